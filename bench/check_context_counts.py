"""diagnose's step-1 counters at a run's size, host side alone: ``ContextCounts.add`` over batches of B sequences of T
positions with the draft's outcomes drawn at random (the unroll itself left out), the way diagnose calls it (the
context buckets of 32 positions and four step-1 counters of one bucket each), against the per-position walk it
replaced. Prints both times and whether the counts agree.

    PYTHONPATH=. python3 bench/check_context_counts.py [--sequences 512] [--positions 640] [--batch 64]
"""

from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

import numpy as np
import torch

from eagle3_doctor.analyses.acceptance.estimator import StepOutputs
from eagle3_doctor.analyses.attribution import context


def _walk(counts: context.ContextCounts, rb, match, valid, starts) -> None:
    """The per-position loop the counters ran until 2026-12-05."""
    for row, i in enumerate(rb.index):
        for t in np.nonzero(valid[row])[0]:
            if t < starts[row]:
                continue
            c = counts.counts.setdefault(int(t) // counts.bucket, np.zeros((counts.n, 2)))
            c[i] += (float(match[row, t]), 1.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sequences", type=int, default=512)
    ap.add_argument("--positions", type=int, default=640)
    ap.add_argument("--batch", type=int, default=64)
    a = ap.parse_args()
    g = torch.Generator().manual_seed(0)
    N, T, B = a.sequences, a.positions, a.batch
    batches = []
    for first in range(0, N, B):
        match, valid = torch.rand(B, 1, T, generator=g) < 0.5, torch.rand(B, 1, T, generator=g) < 0.95
        rb = SimpleNamespace(
            index=list(range(first, first + B)), tokens=torch.zeros(B, T), batch=SimpleNamespace(lengths=[T] * B)
        )
        batches.append((rb, match, valid, [60] * B))
    buckets = [32, 1 << 40, 1 << 40, 1 << 40, 1 << 40]  # the context, the unablated step 1, three ablations
    times, made = {}, {}
    for way in ("walk", "by bucket"):
        counters = [context.ContextCounts(b, N) for b in buckets]
        t0 = time.perf_counter()
        for rb, match, valid, starts in batches:
            for c in counters:
                if way == "walk":
                    _walk(c, rb, match[:, 0].numpy(), valid[:, 0].numpy(), starts)
                else:
                    context.unroll_outcomes = lambda *x, _m=match, _v=valid, **k: StepOutputs(_m, _v)
                    c.add(rb, None, None, None, starts)
        times[way] = round(time.perf_counter() - t0, 3)
        made[way] = counters
    same = all(
        w.counts.keys() == b.counts.keys() and all(np.array_equal(w.counts[k], b.counts[k]) for k in w.counts)
        for w, b in zip(made["walk"], made["by bucket"])
    )
    print({"sequences": N, "positions": T, "seconds": times, "counts equal": same})


if __name__ == "__main__":
    main()
