"""Attention over each row's own written slots, for the static decoders' steps on a GPU: one Triton kernel.

Why: a decode step's attention reads the key/value cache, and at a large batch those reads are most of what the
step does beyond its matrix multiplies. PyTorch's kernels either take an additive mask over a window of slots
(the memory-efficient kernel reads every slot of the window, padding and unwritten slots included, at about
half the HBM bandwidth: 0.41 ms a layer at 512 rows of 352 slots on an H200, 13 ms of a 29 ms step) or, with no
mask, cannot skip a row's left padding. Here each row reads from its first real slot to its last query's slot,
nothing else, and the bounds are read on the device, so one CUDA graph per query count serves every length of a
continuation (the masked route needed a graph per window size).

What it computes is what the masked route computes: query i of row b (its slot ``first[b] + i``) attends the
slots ``start[b] .. first[b] + i`` of its key/value head, softmax in float32 online over blocks of 64 slots, the
weighted sum of values accumulated in float32 from probabilities rounded to the values' dtype (FlashAttention's
arithmetic). Blocks sit at fixed slots and a row's sum never depends on the other rows or on how many queries a
pass holds, so a verify pass and a decode step give one query the same bits (the speculative continuation's
equality to the plain one rests on that). ``tests/model/test_spans.py`` runs the kernel through Triton's
interpreter on the CPU against scaled-dot-product attention under the equivalent mask.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Any

import torch

from ...draft.gpu import kernels

BLOCK_N = 64  # slots a program reads per iteration
MAX_ROWS = 128  # query rows (group members x positions) one program holds


@dataclass(frozen=True)
class Spans:
    """Which slots each query sees: query i of row b sees ``start[b] .. first[b] + i`` (device tensors [B], or a
    0-d ``first`` every row shares). Passed where a model takes its attention mask."""

    start: torch.Tensor
    first: torch.Tensor


def usable(device: torch.device, dtype: torch.dtype, head_dim: int, groups: int, n: int) -> bool:
    """The kernel takes a forward of n query positions: where :func:`.kernels.wanted` allows it, a power-of-two head
    size of 16-256, at most :data:`MAX_ROWS` query rows (``groups`` query heads per key/value head, times n) per
    program, and the shape checked against SDPA (:func:`_runs`)."""
    return (
        kernels.wanted("attention", device, dtype)
        and 16 <= head_dim <= 256
        and head_dim & (head_dim - 1) == 0
        and groups * n <= MAX_ROWS
        and _runs(device, dtype, head_dim, groups, n)
    )


@functools.cache
def _runs(device: torch.device, dtype: torch.dtype, head_dim: int, groups: int, n: int) -> bool:
    """Triton compiles and runs the kernel for this shape, eagerly, before a graph capture could meet a failure
    (Triton builds its launcher with the host's C compiler at first use), and agrees with SDPA."""

    def run() -> None:
        g = torch.Generator(device=device).manual_seed(0)
        q = torch.randn(1, groups, n, head_dim, generator=g, device=device).to(dtype)
        k, v = (torch.randn(1, 1, 2 * BLOCK_N, head_dim, generator=g, device=device).to(dtype) for _ in range(2))
        first = torch.tensor([BLOCK_N], device=device)
        out = attend(q, k, v, Spans(torch.zeros(1, dtype=torch.long, device=device), first), head_dim**-0.5, splits=1)
        seen = torch.arange(2 * BLOCK_N, device=device) <= BLOCK_N + torch.arange(n, device=device)[:, None]
        kk, vv = (x.float().expand(1, groups, 2 * BLOCK_N, head_dim) for x in (k, v))
        want = torch.nn.functional.scaled_dot_product_attention(q.float(), kk, vv, attn_mask=seen, scale=head_dim**-0.5)
        if not torch.allclose(out.float(), want, atol=2e-2, rtol=2e-2):
            raise RuntimeError(f"its output is off by {float((out.float() - want).abs().max()):.3g} from SDPA's")

    return kernels.checked("attention", run)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def splits_for(batch: int, kv_heads: int, slots: int, device: torch.device) -> int:
    """Programs per (row, head) along the slots: enough to give every multiprocessor two programs where the rows
    alone do not (a small batch over a long context), and none of under 256 slots. A property of the cache and the
    batch, never of the pass, so a query's sum splits alike in a decode step and a verify pass."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4
    return max(1, min(_ceil(2 * sms, max(1, batch * kv_heads)), _ceil(slots, 256)))


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, spans: Spans, scale: float, splits: int = 0) -> torch.Tensor:
    """q [B, H, n, D] over the cache's k, v [B, Hkv, L, D] -> [B, H, n, D] in q's dtype (a view of a [B, n, H, D]
    buffer: the layout the output projection reads). ``splits`` 0: :func:`splits_for`."""
    B, H, n, D = q.shape
    Hkv, L = k.shape[1], k.shape[2]
    g = H // Hkv
    S = splits or splits_for(B, Hkv, L, q.device)
    chunk = _ceil(_ceil(L, S), BLOCK_N) * BLOCK_N  # a split's slots, whole blocks
    rows = max(16, 1 << (g * n - 1).bit_length())  # tl.dot's least row count
    start, first = spans.start, spans.first
    first_stride = 0 if first.dim() == 0 else first.stride(0)
    out = torch.empty(B, n, H, D, dtype=q.dtype, device=q.device)
    if S == 1:
        acc, ml = out, out  # written directly, normalised
        acc_strides = (out.stride(0), out.stride(2), out.stride(1), out.stride(3))
    else:
        acc = torch.empty(S, B, H, n, D, dtype=torch.float32, device=q.device)
        ml = torch.empty(2, S, B, H, n, dtype=torch.float32, device=q.device)
        acc_strides = (acc.stride(1), acc.stride(2), acc.stride(3), acc.stride(4))
    # Triton launches on the current device: a target on cuda:1 would hand it another device's pointers
    with torch.cuda.device(q.device) if q.is_cuda else contextlib.nullcontext():
        _kernel()[(B, Hkv, S)](
            q, k, v, acc, ml, start, first,
            *q.stride(), *k.stride(), *v.stride(), *acc_strides,
            acc.stride(0) if S > 1 else 0, start.stride(0), first_stride,
            n, scale, chunk, B * H * n,
            G=g, ROWS=rows, BLOCK_N=BLOCK_N, D=D, SPLIT=S > 1,
        )  # fmt: skip
    if S > 1:
        m, den = ml[0], ml[1]
        w = torch.exp(m - m.amax(0))  # a split with no slot for a query holds m = -inf: weight 0
        o = (acc * w[..., None]).sum(0) / (den * w).sum(0)[..., None]
        out.copy_(o.transpose(1, 2))
    return out.transpose(1, 2)


@functools.cache
def _kernel() -> Any:
    """The kernel, defined at its first use: Triton is imported only where the route is taken."""
    import triton
    import triton.language as tl

    @triton.jit
    def span_attention(
        Q, K, V, OUT, ML, START, FIRST,
        sqb, sqh, sqn, sqd, skb, skh, skl, skd, svb, svh, svl, svd, sob, soh, son, sod,
        s_split, s_start, s_first,
        n, scale, chunk, ml_split,
        G: tl.constexpr, ROWS: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr, SPLIT: tl.constexpr,
    ):  # fmt: skip
        b = tl.program_id(0).to(tl.int64)  # b x a row's stride passes 2**31 on a large cache
        kvh = tl.program_id(1).to(tl.int64)
        s = tl.program_id(2)
        r = tl.arange(0, ROWS)
        live = r < G * n
        h = kvh * G + r // n  # row r: group member r // n at query position r % n
        i = r % n
        d = tl.arange(0, D)
        q = tl.load(Q + b * sqb + h[:, None] * sqh + i[:, None] * sqn + d[None, :] * sqd, mask=live[:, None], other=0.0)
        start = tl.load(START + b * s_start)
        first = tl.load(FIRST + b * s_first)
        lo = tl.maximum(start, s * chunk)
        hi = tl.minimum(first + n, (s + 1) * chunk)
        last = first + i  # the row's last visible slot
        m = tl.full([ROWS], float("-inf"), tl.float32)
        den = tl.zeros([ROWS], tl.float32)
        acc = tl.zeros([ROWS, D], tl.float32)
        kb = K + b * skb + kvh * skh
        vb = V + b * svb + kvh * svh
        for j0 in range((lo // BLOCK_N) * BLOCK_N, hi, BLOCK_N):
            j = j0 + tl.arange(0, BLOCK_N)
            inside = j < hi
            kt = tl.load(kb + j[None, :] * skl + d[:, None] * skd, mask=inside[None, :], other=0.0)
            sc = tl.dot(q, kt) * scale
            sc = tl.where((j[None, :] >= lo) & (j[None, :] <= last[:, None]), sc, float("-inf"))
            top = tl.maximum(m, tl.max(sc, 1))
            ref = tl.where(top == float("-inf"), 0.0, top)  # a row with nothing seen yet stays at zero weight
            alpha = tl.exp(m - ref)
            p = tl.exp(sc - ref[:, None])
            den = den * alpha + tl.sum(p, 1)
            vv = tl.load(vb + j[:, None] * svl + d[None, :] * svd, mask=inside[:, None], other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(vv.dtype), vv)
            m = top
        at = b * sob + h[:, None] * soh + i[:, None] * son + d[None, :] * sod
        if SPLIT:
            tl.store(OUT + s * s_split + at, acc, mask=live[:, None])
            row = (s * ml_split + (b * (G * tl.num_programs(1)) + h) * n + i).to(tl.int64)
            tl.store(ML + row, m, mask=live)
            tl.store(ML + tl.num_programs(2) * ml_split + row, den, mask=live)
        else:
            tl.store(OUT + at, (acc / den[:, None]).to(OUT.dtype.element_ty), mask=live[:, None])

    return span_attention
