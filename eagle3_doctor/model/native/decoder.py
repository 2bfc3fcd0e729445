"""The Llama family's decoder (llama, mistral without a sliding window, qwen2, qwen3), op for op as
transformers writes it, under the same module and parameter names.

Why the doctor carries its own: a GPU command's wall was mostly Python importing transformers' modeling
stack (its loader pulls torch's distributed tensors, sympy, dynamo and scikit-learn: 7-9 s of a 20 s
process on an H200 host, bench/RESULTS.md), and the decode step it runs over a cache copied every key and
value head once per query group. Here the same arithmetic runs with neither: RMSNorm in float32 and back,
rotate-half RoPE from float32 tables, SiLU-gated MLP, scaled-dot-product attention; a decode step's grouped
queries attend their key/value head in place (:func:`_attend`), on a GPU by the static decoders' own kernel
(:mod:`.spans`, whose rounding is FlashAttention's, not SDPA's); in 16-bit on a GPU the norms, RoPE and the gated
product are one fused kernel each (:mod:`.fused`), which family runs being :mod:`.kernels`' answer.

The names match transformers' (``model.layers.{i}.self_attn.q_proj``...), so a checkpoint loads by name,
the taps hook the same modules, and every helper that reads a Hugging Face model (embeddings, head,
``DecoderParts``) reads this one. ``tests/model/test_native.py`` pins its features and greedy tokens to
transformers' in float32 for each family.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ...draft.gpu import fused
from ...draft.model import RMSNorm
from ...draft.rope import rope_cos_sin, rotate
from .cache import DynamicKV
from .spans import Spans, attend


@dataclass(frozen=True)
class NativeSpec:
    """What the decoder needs of a config.json, every family default already applied (:mod:`.plan`)."""

    model_type: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    vocab_size: int
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    qk_norm: bool
    tie_word_embeddings: bool


class NativeConfig:
    """The few config attributes code written for transformers' models reads off ``model.config``."""

    _attn_implementation = "sdpa"

    def __init__(self, spec: NativeSpec, raw: dict[str, Any]):
        self.spec = spec
        self.raw = raw
        self.model_type = spec.model_type
        self.num_hidden_layers = spec.num_layers
        self.hidden_size = spec.hidden_size
        self.vocab_size = spec.vocab_size

    def to_dict(self) -> dict[str, Any]:
        return dict(self.raw)


class Linear(nn.Linear):
    """nn.Linear whose weights only ever come from a checkpoint: no initialisation (on the meta device
    torch's init runs through its reference ops, which import dynamo: seconds of a process's start)."""

    def reset_parameters(self) -> None:
        pass


class Embedding(nn.Embedding):
    def reset_parameters(self) -> None:
        pass


class Norm(RMSNorm):
    """RMSNorm (by one fused kernel on a GPU where it runs, :mod:`...draft.gpu.fused`), and after a residual add."""

    def after_add(self, x: torch.Tensor, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(h, norm(h)) for h = x + r: one pass where the fused kernel runs."""
        if fused.on("norm", x, r, self.weight):
            return fused.add_rms_norm(x, r, self.weight, self.eps)
        h = x + r
        return h, self(h)


GROUPED_ROWS = 16  # query positions up to which a masked forward attends each key/value head in place


def _attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, causal: bool, scale: float
) -> torch.Tensor:
    """q [B, H, n, D] over k, v [B, Hkv, S, D]; mask [B|1, 1, n, S] (bool: attend; float: added), Spans, or None.

    Grouped queries take transformers' three routes, so the features are its own to the last bit in
    float32: no mask, the kernel's own grouping; a few query positions (a decode step, a verify pass), the
    g x n queries of a key/value head as g x n query rows against it, each row under its position's mask
    (a step reads each head once, where ``repeat_kv`` would copy every head g times: at batch 256 that copy
    is gigabytes per layer); else ``repeat_kv`` (a prefill, whose mask g copies would outweigh it)."""
    B, H, n, D = q.shape
    if isinstance(mask, Spans):  # a static decoder's step on a GPU: each row's own slots (.spans)
        return attend(q, k, v, mask, scale)
    g = H // k.shape[1]
    if g == 1:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale)
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=True)
    if n <= GROUPED_ROWS:
        rows = mask if n == 1 else mask.repeat(1, 1, g, 1)  # row gi * n + i is query i of group member gi
        out = F.scaled_dot_product_attention(q.reshape(B, k.shape[1], g * n, D), k, v, attn_mask=rows, scale=scale)
        return out.reshape(B, H, n, D)
    k = k[:, :, None].expand(B, k.shape[1], g, *k.shape[2:]).reshape(B, H, *k.shape[2:])
    v = v[:, :, None].expand(B, v.shape[1], g, *v.shape[2:]).reshape(B, H, *v.shape[2:])
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)


class Attention(nn.Module):
    def __init__(self, s: NativeSpec, dev: Any = None):
        super().__init__()
        self.head_dim, self.num_heads, self.num_kv = s.head_dim, s.num_heads, s.num_kv_heads
        self.scaling = s.head_dim**-0.5
        self.q_proj = Linear(s.hidden_size, s.num_heads * s.head_dim, bias=s.qkv_bias, device=dev)
        self.k_proj = Linear(s.hidden_size, s.num_kv_heads * s.head_dim, bias=s.qkv_bias, device=dev)
        self.v_proj = Linear(s.hidden_size, s.num_kv_heads * s.head_dim, bias=s.qkv_bias, device=dev)
        self.o_proj = Linear(s.num_heads * s.head_dim, s.hidden_size, bias=s.o_bias, device=dev)
        if s.qk_norm:
            self.q_norm = Norm(s.head_dim, s.rms_norm_eps, dev)
            self.k_norm = Norm(s.head_dim, s.rms_norm_eps, dev)

    def forward(
        self, h: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], mask: Any, causal: bool, layer_cache: Any
    ) -> torch.Tensor:
        B, n, _ = h.shape
        q = self.q_proj(h).view(B, n, -1, self.head_dim)
        k = self.k_proj(h).view(B, n, -1, self.head_dim)
        v = self.v_proj(h).view(B, n, -1, self.head_dim).transpose(1, 2)
        if hasattr(self, "q_norm"):  # qwen3: RMSNorm over head_dim, before RoPE
            q, k = self.q_norm(q), self.k_norm(k)
        if fused.on("rope", q, k, *rope):  # rotated in the projection's layout, one pass each
            q, k = fused.rope(q, *rope).transpose(1, 2), fused.rope(k, *rope).transpose(1, 2)
        else:
            q, k = rotate(q.transpose(1, 2), *rope), rotate(k.transpose(1, 2), *rope)
        if layer_cache is not None:
            k, v = layer_cache.update(k, v)
        out = _attend(q, k, v, mask, causal, self.scaling)
        return self.o_proj(out.transpose(1, 2).reshape(B, n, -1))


class MLP(nn.Module):
    def __init__(self, s: NativeSpec, dev: Any = None):
        super().__init__()
        self.gate_proj = Linear(s.hidden_size, s.intermediate_size, bias=s.mlp_bias, device=dev)
        self.up_proj = Linear(s.hidden_size, s.intermediate_size, bias=s.mlp_bias, device=dev)
        self.down_proj = Linear(s.intermediate_size, s.hidden_size, bias=s.mlp_bias, device=dev)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(fused.silu_gated(self.gate_proj(x), self.up_proj(x)))


class DecoderLayer(nn.Module):
    def __init__(self, s: NativeSpec, dev: Any = None):
        super().__init__()
        self.self_attn = Attention(s, dev)
        self.mlp = MLP(s, dev)
        self.input_layernorm = Norm(s.hidden_size, s.rms_norm_eps, dev)
        self.post_attention_layernorm = Norm(s.hidden_size, s.rms_norm_eps, dev)

    def forward(self, hidden_states: torch.Tensor, rope: Any, mask: Any, causal: bool, layer_cache: Any) -> torch.Tensor:
        attn = self.self_attn(self.input_layernorm(hidden_states), rope, mask, causal, layer_cache)
        h, normed = self.post_attention_layernorm.after_add(hidden_states, attn)
        return h + self.mlp(normed)


@dataclass
class NativeOutput:
    last_hidden_state: torch.Tensor
    past_key_values: Any = None
    hidden_states: tuple[torch.Tensor, ...] | None = None  # transformers' tuple: embed, layers 0..L-2, final norm
    logits: torch.Tensor | None = None


class NativeModel(nn.Module):
    """The decoder stack: ``forward`` takes what transformers' base model takes from the doctor's callers."""

    inv_freq: torch.Tensor

    def __init__(self, s: NativeSpec, inv_freq: torch.Tensor, rope_scale: float, dev: Any = None):
        super().__init__()
        self.embed_tokens = Embedding(s.vocab_size, s.hidden_size, device=dev)
        self.layers = nn.ModuleList(DecoderLayer(s, dev) for _ in range(s.num_layers))
        self.norm = Norm(s.hidden_size, s.rms_norm_eps, dev)
        self.register_buffer("inv_freq", inv_freq.float(), persistent=False)
        self.rope_scale = float(rope_scale)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | Spans | None = None,
        position_ids: torch.Tensor | None = None,
        use_cache: bool = False,
        past_key_values: Any = None,
        output_hidden_states: bool = False,
    ) -> NativeOutput:
        B, n = input_ids.shape
        cache = past_key_values if past_key_values is not None else (DynamicKV(len(self.layers)) if use_cache else None)
        past = cache.seen() if isinstance(cache, DynamicKV) else 0
        if position_ids is None:
            position_ids = torch.arange(past, past + n, device=input_ids.device)[None].expand(B, n)
        h = self.embed_tokens(input_ids)
        rope = rope_cos_sin(position_ids, self.inv_freq, self.rope_scale, h.dtype)  # once, for every layer
        mask, causal = _mask(attention_mask, B, n, past, input_ids.device)
        states = []
        for i, layer in enumerate(self.layers):
            states.append(h)
            h = layer(h, rope, mask, causal, None if cache is None else cache.layer(i))
        h = self.norm(h)
        return NativeOutput(h, cache, tuple(states + [h]) if output_hidden_states else None)


def _drops_right_padding(am: torch.Tensor) -> bool:
    """On the GPU only: on the CPU the masked route stays, whose every row (pads included) is transformers' own
    to the last bit in float32 (tests/model/test_native.py)."""
    return am.is_cuda


def _mask(am: Any, B: int, n: int, past: int, dev: torch.device) -> tuple[Any, bool]:
    """(mask, causal) as transformers' sdpa path reads a padding mask: a 4D mask (or Spans) is the caller's own; a 2D
    one with no padding is dropped (the kernel's causal flag does it); else bool [B, 1, n, past + n]."""
    if isinstance(am, Spans) or am is not None and am.dim() == 4:
        return am, False
    if am is not None and bool(am.all()):
        am = None
    if am is not None and past == 0 and _drops_right_padding(am) and bool((am[:, 1:] <= am[:, :-1]).all()):
        # right padding: no real position sees a pad under the causal rule, so the mask is dropped; the masked
        # kernel took 4.2x the unmasked one's time at 4 x 32k on an H200 (bench/RESULTS.md). The pads' own rows,
        # which differ, are zeroed by every caller with padded rows (model.replay.iter_captures)
        return None, n > 1
    if am is None:
        if n == 1 or past == 0:
            return None, n > 1
        am = torch.ones(B, past + n, dtype=torch.bool, device=dev)
    q = torch.arange(past, past + n, device=dev)
    j = torch.arange(am.shape[-1], device=dev)
    return ((j[None, :] <= q[:, None])[None, None] & am.bool()[:, None, None, :]), False


class NativeForCausalLM(nn.Module):
    """The decoder and its head, with the accessors the doctor reads off a transformers model."""

    native = True

    def __init__(self, s: NativeSpec, raw: dict[str, Any], inv_freq: torch.Tensor, rope_scale: float, device: Any = None):
        """``device="meta"``: no storage; the loader assigns the checkpoint's tensors."""
        super().__init__()
        self.config = NativeConfig(s, raw)
        self.model = NativeModel(s, inv_freq, rope_scale, device)
        self.lm_head = Linear(s.hidden_size, s.vocab_size, bias=False, device=device)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kw: Any) -> NativeOutput:
        """transformers' causal-LM call: logits at every position (and ``output_hidden_states``' tuple)."""
        out = self.model(input_ids, attention_mask, **kw)
        out.logits = self.lm_head(out.last_hidden_state)
        return out

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.embed_tokens

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def new_static_cache(self, batch: int, max_len: int) -> Any:
        from .cache import StaticKV

        s = self.config.spec
        w = self.model.embed_tokens.weight
        return StaticKV(s.num_layers, batch, s.num_kv_heads, max_len, s.head_dim, w.dtype, w.device)
