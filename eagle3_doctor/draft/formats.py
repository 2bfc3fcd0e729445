"""Draft checkpoint formats: read any of them into the canonical draft, write any of them back.

| format       | config architecture         | layer ids: key (convention)                                   | weights       |
|--------------|-----------------------------|---------------------------------------------------------------|---------------|
| eagle        | LlamaForCausalLM, 1 layer   | none: hard-coded EAGLE default                                 | ``midlayer.*``|
| sglang       | LlamaForCausalLMEagle3      | ``eagle_config.eagle_aux_hidden_state_layer_ids`` (SGLang ids) | ``midlayer.*``|
| speculators  | Eagle3Speculator            | top-level ``eagle_aux_hidden_state_layer_ids`` (vLLM ids)      | ``layers.0.*``|

(SpecForge's export is the sglang format, and
ModelOpt's HF export reads as sglang with ``layers.0.*`` names and no ``t2d``.)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import BadInput
from ..core.taps import FeatureSpec
from .config import DraftConfig
from .format_configs import KEY_CONVENTION, config_to_canonical, find_layer_ids, ids_to_spec, native_ids_key
from .rope import rope_parameters
from .shapes import expected_shapes

if TYPE_CHECKING:
    import numpy as np

    from ..io.arrays import StoredArray

FORMATS = ("eagle", "sglang", "speculators")

# Which engine's id convention each format's config speaks (see engines.py for the rules).
FORMAT_CONVENTION = {"eagle": "eagle", "sglang": "sglang", "speculators": "vllm"}
_LAYER_PREFIXES = ("midlayer.", "layers.0.", "model.layers.0.", "model.midlayer.")


@dataclass
class DraftInfo:
    """What was found in a draft checkpoint, beside the weights themselves."""

    path: str
    format: str
    format_reason: str
    config: dict[str, Any]
    layer_ids: list[int] | None
    layer_ids_key: str | None  # e.g. "eagle_config.eagle_aux_hidden_state_layer_ids"
    other_layer_id_keys: dict[str, list[int]] = field(default_factory=dict)  # ids found elsewhere
    weight_keys: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    has_lm_head: bool = True
    has_embed: bool = False
    has_d2t: bool = True
    has_t2d: bool = True
    weight_dtype: str | None = None

    @property
    def convention(self) -> str:
        return FORMAT_CONVENTION[self.format]

    def config_layer_ids(self) -> dict[str, list[int]]:
        """Every layer-id list the config holds, by dotted key: the format's own key first, then the others."""
        out: dict[str, list[int]] = {}
        if self.layer_ids_key and self.layer_ids is not None:  # set together (read_draft)
            out[self.layer_ids_key] = self.layer_ids
        out.update(self.other_layer_id_keys)
        return out


# --------------------------------------------------------------------------- detection


def detect_format(config: dict[str, Any], weight_keys: list[str]) -> tuple[str, str]:
    """Return (format, why). Pure function of the config and the weight names."""
    archs = config.get("architectures")
    archs = [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []
    if config.get("speculators_model_type") or "Eagle3Speculator" in archs:
        return "speculators", "config has speculators_model_type / architectures Eagle3Speculator"
    if any(a.endswith("Eagle3") for a in archs):
        return "sglang", f"config architectures {archs} (SGLang/SpecForge/ModelOpt EAGLE-3 export)"
    if any(k.startswith("midlayer.") for k in weight_keys):
        return "eagle", f"weights named midlayer.* with architectures {archs or 'unset'} (EAGLE reference)"
    if isinstance(config.get("eagle_config"), dict):
        return "sglang", "config has a nested eagle_config"
    if any(k.startswith("layers.0.") for k in weight_keys) and "fc.weight" in weight_keys:
        return "speculators", "weights named layers.0.* with an fc (speculators layout)"
    raise BadInput(
        "cannot tell which EAGLE-3 draft format this is (no Eagle3 architecture, no midlayer.* or layers.0.* weights with an fc)",
        "pass --draft-format eagle|sglang|speculators",
    )


# --------------------------------------------------------------------------- config <-> canonical


# --------------------------------------------------------------------------- weight names


_LATER_LAYER = re.compile(r"^(?:model\.)?layers\.([1-9]\d*)\.")


def native_to_canonical_name(name: str) -> str:
    m = _LATER_LAYER.match(name)
    if m:  # decoder layers 1.. of a multi-layer draft: layers.{i} in every format (vLLM llama_eagle3.py names them so)
        return f"extra_layers.{int(m.group(1)) - 1}." + name[m.end() :]
    for pre in ("model.",):
        if name.startswith(pre) and not name.startswith("model.layers.0.") and not name.startswith("model.midlayer."):
            name = name[len(pre) :]
    for pre in _LAYER_PREFIXES:
        if name.startswith(pre):
            return "midlayer." + name[len(pre) :]
    return name


def canonical_state(tensors: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint's tensors under canonical names. A later layer that holds ``hidden_norm`` and no
    ``input_layernorm`` is in SGLang's multi-layer layout (from 0.5.12 its later layers apply
    ``hidden_norm`` before attention, executed by conformance/draft_exec.py): that weight is the
    layer's pre-attention norm, the one the canonical layer calls ``input_layernorm``."""
    canon = {native_to_canonical_name(k): v for k, v in tensors.items()}
    for k in [k for k in canon if k.startswith("extra_layers.") and k.endswith(".hidden_norm.weight")]:
        twin = k[: -len("hidden_norm.weight")] + "input_layernorm.weight"
        if twin not in canon:
            canon[twin] = canon.pop(k)
    return canon


def canonical_to_native_name(fmt: str, name: str) -> str:
    if name.startswith("extra_layers."):
        j, rest = name[len("extra_layers.") :].split(".", 1)
        return f"layers.{int(j) + 1}.{rest}"
    if fmt == "speculators" and name.startswith("midlayer."):
        return "layers.0." + name[len("midlayer.") :]
    return name


# --------------------------------------------------------------------------- read


def load_safetensors_dir(directory: Path) -> dict[str, Any]:
    """All tensors of a draft directory as {name: StoredArray}: safetensors (sharded or not), else
    pytorch_model.bin (weights_only)."""
    from ..io.hub import load_weights_dir

    return load_weights_dir(directory)


@dataclass
class DraftCheckpoint:
    """A draft directory read and checked without torch: what inspect audits, and what read_draft builds
    the module from (one reader for both)."""

    config: DraftConfig
    info: DraftInfo
    state: dict[str, StoredArray]  # canonical names (canonical_state)
    tensors: dict[str, StoredArray]  # the names as stored, for forensics

    @property
    def d2t(self) -> np.ndarray:
        """int64 offsets (target id - draft id); zeros when absent, vLLM's silent reading of a missing map."""
        import numpy as np

        if "d2t" in self.state:
            return self.state["d2t"].values().astype(np.int64)
        return np.zeros(self.config.draft_vocab_size, dtype=np.int64)

    @property
    def t2d(self) -> np.ndarray:
        """bool over the target vocabulary; when absent, the ids d2t reaches, as read_draft fills it in."""
        import numpy as np

        if "t2d" in self.state:
            return self.state["t2d"].values().astype(bool)
        cfg = self.config
        t2d = np.zeros(cfg.vocab_size, dtype=bool)
        t2d[np.clip(np.arange(cfg.draft_vocab_size) + self.d2t, 0, cfg.vocab_size - 1)] = True
        return t2d

    def weight(self, name: str) -> np.ndarray | None:
        """A canonical tensor's values in float32 as read_draft's module holds them (cast to the fc's dtype), or None."""
        from ..io.arrays import rounded_to

        if name not in self.state:
            return None
        t = self.state[name]
        return t.float32() if t.dtype == self.info.weight_dtype else rounded_to(t.float32(), self.info.weight_dtype)


def read_checkpoint(path: str | os.PathLike, *, fmt: str | None = None) -> DraftCheckpoint:
    """Read a draft directory: config, format, canonical tensors, every shape checked against the config."""
    d = Path(path)
    if not d.is_dir():
        raise BadInput(f"draft directory {d} does not exist", "pass --draft DIR with the draft's config.json and weights")
    from ..io.safeio import read_json_object

    cfg_raw = read_json_object(d / "config.json", "point --draft at a directory holding config.json and *.safetensors")
    tensors = load_safetensors_dir(d)
    keys = sorted(tensors)
    fmt, why = _resolve_format(cfg_raw, keys, fmt)
    canon_fields = _config_fields(d, fmt, cfg_raw)
    canon = canonical_state(tensors)
    _fields_from_weights(canon_fields, canon)
    cfg, expected = _checked_config(d, canon_fields)
    missing, unexpected = _check_weights(d, fmt, expected, canon)
    all_ids = find_layer_ids(cfg_raw)
    native = native_ids_key(fmt)
    ids = all_ids.get(native) if native else None
    info = DraftInfo(
        path=str(d),
        format=fmt,
        format_reason=why,
        config=cfg_raw,
        layer_ids=ids,
        layer_ids_key=native if ids is not None else None,
        other_layer_id_keys={k: v for k, v in all_ids.items() if k != native},
        weight_keys=keys,
        missing=missing,
        unexpected=unexpected,
        has_lm_head="lm_head.weight" in canon,
        has_embed="embed_tokens.weight" in canon,
        has_d2t="d2t" in canon,
        has_t2d="t2d" in canon,
        weight_dtype=canon["fc.weight"].dtype,
    )
    return DraftCheckpoint(cfg, info, canon, tensors)


def read_draft(
    path: str | os.PathLike,
    *,
    fmt: str | None = None,
    device: str = "cpu",
    dtype: Any = None,
    target_embed: Any = None,
):
    """Load a draft directory into (Eagle3Draft, DraftInfo).

    ``target_embed`` ([V, H], or a callable returning it) is attached when the checkpoint carries no ``embed_tokens``
    (SGLang always uses the target's embeddings: the draft's own are never loaded there).
    """
    import torch

    ck = read_checkpoint(path, fmt=fmt)
    canon = {k: v.to_torch() for k, v in ck.state.items()}
    cfg, draft = _meta_draft(Path(ck.info.path), ck.config)
    target_dtype = dtype or getattr(torch, ck.info.weight_dtype or "float32")
    draft = _materialise(draft, cfg, canon, device, target_dtype)
    _attach_embeddings(draft, cfg, canon, target_embed, device, target_dtype)
    draft.eval().requires_grad_(False)  # autograd kept every step of diagnose's unrolls: 73 GB at 512 x 512
    return draft, ck.info


def _resolve_format(cfg_raw: dict[str, Any], keys: list[str], fmt: str | None) -> tuple[str, str]:
    if fmt is None:
        return detect_format(cfg_raw, keys)
    if fmt not in FORMATS:
        raise BadInput(f"unknown draft format {fmt!r}", f"use one of {', '.join(FORMATS)}")
    return fmt, "forced by --draft-format"


def _config_fields(d: Path, fmt: str, cfg_raw: dict[str, Any]) -> dict[str, Any]:
    """DraftConfig fields from config.json, refusing a config too incomplete to size the module."""
    canon_fields = config_to_canonical(fmt, cfg_raw)
    required = ("hidden_size", "intermediate_size", "num_attention_heads", "vocab_size")
    missing_fields = [k for k in required if k not in canon_fields]
    if missing_fields:
        raise BadInput(
            f"{d / 'config.json'} lacks {', '.join(missing_fields)} (read as {fmt} format)",
            "restore the full config.json or pass the right --draft-format",
        )
    canon_fields.setdefault("num_key_value_heads", canon_fields["num_attention_heads"])
    return canon_fields


def _fields_from_weights(canon_fields: dict[str, Any], canon: dict[str, Any]) -> None:
    """Fields the weights decide over the config: the module must be built to the tensors it will hold."""
    if "fc.weight" in canon:
        fc_in = canon["fc.weight"].shape[1]
        th = canon_fields.get("target_hidden_size") or canon_fields["hidden_size"]
        if fc_in % th == 0:
            canon_fields["num_aux_states"] = fc_in // th
        else:
            canon_fields["num_aux_states"] = max(1, round(fc_in / th))
    if "lm_head.weight" in canon:
        canon_fields["draft_vocab_size"] = canon["lm_head.weight"].shape[0]
    canon_fields.setdefault("draft_vocab_size", canon_fields["vocab_size"])
    if "midlayer.self_attn.q_proj.bias" in canon:
        canon_fields["attention_bias"] = True
    if "input_norm.weight" in canon:
        canon_fields["norm_before_fc"] = True
    if "fc_norm.0.weight" in canon:
        canon_fields["fc_norm"] = True
    if "midlayer.self_attn.q_norm.weight" in canon:  # a Qwen3-style draft layer, whatever the config says
        canon_fields["qk_norm"] = True
    # the layers the weights hold: 1 + the layers after the first (extra_layers.{j})
    extra = {int(k.split(".")[1]) for k in canon if k.startswith("extra_layers.")}
    canon_fields["num_hidden_layers"] = 1 + (max(extra) + 1 if extra else 0)


def _checked_config(d: Path, canon_fields: dict[str, Any]) -> tuple[DraftConfig, dict[str, tuple[int, ...]]]:
    """The DraftConfig and the state dict it implies, or BadInput where no module can be built from the config."""
    try:
        cfg = DraftConfig.from_dict(canon_fields)
        expected = expected_shapes(cfg)
        bad = next(
            (k for k, shape in expected.items() if any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in shape)),
            None,
        )
        if bad is not None:
            raise ValueError(f"{bad} would have shape {expected[bad]}")
        if rope_parameters(cfg)["rope_type"] != "default":
            # only transformers knows the other rope types: building their tables is what proves the config usable
            from .rope import rope_tables

            rope_tables(cfg)
    except Exception as e:  # any failure to size the module from this config means the config is unusable
        raise BadInput(
            f"draft config in {d} is not usable: {type(e).__name__}: {str(e)[:160]}",
            "check config.json against the checkpoint format",
        ) from None
    return cfg, expected


def _meta_draft(d: Path, cfg: DraftConfig) -> tuple[DraftConfig, Any]:
    """(DraftConfig, Eagle3Draft on the meta device): the module, before any memory is spent."""
    import torch

    from .model import Eagle3Draft

    try:
        with torch.device("meta"):
            draft = Eagle3Draft(cfg)
    except Exception as e:  # the same refusal as _checked_config, for whatever it could not foresee
        raise BadInput(
            f"draft config in {d} is not usable: {type(e).__name__}: {str(e)[:160]}",
            "check config.json against the checkpoint format",
        ) from None
    return cfg, draft


def _check_weights(d: Path, fmt: str, expected: dict[str, tuple[int, ...]], canon: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(missing, unexpected) weight names; a shape mismatch or a missing layer weight is refused."""
    missing = sorted(k for k in expected if k not in canon and k not in ("d2t", "t2d", "lm_head.weight"))
    unexpected = sorted(k for k in canon if k not in expected and k != "embed_tokens.weight")
    for k, want in expected.items():
        if k in canon and tuple(canon[k].shape) != want:
            raise BadInput(
                f"draft tensor {k} has shape {tuple(canon[k].shape)}, the config implies {want}",
                "the weights and config.json come from different checkpoints; restore a matching pair",
            )
    if missing:
        raise BadInput(
            f"draft in {d} ({fmt} format) lacks weights: {', '.join(missing[:4])}" + (" ..." if len(missing) > 4 else ""),
            "re-export the draft; if the names differ, pass the right --draft-format",
        )
    return missing, unexpected


def _storage_on(module: Any, device: str) -> None:
    """Module.to_empty, tensor by tensor: to_empty runs meta tensors through torch's reference ops, which
    import sympy (seconds of a process's start on a slow host) for an uninitialised copy."""
    import torch

    for mod in module.modules():
        for name, p in list(mod._parameters.items()):
            if p is not None:
                mod._parameters[name] = torch.nn.Parameter(torch.empty(p.shape, dtype=p.dtype, device=device), p.requires_grad)
        for name, b in list(mod._buffers.items()):
            if b is not None:
                mod._buffers[name] = torch.empty(b.shape, dtype=b.dtype, device=device)


def _materialise(draft: Any, cfg: Any, canon: dict[str, Any], device: str, target_dtype: Any) -> Any:
    """The meta module given memory and the checkpoint's tensors; absent maps and head get engine-like stand-ins."""
    import torch

    from .rope import rope_inv_freq

    _storage_on(draft, device)
    with torch.no_grad():
        for k, p in draft.state_dict().items():
            if k in canon:
                src = canon[k]
                p.copy_(src.to(device=device, dtype=p.dtype if k in ("d2t", "t2d") else target_dtype))
    draft.inv_freq = rope_inv_freq(cfg).to(device)  # non-persistent: the storage above is uninitialised
    draft.to(dtype=target_dtype)
    draft.d2t = draft.d2t.long()
    draft.t2d = draft.t2d.bool()
    if "lm_head.weight" not in canon:
        # SGLang leaves the head random here (sgl#27908); we make it zeros so nothing is proposed
        # by chance and inspect reports DRF001.
        draft.lm_head.weight.data.zero_()
    if "d2t" not in canon:
        draft.d2t.zero_()  # vLLM's silent behaviour: draft id i means target id i
    if "t2d" not in canon:
        t2d = torch.zeros(cfg.vocab_size, dtype=torch.bool, device=device)
        tgt = torch.arange(cfg.draft_vocab_size, device=device) + draft.d2t
        t2d[tgt.clamp(0, cfg.vocab_size - 1)] = True
        draft.t2d = t2d
    return draft


def _attach_embeddings(draft: Any, cfg: Any, canon: dict[str, Any], target_embed: Any, device: str, target_dtype: Any) -> bool:
    """Whether the draft ships its own embed_tokens; without them the target's are attached, if given."""
    has_embed = "embed_tokens.weight" in canon
    if has_embed:
        draft.set_embeddings(canon["embed_tokens.weight"].to(device=device, dtype=target_dtype), own=True)
    elif target_embed is not None:
        if callable(target_embed):  # Target.embed_weight, taken only here (an offloaded target pays a forward)
            target_embed = target_embed()
        if target_embed.shape[1] != cfg.hidden_size:
            raise BadInput(
                f"the draft has no embed_tokens and the target's are {target_embed.shape[1]} wide, the draft's hidden size is {cfg.hidden_size}",
                "use a draft checkpoint that ships its own embed_tokens (speculators format) for this target",
            )
        draft.set_embeddings(target_embed.to(device=device, dtype=target_dtype), own=False)
    return has_embed


# --------------------------------------------------------------------------- write


def spec_from_info(info: DraftInfo, num_layers: int, family: str = "llama") -> tuple[FeatureSpec, str]:
    """The capture points a draft says it was trained on, and where that came from."""
    from ..engines.capture import default_spec_llama

    if info.layer_ids is not None:
        spec = ids_to_spec(info.convention, info.layer_ids, num_layers, family)
        return spec, f"{info.layer_ids_key} = {info.layer_ids} in {info.path}/config.json (read as {info.convention} ids)"
    for key, ids in info.other_layer_id_keys.items():
        conv = KEY_CONVENTION.get(key)
        if conv:
            spec = ids_to_spec(conv, ids, num_layers, family)
            return spec, (
                f"{key} = {ids} in {info.path}/config.json, a key the {info.format} format does not use (read as {conv} ids)"
            )
    where = {"eagle": "EAGLE reference default (the format records no ids)"}.get(
        info.format, f"{info.format} default (no {native_ids_key(info.format)} in config.json)"
    )
    return default_spec_llama(num_layers), where


def is_finite_state(draft) -> list[str]:
    """Names of parameters holding NaN or Inf."""
    bad = []
    for k, v in draft.state_dict().items():
        if v.is_floating_point() and not bool(v.isfinite().all()):
            bad.append(k)
    return bad
