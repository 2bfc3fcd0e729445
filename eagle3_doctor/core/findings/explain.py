"""The long form of every finding code as text: what it means, why acceptance drops, how to confirm it.

`eagle3-doctor explain CODE` prints one record; tools/gen_docs.py writes them all into docs/findings.md.
"""

from __future__ import annotations

import textwrap

from ..errors import BadInput
from .registry import CODES, REGISTRY


def closest_codes(text: str, n: int = 3) -> list[str]:
    """The registered codes nearest to a mistyped one: the same family and number first, then by spelling."""
    import difflib
    import re

    t = text.strip().upper()
    m = re.fullmatch(r"([A-Z]+)0*([0-9]*)", t)
    near: list[str] = []
    if m:
        letters, digits = m.groups()
        if digits and f"{letters}{digits.zfill(3)}" in CODES:  # cap2 -> CAP002
            near.append(f"{letters}{digits.zfill(3)}")
        elif not digits:  # a family alone: its first codes
            near += [c for c in CODES if re.fullmatch(f"{letters}[0-9]+", c)][:n]
    near += [c for c in difflib.get_close_matches(t, list(CODES), n=n, cutoff=0.5) if c not in near]
    return near[:n]


def list_codes() -> str:
    """Every finding code on one line (code, severity, meaning): what `explain` with no code prints, so
    a user can find the code to ask about."""

    width = max(map(len, CODES))
    return "".join(f"{c:<{width}}  {sev:<7}  {title}\n" for c, (sev, title) in CODES.items())


def explain(code: str) -> str:
    """The long form of a finding code as text; BadInput naming the closest codes for an unknown one."""
    c = code.strip().upper()
    if c not in CODES:
        near = closest_codes(code)
        raise BadInput(
            f"unknown finding code {code!r}",
            (f"did you mean {', '.join(near)}? " if near else "") + "every code is listed in docs/findings.md",
        )
    r = REGISTRY[c]

    def para(head: str, text: str) -> str:
        return head + "\n" + textwrap.fill(text, width=100, initial_indent="  ", subsequent_indent="  ") + "\n"

    return "\n".join(
        [
            f"{c} ({r.severity}): {r.summary}\n",
            para("What it means", r.meaning),
            para("Why acceptance drops", r.why),
            para("How to confirm", r.confirm),
        ]
    )
