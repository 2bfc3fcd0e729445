"""Step-1 accuracy by absolute position in the context, per prompt, and the first fall the prompts separate."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import torch

from ...core.stats import MIN_PROMPTS, Interval, paired
from ..acceptance.estimator import step1_outcomes, unroll_outcomes
from ..weights_fit import window_end
from .result import STEP1, ContextRow

if TYPE_CHECKING:
    from ...draft.model import Eagle3Draft
    from ...model.replay import ReplayBatch


CONTEXT_DROP = 0.15  # a fall in step-1 accuracy past a position that counts as a context finding
# an undecided fall this large (its interval reaching under CONTEXT_DROP, or measured on fewer than MIN_PROMPTS
# prompts) is a lead: the verdict is undetermined, not healthy. Smaller undecided falls are notes: on the fixtures'
# healthy pair at 16 prompts x 128 tokens the draft (trained on 128-token sequences) falls 0.157 [0.108, 0.202] past
# position 128, which more prompts would not lift beyond the 0.15 of a finding with any margin.
CONTEXT_LEAD = 0.25


AFTER = 2  # buckets compared with everything before a cut


class ContextCounts:
    """Per prompt, step-1 [hits, positions] in absolute-position buckets of the base path."""

    def __init__(self, bucket: int, n_prompts: int, window: int | None = None):
        """``window``: count only the first ``window`` positions from each sequence's start (None: every one)."""
        self.bucket = bucket
        self.counts: dict[int, np.ndarray] = {}
        self.n = n_prompts
        self.window = window

    def add(
        self,
        rb: ReplayBatch,
        draft: Eagle3Draft,
        aux: torch.Tensor,
        labels: Callable,
        starts: list[int],
        first: torch.Tensor | None = None,
    ) -> None:
        """Count step-1 hits at positions >= starts[row] of each sequence of the batch (the first :attr:`window` of
        them); ``first``: the draft's step-1 proposals an unroll of this batch already made
        (:attr:`StepOutputs.first`), so it is not run again. Within a window the draft runs on the batch cut after its
        last counted position and that position's label: the draft is causal, so step 1 there is the whole batch's (a
        mean-ablated module's mean is the cut batch's)."""
        lens, T = rb.batch.lengths, rb.tokens.shape[1]
        cut = T if self.window is None or first is not None else window_end(starts, T, self.window)
        if first is not None:
            out = step1_outcomes(first, labels, lens)
        elif cut == T:
            out = unroll_outcomes(draft, aux, rb.tokens, labels, lens, 1)
        else:
            lens = [min(n, cut) for n in lens]
            out = unroll_outcomes(draft, aux[:, :cut], rb.tokens[:, :cut], lambda k: labels(k)[:, :cut], lens, 1)
        match, valid = out.match[:, 0].cpu().numpy(), out.valid[:, 0].cpu().numpy()
        t = np.arange(match.shape[1])
        keep = valid & (t[None, :] >= np.asarray(starts)[:, None])
        if self.window is not None:
            keep &= t[None, :] < np.asarray(starts)[:, None] + self.window
        bucket, rows = t // self.bucket, np.asarray(rb.index)
        # a bucket at a time over the whole batch: a loop over each position in Python took seconds at 512 x 512
        for b in np.unique(bucket[keep.any(0)]):
            sel = keep & (bucket == b)[None, :]
            c = self.counts.setdefault(int(b), np.zeros((self.n, 2)))
            c[rows, 0] += (match & sel).sum(1)
            c[rows, 1] += sel.sum(1)

    def add_along(
        self, rb: ReplayBatch, draft: Eagle3Draft, aux: torch.Tensor, amax: torch.Tensor, first: torch.Tensor | None = None
    ) -> None:
        """Count step 1 at every position of each sequence, prompt included, against the target's own
        next-token choice ``amax`` there: the greedy continuation alone would leave the prompt unmeasured."""
        from ..acceptance.measurement import _labels_fn

        self.add(rb, draft, aux, _labels_fn(rb, amax, False), [0] * len(rb.index), first)

    def rows(self) -> list[ContextRow]:
        out = []
        for b in sorted(self.counts):
            c = self.counts[b][self.counts[b][:, 1] > 0]
            (iv,), _ = paired([c], STEP1, 0)
            out.append(ContextRow(b * self.bucket, (b + 1) * self.bucket - 1, iv, int(c[:, 1].sum())))
        return out

    def drop(self, min_prompts: int = MIN_PROMPTS) -> tuple[int, Interval, Interval] | None:
        """(first position, accuracy before, after - before) of the earliest fall the prompts separate.

        "After" is the window of the next AFTER buckets, not the rest of the sequence: a gradual decay
        over a long context would otherwise put the break at the first bucket (measured on the fixture
        draft, trained on 128-token sequences: 0.79 up to position 160, then 0.53, 0.45, ... 0.05)."""
        keys = sorted(self.counts)
        for cut in keys[1:]:
            zero = np.zeros((self.n, 2))  # the start: the counts' own shape and dtype (each sum has a term)
            before = sum((self.counts[b] for b in keys if b < cut), zero)
            after = sum((self.counts[b] for b in keys if cut <= b < cut + AFTER), zero)
            both = (before[:, 1] > 0) & (after[:, 1] > 0)
            if both.sum() < min_prompts:
                continue
            own, diff = paired([before[both], after[both]], STEP1, 0)
            if diff[1].hi < 0 and -diff[1].point >= CONTEXT_DROP:
                return cut * self.bucket, own[0], diff[1]
        return None
