"""Output that fits the terminal's width: lines broken only between words, with a hanging indent (rustc's
layout), and tables whose columns are never cut, split into several tables where one would not fit.

rich wraps a line at spaces but ellipsizes a word longer than its column, drops a table's columns when
the table is wider than the terminal, and, with soft_wrap, leaves a long line to the terminal, which
cuts it mid-word. At 80 columns that cost the slot table its decisive ``cos min`` figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional, Union

from rich.console import Console, JustifyMethod
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from ..core.text import wrap


def print_wrapped(console: Console, text: str, first: str = "", rest: str = "", prefix_style: str = "", style: str = "") -> None:
    """One logical line on the console, wrapped by ``wrap`` at its width; the prefixes in prefix_style."""
    for n, line in enumerate(wrap(text, console.width, first, rest)):
        head = first if n == 0 else rest
        # soft_wrap: the line already fits; rich must not wrap it again (it would fold, not wrap)
        console.print(Text.assemble((head, prefix_style), (line[len(head) :], style)), soft_wrap=True)


Cell = Union[str, Text]


@dataclass(frozen=True)
class Column:
    header: str
    justify: JustifyMethod = "left"


def _table(title: Optional[str], columns: Sequence[Column], rows: Sequence[Sequence[Cell]], pick: list[int], **kw) -> Table:
    styles: Sequence[Optional[str]] = kw.pop("row_styles", None) or [None] * len(rows)
    t = Table(title=title, **kw)
    for i in pick:
        # no_wrap: a figure or a capture point split over two lines misreads; the caller's split keeps it whole
        t.add_column(columns[i].header, justify=columns[i].justify, no_wrap=True)
    for row, style in zip(rows, styles):
        t.add_row(*[row[i] for i in pick], style=style)
    return t


def fitted_tables(
    console: Console,
    title: str,
    columns: Sequence[Column],
    rows: Sequence[Sequence[Cell]],
    keys: int = 1,
    **kw,
) -> list[Table]:
    """One table when it fits the console; else several, each repeating the first ``keys`` columns (what
    names a row) beside as many of the others, in order, as fit. Every column appears, none is cut."""
    # measured against a wide page: rich clamps a measurement to the width it is given
    page = console.options.update_width(1 << 16)
    groups: list[list[int]] = []
    current = list(range(keys))
    for i in range(keys, len(columns)):
        trial = current + [i]
        wide = Measurement.get(console, page, _table(title, columns, rows, trial, **dict(kw))).maximum
        if len(current) > keys and wide > console.width:
            groups.append(current)
            current = list(range(keys)) + [i]
        else:
            current = trial
    groups.append(current)
    return [
        # the continuation's title without its parenthesis: a narrow table would wrap the full one
        _table(title if n == 0 else f"{title.split(' (')[0]} (continued)", columns, rows, pick, **dict(kw))
        for n, pick in enumerate(groups)
    ]
