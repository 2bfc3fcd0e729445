"""Sampled verification (temperature > 0): each verify pass's expected per-position acceptance, exactly, for a draft
that proposes its argmax and for one that samples from its distribution.

Under sampled verification the served text is a sample, so the greedy loop of ``simulate.py`` no longer applies: this
loop runs the target with the draft, one target forward over the context and the K proposals a pass (no cache: the
fixture-sized prompts make simple beat fast). At the pass's context the draft's argmax chain d_1..d_K and the target's
distributions p_j at temperature T after d_<j give, without sampling noise:

- argmax proposal, verified as a one-hot proposal (q(d) = 1, vLLM's rejection sampler without draft probabilities):
  position k is reached with probability prod_{j<=k} p_j(d_j), exactly;
- a sampled proposal, verified by speculative sampling: position 1 is reached with sum_x min(p_1(x), q_1(x)), exactly;
  deeper positions multiply the same sum along the draft's most likely (argmax) prefix, the one approximation here.

Either rejection sampling leaves the text distributed as the target's own sampling at T, so one seeded sampled
trajectory of the context serves both figures: it advances by the argmax proposal's accept/reject draws (a rejected
position resamples from p with the proposal's token removed, a fully accepted pass samples its bonus from p).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from ...draft.model import DraftCache, Eagle3Draft

if TYPE_CHECKING:
    from ...core.taps import FeatureSpec
    from ...model.target import Target

SEED = 0  # the trajectories' seed: a rerun predicts the same figures


@dataclass
class Expected:
    """One prompt's passes: the probability that each draft position is accepted, per pass, for each proposal."""

    argmax: list[list[float]] = field(default_factory=list)  # [passes][K]
    sampled: list[list[float]] = field(default_factory=list)  # [passes][K]
    accepted: list[int] = field(default_factory=list)  # the trajectory's own draws (argmax proposal)


Forward = Callable[[list[int]], tuple[torch.Tensor, torch.Tensor]]


def target_forward(target: Target, spec: FeatureSpec, temperature: float) -> Forward:
    """tokens -> (the draft's feature rows [1, n, F], the target's distributions at ``temperature`` [n, V])."""
    from ...model.target import capture, make_batch

    head = target.model.get_output_embeddings()

    def forward(tokens: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        got, last = capture(target, make_batch([tokens], 0, target.device), spec, want_logits=True)
        assert last is not None  # want_logits=True returns the final norm
        logits = head(last[0].to(head.weight.dtype)).float()
        return torch.cat([got[p] for p in spec], dim=-1), torch.softmax(logits / temperature, dim=-1)

    return forward


def _draw(p: torch.Tensor, gen: torch.Generator) -> int:
    return int(torch.multinomial(p / p.sum(), 1, generator=gen))


def _chain(draft: Eagle3Draft, aux: torch.Tensor, seq: list[int], t: int, k: int, temperature: float, vocab: int
           ) -> tuple[list[int], torch.Tensor]:  # fmt: skip
    """The draft's argmax chain at base t and its distributions [k, V] over the target's vocabulary at temperature."""
    from ..acceptance.estimator import draft_probs_in_target_vocab

    dev = aux.device
    cache = DraftCache()
    ids = torch.tensor([seq[1 : t + 2]], device=dev)
    h = draft.extend(aux[:, : t + 1], ids, torch.arange(t + 1, device=dev)[None], cache, from_aux=True)[:, -1:]
    props: list[int] = []
    qs = []
    for j in range(1, k + 1):
        logits = draft.logits(h)
        qs.append(draft_probs_in_target_vocab(draft, logits, temperature, vocab)[0, 0])
        props.append(int(draft.to_target_ids(logits.argmax(-1))[0, 0]))
        if j < k:
            tok, at = torch.tensor([[props[-1]]], device=dev), torch.tensor([[t + j]], device=dev)
            h = draft.extend(h, tok, at, cache, from_aux=False)
    return props, torch.stack(qs)


@torch.inference_mode()
def expected_passes(forward: Forward, draft: Eagle3Draft, prompt: list[int], total_len: int, num_steps: int,
                    temperature: float, seed: int = SEED) -> Expected:  # fmt: skip
    """One prompt decoded to ``total_len`` tokens along a seeded sampled trajectory, each pass's expected figures."""
    gen = torch.Generator().manual_seed(seed)
    seq = list(prompt)
    aux, p = forward(seq)
    seq.append(_draw(p[-1], gen))
    out = Expected()
    while True:
        t = len(seq) - 2
        k = min(num_steps, total_len - 2 - t)
        if k <= 0:
            break
        props, q = _chain(draft, aux, seq, t, k, temperature, p.shape[-1])
        aux, p = forward(seq + props)
        pj = p[t + 1 : t + 1 + k]  # the target's distribution for x_{t+2+j} after d_1..d_j
        hit = pj[torch.arange(k), torch.tensor(props)]
        pad = [0.0] * (num_steps - k)
        out.argmax.append(torch.cumprod(hit, 0).tolist() + pad)
        out.sampled.append(torch.cumprod(torch.minimum(pj, q.to(pj.dtype)).sum(-1).clamp(max=1.0), 0).tolist() + pad)
        a = 0
        while a < k and float(torch.rand((), generator=gen)) < float(hit[a]):
            a += 1
        out.accepted.append(a)
        seq += props[:a]
        if len(seq) < total_len:
            nxt = p[t + 1 + a].clone()
            if a < k:  # the residual of a one-hot proposal: p without the rejected token
                nxt[props[a]] = 0.0
            seq.append(_draw(nxt, gen))
        aux = aux[:, : len(seq)]
    return out
