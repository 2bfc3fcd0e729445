"""RMSNorm (with the residual add before it), RoPE and the SiLU-gated product, each one Triton kernel: the native
decoder's (model.native.decoder) and the draft's (draft.model), which share RMSNorm.

Why: with the attention over each row's slots (model.native.spans) and the matrix multiplies at their FLOP rate,
what was left of a large-batch decode step beyond its floor was elementwise work. PyTorch runs RMSNorm in float32 as
seven kernels, each a full pass over the activations in float32; RoPE as six; the gate's SiLU and the product as
two. At batch 1024 on an 8B shape that was about a quarter of the step (bench/RESULTS.md, 2026-12-03). Each
kernel here reads its inputs once and writes its outputs once.

The arithmetic is the decoder's (transformers' Llama), op for op, each intermediate rounded where PyTorch rounds
it: the residual add and every product and sum of RoPE rounded to the activations' dtype (so RoPE and the add give
PyTorch's bits exactly), RMSNorm's statistics in float32 and the normalised row rounded before the scale. Two
things may differ in the last bit: the order of the float32 sum of squares, and ``exp`` inside SiLU. Each row is
computed by one program whatever the batch or the number of queries, so a verify pass and a decode step give a
token the same bits. Every kernel is compiled with fused multiply-adds off: with them on, Triton contracted RoPE's
bf16 product and sum into one FMA, and 23% of its outputs differed from PyTorch's in the last bit on an H200.
``tests/model/test_fused.py`` runs the kernels through Triton's interpreter on the CPU.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import torch

from . import kernels

MAX_WIDTH = 16384  # the widest row one program normalises (a hidden size)


def on(kernel: str, x: torch.Tensor, *others: torch.Tensor) -> bool:
    """The fused ``kernel`` (norm, rope or gated) takes this call: 16-bit on a GPU (:func:`.kernels.wanted`), every
    tensor of x's dtype, none of them recording autograd (the kernels have no backward), and the kernel checked
    against PyTorch on this device (:func:`_runs`)."""
    return (
        kernels.wanted("fused", x.device, x.dtype)
        and _fits(kernel, x, others)
        and all(t.dtype == x.dtype for t in others)
        and not (torch.is_grad_enabled() and any(t.requires_grad for t in (x, *others)))
        and _runs(x.device, x.dtype, kernel)
    )


def prepare(device: torch.device, dtype: torch.dtype) -> None:
    """Every kernel compiled and checked (:func:`_runs`) before the first forward would: Triton's import and first
    launch are most of a second (bench/RESULTS.md), which a load spends beside the weights' copy (model.target)."""
    if device.type == "cuda" and device.index is None:  # the key the tensors' own device gives :func:`on`
        device = torch.device("cuda", torch.cuda.current_device())
    if kernels.wanted("fused", device, dtype):
        for kernel in ("norm", "rope", "gated"):
            _runs(device, dtype, kernel)


def _fits(kernel: str, x: torch.Tensor, others: tuple[torch.Tensor, ...]) -> bool:
    """The shapes the kernel is written for: rows of at most :data:`MAX_WIDTH` to normalise; whole power-of-two
    heads to rotate (a head of 80 or 96 dims, or a partial rotation, keeps PyTorch's ops)."""
    D = x.shape[-1]
    if kernel == "norm":
        return D <= MAX_WIDTH
    if kernel == "rope":
        return D & (D - 1) == 0 and all(t.shape[-1] == D for t in others)
    return True


def _launch(x: torch.Tensor) -> Any:
    # Triton launches on the current device: a target on cuda:1 would hand it another device's pointers
    return torch.cuda.device(x.device) if x.is_cuda else contextlib.nullcontext()


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``weight * (x * rsqrt(mean(x^2) + eps))`` over the last dim, the statistics in float32 and the normalised
    row rounded to x's dtype before the scale (transformers' LlamaRMSNorm)."""
    return _norm(x, None, weight, eps)[1]


def add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(h, rms_norm(h)) for h = x + residual rounded to x's dtype, as ``h = x + r; norm(h)`` computes them."""
    return _norm(x, residual, weight, eps)


def _norm(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    N = x.shape[-1]
    if N > MAX_WIDTH:
        raise ValueError(f"rows of {N} exceed the fused norm's {MAX_WIDTH}")
    rows = x.reshape(-1, N)
    res = residual.reshape(-1, N) if residual is not None else rows
    if rows.stride(-1) != 1 or res.stride(-1) != 1:
        rows, res = rows.contiguous(), res.contiguous()
    out = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    total = torch.empty_like(out) if residual is not None else out
    block = 1 << (N - 1).bit_length()
    with _launch(x):
        _kernels()[0][(rows.shape[0],)](
            rows, res, weight, out, total, rows.stride(0), res.stride(0), out.stride(0), total.stride(0), N, eps,
            RES=residual is not None, BLOCK=block, num_warps=min(16, max(1, block // 256)), enable_fp_fusion=False,
        )  # fmt: skip
    return total.view(x.shape), out.view(x.shape)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [B, n, heads, D] (the projection's layout) rotated NeoX rotate-half by cos, sin [B, 1, n, D]:
    ``x * cos + cat(-x2, x1) * sin``, each product and the sum rounded to x's dtype; a new [B, n, heads, D]."""
    B, n, H, D = x.shape
    if D & (D - 1) or cos.shape[-1] != D:
        raise ValueError(f"the fused RoPE rotates whole power-of-two heads; got {D} dims, {cos.shape[-1]} rotated")
    out = torch.empty(B, n, H, D, dtype=x.dtype, device=x.device)
    with _launch(x):
        _kernels()[1][(B * n,)](
            x, cos, sin, out, n, H,
            *x.stride(), cos.stride(0), cos.stride(2), cos.stride(3), sin.stride(0), sin.stride(2), sin.stride(3),
            *out.stride(), HB=1 << (H - 1).bit_length(), D=D, enable_fp_fusion=False,
        )  # fmt: skip
    return out


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """``silu(gate) * up``, the SiLU rounded to the dtype before the product (as the two ops PyTorch runs)."""
    gate, up = gate.contiguous(), up.contiguous()
    out = torch.empty_like(gate)
    total = gate.numel()
    with _launch(gate):
        _kernels()[2][(-(-total // 2048),)](gate, up, out, total, BLOCK=2048, enable_fp_fusion=False)
    return out


def silu_gated(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """``silu(gate) * up`` as the decoder's and the draft's MLPs compute it: the fused kernel where it takes the call
    (:func:`on`), else PyTorch's two ops."""
    return silu_mul(gate, up) if on("gated", gate, up) else torch.nn.functional.silu(gate) * up


@functools.cache
def _runs(device: torch.device, dtype: torch.dtype, kernel: str) -> bool:
    """The kernel compiles, runs and agrees with PyTorch's ops here (once per device, dtype and kernel): the
    residual add and RoPE to the bit, the norm and the gated product within rounding."""
    g = torch.Generator(device=device).manual_seed(0)
    x, r = (torch.randn(3, 2, 96, generator=g, device=device).to(dtype) for _ in range(2))

    def norm() -> None:
        w = (1 + torch.randn(96, generator=g, device=device) / 4).to(dtype)

        def want(h: torch.Tensor) -> torch.Tensor:
            h32 = h.float()
            return w * (h32 * torch.rsqrt(h32.pow(2).mean(-1, keepdim=True) + 1e-5)).to(dtype)

        total, normed = add_rms_norm(x, r, w, 1e-5)
        _near("residual add", total, x + r, exact=True)
        _near("RMSNorm", normed, want(x + r))
        _near("RMSNorm", rms_norm(x, w, 1e-5), want(x))

    def rotary() -> None:
        q = torch.randn(2, 3, 4, 32, generator=g, device=device).to(dtype)
        ang = torch.randn(2, 1, 3, 16, generator=g, device=device).repeat(1, 1, 1, 2)
        cos, sin = ang.cos().to(dtype), ang.sin().to(dtype)
        qt = q.transpose(1, 2)
        want = (qt * cos + torch.cat([-qt[..., 16:], qt[..., :16]], -1) * sin).transpose(1, 2)
        _near("RoPE", rope(q, cos, sin), want, exact=True)

    def gated() -> None:
        _near("SiLU x up", silu_mul(x, r), torch.nn.functional.silu(x) * r)

    return kernels.checked(f"fused {kernel}", {"norm": norm, "rope": rotary, "gated": gated}[kernel])


def _near(what: str, got: torch.Tensor, want: torch.Tensor, exact: bool = False) -> None:
    off = float((got.float() - want.float()).abs().max())
    if (exact and not torch.equal(got, want)) or off > 2e-2 * (1 + float(want.float().abs().max())):
        raise RuntimeError(f"its {what} is off by {off:.3g} from PyTorch's")


@functools.cache
def _kernels() -> tuple[Any, Any, Any]:
    """The kernels, defined at their first use: Triton is imported only where the route is taken."""
    import triton
    import triton.language as tl

    @triton.jit
    def norm(X, R, W, Y, S, sx, sr, sy, ss, N, eps, RES: tl.constexpr, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        c = tl.arange(0, BLOCK)
        ok = c < N
        x = tl.load(X + row * sx + c, mask=ok, other=0.0)
        if RES:
            r = tl.load(R + row * sr + c, mask=ok, other=0.0)
            x = (x.to(tl.float32) + r.to(tl.float32)).to(X.dtype.element_ty)
            tl.store(S + row * ss + c, x, mask=ok)
        xf = x.to(tl.float32)
        scale = tl.math.rsqrt(tl.sum(xf * xf, 0) / N + eps)
        y = (xf * scale).to(X.dtype.element_ty)
        w = tl.load(W + c, mask=ok, other=0.0)
        tl.store(Y + row * sy + c, (w.to(tl.float32) * y.to(tl.float32)).to(Y.dtype.element_ty), mask=ok)

    @triton.jit
    def rotary(
        X, C, S, OUT, n, H,
        sxb, sxn, sxh, sxd, scb, scn, scd, ssb, ssn, ssd, sob, son, soh, sod,
        HB: tl.constexpr, D: tl.constexpr,
    ):  # fmt: skip
        t = tl.program_id(0)
        b = (t // n).to(tl.int64)
        i = (t % n).to(tl.int64)
        h = tl.arange(0, HB)[:, None]
        d = tl.arange(0, D)[None, :]
        ok = h < H
        half = D // 2
        x = tl.load(X + b * sxb + i * sxn + h * sxh + d * sxd, mask=ok, other=0.0)
        other = tl.load(X + b * sxb + i * sxn + h * sxh + ((d + half) % D) * sxd, mask=ok, other=0.0)
        c = tl.load(C + b * scb + i * scn + d * scd)
        s = tl.load(S + b * ssb + i * ssn + d * ssd)
        turned = tl.where(d < half, -other.to(tl.float32), other.to(tl.float32))  # cat(-x2, x1), exact
        a = (x.to(tl.float32) * c.to(tl.float32)).to(X.dtype.element_ty)
        z = (turned * s.to(tl.float32)).to(X.dtype.element_ty)
        y = (a.to(tl.float32) + z.to(tl.float32)).to(OUT.dtype.element_ty)
        tl.store(OUT + b * sob + i * son + h * soh + d * sod, y, mask=ok)

    @triton.jit
    def gated(G, U, OUT, total, BLOCK: tl.constexpr):
        at = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        ok = at < total
        g = tl.load(G + at, mask=ok, other=0.0).to(tl.float32)
        u = tl.load(U + at, mask=ok, other=0.0)
        s = (g / (1.0 + tl.exp(-g))).to(U.dtype.element_ty)
        tl.store(OUT + at, (s.to(tl.float32) * u.to(tl.float32)).to(OUT.dtype.element_ty), mask=ok)

    return norm, rotary, gated
