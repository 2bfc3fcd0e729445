"""A real speculative decode loop (greedy chain), timed: what the speedup prediction is checked against.

Unlike :func:`acceptance.reference_loop` (which re-runs the target over the whole sequence every pass,
simple over fast), this loop runs as an engine does: the target with a KV cache (one verify forward
of 1 + K tokens per pass, the rejected tail cropped off), the draft with its own KV cache (one extend
over the newly verified positions, then K-1 single-token steps). Greedy verification makes it exact:
its output is the target's greedy continuation token for token, which :func:`plain_decode` (the same
cached target, one token per forward) produces as the baseline, timed the same way.

Batch 1: sequences of one batch accept different lengths, and this loop keeps no ragged state.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from ..draft.model import DraftCache, Eagle3Draft
from ..model.decode import CachedTarget


@dataclass
class LoopRun:
    """One prompt through a decode loop: its tokens and what the loop counted."""

    tokens: list[int]
    passes: int  # target forwards after the prefill (verify passes; decode steps for plain decoding)
    draft_steps: int = 0  # draft forwards (each extend and each single-token step)
    accepted: list[int] = field(default_factory=list)  # draft tokens accepted per verify pass (bonus excluded)
    seconds: float = 0.0  # wall time after the prefill, synchronised

    @property
    def new_tokens(self) -> int:
        return sum(a + 1 for a in self.accepted) if self.accepted else self.passes


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _propose(draft: Eagle3Draft, h: torch.Tensor, cache: DraftCache, t: int, k: int) -> tuple[list[int], int]:
    """K greedy draft tokens from the state h [1, 1, H] at base t; returns (tokens, draft forwards run)."""
    dev = h.device
    props: list[int] = []
    steps = 0
    for j in range(1, k + 1):
        d = int(draft.to_target_ids(draft.logits(h).argmax(-1))[0, 0])
        props.append(d)
        if j == k:
            break
        h = draft.extend(h, torch.tensor([[d]], device=dev), torch.tensor([[t + j]], device=dev), cache, from_aux=False)
        steps += 1
    return props, steps


@torch.inference_mode()
def speculative_decode(
    target: CachedTarget, draft: Eagle3Draft, prompt: Sequence[int], total_len: int, num_steps: int
) -> LoopRun:
    """Greedy chain speculative decoding of ``prompt`` until ``total_len`` tokens exist.

    Base t: the target's features of x_0..x_t are known and x_{t+1} (the last bonus) is the newest
    token; the draft cache holds positions 0..t. A pass proposes d_1..d_k (k = min(K, tokens left)),
    verifies [x_{t+1}, d_1..d_k] in one target forward, keeps the matching prefix d_1..d_a and the
    target's token after it (the bonus), then extends the draft over positions t+1..t+1+a.
    """
    dev = target.target.device
    target.reset()
    aux, amax = target.forward(torch.tensor([list(prompt)], device=dev), last_only=True)
    seq = [*prompt, int(amax[0, -1])]
    _sync(dev)
    t0 = time.perf_counter()
    cache = DraftCache()
    n = len(prompt)
    h = draft.extend(aux, torch.tensor([seq[1:]], device=dev), torch.arange(n, device=dev)[None], cache, from_aux=True)[:, -1:]
    run = LoopRun([], 0, 1)
    while len(seq) < total_len:
        t = len(seq) - 2
        props, steps = _propose(draft, h, cache, t, min(num_steps, total_len - len(seq)))
        aux, amax = target.forward(torch.tensor([[seq[-1], *props]], device=dev))
        got = amax[0].tolist()  # got[j]: the target's token after [x_{t+1}, d_1..d_j]
        a = 0
        while a < len(props) and props[a] == got[a]:
            a += 1
        run.passes, run.draft_steps = run.passes + 1, run.draft_steps + steps
        run.accepted.append(a)
        seq += props[:a]
        target.crop(t + 2 + a)
        cache.crop(t + 1)
        if len(seq) >= total_len:
            break
        seq.append(got[a])
        ids = torch.tensor([seq[t + 2 : t + 3 + a]], device=dev)
        pos = torch.arange(t + 1, t + 2 + a, device=dev)[None]
        h = draft.extend(aux[:, : a + 1], ids, pos, cache, from_aux=True)[:, -1:]
        run.draft_steps += 1
    _sync(dev)
    run.seconds = time.perf_counter() - t0
    run.tokens = seq[:total_len]
    return run


@torch.inference_mode()
def plain_decode(target: CachedTarget, prompt: Sequence[int], total_len: int) -> LoopRun:
    """Greedy decoding one token per cached target forward: the baseline a speedup is measured against."""
    dev = target.target.device
    target.reset()
    _, amax = target.forward(torch.tensor([list(prompt)], device=dev), last_only=True)
    seq = [*prompt, int(amax[0, -1])]
    _sync(dev)
    t0 = time.perf_counter()
    steps = 0
    while len(seq) < total_len:
        _, amax = target.forward(torch.tensor([[seq[-1]]], device=dev))
        seq.append(int(amax[0, -1]))
        steps += 1
    _sync(dev)
    return LoopRun(seq[:total_len], steps, seconds=time.perf_counter() - t0)
