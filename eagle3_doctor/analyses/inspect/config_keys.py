"""Forensics of the draft's config keys: each one modelled (the doctor reads it), known not to change the
forward, or unknown; the unknown ones in one finding (CFG008), so silence means every key was checked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...core.findings import DRAFT_CONFIG, Finding, Location


@dataclass
class KeyRow:
    key: str
    value: Any
    status: str  # modelled | inert | unknown
    reason: str


_DIM = "a dimension: checked against the tensor shapes"


_ROPE = "RoPE: compared with the target's and with how the engine rotates (CFG003, CFG004, FWD006)"


_FLAG = "a forward flag: compared with how each engine version reads it (FWD001)"


_IDS = "layer ids: what the engine captures (CAP*, CFG001, CFG002)"


MODELLED: dict[str, str] = {
    "architectures": "the class the engine builds (CFG007, FWD008)",
    "model_type": "the decoder layer kind (qwen3: q_norm/k_norm, FWD008)",
    **dict.fromkeys(("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim"), _DIM),
    **dict.fromkeys(("vocab_size", "draft_vocab_size", "target_hidden_size", "num_hidden_layers"), _DIM),
    "rms_norm_eps": "the RMSNorm epsilon the canonical draft runs with",
    **dict.fromkeys(
        (
            "rope_theta",
            "rope_scaling",
            "rope_parameters",
            "partial_rotary_factor",
            "max_position_embeddings",
            "rope_is_neox_style",
        ),
        _ROPE,
    ),
    "attention_bias": "q/k/v biases, checked against the tensors",
    "torch_dtype": "compared with the target's dtype (CFG005)",
    "dtype": "compared with the target's dtype (CFG005)",
    "tie_word_embeddings": "whether the engine uses embed_tokens as lm_head (FWD004)",
    **dict.fromkeys(("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output"), _FLAG),
    **dict.fromkeys(("eagle_aux_hidden_state_layer_ids", "aux_hidden_state_layer_ids", "eagle3_layers_to_capture"), _IDS),
    "use_aux_hidden_state": "SGLang captures nothing when false (engines.resolve_serving)",
    "speculators_model_type": "the format (draft/formats.py detect_format)",
    "initializer_range": "the init each matrix is compared with (forensics)",
    "eagle_config": "a section: every key in it examined",
    "transformer_layer_config": "a section: every key in it examined",
}


_META = "metadata: names the producer, changes no value"


INERT: dict[str, str] = {
    **dict.fromkeys(("transformers_version", "speculators_version", "_name_or_path", "_commit_hash"), _META),
    **dict.fromkeys(
        ("bos_token_id", "eos_token_id", "pad_token_id"), "generation-time token ids: the target's tokenizer decides"
    ),
    "use_cache": "KV caching changes no value",
    **dict.fromkeys(
        ("attention_dropout", "hidden_dropout", "dropout", "embd_pdrop", "resid_pdrop"), "dropout is off at inference"
    ),
    "pretraining_tp": "transformers splits the same matmuls into slices: the same values",
    "speculators_config": "the proposal policy and the verifier's name: how many tokens are drafted, not how",
    **dict.fromkeys(
        ("output_attentions", "output_hidden_states", "return_dict", "torchscript"),
        "which outputs are returned, not their values",
    ),
    **dict.fromkeys(
        ("id2label", "label2id", "problem_type", "task_specific_params", "finetuning_task", "tokenizer_class"), _META
    ),
}


# keys that leave the forward alone at one value only (the one the canonical draft runs)
INERT_AT: dict[str, tuple[Any, str]] = {
    "hidden_act": ("silu", "the canonical draft's MLP runs SiLU"),
    "mlp_bias": (False, "the draft's MLP has no bias"),
    "use_sliding_window": (False, "full attention"),
    "sliding_window": (None, "full attention"),
}


def classify(key: str, value: Any) -> tuple[str, str]:
    """(status, reason) of one config key, by its last component."""
    name = key.rsplit(".", 1)[-1]
    if name in INERT_AT:
        want, why = INERT_AT[name]
        return (
            ("modelled" if name == "hidden_act" else "inert", why) if value == want else ("unknown", f"{why}; this is {value!r}")
        )
    if name in MODELLED:
        return "modelled", MODELLED[name]
    if name in INERT:
        return "inert", INERT[name]
    return "unknown", "no modelled engine reads this key"


def key_rows(cfg: dict[str, Any]) -> list[KeyRow]:
    """Every key of the config and of its eagle_config / transformer_layer_config sections."""
    rows = []
    for k, v in cfg.items():
        rows.append(KeyRow(k, v, *classify(k, v)))
        if k in ("eagle_config", "transformer_layer_config") and isinstance(v, dict):
            rows += [KeyRow(f"{k}.{kk}", vv, *classify(f"{k}.{kk}", vv)) for kk, vv in v.items()]
    return rows


def key_findings(rows: list[KeyRow]) -> list[Finding]:
    """CFG008: the keys nothing here models, in one finding, so that silence means every key was checked."""
    unknown = [r for r in rows if r.status == "unknown"]
    if not unknown:
        return []
    return [
        Finding(
            "CFG008",
            f"{len(unknown)} config key(s) no modelled engine reads: {', '.join(r.key for r in unknown[:8])}",
            [f"{r.key} = {_short(r.value)}: {r.reason}" for r in unknown[:12]],
            "no modelled engine reads this key; check your engine applies it (and that training did)",
            data={"keys": [r.key for r in unknown]},
            location=Location(DRAFT_CONFIG, unknown[0].key),
        )
    ]


def _short(v: Any) -> str:
    import json

    try:
        s = json.dumps(v)
    except (TypeError, ValueError):
        s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."
