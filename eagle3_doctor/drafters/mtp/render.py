"""The MTP head's reports: what it was trained on against what the engine hands it, the two states side by side,
and the diagnosis."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ...report.render import render_findings


def render_mtp_checks(console: Console, checks: Any) -> None:
    t = Table(title=f"MTP head ({checks.info.format} layout) under {checks.serving.engine}", show_lines=False)
    for c in ("", "trained", "served", "source (served)"):
        t.add_column(c, overflow="fold")
    t.add_row("step 1 reads", str(checks.trained), str(checks.serving.hidden), checks.serving.hidden_source)
    t.add_row("steps 2..K read", checks.recycle.replace("_", "-"), (checks.serving.recycle or "undetermined").replace("_", "-"),
              checks.serving.recycle_source)  # fmt: skip
    console.print(t)
    console.print(f"trained side: {checks.trained_source}", markup=False, soft_wrap=True)
    for n in checks.notes:
        console.print(f"note: {n}", markup=False, soft_wrap=True)
    console.print()


def render_mtp_compare(console: Console, res: Any) -> None:
    render_mtp_checks(console, res.checks)
    console.print(
        f"{res.checks.serving.hidden} against {res.checks.trained} over {res.tokens} tokens: relative L2 {res.rel_l2:.3f}, "
        f"mean cosine {res.cosine:.4f}",
        markup=False,
    )
    console.print()
    render_findings(console, res.findings, "the engine hands the MTP head the state it was trained on")


def render_mtp_diagnosis(console: Console, d: Any) -> None:
    render_mtp_checks(console, d.checks)
    console.print(f"verdict: {d.verdict}", markup=False, soft_wrap=True)
    console.print()
    render_findings(console, d.findings, "the engine hands the MTP head the state it was trained on")


def render_mtp_fix(console: Console, res: Any) -> None:
    for line in res.applied or ["nothing to fix: no MTP001"]:
        console.print(line, markup=False, soft_wrap=True)
    for name, v in res.before.items():
        copy = f", {res.after[name]:.3f} (copy)" if res.out and name in res.after else ""
        console.print(f"{name} path: mean acceptance length {v:.3f} (original){copy}", markup=False)
    console.print()
    if res.loses:
        console.print("the folded copy accepts less than the original on the serving state: keep the original and retrain "
                      "the head on final_norm (the fold corrects step 1, and rescales the recycled state hnorm also reads)",
                      markup=False, soft_wrap=True)  # fmt: skip
    render_findings(console, res.findings, "the copy is fed the state it now expects")
