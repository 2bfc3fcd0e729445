"""Counts for one feature path across a run's batches, and the path's figures from them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..results import PathResult, PositionBucket, RequestCounts, TemperatureFigures
from .estimator import StepOutputs
from .metrics import _leading_ones_np, metrics_from_passes, tau_from_acc, walk_chain


@dataclass
class PathAccumulator:
    """Counts for one feature path across all batches."""

    name: str
    num_steps: int
    bucket: int = 64
    passes_acc: list[int] = field(default_factory=list)
    passes_drf: list[int] = field(default_factory=list)
    per_request: list[float] = field(default_factory=list)  # mean acceptance length of each sequence
    per_request_passes: list[tuple[list[int], list[int]]] = field(default_factory=list)
    per_request_step1: list[tuple[int, int]] = field(default_factory=list)  # (hits, positions) per sequence
    hits: np.ndarray | None = None
    totals: np.ndarray | None = None
    pos_hits: dict[int, list[int]] = field(default_factory=dict)  # bucket -> [hits, total] for step 1
    tree_acc: list[int] = field(default_factory=list)
    tree_drf: list[int] = field(default_factory=list)
    tree_per_request: list[list[int]] = field(default_factory=list)
    alpha_prod_sum: np.ndarray | None = None
    alpha_n: int = 0
    per_request_hits: list[tuple[list[int], list[int]]] = field(default_factory=list)  # acc_k (hits, positions) per request

    def add(self, out: StepOutputs, starts: Sequence[int], lengths: Sequence[int], walk: bool) -> None:
        # numpy, not torch, for this bookkeeping: torch's CPU reductions over these small bool
        # tensors cost ~0.1 s a batch (bench/RESULTS.md), as much as the draft's own 7 steps
        m, v = out.match.cpu().numpy(), out.valid.cpu().numpy()  # [B, K, T] bool
        # count only bases a decode would reach: t >= start (the prompt's last position in greedy mode)
        B, _, T = m.shape
        t_idx = np.arange(T)
        region = t_idx[None, :] >= np.asarray(list(starts))[:, None]  # [B, T]
        mv = v & region[:, None]
        h = (m & mv).sum(axis=(0, 2))
        n = mv.sum(axis=(0, 2))
        self.hits = h if self.hits is None else self.hits + h
        self.totals = n if self.totals is None else self.totals + n
        # per request too: the bootstrap over prompts resamples these (eagle3_doctor.core.stats)
        hb = (m & mv).sum(axis=2).tolist()
        nb = mv.sum(axis=2).tolist()
        self.per_request_hits += list(zip(hb, nb))
        self._add_step1(m[:, 0] & region, v[:, 0] & region)
        A = _leading_ones_np(m.transpose(0, 2, 1))  # [B, T]
        drafted = v.sum(axis=1)  # [B, T] = min(K, len-2-t) for real bases
        tree: np.ndarray | None
        if out.tree_accepted is not None:  # exact, for the engine's own tree (tree.py)
            tree = out.tree_accepted.cpu().numpy()
        else:
            tree = _leading_ones_np(out.topk_hit.cpu().numpy().transpose(0, 2, 1)) if out.topk_hit is not None else None
        for b in range(B):
            if walk:
                _, acc, drf = walk_chain(A[b], drafted[b], starts[b], lengths[b] - 1)
                if tree is not None:
                    _, tacc, tdrf = walk_chain(tree[b], drafted[b], starts[b], lengths[b] - 1)
                    self.tree_acc += tacc
                    self.tree_drf += tdrf
                    self.tree_per_request.append(tacc)
            else:
                # text mode: every base is a pass (acceptance against the target's argmax along the text)
                sel = np.nonzero(drafted[b, starts[b] : lengths[b] - 1] > 0)[0] + starts[b]
                acc, drf = A[b, sel].tolist(), drafted[b, sel].tolist()
                if tree is not None:
                    self.tree_acc += tree[b, sel].tolist()
                    self.tree_drf += drf
            self.passes_acc += acc
            self.passes_drf += drf
            self.per_request_passes.append((acc, drf))
            if acc:
                self.per_request.append(1 + sum(acc) / len(acc))
        if out.alpha is not None:
            al = out.alpha.cpu().double().numpy()  # [B, K, T]
            prod = np.cumprod(al, axis=1)  # P(first k accepted) along the teacher-forced path
            base = v[:, 0] & region
            s = (prod * base[:, None]).sum(axis=(0, 2))
            self.alpha_prod_sum = s if self.alpha_prod_sum is None else self.alpha_prod_sum + s
            self.alpha_n += int(base.sum())

    def _add_step1(self, step1: np.ndarray, valid1: np.ndarray) -> None:
        """Step-1 hits [B, T] per sequence, and by position bucket (accuracy as the context grows)."""
        for b in range(step1.shape[0]):
            self.per_request_step1.append((int(step1[b].sum()), int(valid1[b].sum())))
            ts = np.nonzero(valid1[b])[0]
            if ts.size == 0:
                continue
            bk = ts // self.bucket
            keys, tot = np.unique(bk, return_counts=True)
            hit = np.bincount(bk, weights=step1[b, ts])[keys]
            for key, hh, nn in zip(keys.tolist(), hit.tolist(), tot.tolist()):
                cur = self.pos_hits.setdefault(key, [0, 0])
                cur[0] += int(hh)
                cur[1] += nn

    def result(self) -> PathResult:
        """The path's figures, per-prompt lists still in replay order (see :func:`path_results`)."""
        K = self.num_steps
        if self.hits is not None and self.totals is not None:
            hits, totals = self.hits, self.totals
        else:  # no batch added
            hits = totals = np.zeros(0, dtype=np.int64)
        acc_k = [float(h / n) if n else float("nan") for h, n in zip(hits, totals)]
        tree = None
        if self.tree_acc:
            tree = metrics_from_passes(self.tree_acc, self.tree_drf, K)
            tree.accepted_lengths = self.tree_per_request or None
        temperature = None
        if self.alpha_prod_sum is not None and self.alpha_n:
            rates = (self.alpha_prod_sum / self.alpha_n).tolist()
            temperature = TemperatureFigures(rates, 1 + float(sum(rates)))
        return PathResult(
            name=self.name,
            acc_k=acc_k,
            acc_k_positions=[int(n) for n in totals],
            tau=tau_from_acc(acc_k),
            chain=metrics_from_passes(self.passes_acc, self.passes_drf, K),
            step1_by_position=[
                PositionBucket(b * self.bucket, (b + 1) * self.bucket - 1, h / n, n)
                for b, (h, n) in sorted(self.pos_hits.items())
                if n
            ],
            per_request_mean_acceptance_length=float(np.mean(self.per_request)) if self.per_request else float("nan"),
            accepted_lengths=[a for a, _ in self.per_request_passes],
            acc_k_by_request=[RequestCounts(h, n) for h, n in self.per_request_hits],
            step1_counts=[list(x) for x in self.per_request_step1],
            tree=tree,
            temperature=temperature,
        )
