"""TensorRT-LLM's capture per release and target family, as conformance/trtllm_exec.py executed it.

data/trtllm_capture.json holds, per family whose decoder layer's capture changed between releases, the rows
(first release, whether the layer calls ``maybe_capture_hidden_states`` with the residual stream, the source it was
executed from) and the outcomes of eagle3.py's one- and two-model metadata over a grid. A family without rows
there captures like every other TensorRT-LLM decoder layer (the rule in capture.py).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources

from .releases import TRTLLM_RELEASES, covering, release_key


@dataclass(frozen=True)
class TrtRow:
    first: str  # first modelled release (series) the row covers
    capture: str  # stream: the layer hands the residual stream to maybe_capture_hidden_states; none: it never calls it
    src: str  # the file (and excerpt) it was executed from, or the evidence for a row not executed
    executed: bool
    note: str = ""  # what the row cannot say (a tensor-parallel path the stored version no longer has)


@functools.lru_cache(maxsize=1)
def trtllm_table() -> dict:
    return json.loads(resources.files("eagle3_doctor").joinpath("data/trtllm_capture.json").read_text())


def trtllm_rows(family: str) -> list[TrtRow]:
    return [
        TrtRow(r["first"], r["capture"], r["src"], r["executed"], r.get("note", ""))
        for r in trtllm_table()["families"].get(family, {}).get("rows", [])
    ]


def trtllm_class(family: str) -> tuple[str, str]:
    """(the target class TensorRT-LLM serves the family with, its decoder layer class), as the table names them."""
    f = trtllm_table()["families"].get(family, {})
    return str(f.get("class", family)), str(f.get("layer", "decoder layer"))


def trtllm_row(version: str, family: str) -> TrtRow | None:
    """The row covering ``version`` (a modelled series, '-two-model' allowed) for ``family``; None: no family row."""
    rows = trtllm_rows(family)
    return covering(rows, version.split("-")[0]) if rows else None


def first_capturing(family: str, after: str) -> TrtRow | None:
    """The first row newer than ``after`` whose decoder layer captures the residual stream."""
    k = release_key(after.split("-")[0])
    return next((r for r in trtllm_rows(family) if release_key(r.first) > k and r.capture == "stream"), None)


def metadata_src() -> str:
    """The eagle3.py version whose one- and two-model metadata were executed (its id handling applies to every
    modelled release: the index held no older copy that could be told apart by release)."""
    return str(trtllm_table()["metadata_src"])


__all__ = [
    "TRTLLM_RELEASES",
    "TrtRow",
    "first_capturing",
    "metadata_src",
    "trtllm_class",
    "trtllm_row",
    "trtllm_rows",
    "trtllm_table",
]
