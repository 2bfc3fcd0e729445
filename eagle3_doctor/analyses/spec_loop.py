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

from ..draft.decode import DraftDecoder
from ..model.decode import CachedTarget


@dataclass
class LoopRun:
    """One prompt through a decode loop: its tokens and what the loop counted."""

    tokens: list[int]
    passes: int  # target forwards after the prefill (verify passes; decode steps for plain decoding)
    draft_steps: int = 0  # draft forwards (each extend and each single-token step)
    accepted: list[int] = field(default_factory=list)  # draft tokens accepted per verify pass (bonus excluded)
    seconds: float = 0.0  # wall time after the prefill, synchronised
    draft_seconds: float = 0.0  # of which in the draft: each pass's catch-up and proposals
    verify_seconds: float = 0.0  # of which in the target's verify forwards (the rest: the loop's bookkeeping)

    @property
    def new_tokens(self) -> int:
        return sum(a + 1 for a in self.accepted) if self.accepted else self.passes


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


# The loop's three operations, each a function the cost probe (``cost_probe.probe_costs``) times as it is:
# the prediction then sums the costs of the very code the loop runs, host reads and tensor building
# included, instead of a model of it.


def catch_up(
    draft: DraftDecoder, aux: torch.Tensor, ids: Sequence[Sequence[int]], start: int, *, once: bool = False
) -> torch.Tensor:
    """The draft's extend over newly verified positions start..start+n-1, from the target's features
    aux [B, n, ...] paired with the tokens after them ids [B][n]; ``once``: a prompt's (eager)."""
    draft.crop(start)
    return draft.catch_up(aux, torch.tensor([list(r) for r in ids], device=aux.device), once=once)


def propose(draft: DraftDecoder, h: torch.Tensor, k: int) -> list[list[int]]:
    """Each row's K greedy chain proposals (target ids) after its last state h [B, n, H], on the host
    (the loop must read them to verify them): K - 1 draft steps, one read."""
    return draft.propose(h[:, -1:], k).tolist()


def verify(target: CachedTarget, rows: Sequence[Sequence[int]]) -> tuple[torch.Tensor, list[list[int]]]:
    """One target forward over each row's new tokens: (their features, the target's token after each)."""
    aux, amax = target.forward(torch.tensor([list(r) for r in rows], device=target.target.device))
    return aux, amax.tolist()


@torch.inference_mode()
def speculative_decode(
    target: CachedTarget, draft: DraftDecoder, prompt: Sequence[int], total_len: int, num_steps: int
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
    h = catch_up(draft, aux, [seq[1:]], 0, once=True)
    run = LoopRun([], 0, 1)
    # the clock is read only where the loop reads the device anyway (each proposal and each verify), so
    # the split adds no sync: the draft's share includes the catch-up launched before it
    t1 = time.perf_counter()
    while len(seq) < total_len:
        t = len(seq) - 2
        k = min(num_steps, total_len - len(seq))
        props = propose(draft, h, k)[0]
        t2 = time.perf_counter()
        aux, rows = verify(target, [[seq[-1], *props]])
        t3 = time.perf_counter()
        run.draft_seconds, run.verify_seconds = run.draft_seconds + t2 - t1, run.verify_seconds + t3 - t2
        got = rows[0]  # got[j]: the target's token after [x_{t+1}, d_1..d_j]
        a = 0
        while a < len(props) and props[a] == got[a]:
            a += 1
        run.passes, run.draft_steps = run.passes + 1, run.draft_steps + k - 1
        run.accepted.append(a)
        seq += props[:a]
        target.crop(t + 2 + a)
        if len(seq) >= total_len:
            break
        seq.append(got[a])
        t1 = time.perf_counter()
        h = catch_up(draft, aux[:, : a + 1], [seq[t + 2 : t + 3 + a]], t + 1)
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
        _, rows = verify(target, [[seq[-1]]])
        seq.append(rows[0][0])
        steps += 1
    _sync(dev)
    return LoopRun(seq[:total_len], steps, seconds=time.perf_counter() - t0)
