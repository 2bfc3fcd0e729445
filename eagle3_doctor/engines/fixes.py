"""Fixes, found by inverting the capture rules: the ids that make an engine feed what training fed
(``ids_to_serve``), the snippet that writes them, and the releases that serve the same config right.
"""

from __future__ import annotations

from ..core.errors import BadInput
from ..core.taps import CapturePoint, FeatureSpec, format_spec
from .capture import RULES
from .families import VLLM_MODEL_TYPE
from .keys import key_rule
from .releases import check_engine, covering, release_key
from .serving import Serving, resolve_serving
from .table import SGLANG_ROWS, VLLM_CHECK, VLLM_ROWS, VLLM_V1_READS, VLLM_V2_DEFAULT_FROM, VLLM_V2_FIRST


def ids_to_serve(engine: str, version: str | None, family: str, num_layers: int, want: FeatureSpec) -> list[int] | None:
    """The id list that makes ``engine`` feed exactly ``want``, or None when it cannot.

    Found by inverting the engine's own rule: candidates are the after-layer and before-layer
    numberings (and None for the default); the first the rule maps onto ``want`` wins.
    """
    version = check_engine(engine, version)
    if engine == "declared":  # its own convention, inverted (no rule to search: the description states it)
        from .declared import read_declared

        d = read_declared(version)
        return None if d.points is not None else d.ids_as_written(want)
    rule = RULES[engine]
    if not key_rule(engine, version).keys:  # ids are not configurable: only the default can be served
        dflt = rule(version, family, num_layers, None)
        return list(dflt.internal or []) if dflt.spec == tuple(want) else None

    def num(p: CapturePoint, base: int) -> int | None:
        if p.is_final_norm():
            return -1 if engine == "trtllm" else None
        return (-1 if p.is_embed() else p.layer_index()) + base

    cands: list[list[int]] = []
    for base in (0, 1):
        nums = [num(p, base) for p in want]
        known = [i for i in nums if i is not None]
        if len(known) == len(nums):
            cands.append(known)
    for ids in cands:
        got = rule(version, family, num_layers, ids)
        if got.spec == tuple(want) and got.failure is None:
            return ids
    # the same ids in another order: a rule that looks at the first id (SGLang DeepSeek adds +1 only when
    # ids[0] == 1) reads [1, 0] raw; an engine that captures in layer order serves it as [0, 1]
    import itertools

    for ids in cands:
        for perm in itertools.permutations(ids):
            got = rule(version, family, num_layers, list(perm))
            if got.spec == tuple(want) and got.failure is None:
                return list(perm)
    return None


def first_working_release(engine: str, family: str, after: str) -> tuple[str, str] | None:
    """(first release newer than ``after`` whose row runs EAGLE-3 for ``family``, the file that decides)."""
    if engine == "trtllm":  # only where this release's decoder layer captures nothing (executed table)
        from .trtllm_table import first_capturing, trtllm_row

        cur = trtllm_row(after, family)
        nxt = first_capturing(family, after) if cur is not None and cur.capture == "none" else None
        return (nxt.first, nxt.src.split(" (")[0]) if nxt else None  # (release, "path Class.forward")
    if engine not in ("sglang", "vllm"):
        return None
    table = SGLANG_ROWS if engine == "sglang" else VLLM_ROWS
    fam = family if family in table else "llama"
    rows = table[fam]
    firsts = {r.first for r in rows} | ({c[0] for c in VLLM_CHECK} if engine == "vllm" else set())
    for cand in sorted((f for f in firsts if release_key(f) > release_key(after)), key=release_key):
        row = covering(rows, cand)
        if row.rule in ("unsupported", "absent", "unmodelled") or row.branch:
            continue
        if engine == "vllm":
            lst = covering(VLLM_CHECK, cand)[1]
            mt = VLLM_MODEL_TYPE.get(fam, "llama")  # None: the checkpoint's text config decides
            if lst is not None and mt is not None and not any(x in mt for x in lst):
                continue
        return cand, row.src
    return None


def earlier_working_rows(engine: str, family: str, before: str) -> tuple[str, str] | None:
    """(first, end) of the newest row older than ``before`` that captures the residual stream for
    ``family``: releases ``first`` <= v < ``end`` serve it (used when a newer release regressed)."""
    table = SGLANG_ROWS if engine == "sglang" else VLLM_ROWS if engine == "vllm" else None
    if table is None:
        return None
    rows = table[family if family in table else "llama"]
    cur = covering(rows, before)
    for i in range(rows.index(cur) - 1, -1, -1):
        if rows[i].rule not in ("unsupported", "absent", "unmodelled") and not rows[i].branch:
            end = next((r.first for r in rows[i + 1 :] if r.branch or r.rule in ("unsupported", "absent")), cur.first)
            return rows[i].first, end
    return None


def release_boundaries(engine: str) -> list[str]:
    """The releases at which the engine's capture, the keys it reads or its runner change (every Row's first
    release and the reader tables'): between two of them a config is served the same way."""
    if engine == "sglang":
        firsts = {r.first for rows in SGLANG_ROWS.values() for r in rows} | {"0.5.3"}  # 0.5.3: the CUDA-graph fix
    elif engine == "vllm":
        firsts = {r.first for rows in VLLM_ROWS.values() for r in rows} | {c[0] for c in VLLM_CHECK}
        firsts |= {v for v, _ in VLLM_V1_READS} | {VLLM_V2_FIRST, VLLM_V2_DEFAULT_FROM}
    else:
        return []
    return sorted((f for f in firsts if f != "0.0"), key=release_key)


def later_release_serving(serving: Serving, want: FeatureSpec) -> tuple[str, str | None] | None:
    """(first later release of the user's engine on which the same config and --layer-ids feed ``want``,
    the first after it that no longer does, or None), or None when no later release does."""
    first: str | None = None
    for v in (b for b in release_boundaries(serving.engine) if release_key(b) > release_key(serving.version)):
        try:
            s = resolve_serving(
                serving.engine, v, serving.family, serving.num_layers, serving.config_ids, serving.override, not serving.aux_off
            )
            ok = s.failure is None and s.spec == tuple(want)
        except BadInput:  # e.g. a row the table records but does not model: not a release to recommend
            ok = False
        if first is None and ok:
            first = v
        elif first is not None and not ok:
            return first, v
    return (first, None) if first is not None else None


ENGINE_NAMES = {"sglang": "SGLang", "vllm": "vLLM", "trtllm": "TensorRT-LLM", "modelopt": "ModelOpt", "llamacpp": "llama.cpp"}


def upgrade_fix(serving: Serving, want: FeatureSpec) -> str:
    """'upgrade to vLLM >= X, which reads these ids' where a later release serves ``want`` from the same
    config; '' where the config already feeds it, or no later release the table covers does."""
    if serving.failure is None and tuple(serving.spec) == tuple(want):
        return ""
    hit = later_release_serving(serving, want)
    if hit is None:
        return ""
    first, stop = hit
    name = ENGINE_NAMES.get(serving.engine, serving.engine)
    why = (
        "which reads these ids"
        if not key_rule(serving.engine, serving.version).keys and key_rule(serving.engine, first).keys
        else f"whose capture rule feeds {format_spec(want)} from these ids"
    )
    span = f">= {first}" + (f" and < {stop}" if stop else "")
    return f"upgrade to {name} {span}, {why}"


def fix_snippet(engine: str, version: str | None, ids: list[int]) -> str:
    version = check_engine(engine, version)
    kr = key_rule(engine, version)
    return f"{kr.snippet(ids)}   ({kr.fix_where or 'in ' + kr.where})"
