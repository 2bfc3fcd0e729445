"""The terminal form of the serving evidence: what the server measured, and the server against the prediction."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..analyses.server_metrics.measured import Measured
    from ..analyses.server_metrics.prediction import ServingComparison


def render_measured(console: Any, m: Measured) -> None:
    from rich.table import Table

    from ..engines.fixes import ENGINE_NAMES

    t = Table(title=f"measured by the server ({ENGINE_NAMES.get(m.engine, m.engine)})")
    t.add_column("metric")
    t.add_column("value", justify="right")

    def ci(c: tuple[float, float] | None) -> str:
        return f"  [{c[0]:.3f}, {c[1]:.3f}]" if c else ""

    t.add_row(_passes_label(m), f"{m.passes:g}")
    t.add_row("mean acceptance length (bonus in)", f"{m.mean_acceptance_length:.3f}{ci(m.mean_acceptance_length_ci)}")
    if m.draft_acceptance_rate is not None:
        t.add_row("draft acceptance rate", f"{m.draft_acceptance_rate:.3f}")
    if m.draft_tokens is not None:
        t.add_row("draft tokens / accepted tokens", f"{m.draft_tokens:g} / {m.accepted_tokens:g}")
    if m.requests is not None:
        t.add_row("requests", f"{m.requests:g}")
    for k, r in enumerate(m.per_position_rate or []):
        t.add_row(f"position {k + 1} rate (unconditional)", f"{r:.3f}{ci(m.per_position_ci[k] if m.per_position_ci else None)}")
    console.print(t)
    console.print(f"source: {m.source}", markup=False)
    for n in m.notes:
        console.print(f"note: {n}", markup=False, soft_wrap=True)


def _passes_label(m: Measured) -> str:
    """The row's name with the counter the passes were read from, where a scrape gave them (a log gives none)."""
    from ..analyses.server_metrics.counters import PER_PASS, SGL_VERIFY

    counter = PER_PASS[m.engine][0] if m.engine in PER_PASS else SGL_VERIFY
    return f"verify passes ({counter})" if counter in m.counters else "verify passes"


def render_comparison(console: Any, c: ServingComparison) -> None:
    from rich.table import Table

    t = Table(title="server vs prediction (95% intervals: server from its counters, prediction by bootstrap over prompts)")
    t.add_column("figure")
    t.add_column("server", justify="right")
    for name in c.predicted:
        t.add_column(f"predicted, {name} features", justify="right")

    def f(x: float, ci: Any) -> str:
        return f"{x:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")

    m = c.measured
    t.add_row(
        "mean acceptance length",
        f(m.mean_acceptance_length, m.mean_acceptance_length_ci),
        *[f(p["mean_acceptance_length"], p["mean_acceptance_length_ci"]) for p in c.predicted.values()],
    )
    K = len(next(iter(c.predicted.values()))["per_position_rate"])
    for k in range(K):
        srv = (
            "-" if m.per_position_rate is None else f(m.per_position_rate[k], m.per_position_ci[k] if m.per_position_ci else None)
        )
        t.add_row(
            f"position {k + 1} rate", srv, *[f(p["per_position_rate"][k], p["per_position_ci"][k]) for p in c.predicted.values()]
        )
    console.print(t)
    console.print(
        f"verdict: {c.verdict or 'none (the server measured what the doctor predicts)'}  "
        f"(server vs serving-feature prediction: {c.relation})",
        markup=False,
    )
    for n in c.notes:
        console.print(f"note: {n}", markup=False, soft_wrap=True)
