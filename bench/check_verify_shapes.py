"""Why a verify forward in the decode loop costs more than the same forward timed alone: one cache length
repeated, or a new length every run (as in a decode loop), with each SDPA backend allowed.

    PYTHONPATH=. python bench/check_verify_shapes.py     # GPU: the 8B shape of bench_speedup.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_speedup  # noqa: E402

from eagle3_doctor.analyses.spec_loop import verify  # noqa: E402
from eagle3_doctor.model.decode import CachedTarget  # noqa: E402
from eagle3_doctor.model.setup import Setup  # noqa: E402


class Args:
    quick, residual_scale, head_scale = False, 0.01, 1.0


def timed(ct: CachedTarget, n: int, grow: bool, runs: int = 24) -> float:
    base = ct.length
    out = []
    for _ in range(runs):
        start = ct.length
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        verify(ct, [[5] * n])
        torch.cuda.synchronize()
        out.append(time.perf_counter() - t0)
        ct.crop(start + 1 if grow else start)
    ct.crop(base)
    return 1000 * statistics.median(out[2:])


def main() -> None:
    model = bench_speedup.build_target(Args, "cuda", torch.bfloat16)
    setup = Setup.from_model(model, None, name="8B shape", device="cuda")
    ct = CachedTarget(setup.target, setup.serving.spec)
    ct.forward(torch.randint(0, 1000, (1, 128), device="cuda"), last_only=True)
    for cudnn in (True, False):
        torch.backends.cuda.enable_cudnn_sdp(cudnn)
        for n in (1, 2, 5, 9):
            fixed, grow = timed(ct, n, False), timed(ct, n, True)
            print(f"cudnn sdp {'on ' if cudnn else 'off'} n={n}: same length {fixed:.2f} ms, new length each run {grow:.2f} ms")


if __name__ == "__main__":
    main()
