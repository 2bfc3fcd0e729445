"""Which server flags each SGLang and vLLM release's own parser accepts, by name.

A launch command is parsed with one argument table per engine (``data/serve_flags.json``, the newest release's);
a flag an older release does not register stops that release's server at startup (argparse: unrecognized
arguments). ``data/serve_flag_releases.json`` holds, for every release conformance/releases.py tracks, the flag
names and aliases its parser registers, extracted from its wheel by conformance/flags_exec.py (each flag as the
ranges of releases that have it), so a launch checked under ``--engine-version`` names the flags that release
lacks and the first release that has each; and, for the flags whose ``choices`` are a literal list (vLLM's also
where get_kwargs makes them from a config field's ``Literal``), the names each release takes, so a value that
release's argparse refuses is named too; and for vLLM the names its
``SpeculativeConfig.method`` admits (a pydantic-validated ``Literal`` from 0.9.1, the names its code compares the
field with before), as ``--speculative-config.method``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..core.errors import BadInput
from .releases import release_key

SOURCE = "conformance/flags_exec.py"


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    return json.loads((Path(__file__).resolve().parent.parent / "data" / "serve_flag_releases.json").read_text())


@dataclass(frozen=True)
class Absent:
    """A flag the launch uses that ``release`` does not register; ``first_after``: the first later release that
    does (None: none does), ``last_before``: the last earlier one that did (None: none did)."""

    flag: str
    release: str
    first_after: str | None
    last_before: str | None
    has_it: list[str]  # the release ranges that register it, 'first..last'
    until: str | None = None  # the last release of the run that starts at first_after, where a later one drops it


def listed_release(engine: str, release: str) -> str | None:
    """The release of the extracted list that ``release`` names ('0.33' and '0.33.0-v1' name 0.33.0), or None
    where its flags were not extracted (an engine or release conformance/releases.py does not track)."""
    data = _table().get(engine)
    if data is None:
        return None
    try:
        key = release_key(release)
    except BadInput:  # refused where the engine is resolved (releases.check_engine), in one line
        return None
    hit = next((r for r in data["releases"] if release_key(r) == key), None)
    return hit if hit is not None and hit in data["wheels"] else None


def registered_by(engine: str, flag: str) -> list[str]:
    """The release ranges whose parser registers ``flag`` ('first..last'); empty where none does."""
    return list(_table().get(engine, {}).get("flags", {}).get(flag, []))


def _indices(data: dict[str, Any], ranges: list[str]) -> list[tuple[int, int]]:
    pos = {r: i for i, r in enumerate(data["releases"])}
    return [(pos[a], pos[b]) for a, _, b in (r.partition("..") for r in ranges) for b in [b or a]]


def absent_flags(engine: str, release: str, flags: list[str]) -> list[Absent] | None:
    """The flags of ``flags`` that ``release``'s parser does not register, in the order given; None where that
    release's flags were not extracted (nothing can be said). A flag no release registers is not listed: the
    argument table already reports it as unknown."""
    listed = listed_release(engine, release)
    if listed is None:
        return None
    data = _table()[engine]
    names, at = data["releases"], data["releases"].index(listed)
    out = []
    for flag in dict.fromkeys(flags):
        ranges = data["flags"].get(flag)
        if not ranges:
            continue
        spans = _indices(data, ranges)
        if any(a <= at <= b for a, b in spans):
            continue
        after = sorted((a, b) for a, b in spans if a > at)
        before = [b for _, b in spans if b < at]
        first, until = (names[after[0][0]], after[0][1]) if after else (None, len(names) - 1)
        last = names[max(before)] if before else None
        out.append(Absent(flag, listed, first, last, ranges, names[until] if until < len(names) - 1 else None))
    return out


@dataclass(frozen=True)
class RefusedValue:
    """A flag's value that ``release``'s parser refuses: its ``choices`` (a literal list, matched exactly) lack it."""

    flag: str
    value: str
    release: str
    choices: list[str]
    source: str  # where the newest release with these choices lists them (file:line)
    takes_it: list[str]  # the release ranges whose choices hold the value as given
    # the release refuses it at start-up (argparse, pydantic); False: it compares the value with its names and acts on
    # none of them (vLLM before 0.9.1's plain SpeculativeConfig dataclass)
    refused: bool = True

    @property
    def spelled(self) -> str | None:
        """The one choice that differs from the value in case alone, if there is one."""
        hits = [c for c in self.choices if c.lower() == self.value.lower()]
        return hits[0] if len(hits) == 1 else None


def refused_values(engine: str, release: str, given: dict[str, str]) -> list[RefusedValue] | None:
    """The values of ``given`` ({flag: value as the command gives it}) that ``release``'s parser refuses with argparse's
    "invalid choice", for the flags whose choices conformance/flags_exec.py read as a literal list (the others, and
    every flag of a release not extracted, are not checked); None where that release was not extracted."""
    listed = listed_release(engine, release)
    if listed is None:
        return None
    data = _table()[engine]
    at = data["releases"].index(listed)
    out = []
    for flag, value in given.items():
        entries = data.get("choices", {}).get(flag, [])
        here = next((e for e in entries if any(a <= at <= b for a, b in _indices(data, e["releases"]))), None)
        if here is not None and value not in here["choices"]:
            takes = {
                i for e in entries if value in e["choices"] for a, b in _indices(data, e["releases"]) for i in range(a, b + 1)
            }
            out.append(RefusedValue(flag, value, listed, list(here["choices"]), here["source"], runs(data["releases"], takes),
                                    here.get("validated", True)))  # fmt: skip
    return out


def runs(names: list[str], held: set[int]) -> list[str]:
    """The releases at ``held`` (indices into ``names``) as runs 'first..last' (one release: its name alone): how the
    tables conformance/flags_exec.py writes name release ranges, read back by ``_indices``."""
    out: list[str] = []
    for i in sorted(held):
        if out and i - 1 in held:
            out[-1] = f"{out[-1].partition('..')[0]}..{names[i]}"
        else:
            out.append(names[i])
    return out
