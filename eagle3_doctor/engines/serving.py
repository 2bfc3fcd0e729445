"""What an engine feeds the draft for one target and draft config: ``resolve_serving``, and the draft's
side of the same forward (whether the captured states fill the draft's fc).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..core.errors import BadInput
from ..core.taps import FeatureSpec, embed, final_norm, format_spec, layer_out
from .capture import RULES, Failure, default_spec_llama
from .declared import ENGINE
from .families import SGLANG_CLASS, is_modelled
from .keys import check_id_range, id_range, read_ids
from .releases import check_engine, covering, newer_than_modelled, release_key, release_label
from .table import SGLANG_ROWS, engine_row


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
        if self.engine == ENGINE:  # a description states what it feeds whatever the family
            return release_label(self.engine, self.version)
        return release_label(self.engine, self.version) + ("" if self.family == "llama" else f" ({self.family})")


def _unmodelled(engine: str, family: str, version: str | None = None) -> Failure:
    """Undetermined: no family models the target, or the release serves it with capture code the harness could not
    match (an `unmodelled` row, with the harness's reason): the doctor says so rather than guess."""
    if version is not None and engine in ("sglang", "vllm") and (row := engine_row(engine, version, family)).rule == "unmodelled":
        return Failure(
            "undetermined",
            f"{engine} {version} serves the {family} family from {row.src}, whose EAGLE-3 capture the engine table does "
            f"not model: {row.message or 'not executed'}",
            f"{engine} {row.src}",
        )
    where = "srt/models/<file>.py set_eagle3_layers_to_capture" if engine == "sglang" else "model_executor/models/<file>.py"
    return Failure(
        "undetermined",
        f"the {family} family is not modelled for {engine}: which states it captures is decided by {where}, "
        "which the engine table has not executed for this target",
        f"{engine} {where}",
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


def _declared(path: str, family: str, num_layers: int, config_ids: dict[str, list[int]], override: list[int] | None) -> Serving:
    """What a serving description (engines/declared.py) says the engine feeds: its points, its ids read with its
    convention, or the ids of the config key it names; --layer-ids replaces the ids, read with the same convention."""
    from .declared import read_declared

    d = read_declared(path)
    where = f"the serving description {d.path}"
    ignored: dict[str, list[int]] = {}
    ids: list[int] | None
    if override is not None:
        if d.points is not None:
            raise BadInput(
                f"--layer-ids {list(override)}: {where} states capture points, not ids",
                "edit its capture.points, or write capture.layer_ids with a convention",
            )
        ids, source = list(override), f"--layer-ids {list(override)} (read with {where}'s {d.convention} convention)"
    elif d.points is not None:
        ids, source = None, f"capture.points in {where}"
    elif d.layer_ids is not None:
        ids, source = list(d.layer_ids), f"capture.layer_ids = {list(d.layer_ids)} in {where} ({d.convention} convention)"
    else:
        assert d.from_config is not None  # read_declared: exactly one of points, layer_ids, from_config
        got = config_ids.get(d.from_config)
        ids = None if got is None else list(got)
        source = f"{d.from_config} = {got} in the draft's config.json ({where}: {d.convention} convention)"
    if d.points is None:
        ignored = {k: v for k, v in config_ids.items() if k != d.from_config}
    spec = d.spec(ids, num_layers)
    if spec is None:
        fail = Failure(
            "undetermined",
            f"{where} reads the layer ids from {d.from_config}, which the draft's config.json does not hold",
            where,
        )
        return Serving(ENGINE, path, family, num_layers, (), None, source, ignored, [], [], fail)
    if bad := [str(p) for p in spec if p.is_layer_out() and not 0 <= p.layer_index() < num_layers]:
        raise BadInput(
            f"{source.split(' (')[0]} captures {', '.join(bad)}, outside a {num_layers}-layer target",
            f"fix {where} ({d.convention} convention: ids 0..{num_layers - 1 + (d.convention == 'input')})",
        )
    notes = [f"{d.label}: {d.source}" if d.source else f"{d.label}: the description names no source", *d.notes]
    return Serving(ENGINE, path, family, num_layers, spec, ids, source, ignored, [], notes, internal=None)


def _resolve(
    engine: str,
    version: str,
    family: str,
    num_layers: int,
    config_ids: dict[str, list[int]],
    override: list[int] | None,
    use_aux_hidden_state: bool,
) -> Serving:
    if engine == "declared":
        return _declared(version, family, num_layers, config_ids, override)
    ids, source, ignored = read_ids(engine, version, config_ids, override)
    if ids is not None:
        check_id_range(engine, num_layers, ids, source)
    if not is_modelled(engine, family):
        return Serving(engine, version, family, num_layers, (), ids, source, ignored, [], [], _unmodelled(engine, family))
    if engine in ("sglang", "vllm") and engine_row(engine, version, family).rule == "unmodelled":
        fail = _unmodelled(engine, family, version)
        return Serving(engine, version, family, num_layers, (), ids, source, ignored, [], [], fail)
    if engine == "sglang" and engine_row(engine, version, family).rule == "absent":
        cap = RULES[engine](version, family, num_layers, ids)  # the model registry refuses before any capture
        return Serving(engine, version, family, num_layers, (), ids, source, ignored, [], [], cap.failure)
    if engine == "sglang" and not use_aux_hidden_state and covering(SGLANG_ROWS["llama"], version).aux_flag:
        # sglang model_runner: eagle_config.use_aux_hidden_state false skips set_eagle3_layers_to_capture
        off = Serving(engine, version, family, num_layers, (), ids, "eagle_config.use_aux_hidden_state = false", ignored)
        off.notes, off.aux_off = ["SGLang reads eagle_config.use_aux_hidden_state = false and captures nothing"], True
        return off
    cap = RULES[engine](version, family, num_layers, ids)
    notes = [cap.note] if cap.note else []
    if (
        engine == "sglang"
        and release_key("0.4.9") <= release_key(version) < release_key("0.5.3")
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
        cls = SGLANG_CLASS.get(serving.family, "LlamaForCausalLM")
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
