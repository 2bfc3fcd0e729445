"""Attention that also returns each query row's log-sum-exp, on the fused kernels where they run: the teacher-forced
unroll's parts (the step-1 keys, a base's own later keys) are one softmax, merged exactly through their
log-sum-exps (:meth:`.model.DraftAttention.attend_unroll`)."""

from __future__ import annotations

from collections.abc import Callable

import torch


def attention_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: bool, key_mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention (causal: query i sees keys <= i) and each row's log-sum-exp of the scaled scores (natural log,
    float32).

    q [B,nh,Tq,d]; k, v [B,nkv,Tk,d] (Tq = Tk where causal); key_mask [B,Tk] (True = real key) or None. Returns
    (out [B,nh,Tq,d] in q's dtype, lse [B,nh,Tq]). The fused kernels that return the log-sum-exp are reached
    through their aten ops (public SDPA does not return it): flash on CUDA in 16-bit, memory-efficient on CUDA
    in float32, the CPU flash kernel on the CPU; the explicit form only where a key mask is given (no caller in
    the package passes one).
    """
    B, nh, Tq, d = q.shape
    nkv, Tk = k.shape[1], k.shape[2]
    if key_mask is None and q.is_cuda and q.dtype in (torch.float16, torch.bfloat16) and d % 8 == 0 and d <= 256:
        try:  # FlashAttention-2 takes grouped KV heads as they are
            out = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False, scale=scale)
            return out[0], out[1]
        except RuntimeError:
            pass
    if nkv != nh:
        k = k.repeat_interleave(nh // nkv, dim=1)
        v = v.repeat_interleave(nh // nkv, dim=1)
    if key_mask is None and q.is_cuda:
        out = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0, causal, scale=scale)
        return out[0], out[1][..., :Tq]  # its log-sum-exp rows are padded to a multiple of 32
    if key_mask is None and q.device.type == "cpu":
        out = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, attn_mask=None, scale=scale)
        return out[0], out[1]
    allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device)
    if causal:
        allowed = allowed.tril()
    if key_mask is not None:
        allowed = allowed[None, None] & key_mask[:, None, None, :].bool()
    s = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scale
    s = s.masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))[..., None])
    return torch.matmul(p, v.float()).to(q.dtype), lse


def causal_parts(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, key_mask: torch.Tensor | None = None
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Query i of q [B,nh,Tq,d] (position T - Tq + i) against the keys k, v [B,nkv,T,d] of the positions up to its
    own, as parts of one softmax for :func:`merged`: the last Tq keys causally, the keys before them whole (every
    query sees them). Two square-or-unmasked calls, where one causal call with Tq < T would lean on a diagonal's
    alignment the kernels do not share. key_mask [B,T] (True = real key) or None."""
    t0 = k.shape[2] - q.shape[2]
    square, before = (None, None) if key_mask is None else (key_mask[:, t0:], key_mask[:, :t0])
    parts = [attention_lse(q, k[:, :, t0:], v[:, :, t0:], scale, True, square)]
    if t0:
        parts.append(attention_lse(q, k[:, :, :t0], v[:, :, :t0], scale, False, before))
    return parts


def merged(
    parts: list[tuple[torch.Tensor, torch.Tensor]],
    scores: torch.Tensor | None = None,
    weigh: Callable[[torch.Tensor], torch.Tensor] | None = None,
    masked: bool = False,
) -> torch.Tensor:
    """One softmax's output from its parts, in float32: ``parts`` (each part's normalised output [..., d], its
    log-sum-exp [..., 1]) and the rest of the keys' scaled ``scores`` [..., n] with ``weigh(w)`` their values' sum
    under weights w [..., n] (None: no other keys). ``masked``: a part may have had no visible key (its output
    undefined, its weight 0)."""
    outs = [torch.nan_to_num(o) if masked else o for o, _ in parts]
    lses = [lse for _, lse in parts]
    m = torch.stack(lses).amax(0)
    if scores is not None and weigh is not None:
        m = torch.maximum(m, scores.amax(-1, keepdim=True))
        w = torch.exp(scores - m)
        num, den = weigh(w), w.sum(-1, keepdim=True)
    else:
        num, den = torch.zeros_like(outs[0]), torch.zeros_like(lses[0])
    for o_p, lse_p in zip(outs, lses):
        w_p = torch.exp(lse_p - m)  # 0 where a part has no visible key (lse = -inf)
        num, den = num + w_p * o_p, den + w_p
    return num / den
