"""FWD016: a tensor of the draft kept in a safetensors file beside the checkpoint that the release never loads.

Both engines load a local draft's safetensors files through ``filter_duplicate_safetensors_files``: where the
directory has a ``model.safetensors.index.json``, only the files its weight_map names are read (executed per release:
``engines/draft_files.py``), so a tensor shipped in a sidecar file the index does not name (a mask embedding, d2t/t2d
saved after the shards) never reaches the model. Without an index every ``*.safetensors`` is read, and nothing is
dropped. The doctor's own reader follows the same rule, so it does not see those tensors either; this check reads
the sidecars' headers alone."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .served import ENGINE_NAME

INDEX = "model.safetensors.index.json"


def _names(f: Path) -> set[str]:
    from ..io.safeio import check_safetensors_header

    return {k for k in check_safetensors_header(f) if k != "__metadata__"}


def _index_map(d: Path) -> dict[str, str] | None:
    try:
        wm = json.loads((d / INDEX).read_text()).get("weight_map")
    except (OSError, ValueError, AttributeError):
        return None  # the checkpoint reader says what is wrong with the index
    return wm if isinstance(wm, dict) and all(isinstance(v, str) for v in wm.values()) else None


def _unnamed(d: Path, named: set[str]) -> list[Path]:
    """The safetensors files in ``d`` the index's weight_map does not name: what an index-following loader skips."""
    return [f for f in sorted(d.glob("*.safetensors")) if f.name not in named and f.is_file()]


def unindexed_holding(path: str, pick: Callable[[set[str]], str | None]) -> tuple[str, str] | None:
    """(file, tensor): the first safetensors file in the checkpoint directory ``path`` that its index does not name
    and that holds a tensor ``pick`` chooses from its names; None without an index or such a file. What a loader that
    follows the index never sees, for a finding that must say where the tensor it misses already is."""
    from ..core.errors import BadInput

    d = Path(path or "")
    wm = _index_map(d) if (d / INDEX).is_file() else None
    if wm is None:
        return None
    for f in _unnamed(d, set(wm.values())):
        try:
            got = pick(_names(f))
        except BadInput:
            continue  # a header the checkpoint reader refuses in its own words
        if got is not None:
            return f.name, got
    return None


def sidecar_findings(path: str, engine: str, version: str, label: str) -> list[Any]:
    """FWD016 per safetensors file the release drops (not named by the index) that holds tensors no loaded file holds,
    for the draft checkpoint directory ``path``."""
    from ..core.errors import BadInput
    from ..core.findings import DRAFT_WEIGHTS, Finding, Location
    from ..engines.draft_files import weight_rule

    d = Path(path or "")
    rule = weight_rule(engine, version) if engine in ENGINE_NAME else None
    if rule is None or not rule.index_filters or not (d / INDEX).is_file():
        return []
    wm = _index_map(d)
    if wm is None:
        return []
    named = sorted(set(wm.values()))
    try:
        loaded = set().union(*(_names(d / f) for f in named if (d / f).is_file()))
        sidecars = {f.name: _names(f) for f in _unnamed(d, set(named))}
    except BadInput:
        return []  # a header the checkpoint reader refuses in its own words
    out = []
    for name, held in sidecars.items():
        only = sorted(held - loaded)
        if not only:
            continue
        shown = ", ".join(only[:8]) + (f" and {len(only) - 8} more" if len(only) > 8 else "")
        entries = json.dumps({k: name for k in only[:8]})
        out.append(
            Finding(
                "FWD016",
                f"{label} never loads {name}, which holds {len(only)} tensor(s) of the draft no loaded file has: {shown}",
                [
                    f"{name} beside the checkpoint holds {shown}; no file {INDEX} names holds them",
                    f"{INDEX}'s weight_map names {', '.join(named)}",
                    f"{rule.source}: with an index, only the files its weight_map names are loaded ({name} is dropped); "
                    "without one, every *.safetensors in the directory is",
                ],
                f"add each to {INDEX}'s weight_map: {entries[1:-1]}"
                + (f" (and the other {len(only) - 8})" if len(only) > 8 else "")
                + f"; or save them into {named[0]}",
                location=Location(DRAFT_WEIGHTS, key=only[0], path=str(d / name)),  # the sidecar, not the shards
                data={"file": name, "tensors": only, "index_files": named},
            )
        )
    return out


def sidecars_of(draft_path: str, engine: str, version: str | None) -> list[Any]:
    """FWD016 for any drafter kind's checkpoint directory: the rule is the loader's, not the kind's (a P-EAGLE mask
    embedding or a DFlash tensor saved beside the shards is dropped alike)."""
    from ..engines.releases import release_label

    if engine not in ENGINE_NAME or version is None:
        return []
    return sidecar_findings(draft_path, engine, version, release_label(engine, version))
