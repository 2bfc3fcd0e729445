"""The terminal form of `speedup`: the best setting per batch size first, then the tables (80 columns)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from ..analyses.speedup import SpeedupResult
    from ..core.stats import Interval


def _iv(i: Interval, nd: int = 2) -> str:
    return f"{i.point:.{nd}f} [{i.lo:.{nd}f}, {i.hi:.{nd}f}]"


def _rate(i: Interval) -> str:
    nd = 0 if i.point >= 100 else 1
    return _iv(i, nd)


def _ms(s: float) -> str:
    return f"{1e3 * s:.2f}"


def _verdicts(console: Console, res: SpeedupResult) -> None:
    for b in res.batches:
        line = f"batch {b.batch_size}: best {b.best}, {_iv(b.best_speedup)}x plain decoding"
        if b.tied:
            line += f"; tied with it: {', '.join(b.tied)}"
        if b.current is not None and b.current_speedup is not None and b.current != b.best:
            line += f"; current {b.current}: {_iv(b.current_speedup)}x"
        console.print(line, markup=False, highlight=False, style="bold")


def _prediction_table(console: Console, res: SpeedupResult, batch_size: int) -> None:
    t = Table(title=f"predicted at batch {batch_size} (95% over {res.prompts} prompts)", title_justify="left")
    for col in ("setting", "tok/pass", "tokens/s", "speedup", ""):
        t.add_column(col)
    tpp = {a.label: a.tokens_per_pass.point for a in res.acceptance}
    for p in (p for p in res.predictions if p.batch_size == batch_size):
        mark = ", ".join(m for m, on in (("best", p.best), ("tied", p.tied), ("current", p.current)) if on)
        t.add_row(p.label, f"{tpp[p.label]:.2f}", _rate(p.tokens_per_second), _iv(p.speedup), mark)
    console.print(t)


def _cost_table(console: Console, res: SpeedupResult) -> None:
    c = res.costs
    sizes = sorted({r.batch_size for r in c.rows})
    t = Table(title=f"{c.where}, {c.mode}, {c.dtype}, context {c.context}: median ms", title_justify="left")
    t.add_column("forward")
    t.add_column("tokens")
    for b in sizes:
        t.add_column(f"batch {b}")
    keys = list(dict.fromkeys((r.part, r.tokens) for r in c.rows))
    for part, n in keys:
        t.add_row(part, str(n), *(_ms(c.seconds(b, part, n)) for b in sizes))
    console.print(t)


def _loop_table(console: Console, res: SpeedupResult) -> None:
    if not res.loop:
        return
    t = Table(title=f"the real decode loop (batch 1, {res.costs.mode}, greedy)", title_justify="left")
    for col in ("setting", "tok/pass", "predicted", "exact", "speedup", "predicted"):
        t.add_column(col)
    for r in res.loop:
        exact = "yes" if r.same_as_greedy and r.same_passes_as_estimator else "NO"
        t.add_row(
            r.label, f"{r.tokens_per_pass:.2f}", f"{r.predicted_tokens_per_pass:.2f}", exact,
            f"{r.measured_speedup:.2f}x", f"{r.predicted_speedup:.2f}x",
        )  # fmt: skip
    console.print(t)
    t = Table(title="where a pass's time went: measured (predicted), ms", title_justify="left")
    for col in ("setting", "draft", "verify", "other", "plain step"):
        t.add_column(col)
    plain = _probe_plain_ms(res)
    for r in res.loop:
        t.add_row(
            r.label, f"{r.draft_ms_per_pass:.2f} ({r.predicted_draft_ms_per_pass:.2f})",
            f"{r.verify_ms_per_pass:.2f} ({r.predicted_verify_ms_per_pass:.2f})", f"{r.other_ms_per_pass:.2f}",
            f"{r.plain_ms_per_step:.2f} ({plain:.2f})",
        )  # fmt: skip
    console.print(t)


def _probe_plain_ms(res: SpeedupResult) -> float:
    """The probe's plain decode step at batch 1, in ms (what the loop's plain step is predicted to take)."""
    return 1000.0 * next((b.plain_seconds for b in res.batches if b.batch_size == 1), float("nan"))


def render_speedup(console: Console, res: SpeedupResult) -> None:
    """Verdict lines, a prediction table per batch size, the measured costs, the loop check, notes."""
    _verdicts(console, res)
    for b in res.batches:
        _prediction_table(console, res, b.batch_size)
    _cost_table(console, res)
    _loop_table(console, res)
    for note in res.notes:
        console.print(f"note: {note}", style="dim", markup=False, highlight=False)
