"""A decode step's attention alone at large batches, over one left-padded cache, three ways:

- "masked": what the native decoder called before its kernel, PyTorch's SDPA with an additive mask over the written
  slots rounded up to 256 (the memory-efficient kernel), each key/value head's query group as its rows;
- "flash": FlashAttention-2's variable-length kernel as torch builds it (``aten._flash_attention_forward`` with
  ``seqused_k``), reading each row's written slots from a token-major copy of the cache;
- "spans": the decoder's own kernel (``eagle3_doctor.model.native.spans``), each row's slots, in place.

    PYTHONPATH=. python3 bench/bench_decode_attention.py

For each (batch, written length, cache slots): milliseconds per call (50 calls replayed as one CUDA graph), the
key/value bytes the rows' written slots hold over that time (GB/s), the largest difference from a float32
reference; and for the kernel, whether a verify pass of 5 queries gives each query its decode step's bits.
Prints one JSON object per case.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eagle3_doctor.model.native import spans  # noqa: E402

Hkv, G, D = 8, 4, 128
H = Hkv * G
CASES = ((512, 352, 1024), (512, 600, 1024), (512, 1100, 1152), (256, 1200, 2048), (64, 4000, 4096), (8, 4000, 4096),
         (4, 32000, 32832))  # fmt: skip


def say(**kw) -> None:
    print(json.dumps(kw), flush=True)


def graphed_ms(fn, reps: int = 50) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    g.replay()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    g.replay()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / reps


def case(B: int, length: int, L: int) -> dict:
    dev, dt, scale = torch.device("cuda"), torch.bfloat16, D**-0.5
    g = torch.Generator(device=dev).manual_seed(0)
    pad = torch.randint(0, 64, (B,), device=dev, generator=g)
    W = min(L, -(-length // 256) * 256)
    k = torch.randn(B, Hkv, L, D, device=dev, dtype=dt, generator=g)  # the native cache's layout
    v = torch.randn(B, Hkv, L, D, device=dev, dtype=dt, generator=g)
    q = torch.randn(B, H, 1, D, device=dev, dtype=dt, generator=g)
    j = torch.arange(W, device=dev)
    ok = (j[None, :] < length) & (j[None, :] >= pad[:, None])
    mask = torch.where(ok, 0.0, torch.finfo(dt).min).to(dt)[:, None, None, :]
    row: dict = {"batch": B, "length": length, "slots": L, "window": W}
    kv_gb = float(2 * (length - pad).sum()) * Hkv * D * 2 / 1e9
    row["kv_gb"] = round(kv_gb, 3)
    ref = F.scaled_dot_product_attention(
        q.float().reshape(B, Hkv, G, D), k[:, :, :W].float(), v[:, :, :W].float(), attn_mask=ok[:, None, None, :],
        scale=scale,
    ).reshape(B, H, 1, D)  # fmt: skip

    def masked() -> torch.Tensor:
        return F.scaled_dot_product_attention(
            q.reshape(B, Hkv, G, D), k[:, :, :W], v[:, :, :W], attn_mask=mask, scale=scale
        ).reshape(B, H, 1, D)

    sp = spans.Spans(pad, torch.tensor(length - 1, device=dev))

    def kernel() -> torch.Tensor:
        return spans.attend(q, k, v, sp, scale)

    routes = {"masked": masked, "spans": kernel}
    if B * L * Hkv * D * 2 * 2 < 40e9:  # the token-major copy flash reads
        kf = k.transpose(1, 2).contiguous().view(B * L, Hkv, D)
        vf = v.transpose(1, 2).contiguous().view(B * L, Hkv, D)
        starts = torch.arange(B + 1, device=dev, dtype=torch.int32) * L
        starts[:B] += pad.int()
        used, cu_q = (length - pad).int(), torch.arange(B + 1, device=dev, dtype=torch.int32)

        def flash() -> torch.Tensor:
            return torch.ops.aten._flash_attention_forward(
                q.reshape(B, H, D), kf, vf, cu_q, starts, 1, W, 0.0, False, False, scale=scale, seqused_k=used
            )[0].reshape(B, H, 1, D)

        routes["flash"] = flash
    for name, fn in routes.items():
        out = fn()
        ms = graphed_ms(fn)
        row[name] = {"graph_ms": round(ms, 4), "gb_s": round(kv_gb / ms * 1e3), "max_err": float((out.float() - ref).abs().max())}
    row["splits"] = spans.splits_for(B, Hkv, L, dev)
    qn = torch.randn(B, H, 5, D, device=dev, dtype=dt, generator=g)
    first = torch.tensor(length - 5, device=dev)
    passed = spans.attend(qn, k, v, spans.Spans(pad, first), scale)
    row["verify_bits_equal"] = all(
        torch.equal(passed[:, :, i : i + 1], spans.attend(qn[:, :, i : i + 1], k, v, spans.Spans(pad, first + i), scale))
        for i in range(5)
    )
    row["verify_ms"] = round(graphed_ms(lambda: spans.attend(qn, k, v, spans.Spans(pad, first), scale)), 4)
    return row


def main() -> None:
    say(torch=torch.__version__, device=torch.cuda.get_device_name())
    for B, length, L in CASES:
        say(**case(B, length, L))
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
