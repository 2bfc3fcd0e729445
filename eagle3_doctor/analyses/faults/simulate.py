"""The draft's sequential decode loop over the target's recorded features, with one runtime fault applied.

Greedy verification accepts a draft token only where it equals the target's own greedy token, so the served
sequence is the target's greedy continuation whatever the draft proposes: one replay of the target over that
continuation records every feature row the loop will ever read, and the loop runs the draft alone. A pass at base
t (the target's rows of x_0..x_t known, x_{t+1} the last bonus token): the draft catches up over the positions
verified since its last pass, proposes K tokens greedily (one cached step each after the first), the target's
tokens x_{t+2..} verify them, the matching prefix and one bonus token are kept. This is the loop of
:func:`eagle3_doctor.analyses.spec_loop.speculative_decode` and :func:`eagle3_doctor.analyses.acceptance.reference.
reference_loop`, with the fault's hooks (``classes.py``) at fixed points; those two stay the fault-free
references the tests plant faults into independently.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ...draft.model import DraftAttention, Eagle3Draft
from .classes import FaultClass


@dataclass
class Trace:
    """One prompt along the target's greedy continuation: its feature rows [N, F] and tokens x_0..x_{N-1}."""

    rows: torch.Tensor
    tokens: list[int]
    start: int  # the first base: the prompt's last position


@dataclass
class Passes:
    """What one prompt's loop counted: draft tokens accepted (bonus excluded) and proposed, per verify pass."""

    accepted: list[int] = field(default_factory=list)
    drafted: list[int] = field(default_factory=list)


class _Cache:
    """Every layer's draft keys and values [1, nkv, S, d] in write order (slot i = the i-th input written)."""

    def __init__(self, layers: int):
        self.k: list[torch.Tensor | None] = [None] * layers
        self.v: list[torch.Tensor | None] = [None] * layers

    @property
    def length(self) -> int:
        k0 = self.k[0]
        return 0 if k0 is None else int(k0.shape[2])

    def write(self, i: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ki, vi = self.k[i], self.v[i]
        self.k[i] = k if ki is None else torch.cat([ki, k], dim=2)
        self.v[i] = v if vi is None else torch.cat([vi, v], dim=2)
        return self.k[i], self.v[i]  # type: ignore[return-value]  # both just set

    def crop(self, n: int) -> None:
        self.k = [None if x is None else x[:, :, :n] for x in self.k]
        self.v = [None if x is None else x[:, :, :n] for x in self.v]


class _Draft:
    """The draft's forward over the loop's cache, with the fault's cache read."""

    def __init__(self, draft: Eagle3Draft, fault: FaultClass | None):
        self.draft, self.fault = draft, fault
        self.cache = _Cache(1 + len(draft.later_layers()))

    def forward(self, h: torch.Tensor, ids: list[int], positions: list[int]) -> torch.Tensor:
        """h [1, n, H] (projected rows or fed-back states) with their tokens at ``positions`` -> states [1, n, H]."""
        dev = h.device
        pos = torch.tensor([positions], device=dev)
        read = self.fault.kv_read if self.fault is not None else None

        def attend(i: int, attn: DraftAttention, x: torch.Tensor) -> torch.Tensor:
            q, k, v = attn.qkv(x, pos, self.draft.inv_freq)
            S = _length(self.cache.k[i])
            K, V = self.cache.write(i, k, v)
            if read is not None:
                K, V = read(K), read(V)
            n = x.shape[1]
            mask = torch.ones(n, S + n, dtype=torch.bool, device=dev).tril(diagonal=S)
            return attn.attend(q, K, V, mask)

        return self.draft.through_layers(h, torch.tensor([ids], device=dev), attend)

    def propose(self, state: torch.Tensor) -> int:
        return int(self.draft.to_target_ids(self.draft.logits(state).argmax(-1))[0, -1])


def _length(k: torch.Tensor | None) -> int:
    return 0 if k is None else int(k.shape[2])


@torch.inference_mode()
def simulate(draft: Eagle3Draft, trace: Trace, other: Trace, num_steps: int, fault: FaultClass | None) -> Passes:
    """One prompt's greedy chain decode with ``fault`` (None: as the draft runs fault-free). ``other``: another
    prompt of the same run, whose rows a wrong-sequence gather reads."""
    rows = trace.rows if fault is None or fault.features is None else fault.features(trace.rows, other.rows)
    toks, N = trace.tokens, len(trace.tokens)
    rollback = fault is None or fault.rollback
    d = _Draft(draft, fault)
    out = Passes()
    t = trace.start
    # the first position the draft is given: 0, or the prompt's last one where the prefill never reached it
    seen = 0 if fault is None or fault.prompt_context else t
    state: torch.Tensor | None = None
    while True:
        k_eff = min(num_steps, N - 2 - t)
        if k_eff <= 0:
            break
        # catch-up over the positions verified since the last pass: rows of x_seen..x_t, tokens x_{seen+1..t+1}
        if fault is not None and not fault.catch_up and out.accepted:  # after the prefill: the newest one only
            seen = t
        span = list(range(seen, t + 1))
        at = span if rollback else [d.cache.length + i for i in range(len(span))]
        state = d.forward(draft.project_aux(rows[seen : t + 1][None]), toks[seen + 1 : t + 2], at)[:, -1:]
        base_len = d.cache.length
        props = [d.propose(state)]
        h = state
        for j in range(2, k_eff + 1):
            pos = t + j - 1 if rollback else d.cache.length
            if fault is not None and fault.step_position is not None:
                pos = fault.step_position(t, j)
            h = d.forward(h, [props[-1]], [pos])
            props.append(d.propose(h))
        a = 0
        while a < k_eff and props[a] == toks[t + 2 + a]:  # step a + 1 proposes x_{t+2+a}
            a += 1
        out.accepted.append(a)
        out.drafted.append(k_eff)
        if rollback:
            d.cache.crop(base_len)
        seen, t = t + 1, t + a + 1
    return out
