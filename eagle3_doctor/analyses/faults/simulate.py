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

The prompts run side by side, one batch row each, pass i of every prompt in one forward: each row keeps its own
base, cache length and positions, so a row's passes are those it would make alone (a row whose decode ended idles
until the others end). Run one prompt at a time, the loop's per-token forwards of a small draft cost their call
overhead, not their arithmetic; side by side that overhead is paid once a pass for the whole batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from ...draft.model import DraftAttention, Eagle3Draft
from .classes import FaultClass

if TYPE_CHECKING:
    from ...core.taps import FeatureSpec
    from ...model.replay import Recorded
    from ...model.target import Target


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
    """Every layer's draft keys and values [B, nkv, capacity, d]; row b holds its first ``length[b]`` slots in
    write order (slot i = the i-th input that row wrote), the rest is free or junk past the row's end."""

    def __init__(self, layers: int, rows: int, capacity: int):
        self.k: list[torch.Tensor | None] = [None] * layers
        self.v: list[torch.Tensor | None] = [None] * layers
        self.length = [0] * rows
        self.capacity = capacity

    def write(self, i: int, k: torch.Tensor, v: torch.Tensor, at: torch.Tensor) -> int:
        """Layer i's new keys and values [B, nkv, n, d] into slots ``at`` [B, n]; returns the slots worth reading."""
        if self.k[i] is None:
            B, nkv, _, d = k.shape
            self.k[i] = k.new_zeros(B, nkv, self.capacity, d)
            self.v[i] = v.new_zeros(B, nkv, self.capacity, d)
        idx = at[:, None, :, None].expand(-1, k.shape[1], -1, k.shape[3])
        self.k[i].scatter_(2, idx, k)  # type: ignore[union-attr]  # allocated above
        self.v[i].scatter_(2, idx, v)  # type: ignore[union-attr]
        return int(at.max()) + 1


class _Draft:
    """The draft's forward over the loop's cache, with the fault's cache read, every row at once."""

    def __init__(self, draft: Eagle3Draft, fault: FaultClass | None, rows: int, capacity: int):
        self.draft, self.fault = draft, fault
        self.cache = _Cache(1 + len(draft.later_layers()), rows, capacity)

    def forward(self, h: torch.Tensor, ids: list[list[int]], positions: list[list[int]], n: list[int]) -> torch.Tensor:
        """h [B, m, H] (projected rows or fed-back states), row b's first ``n[b]`` real, with their tokens at
        ``positions`` -> states [B, m, H]; each row's real inputs are written after its cache, its padding past
        them (never read: the next write starts where the real inputs end)."""
        dev, m = h.device, h.shape[1]
        pos = torch.tensor(positions, device=dev)
        start = torch.tensor(self.cache.length, device=dev)
        at = start[:, None] + torch.arange(m, device=dev)[None]  # [B, m]
        # query j of row b sees its row's slots up to its own
        mask = (torch.arange(self.cache.capacity, device=dev)[None, None] <= at[:, :, None])[:, None]
        read = self.fault.kv_read if self.fault is not None else None

        def attend(i: int, attn: DraftAttention, x: torch.Tensor) -> torch.Tensor:
            q, k, v = attn.qkv(x, pos, self.draft.inv_freq)
            S = self.cache.write(i, k, v, at)
            K, V = self.cache.k[i][:, :, :S], self.cache.v[i][:, :, :S]  # type: ignore[index]  # written above
            if read is not None:
                K, V = read(K), read(V)
            return attn.attend(q, K, V, mask[..., :S])

        out = self.draft.through_layers(h, torch.tensor(ids, device=dev), attend)
        self.cache.length = [L + k for L, k in zip(self.cache.length, n)]
        return out

    def propose(self, state: torch.Tensor) -> list[int]:
        """state [B, 1, H] -> each row's greedy proposal (a target id)."""
        return self.draft.to_target_ids(self.draft.logits(state).argmax(-1))[:, 0].tolist()


@dataclass
class _Row:
    """One prompt's place in the loop."""

    rows: torch.Tensor  # its feature rows as the fault feeds them
    toks: list[int]
    t: int  # the pass's base
    seen: int  # the first position the next catch-up covers
    out: Passes = field(default_factory=Passes)

    def k_eff(self, num_steps: int) -> int:
        return min(num_steps, len(self.toks) - 2 - self.t)


def _pad(seqs: list[list[int]]) -> list[list[int]]:
    m = max(len(s) for s in seqs)
    return [s + [s[-1] if s else 0] * (m - len(s)) for s in seqs]


@torch.inference_mode()
def simulate(draft: Eagle3Draft, traces: list[Trace], others: list[Trace], num_steps: int, fault: FaultClass | None
             ) -> list[Passes]:  # fmt: skip
    """Every prompt's greedy chain decode with ``fault`` (None: as the draft runs fault-free), side by side.
    ``others[b]``: another prompt of the same run, whose rows a wrong-sequence gather reads for prompt b."""
    feed = fault.features if fault is not None else None
    rollback = fault is None or fault.rollback
    # the first position the draft is given: 0, or the prompt's last one where the prefill never reached it
    ctx = fault is None or fault.prompt_context
    rows = [_Row(feed(tr.rows, o.rows) if feed is not None else tr.rows, tr.tokens, tr.start, 0 if ctx else tr.start)
            for tr, o in zip(traces, others)]  # fmt: skip
    N = max(len(r.toks) for r in rows)
    # the slots a row can reach, its padding included: each position once and, without rollback, every proposal
    # step kept; then one padded write (at most N inputs) past its end
    d = _Draft(draft, fault, len(rows), 2 * N + num_steps if rollback else N * (num_steps + 2))
    while True:
        ks = [r.k_eff(num_steps) for r in rows]
        if max(ks) <= 0:
            break
        h = _catch_up(d, rows, ks, fault, rollback)
        base_len = list(d.cache.length)
        props = _propose(d, rows, ks, h, fault, rollback)
        for r, k, pr in zip(rows, ks, props):
            if k <= 0:
                continue
            a = 0
            while a < k and pr[a] == r.toks[r.t + 2 + a]:  # step a + 1 proposes x_{t+2+a}
                a += 1
            r.out.accepted.append(a)
            r.out.drafted.append(k)
            r.seen, r.t = r.t + 1, r.t + a + 1
        if rollback:
            d.cache.length = base_len
    return [r.out for r in rows]


def _catch_up(d: _Draft, rows: list[_Row], ks: list[int], fault: FaultClass | None, rollback: bool) -> torch.Tensor:
    """Every row's catch-up over the positions verified since its last pass (rows of x_seen..x_t, tokens
    x_{seen+1..t+1}); returns each row's last state [B, 1, H] (a finished row's is padding)."""
    spans: list[list[int]] = []
    for r, k in zip(rows, ks):
        if fault is not None and not fault.catch_up and r.out.accepted:  # after the prefill: the newest one only
            r.seen = r.t
        spans.append(list(range(r.seen, r.t + 1)) if k > 0 else [])
    n = [len(s) for s in spans]
    m = max(n)
    feats = torch.stack([_rows_at(r.rows, s, m) for r, s in zip(rows, spans)])
    ids = _pad([[r.toks[p + 1] for p in s] for r, s in zip(rows, spans)])
    at = _pad([s if rollback else [L + i for i in range(len(s))] for s, L in zip(spans, d.cache.length)])
    states = d.forward(d.draft.project_aux(feats), ids, at, n)
    last = torch.tensor([max(x - 1, 0) for x in n], device=states.device)
    return states[torch.arange(len(rows)), last][:, None]


def _propose(d: _Draft, rows: list[_Row], ks: list[int], h: torch.Tensor, fault: FaultClass | None, rollback: bool
             ) -> list[list[int]]:  # fmt: skip
    """Each row's k greedy proposals from its catch-up state h [B, 1, H], one cached step each after the first."""
    props = [[p] for p in d.propose(h)]
    for j in range(2, max(ks) + 1):
        live = [k >= j for k in ks]
        pos = []
        for r, L in zip(rows, d.cache.length):
            p = r.t + j - 1 if rollback else L
            if fault is not None and fault.step_position is not None:
                p = fault.step_position(r.t, j)
            pos.append([p])
        h = d.forward(h, [[pr[-1]] for pr in props], pos, [int(x) for x in live])
        for pr, p, ok in zip(props, d.propose(h), live):
            if ok:
                pr.append(p)
    return props


def _rows_at(rows: torch.Tensor, span: list[int], m: int) -> torch.Tensor:
    """rows[span] padded to m rows with zeros (a padded input's state is never read)."""
    got = rows[span] if span else rows[:0]
    return torch.cat([got, got.new_zeros(m - got.shape[0], got.shape[1])]) if got.shape[0] < m else got


def traces(
    target: Target, seqs: list[list[int]], starts: list[int], spec: FeatureSpec, batch_size: int, recorded: Recorded | None = None
) -> list[Trace]:
    """Every sequence's rows for ``spec`` (its capture points concatenated) from one replay of the target, or read
    from ``recorded`` (model/recorded.py: the decode that generated ``seqs``) where it holds them."""
    import torch

    from ...model.replay import iter_captures

    out: list[Trace | None] = [None] * len(seqs)
    for rb in iter_captures(target, seqs, spec, batch_size=batch_size, recorded=recorded):
        aux = torch.cat([rb.captured[p] for p in spec], dim=-1)
        for b, i in enumerate(rb.index):
            out[i] = Trace(aux[b, : len(seqs[i])].clone(), list(seqs[i]), starts[i])
    assert all(t is not None for t in out)  # every sequence is in one batch
    return [t for t in out if t is not None]


def simulate_all(
    draft: Eagle3Draft, runs: list[Trace], num_steps: int, fault: FaultClass | None, batch_size: int
) -> list[list[int]]:
    """Draft tokens accepted per pass, per prompt, ``batch_size`` prompts side by side; a wrong-sequence gather
    reads the next prompt's rows."""
    n, out = len(runs), []
    for a in range(0, n, batch_size):
        idx = range(a, min(a + batch_size, n))
        got = simulate(draft, [runs[i] for i in idx], [runs[(i + 1) % n] for i in idx], num_steps, fault)
        out += [p.accepted for p in got]
    return out
