"""Write the canonical draft back in a native checkpoint format: its config.json and its weights."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..core.errors import BadInput
from ..core.taps import FeatureSpec, format_spec
from .format_configs import IDS_KEY, spec_to_ids
from .formats import canonical_to_native_name


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
