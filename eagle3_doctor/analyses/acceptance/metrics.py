"""Every engine's acceptance figures from one list of verify passes, and the chain walk that makes the passes."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from ..results import ChainMetrics


def metrics_from_passes(accepted: Sequence[int], drafted: Sequence[int], num_steps: int) -> ChainMetrics:
    """Every engine's acceptance numbers from one list of verify passes.

    accepted[i]: draft tokens accepted in pass i (bonus excluded); drafted[i]: tokens proposed.
    - vLLM (v1/spec_decode/metrics.py): mean acceptance length = 1 + accepted/num_drafts;
      draft acceptance rate = accepted/num_draft_tokens; per-position rate k = #(A >= k)/num_drafts.
    - SGLang: accept_length = (accepted + passes)/passes (bonus included); accept_rate =
      (accept_tokens - forward_ct) / (forward_ct * (num_draft_tokens - 1)) = accepted/(passes*K).
    """
    acc = np.asarray(accepted, dtype=np.int64)
    drf = np.asarray(drafted, dtype=np.int64)
    n = int(acc.size)
    if n == 0:
        return ChainMetrics()
    total = int(acc.sum())
    per_pos = [float((acc >= k).sum() / n) for k in range(1, num_steps + 1)]
    cond = []
    for k in range(1, num_steps + 1):
        reach = int((acc >= k - 1).sum() if k > 1 else n)
        cond.append(float((acc >= k).sum() / reach) if reach else float("nan"))
    hist = np.bincount(acc, minlength=num_steps + 1).tolist()
    return ChainMetrics(
        passes=n,
        accepted_tokens=total,
        drafted_tokens=int(drf.sum()),
        mean_acceptance_length=1.0 + total / n,
        mean_accepted_without_bonus=total / n,
        draft_acceptance_rate=total / max(int(drf.sum()), 1),
        sglang_accept_length=(total + n) / n,
        sglang_accept_rate=total / (n * num_steps),
        per_position_rate=per_pos,
        conditional_rate=cond,
        accepted_length_histogram=hist,
    )


def tau_from_acc(acc_k: Sequence[float]) -> float:
    """tau = 1 + sum_k prod_{i<=k} acc_i (the bridge from SpecForge acc_k to acceptance length)."""
    tau, prod = 1.0, 1.0
    for a in acc_k:
        if math.isnan(a):  # no position reached step k: nothing past it was measured (as stats' tau reads it)
            break
        prod *= a
        tau += prod
    return tau


def leading_ones(match: torch.Tensor) -> torch.Tensor:
    """match [..., K] bool -> number of leading True along the last dim."""
    return match.long().cumprod(dim=-1).sum(dim=-1)


def _leading_ones_np(match: np.ndarray) -> np.ndarray:
    """:func:`leading_ones` in numpy: match [..., K] bool -> leading True count along the last dim."""
    return np.cumprod(match, axis=-1, dtype=np.int64).sum(axis=-1)


def walk_chain(A: np.ndarray, drafted: np.ndarray, start: int, stop: int) -> tuple[list[int], list[int], list[int]]:
    """Bases visited by a decode loop: t -> t + A(t) + 1 from ``start`` while a draft is possible.

    A, drafted: per-base accepted / proposable counts (indexed by base t). Returns (bases, A, K_eff).
    """
    bases, acc, drf = [], [], []
    t = start
    while t < stop and drafted[t] > 0:
        bases.append(t)
        acc.append(int(A[t]))
        drf.append(int(drafted[t]))
        t += int(A[t]) + 1
    return bases, acc, drf
