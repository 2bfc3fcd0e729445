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

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import BadInput
from ..core.taps import FeatureSpec, format_spec

FORMATS = ("eagle", "sglang", "speculators")

# Which engine's id convention each format's config speaks (see engines.py for the rules).
FORMAT_CONVENTION = {"eagle": "eagle", "sglang": "sglang", "speculators": "vllm"}
IDS_KEY = "eagle_aux_hidden_state_layer_ids"
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


_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "hidden_size": (int,),
    "intermediate_size": (int,),
    "num_attention_heads": (int,),
    "num_key_value_heads": (int,),
    "head_dim": (int,),
    "rms_norm_eps": (int, float),
    "rope_theta": (int, float),
    "rope_scaling": (dict,),
    "max_position_embeddings": (int,),
    "hidden_act": (str,),
    "attention_bias": (bool,),
    "vocab_size": (int,),
    "torch_dtype": (str,),
    "draft_vocab_size": (int,),
    "target_hidden_size": (int,),
}
_POSITIVE = {
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "draft_vocab_size",
    "target_hidden_size",
    "max_position_embeddings",
}


def _checked(c: dict[str, Any], key: str, where: str = "config.json") -> Any:
    """c[key] if it has the type the field needs; a clear BadInput otherwise."""
    v = c[key]
    types = _FIELD_TYPES.get(key)
    if types and (not isinstance(v, types) or (isinstance(v, bool) and bool not in types)):
        raise BadInput(
            f"{where}: {key} is {json.dumps(v)[:40]}, expected {' or '.join(t.__name__ for t in types)}",
            "restore config.json from the original checkpoint",
        )
    if key in _POSITIVE and v <= 0:
        raise BadInput(f"{where}: {key} = {v} must be positive", "restore config.json from the original checkpoint")
    return v


def _llama_fields(c: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "hidden_size",
        "intermediate_size",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "rms_norm_eps",
        "rope_theta",
        "rope_scaling",
        "max_position_embeddings",
        "hidden_act",
        "attention_bias",
        "vocab_size",
        "torch_dtype",
    )
    out = {k: _checked(c, k) for k in keys if k in c and c[k] is not None}
    if "rope_theta" not in out and isinstance(c.get("rope_parameters"), dict):
        rp = c["rope_parameters"]
        theta = rp.get("rope_theta", 10000.0)
        if not isinstance(theta, (int, float)) or isinstance(theta, bool):
            raise BadInput("config.json: rope_parameters.rope_theta is not a number", "restore config.json")
        out["rope_theta"] = theta
        if set(rp) - {"rope_theta", "rope_type"} or rp.get("rope_type", "default") != "default":
            out["rope_scaling"] = rp  # transformers-5 layout kept whole; model.rope_parameters reads both
    # SGLang's key for the RoPE layout (srt/models/llama.py:335 in 0.5.23, default True); the
    # trainers that write these formats (SpecForge, speculators, EAGLE) only rotate NeoX-style
    neox = c.get("rope_is_neox_style")
    if isinstance(neox, bool):
        out["rope_interleaved"] = not neox
    prf = c.get("partial_rotary_factor")
    if isinstance(prf, (int, float)) and not isinstance(prf, bool) and prf != 1:
        out["extra"] = {"partial_rotary_factor": float(prf)}
    if "torch_dtype" not in out and isinstance(c.get("dtype"), str):
        out["torch_dtype"] = c["dtype"]
    return out


def config_to_canonical(fmt: str, c: dict[str, Any]) -> dict[str, Any]:
    """Native config.json -> DraftConfig fields."""
    if fmt == "speculators":
        tl = c.get("transformer_layer_config") or {}
        if not isinstance(tl, dict):
            raise BadInput("config.json: transformer_layer_config is not an object", "restore config.json")
        base = _llama_fields(tl)
        if tl.get("model_type") == "qwen3":  # speculators model_definitions.py:136-143: the Qwen3 layer
            base["qk_norm"] = True
        base.update({k: _checked(c, k) for k in ("draft_vocab_size", "target_hidden_size") if c.get(k) is not None})
        if "vocab_size" not in base and c.get("vocab_size") is not None:
            base["vocab_size"] = _checked(c, "vocab_size")
        # speculators 0.9.0 models/eagle3/config.py:43-82: all four default False; norm_output means
        # "feed the normed state to the next step" (core.py:302-306)
        for flag in ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output"):
            if flag in c:
                base[flag] = bool(c[flag])
        return base
    base = _llama_fields(c)
    if c.get("draft_vocab_size") is not None:
        base["draft_vocab_size"] = _checked(c, "draft_vocab_size")
    elif "vocab_size" in base:
        base["draft_vocab_size"] = base["vocab_size"]
    if c.get("target_hidden_size"):
        base["target_hidden_size"] = _checked(c, "target_hidden_size")
    ec = c.get("eagle_config") if isinstance(c.get("eagle_config"), dict) else {}
    if ec.get("norm_before_fc") or c.get("norm_before_fc"):
        base["norm_before_fc"] = True
    if c.get("fc_norm"):
        base["fc_norm"] = True
    if fmt == "sglang":
        # As trained by SpecForge 0.2.0 (the released trainer that writes this format):
        # ``norm_output`` (default True) is "norm before lm_head"; the fed-back state is always
        # pre-norm (llama3_eagle.py:1690, 1773-1778). How each SGLang version *serves* the key is
        # in served.py; inspect reports the difference.
        if "norm_output" in c:
            base["norm_before_lm_head"] = bool(c["norm_output"])
        if "norm_before_residual" in c:
            base["norm_before_residual"] = bool(c["norm_before_residual"])
    return base


def _find_layer_ids(c: dict[str, Any]) -> dict[str, list[int]]:
    """Every place a layer-id list sits in a config, by dotted key (each a list of integers)."""
    from ..io.checks import check_draft_layer_ids

    check_draft_layer_ids(c, "config.json")
    found: dict[str, list[int]] = {}
    if isinstance(c.get(IDS_KEY), list):
        found[IDS_KEY] = list(c[IDS_KEY])
    ec = c.get("eagle_config")
    if isinstance(ec, dict) and isinstance(ec.get(IDS_KEY), list):
        found[f"eagle_config.{IDS_KEY}"] = list(ec[IDS_KEY])
    for alt in ("aux_hidden_state_layer_ids", "eagle3_layers_to_capture"):
        if isinstance(c.get(alt), list):
            found[alt] = list(c[alt])
    return found


def _native_ids_key(fmt: str) -> str | None:
    return {"sglang": f"eagle_config.{IDS_KEY}", "speculators": IDS_KEY, "eagle": None}[fmt]


def ids_to_spec(convention: str, ids: list[int], num_layers: int, family: str = "llama") -> FeatureSpec:
    """Ids as written in a draft config of this convention -> capture points, by the engine's rule."""
    from ..engines.capture import RULES
    from ..engines.releases import ENGINE_VERSIONS

    return RULES[convention](ENGINE_VERSIONS[convention][0], family, num_layers, list(ids)).spec


def spec_to_ids(convention: str, spec: FeatureSpec, num_layers: int, family: str = "llama") -> list[int]:
    """The ids this convention's engine needs to capture ``spec`` (inverse of :func:`ids_to_spec`)."""
    from ..engines.fixes import ids_to_serve

    ids = ids_to_serve(convention, None, family, num_layers, tuple(spec))
    if ids is None:
        raise BadInput(
            f"capture points {format_spec(spec)} cannot be written as {convention} layer ids",
            "write the draft in another format, or retrain on points that engine can capture",
        )
    return ids


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
    """All tensors of a draft directory: safetensors (sharded or not), else pytorch_model.bin (weights_only)."""
    from ..io.hub import load_weights_dir

    return load_weights_dir(directory)


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
    cfg, draft = _meta_draft(d, canon_fields)
    missing, unexpected = _check_weights(d, fmt, draft, canon)
    weight_dtype = canon["fc.weight"].dtype
    target_dtype = dtype or weight_dtype
    draft = _materialise(draft, cfg, canon, device, target_dtype)
    has_embed = _attach_embeddings(draft, cfg, canon, target_embed, device, target_dtype)
    all_ids = _find_layer_ids(cfg_raw)
    native = _native_ids_key(fmt)
    ids = all_ids.get(native) if native else None
    others = {k: v for k, v in all_ids.items() if k != native}
    info = DraftInfo(
        path=str(d),
        format=fmt,
        format_reason=why,
        config=cfg_raw,
        layer_ids=ids,
        layer_ids_key=native if ids is not None else None,
        other_layer_id_keys=others,
        weight_keys=keys,
        missing=missing,
        unexpected=unexpected,
        has_lm_head="lm_head.weight" in canon,
        has_embed=has_embed,
        has_d2t="d2t" in canon,
        has_t2d="t2d" in canon,
        weight_dtype=str(weight_dtype).replace("torch.", ""),
    )
    draft.eval()
    return draft, info


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


def _meta_draft(d: Path, canon_fields: dict[str, Any]) -> tuple[Any, Any]:
    """(DraftConfig, Eagle3Draft on the meta device): the expected shapes, before any memory is spent."""
    import torch

    from .model import DraftConfig, Eagle3Draft

    try:
        cfg = DraftConfig.from_dict(canon_fields)
        with torch.device("meta"):
            draft = Eagle3Draft(cfg)
    except Exception as e:  # any failure to build the module from this config means the config is unusable
        raise BadInput(
            f"draft config in {d} is not usable: {type(e).__name__}: {str(e)[:160]}",
            "check config.json against the checkpoint format",
        ) from None
    return cfg, draft


def _check_weights(d: Path, fmt: str, draft: Any, canon: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(missing, unexpected) weight names; a shape mismatch or a missing layer weight is refused."""
    expected = {k: v for k, v in draft.state_dict().items()}
    missing = sorted(k for k in expected if k not in canon and k not in ("d2t", "t2d", "lm_head.weight"))
    unexpected = sorted(k for k in canon if k not in expected and k != "embed_tokens.weight")
    for k, want in expected.items():
        if k in canon and tuple(canon[k].shape) != tuple(want.shape):
            raise BadInput(
                f"draft tensor {k} has shape {tuple(canon[k].shape)}, the config implies {tuple(want.shape)}",
                "the weights and config.json come from different checkpoints; restore a matching pair",
            )
    if missing:
        raise BadInput(
            f"draft in {d} ({fmt} format) lacks weights: {', '.join(missing[:4])}" + (" ..." if len(missing) > 4 else ""),
            "re-export the draft; if the names differ, pass the right --draft-format",
        )
    return missing, unexpected


def _materialise(draft: Any, cfg: Any, canon: dict[str, Any], device: str, target_dtype: Any) -> Any:
    """The meta module given memory and the checkpoint's tensors; absent maps and head get engine-like stand-ins."""
    import torch

    from .model import rope_inv_freq

    draft = draft.to_empty(device=device)
    with torch.no_grad():
        for k, p in draft.state_dict().items():
            if k in canon:
                src = canon[k]
                p.copy_(src.to(device=device, dtype=p.dtype if k in ("d2t", "t2d") else target_dtype))
    draft.inv_freq = rope_inv_freq(cfg).to(device)  # non-persistent: to_empty left it uninitialised
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


def _llama_config(cfg) -> dict[str, Any]:
    return {
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_key_value_heads,
        "head_dim": cfg.head_dim,
        "num_hidden_layers": cfg.num_hidden_layers,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": cfg.rope_scaling,
        "max_position_embeddings": cfg.max_position_embeddings,
        "hidden_act": cfg.hidden_act,
        "attention_bias": cfg.attention_bias,
        "vocab_size": cfg.vocab_size,
        "tie_word_embeddings": False,
        "model_type": "llama",
        "torch_dtype": cfg.torch_dtype or "float32",
        **({"rope_is_neox_style": False} if cfg.rope_interleaved else {}),
    }


def native_config(
    fmt: str, cfg, spec: FeatureSpec | None, num_layers: int | None = None, *, verifier: str | None = None, num_steps: int = 3
) -> dict[str, Any]:
    """The config.json a format's own tooling would write for this draft and training spec."""
    if fmt == "eagle":
        c = _llama_config(cfg)
        c.update(architectures=["LlamaForCausalLM"], draft_vocab_size=cfg.draft_vocab_size)
        return c
    if cfg.qk_norm and fmt != "speculators":
        raise BadInput(
            f"the {fmt} format has no draft layer with q_norm/k_norm (SGLang and SpecForge draft with a Llama layer)",
            "write the speculators format instead",
        )
    if fmt == "sglang":
        return _sglang_config(cfg, spec, num_layers)
    if fmt == "speculators":
        return _speculators_config(cfg, spec, num_layers, verifier, num_steps)
    raise ValueError(fmt)


def _sglang_config(cfg: Any, spec: FeatureSpec | None, num_layers: int | None) -> dict[str, Any]:
    c = _llama_config(cfg)
    ec: dict[str, Any] = {"use_aux_hidden_state": True, "norm_before_fc": cfg.norm_before_fc}
    if spec is not None:
        ec[IDS_KEY] = spec_to_ids("sglang", spec, _need_layers(num_layers))
    if cfg.norm_output:
        raise BadInput(
            "the sglang (SpecForge 0.2.0) format cannot record norm_output in the "
            "feed-the-normed-state sense: SpecForge reads that key as 'norm before lm_head'",
            "write the speculators format instead",
        )
    c.update(
        architectures=["LlamaForCausalLMEagle3"],
        draft_vocab_size=cfg.draft_vocab_size,
        target_hidden_size=cfg.target_hidden_size,
        eagle_config=ec,
    )
    if cfg.fc_norm:
        c["fc_norm"] = True
    if cfg.norm_before_residual:
        c["norm_before_residual"] = True
    if not cfg.norm_before_lm_head:
        c["norm_output"] = False  # SpecForge 0.2.0's key for "no norm before lm_head"
    return c


def _speculators_config(
    cfg: Any, spec: FeatureSpec | None, num_layers: int | None, verifier: str | None, num_steps: int
) -> dict[str, Any]:
    if not cfg.norm_before_lm_head:
        raise BadInput(
            "the speculators format always norms before lm_head (core.py:302-306); this draft "
            "was trained without that norm (SpecForge norm_output=false)",
            "write the sglang format instead",
        )
    tl = _llama_config(cfg)
    tl["architectures"] = ["LlamaForCausalLM"]
    if cfg.qk_norm:  # speculators' Qwen3 draft layer (model_definitions.py:136-143)
        tl.update(model_type="qwen3", architectures=["Qwen3ForCausalLM"])
    c = {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": "eagle3",
        "speculators_version": "0.2.0",
        "transformer_layer_config": tl,
        "draft_vocab_size": cfg.draft_vocab_size,
        "target_hidden_size": cfg.target_hidden_size,
        "norm_before_residual": cfg.norm_before_residual,
        "norm_before_fc": cfg.norm_before_fc,
        "fc_norm": cfg.fc_norm,
        "norm_output": cfg.norm_output,
        "speculators_config": {
            "algorithm": "eagle3",
            "proposal_methods": [
                {"proposal_type": "greedy", "speculative_tokens": num_steps, "verifier_accept_k": 1, "accept_tolerance": 0.0}
            ],
            "default_proposal_method": "greedy",
            "verifier": {"name_or_path": verifier, "architectures": ["LlamaForCausalLM"]},
        },
        "torch_dtype": cfg.torch_dtype or "float32",
    }
    if spec is not None:
        c[IDS_KEY] = spec_to_ids("vllm", spec, _need_layers(num_layers))
    return c


def _need_layers(num_layers: int | None) -> int:
    if num_layers is None:
        raise ValueError("writing layer ids needs the target's number of layers")
    return num_layers


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file beside ``path`` and rename: a reader never sees half a file."""
    from ..io.outputs import atomic_write_bytes as write

    write(path, data)


def write_draft(
    draft,
    path: str | os.PathLike,
    fmt: str,
    spec: FeatureSpec | None,
    num_layers: int | None = None,
    *,
    verifier: str | None = None,
    config: dict[str, Any] | None = None,
) -> None:
    """Save the canonical draft in a native format. ``config`` overrides the generated config.json
    (used to round-trip a checkpoint's own config unchanged)."""
    from safetensors.torch import save as st_save

    cfg = draft.config
    if fmt == "eagle" and spec is not None and config is None:
        from ..engines.capture import default_spec_llama

        if tuple(spec) != default_spec_llama(_need_layers(num_layers)):
            raise BadInput(
                f"the EAGLE reference format cannot record capture points {format_spec(spec)}",
                "write the sglang or speculators format instead",
            )
    sd = {}
    for k, v in draft.state_dict().items():
        if k == "embed_tokens.weight" and not getattr(draft, "embeddings_are_own", False):
            continue
        if fmt == "speculators" and k in ("d2t", "t2d") and cfg.draft_vocab_size == cfg.vocab_size:
            continue  # speculators omits the maps when the vocabularies are the same size
        if fmt != "speculators" and k == "embed_tokens.weight":
            continue  # SpecForge's export drops any key containing "embed"; EAGLE never saves them
        sd[canonical_to_native_name(fmt, k)] = v.detach().contiguous().cpu()
    c = config if config is not None else native_config(fmt, cfg, spec, num_layers, verifier=verifier)
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "model.safetensors", st_save(sd, metadata={"format": "pt"}))
    atomic_write_bytes(out / "config.json", (json.dumps(c, indent=2, sort_keys=True) + "\n").encode())


# the id convention a key implies when a draft keeps its ids somewhere its format does not
KEY_CONVENTION = {
    IDS_KEY: "vllm",
    f"eagle_config.{IDS_KEY}": "sglang",
    "aux_hidden_state_layer_ids": "sglang",
    "eagle3_layers_to_capture": "trtllm",
}


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
        info.format, f"{info.format} default (no {_native_ids_key(info.format)} in config.json)"
    )
    return default_spec_llama(num_layers), where


def is_finite_state(draft) -> list[str]:
    """Names of parameters holding NaN or Inf."""
    bad = []
    for k, v in draft.state_dict().items():
        if v.is_floating_point() and not bool(v.isfinite().all()):
            bad.append(k)
    return bad
