"""A draft checkpoint's config.json read into the canonical draft's fields, and its layer ids into
capture points (each format's key and id convention)."""

from __future__ import annotations

import json
from typing import Any

from ..core.errors import BadInput
from ..core.taps import FeatureSpec, format_spec

IDS_KEY = "eagle_aux_hidden_state_layer_ids"
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
    from ..io.checks import check_draft_layer_config

    check_draft_layer_config(c, "config.json")
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
    ec = e if isinstance(e := c.get("eagle_config"), dict) else {}
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


def find_layer_ids(c: dict[str, Any]) -> dict[str, list[int]]:
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


def native_ids_key(fmt: str) -> str | None:
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


# the id convention a key implies when a draft keeps its ids somewhere its format does not
KEY_CONVENTION = {
    IDS_KEY: "vllm",
    f"eagle_config.{IDS_KEY}": "sglang",
    "aux_hidden_state_layer_ids": "sglang",
    "eagle3_layers_to_capture": "trtllm",
}
