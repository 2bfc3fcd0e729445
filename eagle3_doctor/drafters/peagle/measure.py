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

from ...analyses.passes import leading_accepted, replay_passes, sequential_loop
from ...core.taps import FeatureSpec


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


@torch.inference_mode()
def accepts_at_every_anchor(pe: Any, way: Way, taps: torch.Tensor, seq: torch.Tensor, start: int) -> list[int]:
    """seq [T] one sequence (prompt + greedy continuation), taps [T, F] the way's taps: the tokens accepted at every
    anchor start..T-1."""
    anchors = torch.arange(start, seq.shape[0], device=seq.device)
    ids = _paired(seq)
    if way.mode == "parallel":
        prop = _run(pe, way).parallel(taps, ids, anchors - 1, way.k, way.positions)
    else:
        d, t0 = pe.draft, max(start - 1, 0)  # the first base an anchor reads: steps 2..K run from it on
        states = list(d.unroll(taps[None], ids[None], way.k, from_base=t0))
        states[0] = states[0][:, t0:]  # step 1 ran everywhere (its keys); its proposals are read from t0 on
        steps = [d.to_target_ids(d.logits(x).argmax(-1))[0] for x in states]
        prop = torch.stack(steps, 1)[anchors - 1 - t0]
    return leading_accepted(prop, seq, anchors)


def _run(pe: Any, way: Way) -> Any:
    """The draft with the way's mask token in its parallel slots."""
    from dataclasses import replace

    return pe if way.token in (None, pe.mask_token_id) else replace(pe, mask_token_id=way.token)


def measure_ways(
    target: Any, pe: Any, ways: dict[str, Way], seqs: list[list[int]], starts: list[int], progress: Callable[[int, int], None]
) -> dict[str, list[list[int]]]:
    """Per way, per sequence: the passes the estimator walks over its continuation."""
    specs = {n: w.spec for n, w in ways.items()}
    return replay_passes(target, specs, seqs, starts, progress,
                         lambda name, taps, ids, start: accepts_at_every_anchor(pe, ways[name], taps, ids, start))  # fmt: skip


def reference_loop(target: Any, pe: Any, way: Way, prompt: list[int], end: int) -> tuple[list[int], list[int]]:
    """(tokens, passes): the speculative loop run pass by pass, the target's verify a fresh forward each time."""

    def propose(taps: torch.Tensor, seq: list[int], a: int) -> list[int]:
        ids = torch.tensor(seq[1 : a + 1], device=target.device)  # slot t pairs the taps at t with x_{t+1}
        return _propose(pe, way, taps.to(target.dtype), ids, a)

    return sequential_loop(target, way.spec, prompt, end, way.k, propose)


def _propose(pe: Any, way: Way, taps: torch.Tensor, ids: torch.Tensor, a: int) -> list[int]:
    """The K tokens of one pass from the taps and paired tokens of slots 0..a-1."""
    if way.mode == "parallel":
        return _run(pe, way).parallel(taps, ids, torch.tensor([a - 1], device=ids.device), way.k, way.positions)[0].tolist()
    from ...draft.model import DraftCache

    d, cache, out = pe.draft, DraftCache(), []
    state = d.extend(taps[None], ids[None], torch.arange(a, device=ids.device)[None], cache, from_aux=True)[:, -1:]
    for j in range(way.k):
        y = d.to_target_ids(d.logits(state).argmax(-1))
        out.append(int(y))
        if j + 1 < way.k:
            state = d.extend(state, y, torch.tensor([[a + j]], device=ids.device), cache, from_aux=False)
    return out
