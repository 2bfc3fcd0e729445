"""Serving engines and training recipes as functions from their own numbers to a feature spec.

Each rule below models one engine file; the quoted source is in docs/engine-sources.md. Every
rule is a pure function ``ids -> capture points`` plus "which config key does this engine read".
The fix for a mismatch is found by inverting the same rule (trying the natural id lists and
keeping the one the rule maps back onto the training spec), so a fix can never disagree with
the diagnosis.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..core.errors import BadInput
from ..core.taps import CapturePoint, FeatureSpec, embed, final_norm, format_spec, from_hs_index, layer_out

ENGINES = ("sglang", "vllm", "trtllm", "modelopt", "eagle")
IDS = "eagle_aux_hidden_state_layer_ids"
NESTED = f"eagle_config.{IDS}"

# version strings accepted per engine; the first is the default
ENGINE_VERSIONS: dict[str, tuple[str, ...]] = {
    "sglang": ("0.5.23", "0.5.2"),
    "vllm": ("0.33.0", "0.33.0-v2", "0.18.0", "0.10.2"),
    "trtllm": ("1.2", "1.2-two-model"),
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


# HF model_type and architecture class -> the engine-table family whose model file decides capture. The
# classes are the ones the conformance harness executes (conformance/sglang_exec.py, vllm_exec.py
# FAMILIES); tests derive every harness family through arch_family, the way the CLI does. Two
# SGLang/vLLM facts shape it: the model class comes from `architectures`, and vLLM's EAGLE-3 target
# check reads `model_type`, so a Mistral checkpoint is "mistral" whichever class it names.
_FAMILY_OF_TYPE: dict[str, str] = {
    "llama": "llama",
    "mistral": "mistral",
    "qwen3": "qwen",
    "qwen3_moe": "qwen3_moe",
    "deepseek_v2": "deepseek",
    "deepseek_v3": "deepseek",
    "kimi_k2": "deepseek",
    "gpt_oss": "gpt_oss",
    "glm4_moe": "glm4_moe",
    "glm4_moe_lite": "glm4_moe_lite",
    "minimax_m2": "minimax_m2",
    "kimi_linear": "kimi_linear",
    "kimi_k25": "kimi_k25",
    "llama4": "llama4",
    "llama4_text": "llama4",
    "gemma3": "gemma3",
    "gemma3_text": "gemma3_text",
}
_FAMILY_OF_ARCH: dict[str, str] = {
    "llamaforcausallm": "llama",
    "mistralforcausallm": "mistral",
    "qwen3forcausallm": "qwen",
    "qwen3moeforcausallm": "qwen3_moe",
    "deepseekv2forcausallm": "deepseek",
    "deepseekv3forcausallm": "deepseek",
    "gptossforcausallm": "gpt_oss",
    "glm4moeforcausallm": "glm4_moe",
    "glm4moeliteforcausallm": "glm4_moe_lite",
    "minimaxm2forcausallm": "minimax_m2",
    "kimilinearforcausallm": "kimi_linear",
    "kimik25forconditionalgeneration": "kimi_k25",
    "llama4forconditionalgeneration": "llama4",
    "llama4forcausallm": "llama4",
    "gemma3forconditionalgeneration": "gemma3",
    "gemma3forcausallm": "gemma3_text",
}
MODELLED_FAMILIES = frozenset(_FAMILY_OF_TYPE.values())


def arch_family(config: dict) -> str:
    """The engine-table family of a target config: by model_type, else by architecture class.

    A target no row models comes back under its own model_type (or its first architecture, or
    "unknown"), never as "llama": resolve_serving turns it into an undetermined serving side.
    """
    mt = str(config.get("model_type", "")).lower()
    archs = [str(a).lower() for a in config.get("architectures") or []]
    if mt in _FAMILY_OF_TYPE:
        return _FAMILY_OF_TYPE[mt]
    for a in archs:
        if a in _FAMILY_OF_ARCH:
            return _FAMILY_OF_ARCH[a]
    return mt or (archs[0] if archs else "unknown")


def is_modelled(engine: str, family: str) -> bool:
    """Whether the engine's capture for this family is in the engine table (sglang, vllm: per model
    file, executed); the other engines' rules do not depend on the target's model file."""
    return engine not in ("sglang", "vllm") or family in MODELLED_FAMILIES


# --------------------------------------------------------------------------- rules


@dataclass
class Captured:
    spec: FeatureSpec
    dropped: list[tuple[int, str]] = field(default_factory=list)  # (id, why it captures nothing)
    internal: list[int] | None = None  # the engine's own index list after its transforms
    note: str | None = None
    failure: Failure | None = None  # the engine refuses to start or crashes on the first forward


def _before_layer(internal: Sequence[int], L: int, *, allow_end: bool, end_point: CapturePoint | None = None) -> Captured:
    """Capture "before layer i" (= layer_out[i-1]; i=0 is embed), optionally i=L after the loop."""
    spec, dropped = [], []
    for i in internal:
        if i < 0:
            dropped.append((i, f"index {i} is before the embeddings: nothing is captured"))
        elif i < L:
            spec.append(embed() if i == 0 else layer_out(i - 1))  # before layer 0: the embeddings
        elif i == L and allow_end:
            spec.append(end_point or layer_out(L - 1))
        else:
            dropped.append((i, f"the decoder loop runs over layers 0..{L - 1}, so index {i} is never captured"))
    return Captured(tuple(spec), dropped, list(internal))


def _sglang(version: str, family: str, L: int, ids: list[int] | None) -> Captured:
    # the engine table below (SGLANG_ROWS), checked against sglang's own code, executed
    c = run_row("sglang", version, family, L, ids)
    row = engine_row("sglang", version, family)
    if ids is not None and row.rule in ("first1", "maxL") and c.failure is None:
        c.note = {
            "first1": "SGLang DeepSeek rule: +1 only when the first id is 1, otherwise ids are used raw",
            "maxL": "SGLang GPT-OSS rule: ids used raw when the largest equals L, otherwise +1",
        }[row.rule]
    if (
        ids is not None
        and c.failure is None
        and c.internal is not None
        and list(dict.fromkeys(sorted(set(c.internal)))) != list(c.internal)
    ):
        c.note = (c.note + "; " if c.note else "") + (
            f"SGLang captures in layer order and once per layer (membership test in the decoder loop): ids {list(ids)}"
        )
    return c


def _vllm(version: str, family: str, L: int, ids: list[int] | None) -> Captured:
    # the engine table below (VLLM_ROWS), checked against vllm's own code, executed
    c = run_row("vllm", version, family, L, ids)
    if ids and c.failure is None and list(ids) != sorted(set(ids)):
        c.note = f"vLLM sorts and de-duplicates the ids: {list(ids)} -> {sorted(set(ids))}"
    return c


def _after_layer_sorted(L: int, ids: list[int], minus_one: CapturePoint | None, minus_one_last: bool = True) -> Captured:
    spec, dropped = [], []
    use = sorted(ids)
    if use and use[0] == -1 and minus_one is not None and minus_one_last:
        use = use[1:] + [-1]  # TensorRT-LLM two-model path moves -1 (the final state) to the end
    for k in use:
        if k == -1 and minus_one is not None:
            spec.append(minus_one)
        elif 0 <= k < L:
            spec.append(layer_out(k))
        else:
            dropped.append((k, f"no decoder layer {k} in a {L}-layer target: its slot is never written"))
    c = Captured(tuple(spec), dropped, use)
    if list(ids) != use:
        c.note = f"ids are sorted: {list(ids)} -> {use}"
    return c


TRT_SRC = "tensorrt_llm/_torch/speculative/eagle3.py"  # NVIDIA/TensorRT-LLM@001e6700 (search index), hand-read


def _trtllm(version: str, family: str, L: int, ids: list[int] | None) -> Captured:
    # HAND-READ (TensorRT-LLM sources are not on PyPI): tensorrt_llm/_torch/speculative/eagle3.py.
    # eagle3_layers_to_capture is a Set[int] (llmapi/llm_args.py): duplicates collapse. Default
    # (1, L//2-1, L-4), captured at the end of decoder layer k (hidden_states + residual), slot i =
    # sorted(ids)[i]. One-model mode (Eagle3OneModelSpecMetadata, the default) only sorts, so -1
    # (the final state) takes the first slot; the two-model path (Eagle3SpecMetadata) moves it last.
    if ids is None and L <= 5:
        # Eagle3SpecMetadata / Eagle3OneModelSpecMetadata.__post_init__ (l.109-111 @001e6700): default ids only
        return Captured(
            (),
            [],
            None,
            failure=Failure(
                "start-up",
                "ValueError: Not enough hidden layers for default EAGLE3 capture",
                f"{TRT_SRC} (__post_init__: num_layers <= 5 with no eagle3_layers_to_capture)",
            ),
        )
    # the default is a tuple, not a set: for L = 6 it is (1, 2, 2)
    use = [1, L // 2 - 1, L - 4] if ids is None else sorted(set(ids))
    c = _after_layer_sorted(L, use, final_norm(), minus_one_last=version.endswith("two-model"))
    # the note compares with what the user wrote, not with the de-duplicated set
    c.note = f"ids are sorted: {list(ids)} -> {c.internal}" if ids is not None and list(ids) != c.internal else None
    # maybe_capture_hidden_states writes slot i only when layer k == slots[i] runs, and only the first slot of a
    # repeated id (`break`); the buffer is torch.empty (Eagle3ResourceManager.hidden_states l.44-47, and the
    # one-model metadata's hidden_states), so a slot no layer writes hands the draft uninitialized memory
    order = list(c.internal or [])
    unwritten = [(i, k) for i, k in enumerate(order) if not (k == -1 or 0 <= k < L) or k in order[:i]]
    if unwritten:
        c.failure = Failure(
            "serving",
            "slot(s) " + ", ".join(f"{i} (id {k})" for i, k in unwritten) + " are never written: no decoder "
            f"layer of a {L}-layer target has that id (or an earlier slot took it), and the capture buffer is torch.empty, "
            "so the draft reads uninitialized memory there",
            f"{TRT_SRC} (maybe_capture_hidden_states; torch.empty buffer)",
            order,
        )
        c.spec, c.dropped = (), []
    return c


MODELOPT_FIRST = "0.35.0"  # first release whose HF EAGLE plugin captures with forward hooks (executed)
MODELOPT_NEWEST = "0.47.0"


def modelopt_default_ids(num_layers: int) -> list[int]:
    """hf_eagle.py default_eagle_aux_layer_ids (0.45+; the same set inline from 0.35): {1, max(0, L//2-1),
    max(0, L-4)}. A set: targets with fewer than 7 layers get fewer than three states (L=5: one)."""
    L = num_layers
    return sorted({1, max(0, L // 2 - 1), max(0, L - 4)})


def _modelopt(version: str, family: str, L: int, ids: list[int] | None) -> Captured:
    # EXECUTED (conformance/modelopt_exec.py, every release 0.35.0-0.47.0): `modify` registers one forward hook
    # on each layers[k] with k in the ids, in layer order; the hook appends the layer's output; the draft's fc
    # takes len(ids) * hidden inputs (plugins/modeling_eagle.py, transformers.py before 0.45), so a duplicate,
    # -1 or an id past the last layer leaves fewer states than ids: a shape error on the first forward.
    use = modelopt_default_ids(L) if not ids else list(ids)
    hooked = [k for k in range(L) if k in use]
    if len(hooked) != len(use):
        return Captured(
            (),
            [],
            use,
            failure=Failure(
                "first forward",
                f"RuntimeError: mat1 and mat2 shapes cannot be multiplied (the draft fc takes {len(use)} x "
                f"hidden inputs, forward hooks captured {len(hooked)} states: one hook per layer 0..{L - 1})",
                "modelopt/torch/speculative/plugins/hf_eagle.py (modify: register_forward_hook) + modeling_eagle.py (fc)",
                use,
            ),
        )
    c = Captured(tuple(layer_out(k) for k in hooked), [], hooked)
    if ids and list(ids) != hooked:
        c.note = f"ids are sorted: ModelOpt's forward hooks fire in layer order: {list(ids)} -> {hooked}"
    return c


def _eagle(version: str, family: str, L: int, ids: list[int] | None) -> Captured:
    # SafeAILab/EAGLE eagle/model/modeling_llama_kv.py: idx in {2, L//2, L-3} at the loop top.
    return _before_layer([2, L // 2, L - 3], L, allow_end=False)


RULES: dict[str, Callable[[str, str, int, list[int] | None], Captured]] = {
    "sglang": _sglang,
    "vllm": _vllm,
    "trtllm": _trtllm,
    "modelopt": _modelopt,
    "eagle": _eagle,
}


# --------------------------------------------------------------------------- the engine table
#
# One row of data per (engine, release range, target family): what decides capture. The SGLang and
# vLLM rows are checked case by case against conformance/table.json, which `make conformance` writes
# by EXECUTING each release's own functions (tests/test_conformance.py); a row's `src` names the file
# the fact comes from. TensorRT-LLM and ModelOpt rules further down are hand-read (cited, not executed).


# a release as pip writes it: numbers, then an optional pre-release (a/b/rc), post-release and dev part;
# a pre-release or dev build of X.Y.Z runs X.Y.Z's code in the making, so it maps to X.Y.Z's row
_RELEASE = re.compile(
    r"^v?(?P<nums>\d+(?:\.\d+)*)(?:[._-]?(?:a|b|c|rc|alpha|beta|pre|preview)[._-]?\d*)?"
    r"(?:[._-]?post[._-]?(?P<post>\d+))?(?:[._-]?dev[._-]?\d*)?$"
)


def _split_version(version: str) -> tuple[str, str]:
    """(release part, the suffix the doctor reads): '0.33.0-v1' -> ('0.33.0', '-v1'); a local version
    ('+g1234abc', a build of that release) is dropped, the '+minus-one-embed' marker is kept."""
    v, suffix = version.strip(), ""
    if v.endswith(MINUS_ONE_EMBED):
        v, suffix = v[: -len(MINUS_ONE_EMBED)], MINUS_ONE_EMBED
    v = v.split("+")[0]
    base, dash, tail = v.partition("-")
    if dash and tail in ("v1", "v2", "two-model"):
        return base, "-" + tail + suffix
    return v, suffix


def _parse(version: str) -> tuple[list[int], int]:
    m = _RELEASE.match(_split_version(version)[0].lower())
    if m is None:
        raise BadInput(
            f"--engine-version {version!r} is not a release number",
            "write e.g. 0.5.23, 0.33, 0.33.1, 0.5.4.post2 or 0.5.10rc0",
        )
    return [int(x) for x in m["nums"].split(".")], int(m["post"]) if m["post"] else -1


def _vkey(version: str) -> tuple:
    """'0.5.4.post2' -> (0, 5, 4, 2); '0.33' == '0.33.0'; '0.5.10rc0' and '0.5.10.dev3' == '0.5.10'; a
    '-v1'/'-v2'/'-two-model' suffix and a local '+...' part are ignored."""
    nums, post = _parse(version)
    nums = nums + [0] * (3 - len(nums))
    return (*nums, post)


def release_string(version: str) -> str:
    """The release a version string names, with the suffix the doctor reads kept: '0.11.0rc2.dev45+g1234abc'
    -> '0.11.0', '0.5.4.post2' -> '0.5.4.post2', '0.33.0-v1' -> '0.33.0-v1'."""
    nums, post = _parse(version)
    return ".".join(map(str, nums)) + (f".post{post}" if post >= 0 else "") + _split_version(version)[1]


@dataclass(frozen=True)
class Row:
    first: str  # first release this row covers (inclusive); rows of one family are in order
    rule: str  # absent | unsupported | default_only | plus1 | first1 (deepseek) | maxL (gpt-oss) | raw (vLLM)
    src: str  # the engine file the rule comes from
    guard0: bool = True  # index 0 captures the embeddings (False: residual is None there -> crash)
    end: bool = False  # index L captures the pre-norm output of the last layer
    packer: bool = False  # capture count must equal the id count (sglang AuxHiddenStatePacker)
    index_check: bool = False  # the setter indexes layers[id]: an id past the last layer raises at start-up
    reads: str = "nested"  # sglang: nested | none; vllm: none | top | top,nested
    aux_flag: bool = False  # sglang reads eagle_config.use_aux_hidden_state (false: capture off)
    loop: str = "before"  # before: id k captures the input of layer k; after: k = output of layer k-1
    message: str = ""  # the engine's own error text for `unsupported` / `absent`
    branch: bool = False  # the loop appends a layer's MLP branch output, not the residual stream (sglang gemma3)


_SG_NOSETTER = "{cls} defines no set_eagle3_layers_to_capture, which the model runner calls at start-up"
_SG_ABSENT = "ValueError: Model architectures ['{cls}'] are not supported for now (sglang/srt/models/registry.py)"
_SG_CLS = {
    "llama": "LlamaForCausalLM",
    "qwen": "Qwen3ForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
    "deepseek": "DeepseekV2ForCausalLM",
    "gpt_oss": "GptOssForCausalLM",
    "mistral": "LlamaForCausalLM",
    "glm4_moe": "Glm4MoeForCausalLM",
    "glm4_moe_lite": "Glm4MoeLiteForCausalLM",
    "minimax_m2": "MiniMaxM2ForCausalLM",
    "kimi_linear": "KimiLinearForCausalLM",
    "kimi_k25": "KimiK25ForConditionalGeneration",
    "llama4": "Llama4ForConditionalGeneration",
    "gemma3": "Gemma3ForConditionalGeneration",
    "gemma3_text": "Gemma3ForCausalLM",
}

# sglang: model files srt/models/<family>.py (setter), reader srt/model_executor/model_runner.py
SGLANG_ROWS: dict[str, list[Row]] = {
    "llama": [
        Row("0.0", "unsupported", "srt/models/llama.py", message=_SG_NOSETTER),
        Row("0.4.4.post2", "default_only", "srt/models/llama.py", guard0=False, reads="none"),
        Row("0.4.9", "plus1", "srt/models/llama.py", guard0=False),
        Row("0.5.8", "plus1", "srt/models/llama.py", guard0=False, aux_flag=True),
        Row("0.5.22", "plus1", "srt/models/llama.py", aux_flag=True),
    ],
    "qwen": [
        Row("0.0", "unsupported", "srt/models/qwen3.py", message=_SG_NOSETTER),
        Row("0.4.9", "plus1", "srt/models/qwen3.py"),
        Row("0.5.8", "plus1", "srt/models/qwen3.py", aux_flag=True),
    ],
    "qwen3_moe": [
        Row("0.0", "unsupported", "srt/models/qwen3_moe.py", message=_SG_NOSETTER),
        Row("0.4.9", "plus1", "srt/models/qwen3_moe.py"),
        Row("0.5.4.post2", "plus1", "srt/models/qwen2_moe.py (Qwen2MoeModel.set_eagle3_layers_to_capture)", index_check=True),
        Row(
            "0.5.8",
            "plus1",
            "srt/models/qwen2_moe.py (Qwen2MoeModel.set_eagle3_layers_to_capture)",
            index_check=True,
            aux_flag=True,
        ),
    ],
    "deepseek": [
        Row("0.0", "unsupported", "srt/models/deepseek_v2.py", message=_SG_NOSETTER),
        Row("0.5.4.post2", "plus1", "srt/models/deepseek_v2.py", guard0=False),
        Row("0.5.8", "plus1", "srt/models/deepseek_v2.py", guard0=False, aux_flag=True),
        Row("0.5.13", "first1", "srt/models/deepseek_v2.py", guard0=False, aux_flag=True),
        Row("0.5.14", "first1", "srt/models/deepseek_v2.py", aux_flag=True),
        Row("0.5.17", "first1", "srt/models/deepseek_v2.py + srt/layers/aux_hidden_states.py", aux_flag=True, packer=True),
    ],
    "gpt_oss": [
        Row("0.0", "unsupported", "srt/models/gpt_oss.py", message=_SG_NOSETTER),
        Row("0.5.1", "plus1", "srt/models/gpt_oss.py", guard0=False),
        Row("0.5.8", "plus1", "srt/models/gpt_oss.py", guard0=False, aux_flag=True),
        Row("0.5.17", "maxL", "srt/models/gpt_oss.py", end=True, aux_flag=True),
    ],
}
SGLANG_ROWS["mistral"] = SGLANG_ROWS["llama"]  # sglang serves Mistral through llama.py's LlamaForCausalLM

# Families with their own setter or a wrapper that delegates to its language model (issue 12). Each row
# was executed by make conformance (conformance/sglang_exec.py FAMILIES) from its first release; `absent`
# rows are releases whose model registry does not know the architecture at all.
_GEMMA_SRC = "srt/models/gemma3_causal.py (Gemma3TextModel.forward)"
SGLANG_ROWS.update(
    {
        "glm4_moe": [
            Row("0.0", "absent", "srt/models/glm4_moe.py", message=_SG_ABSENT),
            Row("0.4.9.post5", "unsupported", "srt/models/glm4_moe.py", message=_SG_NOSETTER),
            Row("0.5.5", "plus1", "srt/models/glm4_moe.py", guard0=False),
            Row("0.5.8", "plus1", "srt/models/glm4_moe.py", guard0=False, aux_flag=True),
            Row("0.5.21", "plus1", "srt/models/glm4_moe.py", aux_flag=True),
        ],
        "glm4_moe_lite": [
            Row("0.0", "absent", "srt/models/glm4_moe_lite.py", message=_SG_ABSENT),
            # Glm4MoeLiteForCausalLM(DeepseekV2ForCausalLM): the DeepSeek setter of that release
            Row("0.5.8", "plus1", "srt/models/glm4_moe_lite.py -> deepseek_v2.py", guard0=False, aux_flag=True),
            Row("0.5.13", "first1", "srt/models/glm4_moe_lite.py", guard0=False, aux_flag=True),
            Row("0.5.21", "first1", "srt/models/glm4_moe_lite.py", aux_flag=True),
        ],
        "minimax_m2": [
            Row("0.0", "absent", "srt/models/minimax_m2.py", message=_SG_ABSENT),
            Row("0.5.4.post1", "unsupported", "srt/models/minimax_m2.py", message=_SG_NOSETTER),
            Row("0.5.5.post1", "plus1", "srt/models/minimax_m2.py", guard0=False),
            Row("0.5.8", "plus1", "srt/models/minimax_m2.py", guard0=False, aux_flag=True),
            Row("0.5.11", "plus1", "srt/models/minimax_m2.py", aux_flag=True),
        ],
        "kimi_linear": [  # no release defines set_eagle3_layers_to_capture for KimiLinearForCausalLM
            Row("0.0", "absent", "srt/models/kimi_linear.py", message=_SG_ABSENT),
            Row("0.5.4.post2", "unsupported", "srt/models/kimi_linear.py", message=_SG_NOSETTER),
        ],
        "kimi_k25": [  # KimiK25ForConditionalGeneration delegates to its DeepseekV3ForCausalLM language model
            Row("0.0", "absent", "srt/models/kimi_k25.py", message=_SG_ABSENT),
            Row("0.5.9", "unsupported", "srt/models/kimi_k25.py", message=_SG_NOSETTER),
            Row("0.5.10", "plus1", "srt/models/kimi_k25.py -> deepseek_v2.py", guard0=False, aux_flag=True),
            Row("0.5.13", "first1", "srt/models/kimi_k25.py -> deepseek_v2.py", guard0=False, aux_flag=True),
            Row("0.5.14", "first1", "srt/models/kimi_k25.py -> deepseek_v2.py", aux_flag=True),
            Row(
                "0.5.17",
                "first1",
                "srt/models/kimi_k25.py -> deepseek_v2.py + srt/layers/aux_hidden_states.py",
                aux_flag=True,
                packer=True,
            ),
        ],
        "llama4": [  # mllama4.py Llama4ForConditionalGeneration delegates to llama4.py Llama4ForCausalLM (llama.py's setter)
            Row("0.0", "absent", "srt/models/mllama4.py", message=_SG_ABSENT),
            Row("0.4.5", "unsupported", "srt/models/mllama4.py", message=_SG_NOSETTER),
            Row("0.4.9", "plus1", "srt/models/mllama4.py -> llama4.py", guard0=False),
            Row("0.5.8", "plus1", "srt/models/mllama4.py -> llama4.py", guard0=False, aux_flag=True),
            Row("0.5.21", "plus1", "srt/models/mllama4.py -> llama4.py", aux_flag=True),
        ],
        "gemma3_text": [
            Row("0.0", "absent", "srt/models/gemma3_causal.py", message=_SG_ABSENT),
            Row("0.4.4.post2", "unsupported", "srt/models/gemma3_causal.py", message=_SG_NOSETTER),
            Row("0.5.12", "plus1", _GEMMA_SRC, end=True, aux_flag=True),
            # the decoder layer keeps the residual apart from 0.5.17 ("Keep the residual live across layers"),
            # but the loop still appends the bare hidden_states: the MLP branch, not the residual stream
            Row("0.5.17", "plus1", _GEMMA_SRC, end=True, aux_flag=True, branch=True),
        ],
    }
)
SGLANG_ROWS["gemma3"] = [  # gemma3_mm.py Gemma3ForConditionalGeneration delegates to Gemma3ForCausalLM
    Row(
        r.first,
        r.rule,
        r.src if r.first == "0.0" else r.src.replace("srt/models/", "srt/models/gemma3_mm.py -> ", 1),
        guard0=r.guard0,
        end=r.end,
        aux_flag=r.aux_flag,
        branch=r.branch,
        message=r.message,
    )
    for r in SGLANG_ROWS["gemma3_text"]
]

_VL_CHECK = "ValueError: Eagle3 is only supported for {supported} models. Got model_type={mt!r}"
_VL_NOIFACE = (
    "v1/worker/gpu_model_runner.py: Model does not support EAGLE3 interface but "
    "aux_hidden_state_outputs was requested ({cls} does not implement SupportsEagle3)"
)
# the substrings vllm's check accepts, by first release (config/__init__.py, later config/speculative.py)
VLLM_CHECK: list[tuple[str, tuple[str, ...] | None]] = [
    ("0.0", None),
    ("0.8.5", ("llama",)),
    ("0.10.1", ("llama", "qwen")),
    ("0.11.0", ("llama", "qwen", "minicpm", "gpt_oss")),
    ("0.16.0", ("llama", "qwen", "minicpm", "gpt_oss", "hunyuan_vl", "hunyuan_v1_dense", "afmoe")),
    ("0.17.0", ("llama", "qwen", "minicpm", "gpt_oss", "hunyuan_vl", "hunyuan_v1_dense", "afmoe", "nemotron_h")),
    (
        "0.18.0",
        (
            "llama",
            "qwen",
            "minicpm",
            "gpt_oss",
            "hunyuan_vl",
            "hunyuan_v1_dense",
            "afmoe",
            "nemotron_h",
            "deepseek_v2",
            "deepseek_v3",
            "kimi_k2",
            "kimi_k25",
        ),
    ),
    (
        "0.19.1",
        (
            "llama",
            "qwen",
            "minicpm",
            "gpt_oss",
            "hunyuan_vl",
            "hunyuan_v1_dense",
            "afmoe",
            "nemotron_h",
            "deepseek_v2",
            "deepseek_v3",
            "kimi_k2",
            "kimi_k25",
            "minimax_m2",
            "gemma4",
        ),
    ),
    (
        "0.21.0",
        (
            "llama",
            "qwen",
            "minicpm",
            "gpt_oss",
            "hunyuan_vl",
            "hunyuan_v1_dense",
            "afmoe",
            "nemotron_h",
            "deepseek_v2",
            "deepseek_v3",
            "kimi_k2",
            "kimi_k25",
            "minimax_m2",
            "gemma4",
            "laguna",
        ),
    ),
    ("0.22.0", None),  # the check is gone: SupportsEagle3 on the model class decides
]
VLLM_MODEL_TYPE = {
    "llama": "llama",
    "mistral": "mistral",
    "qwen": "qwen3",
    "qwen3_moe": "qwen3_moe",
    "deepseek": "deepseek_v3",
    "gpt_oss": "gpt_oss",
    # hf_text_config.model_type of the families SGLang gives their own setter (issue 12)
    "glm4_moe": "glm4_moe",
    "glm4_moe_lite": "glm4_moe_lite",
    "minimax_m2": "minimax_m2",
    "kimi_linear": "kimi_linear",
    "kimi_k25": "kimi_k25",
    "llama4": "llama4_text",
    "gemma3": "gemma3_text",
    "gemma3_text": "gemma3_text",
}
# V1 runner: which draft-config keys it reads (v1/worker/gpu_model_runner.py _get_eagle3_aux_layers_from_config)
VLLM_V1_READS: list[tuple[str, str]] = [("0.0", "none"), ("0.11.1", "top"), ("0.22.0", "top,nested")]
VLLM_V2_FIRST = "0.17.0"  # Model Runner V2 (v1/worker/gpu/spec_decode/eagle/eagle3_utils.py): top-level key only
VLLM_V2_DEFAULT_FROM = "0.33.0"  # hand-read (issue 12): from 0.33 a stock launch runs Model Runner V2
# model class support and capture loop, by family (model_executor/models/<family>.py + interfaces.py)
VLLM_ROWS: dict[str, list[Row]] = {
    "llama": [
        Row("0.0", "unsupported", "model_executor/models/llama.py", message=_VL_NOIFACE),
        Row("0.8.5", "raw", "model_executor/models/llama.py", guard0=False),
        Row("0.18.0", "raw", "model_executor/models/llama.py + interfaces.py _maybe_add_hidden_state", loop="after", end=True),
    ],
    "qwen": [
        Row("0.0", "unsupported", "model_executor/models/qwen3.py", message=_VL_NOIFACE),
        Row("0.8.5", "raw", "model_executor/models/qwen3.py (Qwen2Model)", guard0=False),
        Row("0.18.0", "raw", "model_executor/models/qwen2.py + interfaces.py _maybe_add_hidden_state", loop="after", end=True),
    ],
    "qwen3_moe": [
        Row("0.0", "unsupported", "model_executor/models/qwen3_moe.py", message=_VL_NOIFACE),
        Row("0.11.1", "raw", "model_executor/models/qwen3_moe.py"),
        Row(
            "0.18.0", "raw", "model_executor/models/qwen3_moe.py + interfaces.py _maybe_add_hidden_state", loop="after", end=True
        ),
    ],
    "deepseek": [
        Row("0.0", "unsupported", "model_executor/models/deepseek_v2.py", message=_VL_NOIFACE),
        Row("0.18.0", "raw", "model_executor/models/deepseek_v2.py (DeepseekV2Model.forward)", guard0=False),
        Row("0.25.0", "raw", "model_executor/models/deepseek_v2.py (DeepseekV2Model.forward)", guard0=False, end=True),
    ],
    "gpt_oss": [
        Row("0.0", "unsupported", "model_executor/models/gpt_oss.py", message=_VL_NOIFACE),
        Row("0.11.0", "raw", "model_executor/models/gpt_oss.py"),
        Row("0.18.0", "raw", "model_executor/models/gpt_oss.py + interfaces.py _maybe_add_hidden_state", loop="after", end=True),
    ],
    "mistral": [
        Row("0.0", "unsupported", "model_executor/models/llama.py", message=_VL_NOIFACE),
        Row("0.8.5", "raw", "model_executor/models/llama.py", guard0=False),
        Row("0.18.0", "raw", "model_executor/models/mistral.py -> llama.py", loop="after", end=True),
    ],
}

_VL_ABSENT = "ValueError: Model architectures ['{cls}'] are not supported for now (model_executor/models/registry.py)"
# executed by make conformance (conformance/vllm_exec.py FAMILIES): the wrappers (mllama4, gemma3_mm, kimi_k25)
# are followed into the language model vLLM builds for them (model_class= / architectures=[...])
VLLM_ROWS.update(
    {
        "glm4_moe": [  # never SupportsEagle3: refused by the target check, then (0.22+) at load
            Row("0.0", "absent", "model_executor/models/glm4_moe.py", message=_VL_ABSENT),
            Row("0.10.0", "unsupported", "model_executor/models/glm4_moe.py", message=_VL_NOIFACE),
        ],
        "glm4_moe_lite": [
            Row("0.0", "absent", "model_executor/models/glm4_moe_lite.py", message=_VL_ABSENT),
            Row("0.15.0", "unsupported", "model_executor/models/glm4_moe_lite.py", message=_VL_NOIFACE),
        ],
        "minimax_m2": [
            Row("0.0", "absent", "model_executor/models/minimax_m2.py", message=_VL_ABSENT),
            Row("0.11.1", "unsupported", "model_executor/models/minimax_m2.py", message=_VL_NOIFACE),
            Row(
                "0.20.0",
                "raw",
                "model_executor/models/minimax_m2.py + interfaces.py _maybe_add_hidden_state",
                loop="after",
                end=True,
            ),
        ],
        "kimi_linear": [
            Row("0.0", "absent", "model_executor/models/kimi_linear.py", message=_VL_ABSENT),
            Row("0.11.1", "unsupported", "model_executor/models/kimi_linear.py", message=_VL_NOIFACE),
            # from 0.27 registered from vllm/models/kimi_k3 (SupportsEagle3, its own _capture_aux_hidden_stream):
            # recorded by the harness, not executed, so the doctor refuses to guess
            Row("0.27.0", "unmodelled", "vllm/models/kimi_k3 (nvidia/model.py KimiLinearForCausalLM)"),
        ],
        "kimi_k25": [  # KimiK25ForConditionalGeneration -> DeepseekV2ForCausalLM: the deepseek rows
            Row("0.0", "absent", "model_executor/models/kimi_k25.py", message=_VL_ABSENT),
            Row("0.15.0", "unsupported", "model_executor/models/kimi_k25.py", message=_VL_NOIFACE),
            Row("0.18.0", "raw", "model_executor/models/kimi_k25.py -> deepseek_v2.py (DeepseekV2Model.forward)", guard0=False),
            Row(
                "0.25.0",
                "raw",
                "model_executor/models/kimi_k25.py -> deepseek_v2.py (DeepseekV2Model.forward)",
                guard0=False,
                end=True,
            ),
        ],
        "llama4": [  # mllama4.py Llama4ForConditionalGeneration -> llama4.py Llama4ForCausalLM (llama.py's loop)
            Row("0.0", "unsupported", "model_executor/models/mllama4.py", message=_VL_NOIFACE),
            Row("0.11.1", "raw", "model_executor/models/mllama4.py -> llama4.py / llama.py", guard0=False),
            Row(
                "0.18.0",
                "raw",
                "model_executor/models/mllama4.py -> llama.py + interfaces.py _maybe_add_hidden_state",
                loop="after",
                end=True,
            ),
        ],
        "gemma3": [  # no release implements SupportsEagle3 for Gemma-3
            Row("0.0", "unsupported", "model_executor/models/gemma3_mm.py", message=_VL_NOIFACE),
        ],
        "gemma3_text": [
            Row("0.0", "unsupported", "model_executor/models/gemma3.py", message=_VL_NOIFACE),
        ],
    }
)

NEWEST = {"sglang": "0.5.23", "vllm": "0.33.0"}  # newest release conformance/table.json was executed on


def _pick(rows: list, version: str):
    k = _vkey(version)
    hit = rows[0]
    for r in rows:
        if _vkey(r[0] if isinstance(r, tuple) else r.first) <= k:
            hit = r
    return hit


def engine_row(engine: str, version: str, family: str) -> Row:
    """The engine-table row that covers ``version`` (any release string) for a target family."""
    table = SGLANG_ROWS if engine == "sglang" else VLLM_ROWS
    return _pick(table[family if family in table else "llama"], version)


MINUS_ONE_EMBED = "+minus-one-embed"  # --engine-version suffix: "my sglang build maps -1 to the embeddings"


def vllm_runner(version: str) -> str:
    version = version.split("+")[0]
    if version.endswith("-v1") or version.endswith("-v2"):
        return version[-2:]
    return "v2" if _vkey(version) >= _vkey(VLLM_V2_DEFAULT_FROM) else "v1"


@dataclass
class Failure:
    """The engine refuses to start or crashes on the first forward, in its own words."""

    when: str  # "start-up" | "first forward" | "serving" (runs, but feeds a tensor that is no capture point)
    message: str
    source: str
    internal: list[int] | None = None


def _loop(row: Row, internal: Sequence[int], L: int) -> tuple[list[CapturePoint], Failure | None, list[tuple[int, str]]]:
    """The decoder loop's membership test over ``internal`` (layer order, duplicates collapse)."""
    spec: list[CapturePoint] = []
    members = set(internal)
    if row.loop == "after":  # vllm >= 0.18: id 0 before the loop, id idx+1 after layer idx
        if 0 in members:
            spec.append(embed())
        spec += [layer_out(i) for i in range(L) if i + 1 in members]
    else:
        for i in range(L):
            if i in members:
                if i == 0 and not row.guard0:
                    return (
                        [],
                        Failure(
                            "first forward",
                            "TypeError: unsupported operand type(s) for +: 'Tensor' and "
                            "'NoneType' (the residual is None before layer 0)",
                            row.src,
                            list(internal),
                        ),
                        [],
                    )
                spec.append(embed() if i == 0 else layer_out(i - 1))
        if row.end and L in members:
            spec.append(layer_out(L - 1))
    hi = L if (row.end or row.loop == "after") else L - 1
    dropped = [
        (i, f"index {i} matches no capture point of a {L}-layer target (the loop tests indices 0..{hi})")
        for i in dict.fromkeys(internal)
        if not 0 <= i <= hi
    ]
    if row.packer and len(spec) != len(internal):
        return (
            [],
            Failure(
                "first forward",
                f"AssertionError: captured {len(spec)} of {len(internal)} aux hidden states "
                "(srt/layers/aux_hidden_states.py AuxHiddenStatePacker)",
                row.src,
                list(internal),
            ),
            dropped,
        )
    return spec, None, dropped


def _sglang_internal(row: Row, L: int, ids: list[int] | None) -> list[int]:
    if ids is None or row.rule == "default_only":
        return [2, L // 2, L - 3]
    if row.rule == "first1":  # deepseek_v2.py: +1 only when the first id is 1
        return [v + 1 for v in ids] if ids and ids[0] == 1 else list(ids)
    if row.rule == "maxL":  # gpt_oss.py: raw when the largest id equals L
        return list(ids) if ids and max(ids) == L else [v + 1 for v in ids]
    return [v + 1 for v in ids]


def _vllm_type_check(version: str, family: str) -> Captured | None:
    """vLLM's config/speculative.py checks the target type before the model is built: a refusal there
    is a start-up failure, whatever the ids."""
    supported = _pick(VLLM_CHECK, version)[1]
    mt = VLLM_MODEL_TYPE.get(family, "llama")
    if supported is not None and not any(s in mt for s in supported):
        return Captured(
            (),
            failure=Failure(
                "start-up",
                _VL_CHECK.format(supported=list(supported), mt=mt),
                "config/speculative.py (config/__init__.py before 0.11)",
            ),
        )
    return None


def run_row(engine: str, version: str, family: str, L: int, ids: list[int] | None) -> Captured:
    """What the engine captures for ids already read from the config (None = its default)."""
    row = engine_row(engine, version, family)
    if engine == "vllm":
        refused = _vllm_type_check(version, family)
        if refused is not None:
            return refused
    if row.rule == "unmodelled":
        raise BadInput(
            f"{engine} {version} serves the {family} family from {row.src}, whose EAGLE-3 capture the engine "
            "table does not model yet",
            "name an earlier --engine-version, or extend conformance/vllm_exec.py",
        )
    if row.rule in ("unsupported", "absent"):
        if engine == "sglang":
            msg = row.message.format(cls=_SG_CLS.get(family, "LlamaForCausalLM"))
        else:
            msg = row.message.format(cls=_SG_CLS.get(family, family) if row.rule == "absent" else family)
        return Captured((), failure=Failure("start-up", msg, row.src))
    if engine == "vllm":
        internal = list(ids) if ids else [2, L // 2, L - 3]
    else:
        if version.endswith(MINUS_ONE_EMBED) and ids and -1 in ids and row.rule != "default_only":
            # the user's patched engine captures the embeddings for -1, in layer order, and counts it
            rest = run_row(engine, version.replace(MINUS_ONE_EMBED, ""), family, L, [i for i in ids if i != -1])
            if rest.failure is None:
                rest.spec = (embed(), *rest.spec)
                rest.note = "-1 taken as the embeddings (--engine-version ...+minus-one-embed: a patched engine)"
            return rest
        internal = _sglang_internal(row, L, ids)
        if row.index_check and any(i >= L for i in internal):
            return Captured(
                (),
                failure=Failure(
                    "start-up",
                    f"IndexError: list index out of range (the setter marks self.layers[{max(internal)}] of a {L}-layer model)",
                    row.src,
                    internal,
                ),
            )
    spec, fail, dropped = _loop(row, internal, L)
    if row.branch and fail is None and any(p.is_layer_out() for p in spec):
        # gemma3_causal.py from 0.5.17: `aux_hidden_states.append(hidden_states)` where the layer returns
        # (mlp branch, residual): the draft gets post_feedforward_layernorm(mlp(...)), not the stream
        n = [str(p).replace("layer_out", "mlp_branch") for p in spec]
        fail = Failure(
            "serving",
            f"the capture is the decoder layer's MLP branch, not the residual stream: "
            f"{', '.join(n)} (the loop appends hidden_states, and the layer keeps the residual apart)",
            row.src,
            internal,
        )
        return Captured((), dropped, internal, failure=fail)
    c = Captured(tuple(spec), dropped, internal, failure=fail)
    return c


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
        # sglang model_runner.py (later model_runner_components/spec_aux_hidden_state.py): only
        # eagle_config[...]; any exception (no eagle_config, no key) falls back to the default.
        if _pick(SGLANG_ROWS["llama"], version).reads == "none":
            return KeyRule((), f"nowhere: SGLang {version} never reads layer ids (the setter takes none)", _json_nested)
        return KeyRule((NESTED,), "the draft's config.json", _json_nested)
    if engine == "vllm":
        reads = (
            "top" if vllm_runner(version) == "v2" and _vkey(version) >= _vkey(VLLM_V2_FIRST) else _pick(VLLM_V1_READS, version)[1]
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
    return KeyRule((), "nowhere: the EAGLE reference hard-codes the layers", _json_top)


TRTLLM_RELEASE = "1.2"  # the TensorRT-LLM release the hand-read rules come from; its point releases map onto it


def newest_modelled(engine: str) -> str | None:
    """The newest release whose rules the engine table holds (executed, or hand-read for TensorRT-LLM)."""
    return {**NEWEST, "modelopt": MODELOPT_NEWEST, "trtllm": TRTLLM_RELEASE}.get(engine)


def newer_than_modelled(engine: str, version: str) -> str | None:
    """The newest modelled release, when ``version`` is newer and that release's rules are applied to it;
    None otherwise. TensorRT-LLM point releases (1.2.1) are the 1.2 row, not newer."""
    newest = newest_modelled(engine)
    if newest is None:
        return None
    k, n = _vkey(version), _vkey(newest)
    if engine == "trtllm":
        k, n = k[:2], n[:2]
    return newest if k > n else None


def rules_release(engine: str, version: str | None) -> str:
    """The release whose rules apply to ``version``: itself, or the newest modelled one for a newer release."""
    v = check_engine(engine, version)
    return ENGINE_VERSIONS[engine][0] if newer_than_modelled(engine, v) else v


def check_engine(engine: str, version: str | None) -> str:
    """Any release string maps to the engine-table row that covers it and comes back as that release
    (0.33 == 0.33.0, 0.5.10rc0 -> 0.5.10, TensorRT-LLM 1.2.1 -> 1.2); a release newer than the newest
    modelled, up to the next minor series, takes the newest row (newer_than_modelled says so)."""
    if engine not in ENGINES:
        raise BadInput(f"unknown --engine {engine!r}", f"use one of {', '.join(ENGINES)}")
    versions = ENGINE_VERSIONS[engine]
    if version is None:
        return versions[0]
    if engine == "eagle":
        if version.strip() not in versions:
            raise BadInput(
                f"--engine-version {version} is not modelled for {engine}",
                f"use one of {', '.join(versions)} (the closest release whose behaviour you run)",
            )
        return version.strip()
    v = release_string(version)
    k, newest = _vkey(v), _vkey(newest_modelled(engine) or "0")
    suffix = _split_version(v)[1]
    if k[:2] > (newest[0], newest[1] + 1):
        # the next minor series takes the newest row with a warning (ENG005); anything further out is not
        # a release this table can speak for
        raise BadInput(
            f"--engine-version {version} is newer than any {engine} release the engine table covers "
            f"(newest modelled: {newest_modelled(engine)})",
            "add it to conformance/releases.py and run make conformance, or name the closest release",
        )
    dash = suffix.split("+")[0]
    if dash and dash not in {"vllm": ("-v1", "-v2"), "trtllm": ("-two-model",)}.get(engine, ()):
        raise BadInput(
            f"--engine-version {version}: unknown suffix {dash!r} for {engine}",
            "use e.g. 0.33.0, 0.33.0-v1 or 0.33.0-v2 (vLLM runners), 1.2-two-model (TensorRT-LLM)",
        )
    if engine == "modelopt" and k < _vkey(MODELOPT_FIRST):
        raise BadInput(
            f"--engine-version {version}: ModelOpt before {MODELOPT_FIRST} captured without forward hooks, "
            "which the engine table does not model",
            f"use {MODELOPT_FIRST} or newer (e.g. 0.47)",
        )
    if engine == "trtllm":
        if k[:2] < newest[:2]:
            raise BadInput(
                f"--engine-version {version} is not modelled for {engine}",
                f"use one of {', '.join(versions)} (the closest release whose behaviour you run)",
            )
        return (TRTLLM_RELEASE if k[:2] == newest[:2] else v.split("-")[0]) + suffix
    return v


def id_range(engine: str, num_layers: int) -> tuple[int, int]:
    """Ids the doctor takes as written for an engine (inspect and compare-hidden both use this); some,
    like SGLang's L-1 under the +1 rule, are taken yet capture nothing or make the engine fail, and
    the engine table says which."""
    L = num_layers
    # trtllm takes id L: its slot stays unwritten, which the engine table reports (ENG003) rather than refusing
    return {"sglang": (-1, L), "vllm": (0, L), "trtllm": (-1, L), "modelopt": (0, L - 1)}.get(engine, (-1, L))


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
    failure: Failure | None = None  # the engine refuses to start or crashes on the first forward
    internal: list[int] | None = None  # the engine's own index list after its rule, position by position with ids
    config_ids: dict[str, list[int]] = field(default_factory=dict)  # every id list the draft config holds, by key
    override: list[int] | None = None  # --layer-ids, taken as written in the key the engine reads
    aux_off: bool = False  # the config turns aux capture off (SGLang use_aux_hidden_state = false)
    rules_of: str | None = None  # the newest modelled release, when ``version`` is newer and its rules were applied

    @property
    def label(self) -> str:
        return f"{self.engine} {self.version}" + ("" if self.family == "llama" else f" ({self.family})")


def _unmodelled(engine: str, family: str) -> Failure:
    where = "srt/models/<file>.py set_eagle3_layers_to_capture" if engine == "sglang" else "model_executor/models/<file>.py"
    return Failure(
        "undetermined",
        f"the {family} family is not modelled for {engine}: which states it captures is decided by {where}, "
        "which the engine table has not executed for this target",
        f"{engine} {where}",
    )


def _read_ids(
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


def _check_id_range(engine: str, num_layers: int, ids: list[int], source: str) -> None:
    lo, hi = id_range(engine, num_layers)
    bad = [i for i in ids if not lo <= i <= hi]
    if bad:
        raise BadInput(
            f"layer id(s) {bad} in {source.split(' (')[0]} are out of range for a {num_layers}-layer target under "
            f"{engine} (valid ids: {lo}..{hi})",
            "use ids inside the target's depth, in this engine's numbering",
        )


def resolve_serving(
    engine: str,
    version: str | None,
    family: str,
    num_layers: int,
    config_ids: dict[str, list[int]],
    override: list[int] | None = None,
    use_aux_hidden_state: bool = True,
) -> Serving:
    """Which capture points ``engine`` feeds the draft.

    config_ids: every layer-id list found in the draft config, by dotted key; override: ids the
    user passes with ``--layer-ids`` (taken as written in the key this engine reads).
    """
    version = check_engine(engine, version)
    s = _resolve(engine, version, family, num_layers, config_ids, override, use_aux_hidden_state)
    # kept so a fix can ask what the same config does on another release (fixes_on_later_releases)
    s.config_ids, s.override = dict(config_ids), None if override is None else list(override)
    s.rules_of = newer_than_modelled(engine, version)
    return s


def _resolve(
    engine: str,
    version: str,
    family: str,
    num_layers: int,
    config_ids: dict[str, list[int]],
    override: list[int] | None,
    use_aux_hidden_state: bool,
) -> Serving:
    ids, source, ignored = _read_ids(engine, version, config_ids, override)
    if ids is not None:
        _check_id_range(engine, num_layers, ids, source)
    if not is_modelled(engine, family):
        return Serving(engine, version, family, num_layers, (), ids, source, ignored, [], [], _unmodelled(engine, family))
    if engine == "sglang" and engine_row(engine, version, family).rule == "absent":
        cap = RULES[engine](version, family, num_layers, ids)  # the model registry refuses before any capture
        return Serving(engine, version, family, num_layers, (), ids, source, ignored, [], [], cap.failure)
    if engine == "sglang" and not use_aux_hidden_state and _pick(SGLANG_ROWS["llama"], version).aux_flag:
        # sglang model_runner: eagle_config.use_aux_hidden_state false skips set_eagle3_layers_to_capture
        off = Serving(engine, version, family, num_layers, (), ids, "eagle_config.use_aux_hidden_state = false", ignored)
        off.notes, off.aux_off = ["SGLang reads eagle_config.use_aux_hidden_state = false and captures nothing"], True
        return off
    cap = RULES[engine](version, family, num_layers, ids)
    notes = [cap.note] if cap.note else []
    if (
        engine == "sglang"
        and _vkey("0.4.9") <= _vkey(version) < _vkey("0.5.3")
        and ids is not None
        and cap.failure is None
        and cap.spec != default_spec_llama(num_layers)
    ):
        notes.append(
            "SGLang 0.5.2 captured its CUDA graphs for decode/verify with the DEFAULT ids while eager "
            "prefill used the configured ones (fixed by SGLang PR #22836)"
        )
    s = Serving(engine, version, family, num_layers, cap.spec, ids, source, ignored, cap.dropped, notes, cap.failure)
    s.internal = cap.internal
    return s


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
        if p.is_final_norm():
            return -1 if engine == "trtllm" else None
        return (-1 if p.is_embed() else int(p.layer)) + base  # type: ignore[arg-type]

    cands: list[list[int] | None] = []
    for base in (0, 1):
        ids = [num(p, base) for p in want]
        if all(i is not None for i in ids):
            cands.append(ids)  # type: ignore[arg-type]
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


SG_DRAFT_SRC = "srt/models/llama_eagle3.py (LlamaModel.forward: fc only when the width differs from the embeddings')"
VL_DRAFT_SRC = "model_executor/models/llama_eagle3.py (combine_hidden_states: self.model.fc)"


def fc_feed_failure(serving: Serving, fc_in: int, target_hidden: int, draft_hidden: int) -> Failure | None:
    """What the engine's draft does when the states it captured do not fill the fc the checkpoint holds.

    The capture rules say which states the target hands over; this is the draft's side of the same
    forward. SGLang (srt/models/llama_eagle3.py) and vLLM (llama_eagle3.py) build fc from the checkpoint
    and apply it to the concatenation as is, so a width other than fc_in is a matmul error on the first
    draft forward; SGLang skips fc when the width equals its own hidden size, and with no state at all
    its target's forward unpacks a bare tensor as (hidden_states, aux_hidden_states).
    """
    n = len(serving.spec)
    width = n * target_hidden
    if width == fc_in or serving.engine not in ("sglang", "vllm") or serving.failure is not None or serving.aux_off:
        return None
    if serving.engine == "sglang" and n == 0:
        row = engine_row("sglang", serving.version, serving.family)
        cls = _SG_CLS.get(serving.family, "LlamaForCausalLM")
        return Failure(
            "first forward",
            "ValueError: too many values to unpack (expected 2) (no layer was captured, so the model returns the bare "
            "hidden states where the causal-LM forward unpacks (hidden_states, aux_hidden_states))",
            f"{row.src} ({cls}.forward: `hidden_states, aux_hidden_states = hidden_states`)",
            serving.internal,
        )
    if serving.engine == "sglang" and width == draft_hidden:
        return Failure(
            "serving",
            f"the draft's fc is skipped: {n} captured state of width {width} equals the draft's hidden size, so "
            f"{format_spec(serving.spec)} goes into the decoder layer raw instead of through fc ({fc_in} inputs)",
            SG_DRAFT_SRC,
            serving.internal,
        )
    return Failure(
        "first forward",
        f"RuntimeError: mat1 and mat2 shapes cannot be multiplied (Tx{width} and {fc_in}x{draft_hidden}): "
        f"{n} captured state(s) x target hidden {target_hidden}, the draft's fc takes {fc_in} inputs",
        SG_DRAFT_SRC if serving.engine == "sglang" else VL_DRAFT_SRC,
        serving.internal,
    )


def uncaptured_ids(serving: Serving) -> list[tuple[int, str]]:
    """(configured id, why) for each id that adds no state: its index matches no capture point, or it
    repeats a layer an earlier id already captured (the decoder loop tests membership once per layer)."""
    ids, internal = serving.ids, serving.internal
    if not ids or internal is None or len(internal) != len(ids):
        return []
    why = dict(serving.dropped)
    out: list[tuple[int, str]] = []
    for pos, (k, i) in enumerate(zip(ids, internal)):
        shown = f"index {i} after the engine's rule" if i != k else f"index {i}"
        if i in why:
            out.append((k, f"{shown}: {why[i]}"))
        elif i in internal[:pos]:
            out.append((k, f"{shown} repeats an earlier id's layer: each layer is captured once"))
    return out


def capturing_ids(engine: str, version: str, family: str, num_layers: int) -> list[int]:
    """The ids that, written alone, capture one state on this release (how to tell a user which ids work)."""
    lo, hi = id_range(engine, num_layers)
    out = []
    for k in range(lo, hi + 1):
        c = RULES[engine](version, family, num_layers, [k])
        if c.failure is None and len(c.spec) == 1:
            out.append(k)
    return out


def as_written(engine: str, ids: Sequence[int], num_layers: int) -> FeatureSpec | None:
    """The capture points ``ids`` name in ``engine``'s numbering, one per id, with no range check, dedup or
    reordering: what a trainer that read the ids at face value fed (None where an id names no point of the
    target). SGLang, TensorRT-LLM, ModelOpt: id k is layer_out[k] (SGLang -1: embed, TensorRT-LLM -1:
    final_norm); vLLM: id k is layer_out[k-1], id 0 the embeddings."""
    L, out = num_layers, []
    for k in ids:
        if engine == "vllm":
            p = embed() if k == 0 else layer_out(k - 1) if 1 <= k <= L else None
        elif k == -1:
            p = embed() if engine == "sglang" else final_norm() if engine == "trtllm" else None
        else:
            p = layer_out(k) if 0 <= k < L else None
        if p is None:
            return None
        out.append(p)
    return tuple(out)


def first_working_release(engine: str, family: str, after: str) -> tuple[str, str] | None:
    """(first release newer than ``after`` whose row runs EAGLE-3 for ``family``, the file that decides)."""
    if engine not in ("sglang", "vllm"):
        return None
    table = SGLANG_ROWS if engine == "sglang" else VLLM_ROWS
    fam = family if family in table else "llama"
    rows = table[fam]
    firsts = {r.first for r in rows} | ({c[0] for c in VLLM_CHECK} if engine == "vllm" else set())
    for cand in sorted((f for f in firsts if _vkey(f) > _vkey(after)), key=_vkey):
        row = _pick(rows, cand)
        if row.rule in ("unsupported", "absent", "unmodelled") or row.branch:
            continue
        if engine == "vllm":
            lst = _pick(VLLM_CHECK, cand)[1]
            if lst is not None and not any(x in VLLM_MODEL_TYPE.get(fam, "llama") for x in lst):
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
    cur = _pick(rows, before)
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
    return sorted((f for f in firsts if f != "0.0"), key=_vkey)


def later_release_serving(serving: Serving, want: FeatureSpec) -> tuple[str, str | None] | None:
    """(first later release of the user's engine on which the same config and --layer-ids feed ``want``,
    the first after it that no longer does, or None), or None when no later release does."""
    first: str | None = None
    for v in (b for b in release_boundaries(serving.engine) if _vkey(b) > _vkey(serving.version)):
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


ENGINE_NAMES = {"sglang": "SGLang", "vllm": "vLLM", "trtllm": "TensorRT-LLM", "modelopt": "ModelOpt"}


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


# --------------------------------------------------------------------------- training recipes


@dataclass(frozen=True)
class Recipe:
    """A training recipe: which engine's capture made its features (a row of the engine table above), and the
    ids it uses when none are written. --train-recipe, its help text and its error text all read RECIPE_TABLE."""

    name: str
    usage: str  # how it is written after the name
    engine: str | None = None  # RULES key whose newest row the features went through; None: not an engine capture
    version: str | None = None
    default: Callable[[int], list[int]] | None = None  # ids when none are given (None: the engine's own default)
    explain: str = ""  # str.format(ids=..., L=...)


RECIPE_TABLE: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe(
            "hf-hidden-states",
            ":I,J,K",
            explain="output_hidden_states{ids}: hs[0]=embed, hs[i]=layer_out[i-1], hs[{L}]=final_norm",
        ),
        Recipe(
            "eagle-default",
            "",
            "eagle",
            "eagle3",
            explain="EAGLE reference: idx {{2, L//2, L-3}} before the layer (SafeAILab/EAGLE modeling_llama_kv.py)",
        ),
        # SpecForge eagle3_target_model.py: [1, L//2-1, L-4], captured through SGLang's setter (+1)
        Recipe(
            "specforge",
            "[:ids]",
            "sglang",
            NEWEST["sglang"],
            lambda L: [1, L // 2 - 1, L - 4],
            "SpecForge aux_hidden_states_layers {ids} (SGLang ids: layer_out[k])",
        ),
        # speculators' data generation is vLLM extract_hidden_states: vLLM numbering
        Recipe(
            "speculators",
            "[:ids]",
            "vllm",
            NEWEST["vllm"],
            lambda L: [2, L // 2, L - 3],
            "speculators (vLLM extract_hidden_states) ids {ids}: layer_out[k-1]",
        ),
        Recipe(
            "modelopt", "[:ids]", "modelopt", MODELOPT_NEWEST, None, "ModelOpt ids {ids}: forward hooks on layers[k], layer order"
        ),
        Recipe("spec", ":POINTS", explain="capture points given explicitly"),
        Recipe("draft-config", "", explain="the ids the draft config declares"),
    )
}
RECIPE_ALIASES = {"hf": "hf-hidden-states", "output_hidden_states": "hf-hidden-states"}
RECIPES = tuple(r.name + r.usage for r in RECIPE_TABLE.values())


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
    r = RECIPE_TABLE.get(RECIPE_ALIASES.get(name, name))
    if r is None or r.name == "draft-config":  # draft-config is resolved by the caller from the draft's own ids
        raise BadInput(f"unknown --train-recipe {recipe!r}", f"use one of: {', '.join(RECIPES)}")
    if r.name == "hf-hidden-states":
        if not arg:
            raise BadInput("--train-recipe hf-hidden-states needs indices", "write hf-hidden-states:2,4,5")
        idx = _ids(arg, recipe)
        return tuple(from_hs_index(i, L) for i in idx), r.explain.format(ids=idx, L=L)
    if r.name == "spec":
        from ..core.taps import parse_spec

        return parse_spec(arg), r.explain
    assert r.engine is not None and r.version is not None
    ids = _ids(arg, recipe) if arg else (r.default(L) if r.default else None)
    got = RULES[r.engine](r.version, "llama", L, ids)
    if got.failure is not None:
        raise BadInput(
            f"--train-recipe {recipe!r}: {r.engine} {r.version} fails on these ids: {got.failure.message}",
            "use distinct ids inside the target's depth, one per layer",
        )
    shown = ids if ids is not None else got.internal
    return got.spec, r.explain.format(ids=shown, L=L)


__all__ = [
    "ENGINES",
    "ENGINE_VERSIONS",
    "Serving",
    "arch_family",
    "is_modelled",
    "MODELLED_FAMILIES",
    "default_spec_llama",
    "fix_snippet",
    "ids_to_serve",
    "resolve_serving",
    "training_spec",
]


# --------------------------------------------------------------------------- generated docs


def _row_meaning(engine: str, r: Row) -> tuple[str, str]:
    """(what id k captures, what -1 / 0 / L do) for one engine-table row."""
    if r.rule == "unmodelled":
        return "not modelled (the doctor refuses to guess)", "-"
    if r.rule in ("unsupported", "absent"):
        what = "no `set_eagle3_layers_to_capture`" if engine == "sglang" else "no `SupportsEagle3`"
        return (
            f"start-up: {what} (ENG001)" if r.rule == "unsupported" else "start-up: architecture not registered (ENG001)"
        ), "-"
    if engine == "vllm":
        k = "`layer_out[k-1]` (0 = embed)"
        zero = "embed" if r.guard0 or r.loop == "after" else "crash (residual None)"
        end = "`layer_out[L-1]` (pre-norm)" if r.end or r.loop == "after" else "dropped"
        return k, f"-1 dropped; 0 {zero}; L {end}"
    k = {
        "default_only": "ids not read: default",
        "plus1": "`layer_out[k]` (+1)",
        "first1": "`layer_out[k]` if ids[0]==1 else `layer_out[k-1]`",
        "maxL": "raw if max(ids)==L else +1",
    }[r.rule]
    m1 = "embed" if r.guard0 else "crash (residual None)"
    if r.rule == "first1":
        m1 = "matches no layer (dropped)"
    tail = "IndexError at start-up" if r.index_check else ("`layer_out[L-1]`" if r.end else "dropped")
    extra = "; fewer captures than ids: AssertionError" if r.packer else ""
    if r.branch:
        k += "; but the layer's MLP branch, not the residual stream (ENG003)"
    return k, f"-1 {m1}; L-1 {tail}{extra}"


def engine_table_markdown() -> str:
    """The README/docs engine table, generated from SGLANG_ROWS / VLLM_ROWS (tests keep docs in sync)."""
    lines = [
        "| engine | from release | target family | id k captures | -1 / 0 / L | keys read | order | source |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for engine, table in (("sglang", SGLANG_ROWS), ("vllm", VLLM_ROWS)):
        for fam, rows in table.items():
            if engine == "sglang" and fam == "mistral":
                continue
            for r in rows:
                if r.first == "0.0":
                    continue
                k, special = _row_meaning(engine, r)
                keys = ", ".join(key_rule(engine, r.first).keys) or "none"
                if engine == "sglang" and r.aux_flag:
                    keys += " (+ use_aux_hidden_state)"
                if engine == "vllm":
                    lst = _pick(VLLM_CHECK, r.first)[1]
                    if lst is not None and not any(x in VLLM_MODEL_TYPE[fam] for x in lst):
                        k, special = "start-up ValueError (target check)", "-"
                order = "layer order, duplicates collapse"
                lines.append(f"| {engine} | {r.first} | {fam} | {k} | {special} | {keys} | {order} | `{r.src}` |")
    lines.append("")
    lines.append(
        "vLLM V1 runner reads: "
        + "; ".join(f"from {v}: {k}" for v, k in VLLM_V1_READS)
        + f"; Model Runner V2 (from {VLLM_V2_FIRST}): top-level key only; default runner V2 from {VLLM_V2_DEFAULT_FROM} (hand-read)."
    )
    lines.append("")
    lines.append("| engine | from release | target family | id k captures | -1 / 0 / L | keys read | order | source |")
    lines.append("|---|---|---|---|---|---|---|---|")
    lines.append(
        "| trtllm (hand-read) | 1.2 | all | `layer_out[k]`; -1 = `final_norm` | one-model: sorted, -1 first; "
        "two-model: -1 last; id L (no such layer): slot never written, uninitialized memory (ENG003); no ids "
        "and L <= 5: start-up ValueError (ENG001) | `eagle3_layers_to_capture` | sorted set "
        "| `tensorrt_llm/_torch/speculative/eagle3.py` |"
    )
    lines.append(
        f"| modelopt (executed) | {MODELOPT_FIRST} | all | `layer_out[k]` (forward hook on layers[k]); default "
        "{1, max(0, L//2-1), max(0, L-4)}: fewer than 3 states for L < 7 | 0..L-1; a duplicate, -1 or L: fc shape "
        "error on the first forward (ENG002) | `eagle_config.eagle_aux_hidden_state_layer_ids` "
        "| layer order | `modelopt/torch/speculative/plugins/hf_eagle.py` |"
    )
    return "\n".join(lines) + "\n"
