"""The canonical draft's state dict, names and shapes, from its config alone: what a checkpoint must hold,
known without building the torch module (tests/draft/test_shapes.py pins it to Eagle3Draft's own
state_dict, order included, so the two cannot drift)."""

from __future__ import annotations

from .config import DraftConfig


def _attention(prefix: str, cfg: DraftConfig, n_in: int) -> dict[str, tuple[int, ...]]:
    d, nh, nkv = int(cfg.head_dim), cfg.num_attention_heads, cfg.num_key_value_heads
    out: dict[str, tuple[int, ...]] = {}
    for proj, rows in (("q_proj", nh * d), ("k_proj", nkv * d), ("v_proj", nkv * d)):
        out[f"{prefix}{proj}.weight"] = (rows, n_in)
        if cfg.attention_bias:
            out[f"{prefix}{proj}.bias"] = (rows,)
    out[f"{prefix}o_proj.weight"] = (cfg.hidden_size, nh * d)
    if cfg.qk_norm:
        out[f"{prefix}q_norm.weight"] = (d,)
        out[f"{prefix}k_norm.weight"] = (d,)
    return out


def _layer(prefix: str, cfg: DraftConfig, first: bool) -> dict[str, tuple[int, ...]]:
    H, inter = cfg.hidden_size, cfg.intermediate_size
    out: dict[str, tuple[int, ...]] = {}
    if first:
        out[f"{prefix}hidden_norm.weight"] = (H,)
    out[f"{prefix}input_layernorm.weight"] = (H,)
    out.update(_attention(f"{prefix}self_attn.", cfg, 2 * H if first else H))  # the first layer reads [embed, h]
    out[f"{prefix}post_attention_layernorm.weight"] = (H,)
    out[f"{prefix}mlp.gate_proj.weight"] = (inter, H)
    out[f"{prefix}mlp.up_proj.weight"] = (inter, H)
    out[f"{prefix}mlp.down_proj.weight"] = (H, inter)
    return out


def expected_shapes(cfg: DraftConfig) -> dict[str, tuple[int, ...]]:
    """Eagle3Draft(cfg).state_dict()'s names and shapes, in its order (the module's own buffers first)."""
    out: dict[str, tuple[int, ...]] = {"d2t": (cfg.draft_vocab_size,), "t2d": (cfg.vocab_size,)}
    if cfg.norm_before_fc:
        out["input_norm.weight"] = (cfg.fc_in_features,)
    if cfg.fc_norm:
        out.update({f"fc_norm.{i}.weight": (int(cfg.target_hidden_size),) for i in range(cfg.num_aux_states)})
    out["fc.weight"] = (cfg.hidden_size, cfg.fc_in_features)
    out.update(_layer("midlayer.", cfg, first=True))
    for j in range(cfg.num_hidden_layers - 1):
        out.update(_layer(f"extra_layers.{j}.", cfg, first=False))
    out["norm.weight"] = (cfg.hidden_size,)
    out["lm_head.weight"] = (cfg.draft_vocab_size, cfg.hidden_size)
    return out
