"""Whether a decode step's attention can run beside its matrix multiplies on one H200: the question between the
greedy continuation's steps (matmuls, then attention's KV reads, one after the other) and its floor, which lets the
reads hide under the matmuls (bench/floor.py).

Two kernels of a step at batch 512 on an 8B shape, each alone, one after the other on one stream, and at once on two
streams: the MLP's gate projection of half the batch (compute-bound, cuBLAS) and a grouped-query decode attention of
the other half over its KV cache (memory-bound, PyTorch's SDPA), each repeated. Where cuBLAS's kernels hold every SM,
the two streams gain nothing; ``--carveout N`` (torch's ``_set_sm_carveout_experimental``, where this torch has it)
keeps N SMs out of cuBLAS's kernels for the attention.

    python3 bench/check_overlap.py [--rows 256] [--context 320] [--carveout 0,16,32]

Prints one JSON object a setting: each way's milliseconds, and "overlap": the two streams' time against the sum of
the two alone (1.0: no overlap; max/sum: perfect).
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F
from check_projections import device_ms  # the device timer (this script's folder is on the path)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=256, help="sequences in each half of the batch")
    ap.add_argument("--context", type=int, default=320, help="KV slots each sequence's attention reads")
    ap.add_argument("--carveout", default="0,16,32")
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    dev, dt = torch.device("cuda"), torch.bfloat16
    H, FF, heads, kv, D = 4096, 14336, 32, 8, 128
    x = torch.randn(a.rows, H, device=dev, dtype=dt)
    w = torch.randn(FF, H, device=dev, dtype=dt) / H**0.5
    q = torch.randn(a.rows, heads, 1, D, device=dev, dtype=dt)
    k = torch.randn(a.rows, kv, a.context, D, device=dev, dtype=dt)
    v = torch.randn_like(k)
    layers = 8  # a few layers' worth of each, so each stream's work outlasts the other's launch

    def mm() -> None:
        for _ in range(layers):
            F.linear(x, w)

    def attn() -> None:
        for _ in range(layers):
            F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    side = torch.cuda.Stream()

    def both() -> None:
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            attn()
        mm()
        torch.cuda.current_stream().wait_stream(side)

    setter = getattr(torch._C, "_set_sm_carveout_experimental", None)
    for carve in (int(c) for c in a.carveout.split(",")):
        if carve and setter is None:
            print(json.dumps({"carveout": carve, "skipped": "this torch has no _set_sm_carveout_experimental"}))
            continue
        if setter is not None:
            setter(carve if carve else None)
        t_mm, t_attn = device_ms(mm, a.reps, 1), device_ms(attn, a.reps, 1)
        t_seq = device_ms(lambda: (mm(), attn()), a.reps, 1)
        t_both = device_ms(both, a.reps, 1)
        kv_gb = 2 * k.numel() * k.element_size() * layers / 1e9
        print(json.dumps({
            "carveout": carve, "matmuls_ms": round(t_mm, 3), "attention_ms": round(t_attn, 3),
            "one_stream_ms": round(t_seq, 3), "two_streams_ms": round(t_both, 3),
            "overlap": round(t_both / (t_mm + t_attn), 3), "perfect": round(max(t_mm, t_attn) / (t_mm + t_attn), 3),
            "attention_tb_s": round(kv_gb / t_attn, 2),
        }))  # fmt: skip
    if setter is not None:
        setter(None)


if __name__ == "__main__":
    main()
