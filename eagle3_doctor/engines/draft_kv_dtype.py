"""The KV cache dtype each SGLang and vLLM release runs its EAGLE-3 draft's attention with, as executed.

``conformance/kvdtype_exec.py`` (``make conformance``) runs each release's own code that hands the draft its KV cache
dtype (SGLang's draft ModelRunner ``configure_kv_cache_dtype``; vLLM's proposer ``_create_draft_vllm_config`` and Model
Runner V2's ``load_eagle_model``, or the ``get_model`` call that gives the draft the target's own config) for every
pair of the launch's target ``--kv-cache-dtype`` and draft-only setting, on an unquantized draft, and writes
``eagle3_doctor/data/draft_kv_dtype.json``. This module reads a launch's two values through it.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TABLE = Path(__file__).resolve().parent.parent / "data" / "draft_kv_dtype.json"
EXEC = "conformance/kvdtype_exec.py"
# how the user spells the draft-only setting on each engine's launch line
DRAFT_KEY = {"sglang": "--speculative-draft-kv-cache-dtype", "vllm": "--speculative-config kv_cache_dtype"}
TARGET_DEFAULT = "auto"  # SGLang's --kv-cache-dtype default; vLLM's CacheConfig.cache_dtype default


@functools.lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    return json.loads(TABLE.read_text())


@dataclass(frozen=True)
class ServedKv:
    """The KV dtype one release gives the draft's attention for one launch."""

    dtype: str  # "model" (the draft's own dtype), "bfloat16", "fp8_e4m3", "fp8_e5m2", or "!<the error it raises>"
    per_runner: dict[str, str]  # where the release has two runners (vLLM V1 and Model Runner V2): each one's
    source: str  # the release range and the code run
    key: str | None  # file:line of the draft-only setting; None where the release has none
    first_key: str | None  # the first release with the draft-only setting


def _row(engine: str, version: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    t = table()
    at = t["release_rows"].get(engine, {}).get(version)
    if at is None:
        return None
    return t["rows"][at["row"]], at


def first_with_key(engine: str) -> str | None:
    return next((v for v, at in table()["release_rows"].get(engine, {}).items() if at["key"]), None)


def served_kv(engine: str, version: str, target: str | None, draft: str | None) -> ServedKv | None:
    """What the release's draft runs with for the launch's ``--kv-cache-dtype`` ``target`` and draft-only ``draft``
    (None: not set); None where the release or a value is outside what was executed."""
    release, _, runner = version.partition("-")  # vLLM's -v1/-v2 names the runner
    got = _row(engine, release)
    if got is None:
        return None
    row, at = got
    runners = {r: s for r, s in row["served"].items() if not runner or r.lower() == runner.lower()} or row["served"]
    t = (target or TARGET_DEFAULT).lower()
    d = draft.lower() if draft is not None and at["key"] else None
    case = f"{t}|{d or '-'}"
    per = {r: served[case] for r, served in runners.items() if case in served}
    if not per or len(per) != len(runners):
        return None
    values = set(per.values())
    dtype = per[next(iter(per))] if len(values) == 1 else "!the runners differ"
    releases = row["releases"]
    span = releases[0] if len(releases) == 1 else f"{releases[0]}-{releases[-1]}"
    code = "; ".join(f"{r}: {w}" if len(per) > 1 else w for r, w in at["sources"].items() if r in per)
    source = f"{engine} {span} {code} ({EXEC})"
    return ServedKv(dtype, per, source, at["key"], first_with_key(engine))


def is_fp8(dtype: str) -> bool:
    return dtype.startswith("fp8")
