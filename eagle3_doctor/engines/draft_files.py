"""Which safetensors files beside a draft checkpoint each SGLang and vLLM release loads, as executed.

``conformance/weightfiles_exec.py`` (``make conformance``) runs each release's own
``filter_duplicate_safetensors_files`` on a directory holding ``model.safetensors`` and ``extra.safetensors``, with
and without a ``model.safetensors.index.json`` naming only the first, and checks the loader's selection loop (the
first allow pattern that globs a file wins, ``*.safetensors`` before ``*.bin``); ``eagle3_doctor/data/
draft_weight_files.json`` holds the files kept. This module reads it per release.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TABLE = Path(__file__).resolve().parent.parent / "data" / "draft_weight_files.json"


@functools.lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    return json.loads(TABLE.read_text())


@dataclass(frozen=True)
class WeightRule:
    index_filters: bool  # with an index, a safetensors file it does not name is dropped (executed)
    all_without_index: bool  # with no index, every *.safetensors in the directory is loaded (executed)
    source: str


def weight_rule(engine: str, version: str) -> WeightRule | None:
    """The release's rule, or None where the table has no row for it (no draft model, an engine not covered)."""
    at = table()["release_rows"].get(engine, {}).get(version.partition("-")[0])
    if at is None:
        return None
    row = table()["rows"][at["row"]]
    kept = row["kept"]
    releases = row["releases"]
    span = releases[0] if len(releases) == 1 else f"{releases[0]}-{releases[-1]}"
    src = at["sources"]
    source = (
        f"{engine} {span} {src['selection']} (the first of *.safetensors, *.bin that matches a file) and "
        f"{src['filter']}, executed (conformance/weightfiles_exec.py)"
    )
    return WeightRule(kept["with_index"] == ["model.safetensors"], len(kept["no_index"]) == 2, source)
