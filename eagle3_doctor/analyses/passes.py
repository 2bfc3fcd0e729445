"""What the drafters that draft a whole pass at once (DFlash, P-EAGLE) share: the target's greedy continuation the
passes run over, the replay that drafts every anchor of it, the accepted count at each anchor and the walk from
anchor to anchor, the sequential loop the estimator is held to, and fix's result (a corrected copy measured against
the original)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..core.findings import Finding
from ..core.taps import FeatureSpec


def walk(accepts: Sequence[int], start: int, end: int) -> list[int]:
    """The passes over anchors start.. given the accepted count at every anchor (accepts[a - start])."""
    out, a = [], start
    while a < end:
        n = min(accepts[a - start], end - 1 - a)
        out.append(n)
        a += n + 1
    return out


def leading_accepted(prop: torch.Tensor, seq: torch.Tensor, anchors: torch.Tensor) -> list[int]:
    """Per anchor, the leading proposals equal to the sequence's next tokens: prop[i, d] proposes
    x_{anchors[i] + 1 + d} of seq [T] (past the end, nothing is accepted)."""
    T, k = seq.shape[0], prop.shape[1]
    nxt = torch.full_like(prop, -1)
    for d in range(k):
        pos = anchors + 1 + d
        ok = pos < T
        nxt[ok, d] = seq[pos[ok]]
    return (prop == nxt).long().cumprod(-1).sum(-1).tolist()


def replay_passes(
    target: Any,
    specs: dict[str, FeatureSpec],
    seqs: list[list[int]],
    starts: list[int],
    progress: Callable[[int, int], None],
    accepts: Callable[[str, torch.Tensor, torch.Tensor, int], list[int]],
) -> dict[str, list[list[int]]]:
    """Per path, per sequence: the passes walked over its continuation, ``accepts(path, taps [T, F], tokens [T],
    start)`` giving the accepted count at every anchor start..T-1 (the sequences replayed through the target in
    batches, as every replay runs)."""
    from ..model.replay import iter_captures
    from ..model.runtime import auto_batch_size

    pts = {p for s in specs.values() for p in s}
    out: dict[str, list[list[int]]] = {n: [[] for _ in seqs] for n in specs}
    batch = auto_batch_size(target, max(map(len, seqs)))
    for rb in iter_captures(target, seqs, pts, batch_size=batch, progress=progress):
        for row, i in enumerate(rb.index):
            T = len(seqs[i])
            for name, spec in specs.items():
                taps = torch.cat([rb.captured[p][row, :T] for p in spec], -1).to(target.dtype)
                out[name][i] = walk(accepts(name, taps, rb.tokens[row, :T], starts[i]), starts[i], T)
    return out


@torch.inference_mode()
def sequential_loop(
    target: Any, spec: FeatureSpec, prompt: list[int], end: int, k: int,
    propose: Callable[[torch.Tensor, list[int], int], list[int]],
) -> tuple[list[int], list[int]]:  # fmt: skip
    """(tokens, passes): the speculative loop run pass by pass, the target's verify a fresh forward each time.
    ``propose(taps, seq, a)`` drafts the k tokens of the pass whose last verified token is seq[a], from the taps of
    positions 0..a-1 (the prefix's own forward: causal, so those rows are the accepted tokens')."""
    from ..model.target import capture, make_batch, target_argmax

    def forward(s: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        got, last = capture(target, make_batch([s], 0, target.device), spec, want_logits=True)
        assert last is not None
        return torch.cat([got[p] for p in spec], -1)[0], target_argmax(target, last)[0]

    taps, amax = forward(prompt)
    seq, passes = list(prompt) + [int(amax[-1])], []
    while len(seq) - 1 < end:
        a = len(seq) - 1
        prop = propose(taps[:a], seq, a)
        taps, amax = forward(seq + prop)
        post = amax[a : a + k + 1].tolist()
        n = 0
        while n < k and prop[n] == post[n]:
            n += 1
        n = min(n, end - 1 - a)
        passes.append(n)
        seq += prop[:n] + [post[n]]
    return seq[:end], passes


def continue_prompts(
    target: Any, prompts: list[list[int]], max_new_tokens: int, progress: Callable[[str, int, int], None]
) -> list[list[int]]:
    """The target's greedy continuation of every prompt, in batches as large as memory allows."""
    from ..model.continuation import greedy_continue
    from ..model.static import decode_batch_size

    longest = max(map(len, prompts))
    batch = decode_batch_size(target, longest, longest + max_new_tokens)
    return greedy_continue(target, prompts, max_new_tokens, batch, lambda k, n: progress("greedy continuation", k, n))


@dataclass
class CopyFix:
    """fix on a drafter: the config keys written into the copy at ``out`` (None: nothing to fix, nothing written),
    and acceptance on the original and on the copy (``schema`` and ``drafter`` name the document)."""

    schema: str
    drafter: str
    source: str
    out: str | None
    applied: list[Any]  # fixing.Edit
    before: Any  # the drafter's acceptance result on the original
    after: Any  # on the copy, or None

    @property
    def findings(self) -> list[Finding]:
        return self.after.findings if self.after is not None else self.before.findings

    def to_dict(self) -> dict[str, Any]:
        return {"schema": self.schema, "command": "fix", "drafter": self.drafter, "source": self.source, "out": self.out,
                "applied": [e.to_dict() for e in self.applied], "before": self.before.to_dict(),
                "after": self.after.to_dict() if self.after is not None else None,
                "findings": [f.to_dict() for f in self.findings]}  # fmt: skip
