"""Serving engines and training recipes as functions from their own numbers to a feature spec.

Each rule below models one engine file; the quoted source is in docs/engine-sources.md. Every
rule is a pure function ``ids -> capture points`` plus "which config key does this engine read".
The fix for a mismatch is found by inverting the same rule (trying the natural id lists and
keeping the one the rule maps back onto the training spec), so a fix can never disagree with
the diagnosis.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from .errors import BadInput
from .taps import CapturePoint, FeatureSpec, final_norm, from_hs_index, layer_out

ENGINES = ("sglang", "vllm", "trtllm", "modelopt", "eagle")
IDS = "eagle_aux_hidden_state_layer_ids"
NESTED = f"eagle_config.{IDS}"

# version strings accepted per engine; the first is the default
ENGINE_VERSIONS: dict[str, tuple[str, ...]] = {
    "sglang": ("0.5.23", "0.5.2"),
    "vllm": ("0.33.0", "0.33.0-v2", "0.18.0", "0.10.2"),
    "trtllm": ("1.2",),
    "modelopt": ("0.47",),
    "eagle": ("eagle3",),
}


def default_spec_llama(num_layers: int) -> FeatureSpec:
    """The capture points every engine's default names: in(2), in(L//2), in(L-3).

    EAGLE idx {2, L//2, L-3} before the layer; SGLang/vLLM default [2, L//2, L-3] (before-layer);
    SpecForge/TensorRT-LLM/ModelOpt default [1, L//2-1, L-4] (after-layer). All the same states.
    """
    L = num_layers
    return (layer_out(1), layer_out(L // 2 - 1), layer_out(L - 4))


def arch_family(config: dict) -> str:
    mt = str(config.get("model_type", "")).lower()
    archs = " ".join(config.get("architectures") or []).lower()
    if mt in ("deepseek_v2", "deepseek_v3", "kimi_k2") or "deepseek" in archs:
        return "deepseek"
    if mt == "gpt_oss" or "gptoss" in archs:
        return "gpt_oss"
    return "llama"


# --------------------------------------------------------------------------- rules


@dataclass
class Captured:
    spec: FeatureSpec
    dropped: list[tuple[int, str]] = field(default_factory=list)  # (id, why it captures nothing)
    internal: list[int] | None = None  # the engine's own index list after its transforms
    note: str | None = None


def _before_layer(internal: Sequence[int], L: int, *, allow_end: bool, end_point: CapturePoint | None = None) -> Captured:
    """Capture "before layer i" (= layer_out[i-1]; i=0 is embed), optionally i=L after the loop."""
    spec, dropped = [], []
    for i in internal:
        if i < 0:
            dropped.append((i, f"index {i} is before the embeddings: nothing is captured"))
        elif i < L:
            spec.append(layer_out(i - 1))
        elif i == L and allow_end:
            spec.append(end_point or layer_out(L - 1))
        else:
            dropped.append((i, f"the decoder loop runs over layers 0..{L - 1}, so index {i} is never captured"))
    return Captured(tuple(spec), dropped, list(internal))


def _sglang(version: str, family: str, L: int, ids: list[int] | None) -> Captured:
    # sglang srt/models/llama.py set_eagle3_layers_to_capture: default [2, L//2, L-3] without +1,
    # configured ids +1; LlamaModel.forward captures hidden_states + residual before layer i.
    if ids is None:
        return _before_layer([2, L // 2, L - 3], L, allow_end=False)
    if version == "0.5.2":
        # The per-architecture heuristics below were read in 0.5.23; 0.5.2 is modelled with the
        # llama.py "+1" for every architecture (read for Llama; not verified for DeepSeek/GPT-OSS).
        c = _before_layer([v + 1 for v in ids], L, allow_end=False)
        if family != "llama":
            c.note = f"SGLang 0.5.2 modelled with the Llama +1 rule for {family} (0.5.23 has its own rule)"
        return c
    if family == "deepseek":
        # sglang srt/models/deepseek_v2.py: +1 only when ids[0] == 1
        internal = [v + 1 for v in ids] if ids and ids[0] == 1 else list(ids)
        c = _before_layer(internal, L, allow_end=False)
        c.note = "SGLang DeepSeek rule: +1 only when the first id is 1, otherwise ids are used raw"
        return c
    if family == "gpt_oss":
        # sglang srt/models/gpt_oss.py: raw when max(ids) == L (then L is the pre-norm end state)
        internal = list(ids) if ids and max(ids) == L else [v + 1 for v in ids]
        c = _before_layer(internal, L, allow_end=True)
        c.note = "SGLang GPT-OSS rule: ids used raw when the largest equals L, otherwise +1"
        return c
    return _before_layer([v + 1 for v in ids], L, allow_end=False)


def _vllm(version: str, family: str, L: int, ids: list[int] | None) -> Captured:
    # vllm model_executor/models/llama.py (0.18+): after layer idx stored under idx+1, 0 = embed,
    # L = pre-norm last layer; interfaces.py default (2, L//2, L-3); ids sorted and de-duplicated.
    use = sorted(set(ids)) if ids is not None else [2, L // 2, L - 3]
    allow_end = version not in ("0.10.2",)  # before 0.18 the capture sat before the layer call
    c = _before_layer(use, L, allow_end=allow_end)
    if ids is not None and list(ids) != use:
        c.note = f"vLLM sorts and de-duplicates the ids: {list(ids)} -> {use}"
    return c


def _after_layer_sorted(L: int, ids: list[int], minus_one: CapturePoint | None) -> Captured:
    spec, dropped = [], []
    use = sorted(ids)
    if use and use[0] == -1 and minus_one is not None:
        use = use[1:] + [-1]  # TensorRT-LLM moves -1 (the final state) to the end
    for k in use:
        if k == -1 and minus_one is not None:
            spec.append(minus_one)
        elif 0 <= k < L:
            spec.append(layer_out(k))
        else:
            dropped.append((k, f"no decoder layer {k} in a {L}-layer target"))
    c = Captured(tuple(spec), dropped, use)
    if list(ids) != use:
        c.note = f"ids are sorted: {list(ids)} -> {use}"
    return c


def _trtllm(version: str, family: str, L: int, ids: list[int] | None) -> Captured:
    # tensorrt_llm/_torch/speculative/eagle3.py Eagle3SpecMetadata: default (1, L//2-1, L-4),
    # captured at the end of decoder layer k (hidden_states + residual); sorted; -1 = final state.
    return _after_layer_sorted(L, [1, L // 2 - 1, L - 4] if ids is None else list(ids), final_norm())


def _modelopt(version: str, family: str, L: int, ids: list[int] | None) -> Captured:
    # modelopt/torch/speculative/plugins/hf_eagle.py: forward hooks on layers[k], sorted.
    return _after_layer_sorted(L, [1, L // 2 - 1, L - 4] if ids is None else list(ids), None)


def _eagle(version: str, family: str, L: int, ids: list[int] | None) -> Captured:
    # SafeAILab/EAGLE eagle/model/modeling_llama_kv.py: idx in {2, L//2, L-3} at the loop top.
    return _before_layer([2, L // 2, L - 3], L, allow_end=False)


RULES: dict[str, Callable[[str, str, int, list[int] | None], Captured]] = {
    "sglang": _sglang, "vllm": _vllm, "trtllm": _trtllm, "modelopt": _modelopt, "eagle": _eagle,
}


# --------------------------------------------------------------------------- config keys


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
        # sglang model_runner_components/spec_aux_hidden_state.py: eagle_config[...] only; any
        # exception (no eagle_config, no key) falls back to the model's default.
        return KeyRule((NESTED,), "the draft's config.json", _json_nested)
    if engine == "vllm":
        if version == "0.10.2":
            return KeyRule((), "nowhere: vLLM 0.10.2 always uses its default (reading ids came with vLLM PR #25961)", _json_top)
        if version in ("0.18.0", "0.33.0-v2"):
            # vllm v1/worker/gpu_model_runner.py (0.18) and gpu/spec_decode/eagle/eagle3_utils.py (MRV2)
            return KeyRule((IDS,), "the draft's config.json", _json_top, "at the top level of the draft's config.json")
        # vllm 0.33 v1/worker/gpu_model_runner.py _get_eagle3_aux_layers_from_config
        return KeyRule((IDS, NESTED), "the draft's config.json", _json_top, "at the top level of the draft's config.json")
    if engine == "trtllm":
        return KeyRule(
            ("eagle3_layers_to_capture",),
            "the LLM API speculative_config (extra_llm_api_options YAML)",
            lambda ids: f"speculative_config:\n  decoding_type: Eagle\n  eagle3_layers_to_capture: {ids}",
        )
    if engine == "modelopt":
        return KeyRule((NESTED,), "the draft's config.json", _json_nested)
    return KeyRule((), "nowhere: the EAGLE reference hard-codes the layers", _json_top)


def check_engine(engine: str, version: str | None) -> str:
    if engine not in ENGINES:
        raise BadInput(f"unknown --engine {engine!r}", f"use one of {', '.join(ENGINES)}")
    versions = ENGINE_VERSIONS[engine]
    if version is None:
        return versions[0]
    if version not in versions:
        raise BadInput(
            f"--engine-version {version} is not modelled for {engine}",
            f"use one of {', '.join(versions)} (the closest release whose behaviour you run)",
        )
    return version


def id_range(engine: str, num_layers: int) -> tuple[int, int]:
    """Ids an engine accepts at all (some, like SGLang's L-1, are accepted yet capture nothing)."""
    L = num_layers
    return {"sglang": (-1, L), "vllm": (0, L), "trtllm": (-1, L - 1), "modelopt": (0, L - 1)}.get(engine, (-1, L))


@dataclass
class Serving:
    """What an engine will feed the draft, and why."""

    engine: str
    version: str
    family: str
    num_layers: int
    spec: FeatureSpec
    ids: list[int] | None  # ids the engine uses (None = its default)
    source: str
    ignored: dict[str, list[int]] = field(default_factory=dict)  # ids in keys this engine does not read
    dropped: list[tuple[int, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.engine} {self.version}" + ("" if self.family == "llama" else f" ({self.family})")


def resolve_serving(
    engine: str,
    version: str | None,
    family: str,
    num_layers: int,
    config_ids: dict[str, list[int]],
    override: list[int] | None = None,
) -> Serving:
    """Which capture points ``engine`` feeds the draft.

    config_ids: every layer-id list found in the draft config, by dotted key; override: ids the
    user passes with ``--layer-ids`` (taken as written in the key this engine reads).
    """
    version = check_engine(engine, version)
    kr = key_rule(engine, version)
    ids, source, ignored = None, "", {}
    if override is not None and engine not in ("eagle",) and not (engine == "vllm" and version == "0.10.2"):
        ids, source = list(override), f"--layer-ids {list(override)} (as if written in {kr.keys[0]})"
    else:
        for k in kr.keys:
            if config_ids.get(k):
                ids, source = list(config_ids[k]), f"{k} = {config_ids[k]} in {kr.where}"
                break
        ignored = {k: v for k, v in config_ids.items() if k not in kr.keys}
        if ids is None:
            source = f"{engine} default (no ids where it reads them: {kr.where})"
        if override is not None:
            ignored["--layer-ids"] = list(override)
    if ids is not None:
        lo, hi = id_range(engine, num_layers)
        bad = [i for i in ids if not lo <= i <= hi]
        if bad:
            raise BadInput(
                f"layer id(s) {bad} in {source.split(' (')[0]} are out of range for a {num_layers}-layer target under "
                f"{engine} (valid ids: {lo}..{hi})",
                "use ids inside the target's depth, in this engine's numbering",
            )
    cap = RULES[engine](version, family, num_layers, ids)
    notes = [cap.note] if cap.note else []
    if engine == "sglang" and version == "0.5.2" and ids is not None and cap.spec != default_spec_llama(num_layers):
        notes.append(
            "SGLang 0.5.2 captured its CUDA graphs for decode/verify with the DEFAULT ids while eager "
            "prefill used the configured ones (fixed by SGLang PR #22836)"
        )
    return Serving(engine, version, family, num_layers, cap.spec, ids, source, ignored, cap.dropped, notes)


def ids_to_serve(engine: str, version: str | None, family: str, num_layers: int, want: FeatureSpec) -> list[int] | None:
    """The id list that makes ``engine`` feed exactly ``want``, or None when it cannot.

    Found by inverting the engine's own rule: candidates are the after-layer and before-layer
    numberings (and None for the default); the first the rule maps onto ``want`` wins.
    """
    version = check_engine(engine, version)
    rule = RULES[engine]
    if not key_rule(engine, version).keys:  # ids are not configurable: only the default can be served
        dflt = rule(version, family, num_layers, None)
        return list(dflt.internal or []) if dflt.spec == tuple(want) else None

    def num(p: CapturePoint, base: int) -> int | None:
        if p.kind == "final_norm":
            return -1 if engine == "trtllm" else None
        return (-1 if p.kind == "embed" else int(p.layer)) + base  # type: ignore[arg-type]

    cands: list[list[int] | None] = []
    for base in (0, 1):
        ids = [num(p, base) for p in want]
        if all(i is not None for i in ids):
            cands.append(ids)  # type: ignore[arg-type]
    for ids in cands:
        if rule(version, family, num_layers, ids).spec == tuple(want):
            return ids
    return None


def fix_snippet(engine: str, version: str | None, ids: list[int]) -> str:
    version = check_engine(engine, version)
    kr = key_rule(engine, version)
    return f"{kr.snippet(ids)}   ({kr.fix_where or 'in ' + kr.where})"


# --------------------------------------------------------------------------- training recipes

RECIPES = ("hf-hidden-states:I,J,K", "eagle-default", "specforge[:ids]", "speculators[:ids]", "modelopt[:ids]", "spec:POINTS", "draft-config")


def _ids(text: str, recipe: str) -> list[int]:
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x != ""]
    except ValueError:
        raise BadInput(f"--train-recipe {recipe!r}: ids must be integers", "write e.g. specforge:1,3,4") from None


def training_spec(recipe: str, num_layers: int) -> tuple[FeatureSpec, str]:
    """A training recipe -> (capture points, explanation)."""
    L = num_layers
    name, _, arg = recipe.partition(":")
    name = name.strip().lower()
    if name in ("hf-hidden-states", "hf", "output_hidden_states"):
        if not arg:
            raise BadInput("--train-recipe hf-hidden-states needs indices", "write hf-hidden-states:2,4,5")
        idx = _ids(arg, recipe)
        spec = tuple(from_hs_index(i, L) for i in idx)
        return spec, f"output_hidden_states{idx}: hs[0]=embed, hs[i]=layer_out[i-1], hs[{L}]=final_norm"
    if name == "eagle-default":
        return default_spec_llama(L), f"EAGLE reference: idx {{2, L//2, L-3}} = {{2, {L // 2}, {L - 3}}} before the layer"
    if name == "specforge":
        # SpecForge eagle3_target_model.py: [1, L//2-1, L-4], captured through SGLang (+1) or layer hooks
        ids = _ids(arg, recipe) if arg else [1, L // 2 - 1, L - 4]
        return _sglang("0.5.23", "llama", L, ids).spec, f"SpecForge aux_hidden_states_layers {ids} (SGLang ids: layer_out[k])"
    if name == "speculators":
        ids = _ids(arg, recipe) if arg else [2, L // 2, L - 3]
        return _vllm("0.33.0", "llama", L, ids).spec, f"speculators (vLLM extract_hidden_states) ids {ids}: layer_out[k-1]"
    if name == "modelopt":
        ids = _ids(arg, recipe) if arg else [1, L // 2 - 1, L - 4]
        return _modelopt("0.47", "llama", L, ids).spec, f"ModelOpt ids {sorted(ids)}: hooks on layers[k]"
    if name == "spec":
        from .taps import parse_spec

        return parse_spec(arg), "capture points given explicitly"
    raise BadInput(f"unknown --train-recipe {recipe!r}", f"use one of: {', '.join(RECIPES)}")


__all__ = [
    "ENGINES", "ENGINE_VERSIONS", "Serving", "arch_family", "default_spec_llama", "fix_snippet",
    "ids_to_serve", "resolve_serving", "training_spec",
]
