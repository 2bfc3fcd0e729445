"""Where a config key stands in the file the run read: ``path:line:col``, as rustc and ruff print a location
and as editors and CI annotations jump to one.

A JSON file is read once per run with the position of every object key (json.loads forgets them); a finding
whose location is a key of a local JSON file gets the 1-based line and column of that key's opening quote.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Optional

from ..core.findings import Finding, Location

MAX_BYTES = 16 << 20  # a config.json is kilobytes; a file past this is not read for a position
_WS = re.compile(r"[ \t\n\r]*")
_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null")


class _NotJson(ValueError):
    pass


def key_offsets(text: str) -> dict[tuple[str, ...], int]:
    """Every object key of a JSON text by its path (("eagle_config", "eagle_aux_hidden_state_layer_ids")), as the
    offset of its opening quote; a key repeated in one object keeps its last place, as json.loads keeps its last value.
    Raises ValueError for text that is not JSON."""
    out: dict[tuple[str, ...], int] = {}

    def ws(i: int) -> int:
        m = _WS.match(text, i)
        return m.end() if m else i

    def value(i: int, path: tuple[str, ...]) -> int:
        i = ws(i)
        if i >= len(text):
            raise _NotJson("unexpected end")
        c = text[i]
        if c == "{":
            i = ws(i + 1)
            if text.startswith("}", i):
                return i + 1
            while True:
                if not text.startswith('"', i):
                    raise _NotJson(f"expected a key at {i}")
                key, end = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
                out[path + (key,)] = i
                i = ws(end)
                if not text.startswith(":", i):
                    raise _NotJson(f"expected ':' at {i}")
                i = ws(value(i + 1, path + (key,)))
                if text.startswith(",", i):
                    i = ws(i + 1)
                    continue
                if text.startswith("}", i):
                    return i + 1
                raise _NotJson(f"expected ',' or '}}' at {i}")
        if c == "[":
            i = ws(i + 1)
            if text.startswith("]", i):
                return i + 1
            n = 0
            while True:
                i = ws(value(i, path + (str(n),)))
                n += 1
                if text.startswith(",", i):
                    i += 1
                    continue
                if text.startswith("]", i):
                    return i + 1
                raise _NotJson(f"expected ',' or ']' at {i}")
        if c == '"':
            return json.decoder.scanstring(text, i + 1)[1]  # type: ignore[attr-defined]
        m = _SCALAR.match(text, i)
        if not m:
            raise _NotJson(f"unexpected {c!r} at {i}")
        return m.end()

    value(0, ())
    return out


def line_col(text: str, offset: int) -> tuple[int, int]:
    """The 1-based line and column (in characters) of ``offset``."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


@lru_cache(maxsize=32)
def _positions(path: str, mtime_ns: int) -> Optional[tuple[str, dict[tuple[str, ...], int]]]:
    from .safeio import read_regular_text

    try:
        text = read_regular_text(path, "a config file", "", MAX_BYTES)
        return text, key_offsets(text)
    except Exception:  # a refused read, not JSON, nested past the stack: the location keeps its key, without a line
        return None


def key_position(path: str, dotted: str) -> Optional[tuple[int, int]]:
    """Line and column of the dotted key in the JSON file at ``path``; the nearest enclosing key that is
    there where the key itself is not (a fix that adds it goes inside that object); None for anything else."""
    p = Path(path)
    try:
        if p.suffix != ".json" or not p.is_file():
            return None
        got = _positions(str(p), p.stat().st_mtime_ns)
    except OSError:
        return None
    if got is None:
        return None
    text, offsets = got
    parts = tuple(dotted.split("."))
    while parts:
        if parts in offsets:
            return line_col(text, offsets[parts])
        parts = parts[:-1]
    return None


def _placed(loc: Optional[Location]) -> Optional[Location]:
    if loc is None or loc.path is None or loc.key is None or loc.line is not None:
        return loc
    pos = key_position(loc.path, loc.key)
    return loc if pos is None else replace(loc, line=pos[0], col=pos[1])


def place(findings: Iterable[Finding]) -> None:
    """Give each located finding (``core.findings.locate`` filled its path) the line and column of its key."""
    for f in findings:
        f.location = _placed(f.location)
        for r in f.data.get("related", []):  # the same root cause's other sightings (core.findings.by_root_cause)
            loc = r.get("location")
            if loc and loc.get("path") and loc.get("key") and loc.get("line") is None:
                pos = key_position(loc["path"], loc["key"])
                if pos is not None:
                    loc.update(line=pos[0], col=pos[1])
