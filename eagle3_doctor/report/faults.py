"""The terminal form of the runtime-fault ranking: the live profile beside each prediction, best fit first."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from ..analyses.faults.attribute import Ranking
    from ..analyses.server_metrics.measured import Measured


def render_ranking(console: Console, r: Ranking, m: Measured) -> None:
    t = Table(
        title=f"runtime-fault signatures against the live profile ({r.num_steps} draft tokens a pass; "
        "95% intervals: live Wilson, predictions over prompts)",
        title_justify="left",
    )
    for col in ("prediction", "mean acc. length", "position rates", "chi2 / pos.", "p"):
        t.add_column(col)
    live_rates = " ".join(f"{x:.2f}" for x in m.per_position_rate) if m.per_position_rate is not None else "-"
    ci = m.mean_acceptance_length_ci
    t.add_row("live", f"{m.mean_acceptance_length:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""), live_rates, "", "")
    for f in r.fits:
        name = f.candidate.name + (f" (= {f.candidate.same_as})" if f.candidate.same_as else "")
        if not f.applies:
            name += " (does not apply)"
        t.add_row(
            name,
            f.mean.text(2),
            " ".join(f"{x.point:.2f}" for x in f.rates),
            f"{f.chi2:.1f} / {f.dof}",
            f"{f.p:.3f}",
        )
    console.print(t)
    console.print(f"verdict of the fault signatures: {r.verdict}", markup=False, highlight=False)
