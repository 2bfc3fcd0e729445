"""Which config key each engine reads its layer ids from, by release, and which ids it takes.

The ids a user writes reach a capture rule (capture.py) only through the key the engine's own
reader looks at; ids in any other key are ignored, and this module says which those are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..core.errors import BadInput
from .releases import covering, release_key
from .table import SGLANG_ROWS, VLLM_V1_READS, VLLM_V2_FIRST, vllm_runner

IDS = "eagle_aux_hidden_state_layer_ids"
NESTED = f"eagle_config.{IDS}"


@dataclass(frozen=True)
class KeyRule:
    keys: tuple[str, ...]  # read in this order; the first present wins
    where: str  # human description of the file/option
    snippet: Callable[[list[int]], str]
    fix_where: str | None = None  # where the fix snippet goes, when more precise than `where`


def _json_nested(ids: list[int]) -> str:
    return f'"eagle_config": {{"{IDS}": {ids}}}'


def _json_top(ids: list[int]) -> str:
    return f'"{IDS}": {ids}'


def key_rule(engine: str, version: str) -> KeyRule:
    if engine == "sglang":
        # sglang model_runner.py (later model_runner_components/spec_aux_hidden_state.py): only
        # eagle_config[...]; any exception (no eagle_config, no key) falls back to the default.
        if covering(SGLANG_ROWS["llama"], version).reads == "none":
            return KeyRule((), f"nowhere: SGLang {version} never reads layer ids (the setter takes none)", _json_nested)
        return KeyRule((NESTED,), "the draft's config.json", _json_nested)
    if engine == "vllm":
        reads = (
            "top"
            if vllm_runner(version) == "v2" and release_key(version) >= release_key(VLLM_V2_FIRST)
            else covering(VLLM_V1_READS, version)[1]
        )
        if reads == "none":
            return KeyRule(
                (), f"nowhere: vLLM {version} always uses its default (reading ids came with vLLM PR #25961)", _json_top
            )
        keys = (IDS, NESTED) if reads == "top,nested" else (IDS,)
        return KeyRule(keys, "the draft's config.json", _json_top, "at the top level of the draft's config.json")
    if engine == "trtllm":
        return KeyRule(
            ("eagle3_layers_to_capture",),
            "the LLM API speculative_config (extra_llm_api_options YAML)",
            lambda ids: f"speculative_config:\n  decoding_type: Eagle\n  eagle3_layers_to_capture: {ids}",
        )
    if engine == "modelopt":
        return KeyRule((NESTED,), "the draft's config.json", _json_nested)
    if engine == "declared":
        from .declared import read_declared

        d = read_declared(version)
        if d.from_config is not None:
            key = d.from_config
            return KeyRule((key,), "the draft's config.json", lambda ids: _json_at(key, ids))
        conv = d.convention
        return KeyRule(
            ("capture.layer_ids",),
            f"the serving description {d.path}",
            lambda ids: f'"capture": {{"layer_ids": {ids}, "convention": "{conv}"}}',
        )
    return KeyRule((), "nowhere: the EAGLE reference hard-codes the layers", _json_top)


def _json_at(dotted: str, ids: list[int]) -> str:
    """``a.b.c`` = ids as the JSON a config.json holds there."""
    *outer, last = dotted.split(".")
    text = f'"{last}": {ids}'
    for k in reversed(outer):
        text = f'"{k}": {{{text}}}'
    return text


def id_range(engine: str, num_layers: int) -> tuple[int, int]:
    """Ids the doctor takes as written for an engine (inspect and compare-hidden both use this); some,
    like SGLang's L-1 under the +1 rule, are taken yet capture nothing or make the engine fail, and
    the engine table says which."""
    L = num_layers
    # trtllm takes id L: its slot stays unwritten, which the engine table reports (ENG003) rather than refusing
    return {"sglang": (-1, L), "vllm": (0, L), "trtllm": (-1, L), "modelopt": (0, L - 1)}.get(engine, (-1, L))


def read_ids(
    engine: str, version: str, config_ids: dict[str, list[int]], override: list[int] | None
) -> tuple[list[int] | None, str, dict[str, list[int]]]:
    """(ids, where they came from, ids the engine never reads): the first key this engine reads that
    holds ids, or the --layer-ids override taken as if written there."""
    kr = key_rule(engine, version)
    ids, source, ignored = None, "", {}
    if override is not None and kr.keys and engine != "eagle":
        ids, source = list(override), f"--layer-ids {list(override)} (as if written in {kr.keys[0]})"
    else:
        for k in kr.keys:
            # sglang takes eagle_config[...] as it is, even an empty list; vllm falls through on a falsy value
            present = (k in config_ids) if engine == "sglang" else bool(config_ids.get(k))
            if present:
                ids, source = list(config_ids[k]), f"{k} = {config_ids[k]} in {kr.where}"
                break
        ignored = {k: v for k, v in config_ids.items() if k not in kr.keys}
        if ids is None:
            source = f"{engine} default (no ids where it reads them: {kr.where})"
        if override is not None:
            ignored["--layer-ids"] = list(override)
    return ids, source, ignored


def check_id_range(engine: str, num_layers: int, ids: list[int], source: str) -> None:
    lo, hi = id_range(engine, num_layers)
    bad = [i for i in ids if not lo <= i <= hi]
    if bad:
        raise BadInput(
            f"layer id(s) {bad} in {source.split(' (')[0]} are out of range for a {num_layers}-layer target under "
            f"{engine} (valid ids: {lo}..{hi})",
            "use ids inside the target's depth, in this engine's numbering",
        )
