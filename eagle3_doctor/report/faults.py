"""The terminal form of the runtime-fault ranking: the live profile beside each prediction, best fit first."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from ..analyses.faults.attribute import Fit, Ranking
    from ..analyses.faults.batches import BatchProfile
    from ..analyses.server_metrics.measured import Measured


def _live(m: Measured) -> tuple[str, str]:
    rates = " ".join(f"{x:.2f}" for x in m.per_position_rate) if m.per_position_rate is not None else "-"
    ci = m.mean_acceptance_length_ci
    return f"{m.mean_acceptance_length:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""), rates


def _predicted(f: Fit) -> tuple[str, str]:
    return f.mean.text(2), " ".join(f"{x.point:.2f}" for x in f.rates)


def render_ranking(console: Console, r: Ranking, m: Measured | list[BatchProfile]) -> None:
    """One row a prediction; with profiles at several batch sizes, one line a batch size in each cell."""
    joint = isinstance(m, list)
    t = Table(
        title=f"runtime-fault signatures against the live profile{'s' if joint else ''} ({r.num_steps} draft tokens a "
        "pass; 95% intervals: live Wilson, predictions over prompts)",
        title_justify="left",
    )
    cols = ("prediction", "batch", "mean acc. length", "position rates", "chi2 / pos.", "p")
    for col in cols if joint else cols[:1] + cols[2:]:
        t.add_column(col)
    profiles = m if isinstance(m, list) else None
    if profiles is None:
        assert not isinstance(m, list)
        t.add_row("live", *_live(m), "", "")
    else:
        lives = [_live(p.measured) for p in profiles]
        t.add_row("live", "\n".join(str(p.batch) for p in profiles), *("\n".join(c) for c in zip(*lives)), "", "")
    for f in r.fits:
        name = f.candidate.name + (f" (= {f.candidate.same_as})" if f.candidate.same_as else "")
        if not f.applies:
            name += " (does not apply)"
        fit = (f"{f.chi2:.1f} / {f.dof}", f"{f.p:.3f}")
        if f.parts is None:
            t.add_row(name, *_predicted(f), *fit)
        else:
            cells = [_predicted(p) for _, p in f.parts]
            t.add_row(name, "\n".join(str(b) for b, _ in f.parts), *("\n".join(c) for c in zip(*cells)), *fit)
    console.print(t)
    console.print(f"verdict of the fault signatures: {r.verdict}", markup=False, highlight=False)
