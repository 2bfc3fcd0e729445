"""A DFlash draft's forward: one block of positions drafted in parallel from the target's taps.

As the DFlash reference and SpecForge write it (``specforge/modeling/draft/dflash.py``
``DFlashDraftModel.forward`` and ``spec_generate``, GQA layers): the target's taps at the context
positions, concatenated, go through ``fc`` and ``hidden_norm`` once; a block is the last verified token
followed by ``block_size - 1`` mask tokens, embedded by the *target's* embedding, at the next positions.
Every layer's queries are the block's (q_norm, RoPE); its keys and values are the context's projected taps
and the block's own (k_norm, RoPE), and the block attends all of them, not causally. The final norm and the
target's head turn block rows 1.. into the proposals for the positions after the anchor.

The draft's output at an anchor depends only on the taps before it and the anchor token (an engine's draft
cache holds exactly those keys, and drops the block's after each pass), so :meth:`DFlashDraft.blocks` drafts
every anchor of a sequence in one forward: each block sees the context before its anchor and itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..model import RMSNorm
from ..rope import rope_cos_sin, rotate


@dataclass(frozen=True)
class DFlashConfig:
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    num_hidden_layers: int
    num_taps: int  # fc input: num_taps x the target's hidden size
    block_size: int
    mask_token_id: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None
    max_position_embeddings: int = 2048
    attention_bias: bool = False

    @classmethod
    def from_dict(cls, d: dict[str, Any], num_taps: int) -> DFlashConfig:
        heads = int(d["num_attention_heads"])
        dc = d.get("dflash_config")
        mask = (dc if isinstance(dc, dict) else {}).get("mask_token_id", d.get("mask_token_id"))
        return cls(
            hidden_size=int(d["hidden_size"]),
            intermediate_size=int(d["intermediate_size"]),
            num_attention_heads=heads,
            num_key_value_heads=int(d.get("num_key_value_heads") or heads),
            head_dim=int(d.get("head_dim") or int(d["hidden_size"]) // heads),
            num_hidden_layers=int(d["num_hidden_layers"]),
            num_taps=num_taps,
            block_size=int(d["block_size"]),
            mask_token_id=int(mask) if isinstance(mask, int) else -1,
            rms_norm_eps=float(d.get("rms_norm_eps", 1e-6)),
            rope_theta=float(d.get("rope_theta", 10000.0)),
            rope_scaling=d.get("rope_scaling") or d.get("rope_parameters"),
            max_position_embeddings=int(d.get("max_position_embeddings", 2048)),
            attention_bias=bool(d.get("attention_bias", False)),
        )


class _Attention(nn.Module):
    def __init__(self, c: DFlashConfig):
        super().__init__()
        self.c = c
        H, D = c.hidden_size, c.head_dim
        self.q_proj = nn.Linear(H, c.num_attention_heads * D, bias=c.attention_bias)
        self.k_proj = nn.Linear(H, c.num_key_value_heads * D, bias=c.attention_bias)
        self.v_proj = nn.Linear(H, c.num_key_value_heads * D, bias=c.attention_bias)
        self.o_proj = nn.Linear(c.num_attention_heads * D, H, bias=c.attention_bias)
        self.q_norm = RMSNorm(D, c.rms_norm_eps)
        self.k_norm = RMSNorm(D, c.rms_norm_eps)

    def forward(self, h: torch.Tensor, ctx: torch.Tensor, rope: Any, mask: torch.Tensor) -> torch.Tensor:
        """h [B, Q, H] block rows, ctx [B, C, H] projected taps; mask [B, 1, Q, C + Q] (True: attend)."""
        B, Q, _ = h.shape
        D, g = self.c.head_dim, self.c.num_attention_heads // self.c.num_key_value_heads
        q = self.q_norm(self.q_proj(h).view(B, Q, -1, D)).transpose(1, 2)
        kv_in = torch.cat([ctx, h], dim=1)
        k = self.k_norm(self.k_proj(kv_in).view(B, kv_in.shape[1], -1, D)).transpose(1, 2)
        v = self.v_proj(kv_in).view(B, kv_in.shape[1], -1, D).transpose(1, 2)
        (qc, qs), (kc, ks) = rope
        q, k = rotate(q, qc, qs), rotate(k, kc, ks)
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=D**-0.5)
        return self.o_proj(out.transpose(1, 2).reshape(B, Q, -1))


class _Layer(nn.Module):
    def __init__(self, c: DFlashConfig):
        super().__init__()
        self.self_attn = _Attention(c)
        self.mlp = nn.ModuleDict(
            {
                "gate_proj": nn.Linear(c.hidden_size, c.intermediate_size, bias=False),
                "up_proj": nn.Linear(c.hidden_size, c.intermediate_size, bias=False),
                "down_proj": nn.Linear(c.intermediate_size, c.hidden_size, bias=False),
            }
        )
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)

    def forward(self, h: torch.Tensor, ctx: torch.Tensor, rope: Any, mask: torch.Tensor) -> torch.Tensor:
        h = h + self.self_attn(self.input_layernorm(h), ctx, rope, mask)
        x = self.post_attention_layernorm(h)
        m = self.mlp
        return h + m["down_proj"](F.silu(m["gate_proj"](x)) * m["up_proj"](x))


def _rope_tables(c: DFlashConfig) -> tuple[torch.Tensor, float]:
    """(inv_freq, attention scaling) for the draft's RoPE, by the function every draft's tables come from."""
    from ..config import DraftConfig
    from ..rope import rope_tables

    return rope_tables(
        DraftConfig(
            hidden_size=c.hidden_size,
            intermediate_size=c.intermediate_size,
            num_attention_heads=c.num_attention_heads,
            num_key_value_heads=c.num_key_value_heads,
            vocab_size=1,
            draft_vocab_size=1,
            head_dim=c.head_dim,
            rope_theta=c.rope_theta,
            rope_scaling=c.rope_scaling,
            max_position_embeddings=c.max_position_embeddings,
        )  # fmt: skip
    )


class DFlashDraft(nn.Module):
    """fc + hidden_norm over the taps, the block layers, the final norm; the target's embedding and head."""

    kind = "dflash"
    checkpoint_hint = (
        "check the mask token's embedding row (inspect, DRF014) and that it is served with the head it was trained against"
    )

    inv_freq: torch.Tensor

    def __init__(self, c: DFlashConfig):
        super().__init__()
        inv_freq, rope_scale = _rope_tables(c)
        self.config = c
        self.fc = nn.Linear(c.num_taps * c.hidden_size, c.hidden_size, bias=False)
        self.hidden_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.layers = nn.ModuleList(_Layer(c) for _ in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.register_buffer("inv_freq", inv_freq.float(), persistent=False)
        self.rope_scale = rope_scale

    def blocks(
        self, taps: torch.Tensor, ids: torch.Tensor, anchors: torch.Tensor, embed: nn.Module, block: int | None = None
    ) -> torch.Tensor:
        """Every anchor's block drafted in one forward.

        taps [B, T, n*H] the target's taps along the sequence ids [B, >= T]; anchors [A] positions (the last
        verified token of a pass; a block sees the taps before its anchor); ``block`` the block drafted (None: the
        config's block_size; an engine serves the block its launch names, whatever the draft was trained on).
        Returns the normed hidden states [B, A, block - 1, H] of the mask rows: row i of anchor a proposes the
        token at a + i + 1."""
        c, (B, T) = self.config, taps.shape[:2]  # T context positions; ids may run past them (the anchors)
        bs, A, dev = block or c.block_size, anchors.numel(), ids.device
        ctx = self.hidden_norm(self.fc(taps))
        block_ids = torch.full((B, A, bs), c.mask_token_id, dtype=torch.long, device=dev)
        block_ids[:, :, 0] = ids[:, anchors]
        h = embed(block_ids).reshape(B, A * bs, -1).to(ctx.dtype)
        bpos = (anchors[:, None] + torch.arange(bs, device=dev)).reshape(-1)
        rope_q = rope_cos_sin(bpos[None].expand(B, -1), self.inv_freq, self.rope_scale, ctx.dtype)
        kpos = torch.cat([torch.arange(T, device=dev), bpos])
        rope_k = rope_cos_sin(kpos[None].expand(B, -1), self.inv_freq, self.rope_scale, ctx.dtype)
        owner = torch.arange(A, device=dev).repeat_interleave(bs)
        sees_ctx = torch.arange(T, device=dev)[None, :] < anchors[owner][:, None]  # [A*bs, T]
        sees_block = owner[:, None] == owner[None, :]  # [A*bs, A*bs]: its own block, both ways
        mask = torch.cat([sees_ctx, sees_block], dim=1)[None, None].expand(B, 1, -1, -1)
        for layer in self.layers:
            h = layer(h, ctx, (rope_q, rope_k), mask)
        return self.norm(h).view(B, A, bs, -1)[:, :, 1:]
