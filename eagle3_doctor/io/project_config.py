"""The project's own settings for the doctor, as linters keep theirs: ``[tool.eagle3-doctor]`` in the nearest
``pyproject.toml``, or a ``.eagle3-doctor.toml`` beside it (which wins), found from the working directory up.

Today one setting: ``ignore = ["CAP007", ...]``, finding codes a project has decided to live with; they are
dropped from every command's report, document and exit code, and the run says so on stderr.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ..core.errors import BadInput
from ..core.findings.registry import CODES

OWN_FILE = ".eagle3-doctor.toml"
KNOWN_KEYS = frozenset({"ignore", "release"})  # release: this project's own pyproject pins its release tag there


@dataclass(frozen=True)
class ProjectConfig:
    ignore: frozenset[str] = frozenset()
    source: Optional[str] = None  # the file the settings came from


def _table(path: Path) -> Optional[dict[str, Any]]:
    try:
        import tomllib  # type: ignore[import-not-found]  # stdlib from 3.11; mypy checks as 3.10
    except ImportError:  # Python 3.10: a pyproject.toml is everywhere and is passed over; the doctor's own file is not
        if path.name == OWN_FILE:
            raise BadInput(f"{path} needs Python 3.11+ (tomllib) to be read", "run on Python 3.11+, or remove it") from None
        return None
    from .safeio import read_regular_text

    text = read_regular_text(path, f"settings file {path}", "fix the file or remove it", 1 << 20)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BadInput(f"{path} is not valid TOML ({e})", "fix the file's syntax") from None
    if path.name == OWN_FILE:
        table = doc.get("tool", {}).get("eagle3-doctor", doc)
    else:
        table = doc.get("tool", {}).get("eagle3-doctor")
    return table if isinstance(table, dict) else None


def load(start: Optional[str] = None) -> ProjectConfig:
    """The settings of the project the run is started in: the first directory from ``start`` (the working
    directory) up that holds .eagle3-doctor.toml or a pyproject.toml with [tool.eagle3-doctor]."""
    here = Path(start or os.getcwd()).resolve()
    for d in (here, *here.parents):
        for name in (OWN_FILE, "pyproject.toml"):
            p = d / name
            if p.is_file():
                table = _table(p)
                if table is not None:
                    return _parse(table, p)
    return ProjectConfig()


def _parse(table: dict[str, Any], path: Path) -> ProjectConfig:
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise BadInput(f"unknown key(s) {', '.join(unknown)} in {path}", f"the keys read there: {', '.join(sorted(KNOWN_KEYS))}")
    codes = table.get("ignore", [])
    if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
        raise BadInput(f"ignore in {path} is not a list of finding codes", 'write ignore = ["CAP007"]')
    up = [c.strip().upper() for c in codes]
    bad = [c for c in up if c not in CODES]
    if bad:
        from ..core.findings.explain import closest_codes

        near = closest_codes(bad[0])
        raise BadInput(
            f"ignore in {path} names unknown finding code(s) {', '.join(bad)}",
            (f"did you mean {', '.join(near)}? " if near else "") + "eagle3-doctor explain lists every code",
        )
    return ProjectConfig(frozenset(up), str(path))
