"""The capture rules: each engine as a pure function from its own layer ids to the capture points it feeds.

Each rule models one engine file; the quoted source is in docs/engine-sources.md. SGLang and vLLM run
a row of the engine table (table.py) through a model of their decoder loop (``run_row``); TensorRT-LLM,
ModelOpt and the EAGLE reference are rules of their own. Which config key holds the ids is keys.py; the
fix for a mismatch is found by inverting these same rules (fixes.py), so a fix can never disagree with
the diagnosis.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..core.errors import BadInput
from ..core.taps import CapturePoint, FeatureSpec, embed, final_norm, layer_out
from .families import SGLANG_CLASS, VLLM_MODEL_TYPE
from .releases import MINUS_ONE_EMBED, TRTLLM_RELEASE, covering, release_key
from .table import VLLM_CHECK, Row, engine_row
from .trtllm_table import first_capturing, metadata_src, trtllm_class, trtllm_row, trtllm_rows


def default_spec_llama(num_layers: int) -> FeatureSpec:
    """The capture points every engine's default names: in(2), in(L//2), in(L-3).

    EAGLE idx {2, L//2, L-3} before the layer; SGLang/vLLM default [2, L//2, L-3] (before-layer);
    SpecForge/TensorRT-LLM/ModelOpt default [1, L//2-1, L-4] (after-layer). All the same states.
    """
    L = num_layers
    return (layer_out(1), layer_out(L // 2 - 1), layer_out(L - 4))


@dataclass
class Captured:
    spec: FeatureSpec
    dropped: list[tuple[int, str]] = field(default_factory=list)  # (id, why it captures nothing)
    internal: list[int] | None = None  # the engine's own index list after its transforms
    note: str | None = None
    failure: Failure | None = None  # the engine refuses to start or crashes on the first forward


@dataclass
class Failure:
    """The engine refuses to start or crashes on the first forward, in its own words."""

    when: str  # "start-up" | "first forward" | "serving" (runs, but feeds a tensor that is no capture point)
    message: str
    source: str
    internal: list[int] | None = None


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
    # the engine table (table.py SGLANG_ROWS), checked against sglang's own code, executed
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
    # the engine table (table.py VLLM_ROWS), checked against vllm's own code, executed
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


TRT_SRC = "tensorrt_llm/_torch/speculative/eagle3.py"  # executed at NVIDIA/TensorRT-LLM@f933a608 (trtllm_exec.py)


def _trtllm_no_capture(version: str, family: str, L: int, ids: list[int] | None) -> Captured | None:
    """The family's decoder layer in this release never calls maybe_capture_hidden_states (executed,
    data/trtllm_capture.json): every slot of the capture buffer stays as torch.empty left it."""
    row = trtllm_row(version, family)
    if row is None or row.capture != "none":
        return None
    release = version.split("-")[0]
    nxt = first_capturing(family, release)
    cls, layer = trtllm_class(family)
    adds = f", and {nxt.first} is the first release whose {layer} captures" if nxt else ""
    n = 3 if ids is None else len(set(ids))
    return Captured(
        (),
        [],
        None,
        failure=Failure(
            "serving",
            f"no aux hidden state is captured: TensorRT-LLM {release}'s {layer} never calls "
            f"maybe_capture_hidden_states{adds}; all {n} slot(s) of the torch.empty capture buffer stay uninitialized, "
            f"so the draft reads that memory for a {cls} target",
            row.src if not row.executed else f"{row.src}, executed",
            None,
        ),
    )


# LlamaModel's decoder layer (Llama, Mistral, Llama-4) calls maybe_capture_hidden_states in every stored
# modeling_llama.py read, from an early-2025 one (@012cf909) on: its capture does not change by release
_TRT_EVERY_RELEASE = ("llama", "mistral", "llama4")
# the series the one executed eagle3.py belongs to (its resource manager holds the late-2025 tree drafting)
_TRT_METADATA_LINE = "1.1"


def _trtllm_undetermined(release: str, family: str) -> Captured | None:
    """A family with no executed row, before the release the family-independent rule was read on."""
    if family in _TRT_EVERY_RELEASE or trtllm_rows(family) or release_key(release) >= release_key(TRTLLM_RELEASE):
        return None
    # whether an older release's decoder layer for this family captures at all (or serves it) is not in the
    # executed table: say so rather than guess
    return Captured(
        (),
        failure=Failure(
            "undetermined",
            f"TensorRT-LLM {release}'s decoder layer for the {family} family is not in the executed table "
            f"(conformance/trtllm_exec.py runs Qwen3-MoE and Qwen3 per release; the family-independent rule is "
            f"the {TRTLLM_RELEASE} reading)",
            "tensorrt_llm/_torch/models/modeling_<family>.py",
        ),
    )


def _trtllm_notes(c: Captured, release: str, family: str, ids: list[int] | None) -> None:
    """What a release before the executed eagle3.py's line cannot be told for sure, as notes."""
    row = trtllm_row(release, family)
    if release_key(release) >= release_key(_TRT_METADATA_LINE):
        return
    if row is not None and row.note:
        c.note = (c.note + "; " if c.note else "") + row.note
    if ids is not None and (list(ids) != c.internal or -1 in ids):
        # the id handling was executed from the one eagle3.py the index holds
        c.note = (c.note + "; " if c.note else "") + (
            f"the ids' order is eagle3.py's at {metadata_src().split('@')[-1]} (the {_TRT_METADATA_LINE}/{TRTLLM_RELEASE} line): "
            "this release's own copy was not in the search index"
        )


def _trtllm(version: str, family: str, L: int, ids: list[int] | None) -> Captured:
    # EXECUTED (conformance/trtllm_exec.py, from index excerpts; TensorRT-LLM is not on PyPI):
    # tensorrt_llm/_torch/speculative/eagle3.py's metadata, and per family the decoder layer's capture call.
    release = version.split("-")[0]
    undetermined = _trtllm_undetermined(release, family)
    if undetermined is not None:
        return undetermined
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
    # past __post_init__, a decoder layer that never captures leaves every slot unwritten, whatever the ids
    missing = _trtllm_no_capture(version, family, L, ids)
    if missing is not None:
        return missing
    # the default is a tuple, not a set: for L = 6 it is (1, 2, 2)
    use = [1, L // 2 - 1, L - 4] if ids is None else sorted(set(ids))
    c = _after_layer_sorted(L, use, final_norm(), minus_one_last=version.endswith("two-model"))
    # the note compares with what the user wrote, not with the de-duplicated set
    c.note = f"ids are sorted: {list(ids)} -> {c.internal}" if ids is not None and list(ids) != c.internal else None
    _trtllm_notes(c, release, family, ids)
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

_VL_CHECK = "ValueError: Eagle3 is only supported for {supported} models. Got model_type={mt!r}"


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
    supported = covering(VLLM_CHECK, version)[1]
    mt = VLLM_MODEL_TYPE.get(family, "llama")
    # mt None: the checkpoint's text config decides; such a family's rows under a check are `unmodelled`
    if supported is not None and mt is not None and not any(s in mt for s in supported):
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
    if row.rule == "unmodelled":
        raise BadInput(
            f"{engine} {version} serves the {family} family from {row.src}, whose EAGLE-3 capture the engine "
            f"table does not model yet{': ' + row.message if row.message else ''}",
            f"name another --engine-version, or extend conformance/{engine}_exec.py",
        )
    if engine == "vllm":
        refused = _vllm_type_check(version, family)
        if refused is not None:
            return refused
    if row.rule in ("unsupported", "absent"):
        if engine == "sglang":
            msg = row.message.format(cls=SGLANG_CLASS.get(family, "LlamaForCausalLM"))
        else:
            msg = row.message.format(cls=SGLANG_CLASS.get(family, family) if row.rule == "absent" else family)
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
