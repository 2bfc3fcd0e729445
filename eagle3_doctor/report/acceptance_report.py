"""The acceptance command's terminal report on an EAGLE-3 draft: the run, the 16-bit target beside it, the
server's own counters against the prediction, and the prompt-format table; the files --report and --plot ask for."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional


def render_acceptance_report(con: Any, rep: Any, both: Any = None) -> None:
    from .render import render_acceptance

    render_acceptance(con, rep.run)
    if both is not None:
        from ..analyses.quant_drift import both_ways_lines

        for line in both_ways_lines(both):
            con.print(line, markup=False, highlight=False)
    if rep.server is not None:
        from .server_metrics import render_comparison

        render_comparison(con, rep.server)
    if rep.formats is not None:
        from .templates import render_format_table

        render_format_table(con, rep.formats)


def acceptance_files(run: Any, report: Optional[str], plot: Optional[str]) -> Optional[Callable[[], None]]:
    """Writes the Markdown report and the PNG, where asked for; None where neither is."""
    if not (plot or report):
        return None
    from .render import write_acceptance_report

    return lambda: write_acceptance_report(run, report, plot)
