"""The loaded world one run works on: target, draft, both feature paths (:class:`Setup`).

Built from paths (:func:`load_setup`, what the commands do) or from models already in memory
(:meth:`Setup.from_model`, what the benches and library users do). Layer ids arrive parsed: the
comma string of ``--layer-ids`` is the CLI's business (``validate.parse_layer_ids``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..core.errors import BadInput
from ..core.taps import FeatureSpec
from ..draft.formats import DraftInfo, read_draft, spec_from_info
from ..draft.model import Eagle3Draft
from ..engines import trainers
from ..engines.families import arch_family
from ..engines.recipes import training_spec
from ..engines.serving import Serving, resolve_serving
from .target import Target, load_target


@dataclass
class Setup:
    target: Target
    draft: Eagle3Draft | None
    info: DraftInfo | None
    serving: Serving
    train_spec: FeatureSpec | None
    train_source: str
    family: str
    notes: list[str] = field(default_factory=list)
    compiled: bool = False  # the draft's step pieces run under torch.compile (--compile)

    def compile_draft(self, **options: Any) -> None:
        """torch.compile the draft's step pieces in place (``--compile``); results stay identical to eager.

        Worth it on a GPU (acceptance 1.40x -> 1.34x a bare forward, bench/RESULTS.md); on a CPU
        the compilation costs about a minute and saves nothing, so it is said and skipped.
        """
        if self.draft is None or self.compiled:
            return
        if next(self.draft.parameters()).device.type != "cuda" and not options:
            self.notes.append("--compile skipped: the draft runs on the CPU, where compiling costs more than it saves")
            return
        from ..draft.fast import compile_draft

        compile_draft(self.draft, **options)
        self.compiled = True

    def draft_summary(self) -> dict[str, Any] | None:
        if self.info is None:
            return None
        i = self.info
        return {
            "path": i.path,
            "format": i.format,
            "format_reason": i.format_reason,
            "layer_ids": i.layer_ids,
            "layer_ids_key": i.layer_ids_key,
            "other_layer_id_keys": i.other_layer_id_keys,
            "dtype": i.weight_dtype,
        }

    @classmethod
    def from_model(
        cls,
        model: Any,
        draft: Eagle3Draft | None = None,
        tokenizer: Any = None,
        *,
        engine: str = "sglang",
        engine_version: str | None = None,
        layer_ids: Sequence[int] | None = None,
        train_spec: FeatureSpec | None = None,
        train_source: str | None = None,
        name: str = "in-memory target",
        device: torch.device | str | None = None,
        capture_device: torch.device | str | None = None,
    ) -> Setup:
        """A Setup around a causal LM (and draft) already in memory, e.g. built at random for a benchmark.

        ``tokenizer`` None: prompts must come as token ids (``prompt_ids=``); pad id 0, no EOS.
        ``layer_ids``: the serving engine's ids as its key would hold them (None: the engine's default).
        ``train_spec`` None measures the serving path only. ``device`` defaults to the first parameter's;
        ``capture_device`` is where captures of a sharded model gather.
        """
        config = model.config.to_dict() if hasattr(model.config, "to_dict") else dict(model.config)
        p = next(model.parameters())
        dev = torch.device(device) if device is not None else p.device
        cap = torch.device(capture_device) if capture_device is not None else None
        tgt = Target(
            model, tokenizer if tokenizer is not None else _IdsOnlyTokenizer(), config, name, dev, p.dtype, capture_device=cap
        )
        family = arch_family(config)
        serving = resolve_serving(
            engine, engine_version, family, tgt.num_layers, {}, list(layer_ids) if layer_ids is not None else None
        )
        tspec = tuple(train_spec) if train_spec else None
        source = train_source or ("given" if tspec is not None else "unknown (no train_spec given)")
        return cls(tgt, draft, None, serving, tspec, source, family)


class _IdsOnlyTokenizer:
    """What the replay needs of a tokenizer when prompts come as token ids: a pad id, no EOS, a decode for reports."""

    pad_token_id = 0
    eos_token_id = None

    def decode(self, ids: Sequence[int]) -> str:
        return f"<{ids[0]}>" if len(ids) == 1 else " ".join(f"<{i}>" for i in ids)


@torch.inference_mode()
def _check_finite_target(tgt: Target) -> None:
    """NaN/Inf in target weights poison every comparison silently: refuse them up front."""
    for name, p in tgt.model.named_parameters():
        # float8 weights (a native FP8 load) are skipped: their scales carry the range, and isfinite has no float8 kernel
        if p.device.type != "meta" and p.is_floating_point() and p.element_size() > 1 and not bool(torch.isfinite(p).all()):
            raise BadInput(
                f"target weight {name} in {tgt.name} holds NaN or Inf",
                "re-download the checkpoint (or load it in a wider --dtype if it overflowed on conversion)",
            )


def _load_draft(tgt: Target, draft: str, draft_format: str | None) -> tuple[Eagle3Draft, DraftInfo, list[str]]:
    """The draft in the target's dtype on the capture device, refused if it cannot belong to this target."""
    draft_device = str(tgt.capture_device or tgt.device)
    # the embedding is passed lazily: only a draft without its own embed_tokens takes it (offloaded targets pay a forward)
    d, info = read_draft(draft, fmt=draft_format, device=draft_device, dtype=tgt.dtype, target_embed=tgt.embed_weight)
    notes = []
    tdt = str(tgt.dtype).replace("torch.", "")
    if info.weight_dtype and info.weight_dtype != tdt:
        notes.append(
            f"draft weights are {info.weight_dtype}, target runs in {tdt}: "
            "the draft is run in the target's dtype here (see inspect CFG005)"
        )
    from ..draft.formats import is_finite_state

    bad = is_finite_state(d)
    if bad:
        raise BadInput(
            f"draft weights in {draft} hold NaN or Inf ({', '.join(bad[:3])})",
            "re-export the draft from a healthy training checkpoint",
        )
    fc_in, hidden = d.config.fc_in_features, tgt.hidden_size
    if fc_in % hidden:
        raise BadInput(
            f"the draft's fc takes {fc_in} inputs, not a multiple of the target hidden size {hidden}",
            "this draft belongs to another target; pass the target it was trained for",
        )
    return d, info, notes


def _training_side(train_recipe: str | None, info: DraftInfo | None, L: int, family: str) -> tuple[FeatureSpec | None, str]:
    if train_recipe and train_recipe.startswith(trainers.PREFIX):
        tspec, tsrc = trainers.training_side(train_recipe[len(trainers.PREFIX) :], family, L, info.layer_ids if info else None)
        if tspec is None:  # the trainer's capture is undetermined for this target: said, not guessed
            return None, tsrc
    elif train_recipe:
        tspec, tsrc = training_spec(train_recipe, L)
    elif info is not None:
        tspec, tsrc = spec_from_info(info, L, family)
        note = trainers.checkpoint_note(info.config)
        if note:
            tsrc = f"{tsrc}; {note}"
    else:
        return None, "unknown (pass --train-recipe, --train-dump or --draft)"
    for p in tspec:
        p.check_range(L)
    return tspec, tsrc


def load_setup(
    *,
    target: str,
    draft: str | None,
    draft_format: str | None = None,
    engine: str = "sglang",
    engine_version: str | None = None,
    layer_ids: Sequence[int] | None = None,
    train_recipe: str | None = None,
    dtype: str = "auto",
    device: str = "auto",
    trust_remote_code: bool = False,
    device_map: str | dict | None = None,
    max_memory: dict | None = None,
    stream_layers: bool = False,
) -> Setup:
    """Load target and draft and resolve both feature paths; ``layer_ids`` overrides the draft config's ids.

    ``stream_layers``: keep one decoder layer of the target resident at a time (:mod:`model.stream`), for a
    target larger than the device; replays then read the weights once per group of sequences."""
    if stream_layers:
        if device_map is not None:
            raise BadInput("--stream-layers and --device-map both place the target's layers", "pass one of them")
        from .stream import load_streamed_target

        tgt: Target = load_streamed_target(target, dtype=dtype, device=device, trust_remote_code=trust_remote_code)
    else:
        tgt = load_target(
            target, dtype=dtype, device=device, trust_remote_code=trust_remote_code, device_map=device_map, max_memory=max_memory
        )
    _check_finite_target(tgt)
    return assemble(tgt, draft, draft_format, engine, engine_version, layer_ids, train_recipe)


def assemble(
    tgt: Target,
    draft: str | None,
    draft_format: str | None = None,
    engine: str = "sglang",
    engine_version: str | None = None,
    layer_ids: Sequence[int] | None = None,
    train_recipe: str | None = None,
) -> Setup:
    """A Setup around a target already loaded: the draft read and both feature paths resolved (fix
    measures a corrected copy of the draft against the same target this way, without reloading it)."""
    L = tgt.num_layers
    family = arch_family(tgt.config)
    d, info, notes = (None, None, []) if draft is None else _load_draft(tgt, draft, draft_format)
    if tgt.quant_note:
        notes.insert(0, tgt.quant_note)
    config_ids = {} if info is None else info.config_layer_ids()
    serving = resolve_serving(engine, engine_version, family, L, config_ids, list(layer_ids) if layer_ids is not None else None)
    for p in serving.spec:
        p.check_range(L)
    tspec, tsrc = _training_side(train_recipe, info, L, family)
    return Setup(tgt, d, info, serving, tspec, tsrc, family, notes)
