"""The projections of one decoder layer as separate matrix multiplies against one over their rows concatenated
(q, k, v -> qkv; gate, up -> gate_up), on the GPU, at the row counts the commands run them at: a decode step's
batch, a prefill's tokens, the draft's positions. Prints each way's time, their ratio, and whether the fused
output's slices equal the separate outputs bit for bit.

    python3 bench/check_projections.py [--rows 512,1024,38144,65536] [--hidden 4096] [--ff 14336] [--heads 32,8]
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F


def device_ms(fn, reps: int = 20, warmup: int = 3) -> float:
    """Milliseconds a call of ``fn`` keeps the device busy, by CUDA events over ``reps`` calls after ``warmup``."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / reps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="512,1024,38144,65536")
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--ff", type=int, default=14336)
    ap.add_argument("--heads", default="32,8")
    ap.add_argument("--head-dim", type=int, default=128)
    a = ap.parse_args()
    H, FF, D = a.hidden, a.ff, a.head_dim
    nh, nkv = map(int, a.heads.split(","))
    dev, dt = torch.device("cuda"), torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(0)
    for k_in, what in ((H, "target layer"), (2 * H, "EAGLE-3 draft layer (q, k, v over [embed, h])")):
        sizes = {"qkv": [nh * D, nkv * D, nkv * D], "gate_up": [FF, FF]} if k_in == H else {"qkv": [nh * D, nkv * D, nkv * D]}
        for name, outs in sizes.items():
            kin = k_in if name == "qkv" else H
            fused = torch.randn(sum(outs), kin, generator=g, device=dev, dtype=dt) / kin**0.5
            parts = list(fused.split(outs))
            for M in map(int, a.rows.split(",")):
                x = torch.randn(M, kin, generator=g, device=dev, dtype=dt)
                sep = 1e3 * device_ms(lambda x=x, parts=parts: [F.linear(x, w) for w in parts])
                one = 1e3 * device_ms(lambda x=x, fused=fused: F.linear(x, fused))
                got = F.linear(x, fused).split(outs, dim=-1)
                equal = all(torch.equal(y, F.linear(x, w)) for y, w in zip(got, parts))
                flops = 2 * M * kin * sum(outs)
                print(f"{what:48s} {name:8s} rows {M:6d}: separate {sep:9.1f} us, one {one:9.1f} us, "
                      f"{sep / one:5.2f}x; {flops / one / 1e6:6.1f} TFLOP/s; equal bits {equal}")  # fmt: skip


if __name__ == "__main__":
    main()
