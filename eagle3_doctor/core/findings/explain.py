"""The long form of every finding code as text: what it means, why acceptance drops, how to confirm it.

`eagle3-doctor explain CODE` prints one record; tools/gen_docs.py writes them all into docs/findings.md.
"""

from __future__ import annotations

from ..errors import BadInput
from ..text import wrap
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


def _fill(text: str, width: int | None, indent: str, rest: str | None = None) -> str:
    """text after indent, wrapped at width between words only (never inside a hyphenated word or a long
    token); width None: one line."""
    rest = indent if rest is None else rest
    if width is None:
        return indent + " ".join(text.split())
    return "\n".join(wrap(" ".join(text.split()), max(width, len(rest) + 20), indent, rest))


def list_codes(width: int | None = None) -> str:
    """Every finding code with its severity and meaning (continued lines indented past the code at
    ``width``; one line each without): what `explain` with no code prints, so a user can find the code to ask about."""

    w = max(map(len, CODES))
    heads = {c: f"{c:<{w}}  {sev:<7}  " for c, (sev, _) in CODES.items()}
    return "".join(_fill(title, width, heads[c], " " * len(heads[c])) + "\n" for c, (_, title) in CODES.items())


def explain(code: str, width: int | None = 100) -> str:
    """The long form of a finding code as text wrapped at ``width`` (None: a paragraph per line); BadInput
    naming the closest codes for an unknown one."""
    c = code.strip().upper()
    if c not in CODES:
        near = closest_codes(code)
        raise BadInput(
            f"unknown finding code {code!r}",
            (f"did you mean {', '.join(near)}? " if near else "") + "every code is listed in docs/findings.md",
        )
    r = REGISTRY[c]

    def para(head: str, text: str) -> str:
        return head + "\n" + _fill(text, width, "  ") + "\n"

    return "\n".join(
        [
            _fill(f"{c} ({r.severity}): {r.summary}", width, "", "  ") + "\n",
            para("What it means", r.meaning),
            para("Why acceptance drops", r.why),
            para("How to confirm", r.confirm),
        ]
    )
