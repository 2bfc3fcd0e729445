"""acceptance on a P-EAGLE draft: its passes over the target's own greedy continuation, drafted the way it was
trained (K slots in one forward, at the taps its config names) and the way the engine runs it (in parallel, as an
EAGLE-3 chain, or with another mask token), checked against a sequential loop.

A pass starts where the target's last token x_a stands: the draft reads x_a with the taps at a - 1 (the EAGLE-3
pairing) and proposes K tokens; the target keeps the leading ones its greedy choice agrees with, plus its own next
token. The estimator drafts every pass of a sequence in one forward
(:meth:`~eagle3_doctor.draft.peagle.model.PEagleDraft.parallel`; a chain through the EAGLE-3 teacher-forced
unroll, exact for greedy chains) and walks the passes over it; the reference loop runs them one by one, a fresh
target forward for each verify (a chain through the draft's KV cache, step after step), and must give the same
passes and the same tokens as greedy decoding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..core.taps import FeatureSpec
from .passes import walk


@dataclass(frozen=True)
class Way:
    """One way of running the draft: ``mode`` parallel or chain, over taps ``spec``, K tokens a pass, the parallel
    slots' token and positions."""

    name: str
    mode: str
    spec: FeatureSpec
    k: int
    token: int | None
    positions: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "mode": self.mode, "spec": [str(p) for p in self.spec], "k": self.k,
                "mask_token_id": self.token, "positions": self.positions, "source": self.source}  # fmt: skip


def _paired(seq: torch.Tensor) -> torch.Tensor:
    """ids[t] = x_{t+1}, the token EAGLE-3 reads beside the taps at t (the last slot reads its own token: no pass uses it)."""
    return torch.cat([seq[1:], seq[-1:]])


def _accepted(prop: torch.Tensor, seq: torch.Tensor, anchors: torch.Tensor) -> list[int]:
    """Leading proposals equal to the sequence's next tokens: prop[i, d] proposes x_{anchors[i] + 1 + d}."""
    T, k = seq.shape[0], prop.shape[1]
    nxt = torch.full_like(prop, -1)
    for d in range(k):
        pos = anchors + 1 + d
        ok = pos < T
        nxt[ok, d] = seq[pos[ok]]
    return (prop == nxt).long().cumprod(-1).sum(-1).tolist()


@torch.inference_mode()
def accepts_at_every_anchor(pe: Any, way: Way, taps: torch.Tensor, seq: torch.Tensor, start: int) -> list[int]:
    """seq [T] one sequence (prompt + greedy continuation), taps [T, F] the way's taps: the tokens accepted at every
    anchor start..T-1."""
    T = seq.shape[0]
    anchors = torch.arange(start, T, device=seq.device)
    ids = _paired(seq)
    if way.mode == "parallel":
        run = pe if way.token in (None, pe.mask_token_id) else _with_token(pe, way.token)
        prop = run.parallel(taps, ids, anchors - 1, way.k, way.positions)
    else:
        d = pe.draft
        steps = [d.to_target_ids(d.logits(h).argmax(-1))[0] for h in d.unroll(taps[None], ids[None], way.k)]
        prop = torch.stack(steps, 1)[anchors - 1]
    return _accepted(prop, seq, anchors)


def _with_token(pe: Any, token: int) -> Any:
    from dataclasses import replace

    return replace(pe, mask_token_id=token)


def measure_ways(
    target: Any, pe: Any, ways: dict[str, Way], seqs: list[list[int]], starts: list[int], progress: Callable[[int, int], None]
) -> dict[str, list[list[int]]]:
    """Per way, per sequence: the passes the estimator walks over its continuation (replayed in batches)."""
    from ..model.replay import iter_captures
    from ..model.runtime import auto_batch_size

    pts = {p for w in ways.values() for p in w.spec}
    out: dict[str, list[list[int]]] = {n: [[] for _ in seqs] for n in ways}
    batch = auto_batch_size(target, max(map(len, seqs)))
    for rb in iter_captures(target, seqs, pts, batch_size=batch, progress=progress):
        for row, i in enumerate(rb.index):
            T = len(seqs[i])
            for name, w in ways.items():
                taps = torch.cat([rb.captured[p][row, :T] for p in w.spec], -1).to(target.dtype)
                got = accepts_at_every_anchor(pe, w, taps, rb.tokens[row, :T], starts[i])
                out[name][i] = walk([min(g, w.k) for g in got], starts[i], T)
    return out


@torch.inference_mode()
def reference_loop(target: Any, pe: Any, way: Way, prompt: list[int], end: int) -> tuple[list[int], list[int]]:
    """(tokens, passes): the speculative loop run pass by pass, the target's verify a fresh forward each time."""
    from ..model.target import capture, make_batch, target_argmax

    def forward(s: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        got, last = capture(target, make_batch([s], 0, target.device), way.spec, want_logits=True)
        assert last is not None
        return torch.cat([got[p] for p in way.spec], -1)[0].to(target.dtype), target_argmax(target, last)[0]

    taps, amax = forward(prompt)
    seq, passes = list(prompt) + [int(amax[-1])], []
    while len(seq) - 1 < end:
        a = len(seq) - 1
        ids = torch.tensor(seq[1:] + seq[-1:], device=target.device)
        prop = _propose(pe, way, taps[:a], ids[:a], a)
        taps, amax = forward(seq + prop)
        post = amax[a : a + way.k + 1].tolist()
        n = 0
        while n < way.k and prop[n] == post[n]:
            n += 1
        n = min(n, end - 1 - a)
        passes.append(n)
        seq += prop[:n] + [post[n]]
    return seq[:end], passes


def _propose(pe: Any, way: Way, taps: torch.Tensor, ids: torch.Tensor, a: int) -> list[int]:
    """The K tokens of one pass from the taps and paired tokens of slots 0..a-1."""
    if way.mode == "parallel":
        run = pe if way.token in (None, pe.mask_token_id) else _with_token(pe, way.token)
        return run.parallel(taps, ids, torch.tensor([a - 1], device=ids.device), way.k, way.positions)[0].tolist()
    from ..draft.model import DraftCache

    d, cache, out = pe.draft, DraftCache(), []
    state = d.extend(taps[None], ids[None], torch.arange(a, device=ids.device)[None], cache, from_aux=True)[:, -1:]
    for j in range(way.k):
        y = d.to_target_ids(d.logits(state).argmax(-1))
        out.append(int(y))
        if j + 1 < way.k:
            state = d.extend(state, y, torch.tensor([[a + j]], device=ids.device), cache, from_aux=False)
    return out
