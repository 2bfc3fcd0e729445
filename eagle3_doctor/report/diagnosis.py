"""The terminal form of `diagnose`: the verdict first, then the tables it rests on (80 columns)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from .render import render_findings

if TYPE_CHECKING:
    from ..analyses.attribution.result import Diagnosis
    from ..analyses.fixing import FixResult


def render_diagnosis(console: Console, d: Diagnosis, tables: Callable[[Console], None] | None = None) -> None:
    """The verdict, the measurements' tables (and ``tables``' own, where a run adds some), the notes, the findings."""
    console.print(f"verdict: {d.verdict}", markup=False, highlight=False, style="bold")
    console.print(
        f"mean acceptance length over {d.prompts} prompts (95% intervals): serving {d.serving.text(2)}, "
        f"training {d.training.text(2)}, gap {d.gap.text(2)}",
        markup=False,
        highlight=False,
    )
    if d.levers:
        t = Table(title="levers: one serving difference set back to training", title_justify="left")
        for col in ("lever", "acceptance length", "recovers"):
            t.add_column(col)
        for r in d.levers:
            t.add_row(r.name, r.mean_acceptance_length.text(2), r.recovery.text(2))
        console.print(t)
    t = Table(title=f"module health: mean-ablated on the {d.base_path} features", title_justify="left")
    for col in ("module", "step-1 ablated", "costs", "verdict"):
        t.add_column(col)
    for m in d.modules:
        t.add_row(m.module, m.step1.text(3), m.cost.text(3), m.verdict)
    console.print(t)
    if d.context:
        t = Table(title="step-1 accuracy along the context", title_justify="left")
        for col in ("positions", "step-1", "positions measured"):
            t.add_column(col)
        for c in d.context:
            t.add_row(f"{c.start}-{c.end}", c.step1.text(3), str(c.positions))
        console.print(t)
    if tables is not None:
        tables(console)
    for note in d.notes:
        console.print(f"note: {note}", style="dim", markup=False)
    console.print()
    render_findings(console, d.findings, "no gap: serving matches training")


def render_fix(console: Console, res: FixResult) -> None:
    console.print(f"draft: {res.source}", markup=False, highlight=False)
    if res.edits:
        console.print(f"corrected copy written to {res.out} (the input is untouched):", markup=False, highlight=False)
        for e in res.edits:
            what = f"{e.key}: {e.before!r} -> {e.after!r}" if e.op == "set" else f"{e.key}: deleted"
            console.print(f"  {e.code}  {what}", markup=False, highlight=False)
    if res.before is not None and res.after is not None and res.change is not None:
        console.print(
            f"mean acceptance length ({res.path}): before {res.before.text(2)}, after {res.after.text(2)}, change {res.change.text(2)}",
            markup=False,
            highlight=False,
        )
    console.print()
    render_findings(console, res.findings, "the copy recovers acceptance")
