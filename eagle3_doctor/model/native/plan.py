"""Whether a target runs on the native decoder, and its weights read into it.

The decoder is taken only where it provably computes what transformers would: a local safetensors
checkpoint of one of the four families, every weight it holds one the decoder names and every one it
names present, no remote code, no quantization, no sliding window, no dynamic RoPE. Anything else (and
``EAGLE3_DOCTOR_FORWARD=transformers``) keeps transformers' own model; :func:`native_plan` says why.
Family defaults are transformers' config defaults, so a config.json that omits a key means here what it
means there (qwen3's head_dim 128, mistral's 4096-token window).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...core.errors import BadInput
from ...draft.rope import config_rope

if TYPE_CHECKING:
    import torch

    from .decoder import NativeForCausalLM, NativeSpec

FAMILIES = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
}
ROPE_TYPES = ("default", "linear", "llama3", "yarn")  # tables fixed at load: no length-dependent update
ENV = "EAGLE3_DOCTOR_FORWARD"


@dataclass
class NativePlan:
    spec: NativeSpec | None
    files: list[Path]
    reason: str | None  # why transformers' model runs instead; None: the native decoder runs
    raw: dict[str, Any]


def _refuse(reason: str, raw: dict[str, Any]) -> NativePlan:
    return NativePlan(None, [], reason, raw)


def native_plan(
    path: str, cfg: dict[str, Any] | None, *, trust_remote_code: bool, device_map: Any, forward: str = "auto"
) -> NativePlan:
    """The plan for ``path``'s config (None: a hub id or no local config.json); ``forward="transformers"``
    (or the environment's ``EAGLE3_DOCTOR_FORWARD=transformers``) asks for transformers' model."""
    raw = dict(cfg or {})
    if forward == "transformers" or os.environ.get(ENV, "").strip().lower() == "transformers":
        return _refuse("transformers' forward asked for", raw)
    if cfg is None or device_map is not None or trust_remote_code or "auto_map" in cfg:
        return _refuse("not a plain local checkpoint on one device", raw)
    mt = cfg.get("model_type")
    if mt not in FAMILIES or (cfg.get("architectures") or [FAMILIES[mt]])[0] != FAMILIES[mt]:
        return _refuse(f"architecture {mt!r} is not one the native decoder writes out", raw)
    why = _config_refusal(cfg, mt)
    if why:
        return _refuse(why, raw)
    spec = _spec(cfg, mt)
    from ...io.hub import weight_files

    files = weight_files(Path(path))
    if not files or any(f.suffix != ".safetensors" for f in files):
        return _refuse("weights are not safetensors", raw)
    why = _keys_refusal(spec, files)
    return _refuse(why, raw) if why else NativePlan(spec, files, None, raw)


def _config_refusal(cfg: dict[str, Any], mt: str) -> str | None:
    if cfg.get("quantization_config"):
        return "a quantized checkpoint"
    if cfg.get("hidden_act", "silu") != "silu":
        return f"hidden_act {cfg.get('hidden_act')!r}"
    kinds = set(cfg.get("layer_types") or ["full_attention"])
    windowed = mt == "mistral" and cfg.get("sliding_window", 4096) is not None
    if kinds != {"full_attention"} or windowed or (mt in ("qwen2", "qwen3") and cfg.get("use_sliding_window")):
        return "sliding-window layers"
    rp = config_rope(cfg)
    if rp.get("rope_type", "default") not in ROPE_TYPES or "partial_rotary_factor" in rp or "partial_rotary_factor" in cfg:
        return f"rope {rp.get('rope_type')!r}"
    return None


def _spec(cfg: dict[str, Any], mt: str) -> NativeSpec:
    from .decoder import NativeSpec

    heads = int(cfg["num_attention_heads"])
    bias = bool(cfg.get("attention_bias", False))
    return NativeSpec(
        model_type=mt,
        hidden_size=int(cfg["hidden_size"]),
        intermediate_size=int(cfg["intermediate_size"]),
        num_layers=int(cfg["num_hidden_layers"]),
        num_heads=heads,
        num_kv_heads=int(cfg.get("num_key_value_heads") or heads),
        head_dim=int(cfg.get("head_dim") or (128 if mt == "qwen3" else int(cfg["hidden_size"]) // heads)),
        rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        vocab_size=int(cfg["vocab_size"]),
        qkv_bias=True if mt == "qwen2" else bias,
        o_bias=False if mt == "qwen2" else bias,
        mlp_bias=bool(cfg.get("mlp_bias", False)) if mt == "llama" else False,
        qk_norm=mt == "qwen3",
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
    )


def expected_keys(s: NativeSpec) -> set[str]:
    """Every tensor name the decoder's state dict holds for ``s``, lm_head left out where it is tied."""
    per = ["input_layernorm.weight", "post_attention_layernorm.weight"]
    per += [f"self_attn.{p}_proj.weight" for p in "qkvo"] + [f"mlp.{p}_proj.weight" for p in ("gate", "up", "down")]
    if s.qkv_bias:
        per += [f"self_attn.{p}_proj.bias" for p in "qkv"]
    if s.o_bias:
        per.append("self_attn.o_proj.bias")
    if s.mlp_bias:
        per += [f"mlp.{p}_proj.bias" for p in ("gate", "up", "down")]
    if s.qk_norm:
        per += ["self_attn.q_norm.weight", "self_attn.k_norm.weight"]
    keys = {f"model.layers.{i}.{p}" for i in range(s.num_layers) for p in per}
    keys |= {"model.embed_tokens.weight", "model.norm.weight"}
    return keys if s.tie_word_embeddings else keys | {"lm_head.weight"}


def missing_tensors(name: str, lost: list[str]) -> BadInput:
    """The one line for a target whose checkpoint lacks tensors its architecture needs, whichever loader found it."""
    more = f" and {len(lost) - 3} more" if len(lost) > 3 else ""
    return BadInput(
        f"the target {name} lacks {len(lost)} tensor(s) its config's architecture needs ({', '.join(lost[:3])}{more})",
        "re-download the checkpoint (a shard may be missing or truncated), or fix config.json "
        "(tie_word_embeddings, num_hidden_layers) to match the weights",
    )


def _keys_refusal(s: NativeSpec, files: list[Path]) -> str | None:
    from ...io.safeio import check_safetensors_header

    held: set[str] = set()
    for f in files:
        held |= {k for k in check_safetensors_header(f) if k != "__metadata__"}
    want = expected_keys(s)
    if s.tie_word_embeddings and "lm_head.weight" in held:
        return "a tied head stored as its own tensor"
    lost = sorted(want - held)
    if lost and not held - want:
        # every tensor held is one the architecture names, and some it needs are not there: no loader may fill
        # them (transformers' would, at random, and the run would measure a different model)
        raise missing_tensors(str(files[0].parent), lost)
    if held != want:
        odd = sorted(held - want)[:2] + sorted(want - held)[:2]
        return f"weights the native decoder does not name one for one ({', '.join(odd)})"
    return None


def load_native(plan: NativePlan, dtype: torch.dtype, device: torch.device) -> NativeForCausalLM:
    """The decoder with the checkpoint's tensors, read once straight to ``device`` in ``dtype``."""
    from .read import read_tensors

    assert plan.spec is not None
    return _assembled(plan.spec, plan.raw, read_tensors(plan.files, dtype, device), device)


def native_from_model(model: Any) -> NativeForCausalLM:
    """The native decoder over the tensors of a Llama-family transformers model already in memory (the tensors
    shared, not copied): for benchmarks that draw their weights on the device instead of reading a checkpoint."""
    raw = model.config.to_dict()
    mt = raw.get("model_type")
    why = _config_refusal(raw, mt) if mt in FAMILIES else f"architecture {mt!r} is not one the native decoder writes out"
    if why:
        raise ValueError(f"the native decoder does not run this model: {why}")
    sd = dict(model.state_dict())
    return _assembled(_spec(raw, mt), raw, sd, next(iter(sd.values())).device)


def _assembled(s: NativeSpec, raw: dict[str, Any], sd: dict[str, torch.Tensor], device: torch.device) -> NativeForCausalLM:
    from ...draft.config import DraftConfig
    from ...draft.rope import rope_tables
    from .decoder import NativeForCausalLM

    rp = config_rope(raw)
    rope_cfg = DraftConfig(
        hidden_size=s.hidden_size,
        intermediate_size=s.intermediate_size,
        num_attention_heads=s.num_heads,
        num_key_value_heads=s.num_kv_heads,
        vocab_size=s.vocab_size,
        draft_vocab_size=s.vocab_size,
        head_dim=s.head_dim,
        rope_theta=float(rp["rope_theta"]),
        rope_scaling=rp,
        max_position_embeddings=int(raw.get("max_position_embeddings", 2048)),
    )
    inv_freq, scale = rope_tables(rope_cfg)
    model = NativeForCausalLM(s, raw, inv_freq, scale, device="meta")
    if s.tie_word_embeddings:
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    model.load_state_dict(sd, assign=True, strict=True)
    model.model.inv_freq = inv_freq.to(device)
    return model.requires_grad_(False).eval()
