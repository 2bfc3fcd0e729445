"""The parallel estimator of acceptance: every base at once, teacher-forced, into per-step outcomes.

Notation (one sequence x_0..x_{N-1}; f_t = target features of x_t; a_t = target argmax at t):
a verify pass at *base* t knows x_0..x_{t+1} (x_{t+1} is the bonus token of the previous pass).
The draft's step j proposes d_j for x_{t+1+j}; greedy verification accepts the longest prefix with
d_j == target's choice, then adds one bonus token, so the next base is t + A + 1.

The estimator runs the draft K steps teacher-forced at every t at once (:meth:`Eagle3Draft.unroll`).
Along the target's own greedy continuation the teacher-forced inputs are exactly the tokens a
decode loop would feed whenever the earlier steps were accepted, so the per-base accepted length
A(t) is exact, and walking t -> t + A(t) + 1 from the first base reproduces the loop's passes.
:func:`reference_loop` is that loop written plainly (draft KV cache, one target forward per pass).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ...draft.model import Eagle3Draft


def expected_accept_prob(p: torch.Tensor, q: torch.Tensor, draft_token: torch.Tensor | None, mode: str) -> torch.Tensor:
    """Acceptance probability of one draft position at temperature > 0, without sampling noise.

    mode "sampled": the draft token is sampled from q and verified by speculative sampling:
    P(accept) = sum_x q(x) min(1, p(x)/q(x)) = sum_x min(p(x), q(x)).
    mode "argmax": the draft proposes argmax q (vLLM V1 at any temperature): P = p(draft token).
    """
    if mode == "sampled":
        return torch.minimum(p, q).sum(-1)
    if mode == "argmax":
        assert draft_token is not None
        return p.gather(-1, draft_token.unsqueeze(-1)).squeeze(-1)
    raise ValueError(mode)


def draft_probs_in_target_vocab(draft: Eagle3Draft, logits: torch.Tensor, temperature: float, vocab: int) -> torch.Tensor:
    q_d = torch.softmax(logits.float() / temperature, dim=-1)
    q = torch.zeros(*q_d.shape[:-1], vocab, dtype=q_d.dtype, device=q_d.device)
    idx = (torch.arange(q_d.shape[-1], device=q_d.device) + draft.d2t).clamp(0, vocab - 1)
    q.index_add_(-1, idx, q_d)
    return q


@dataclass
class StepOutputs:
    """Per (sequence, base t, step k) draft outcomes from one teacher-forced unroll."""

    match: torch.Tensor  # [B, K, T] bool: greedy chain proposal == the verifier's token
    valid: torch.Tensor  # [B, K, T] bool: a label exists for this step at this base
    topk_hit: torch.Tensor | None = None  # [B, K, T] bool: verifier's token within draft top-k
    alpha: torch.Tensor | None = None  # [B, K, T] float: acceptance probability at temperature
    ranks: torch.Tensor | None = None  # [B, K, T] long: rank of the verifier's token among the draft's top-N
    tree_accepted: torch.Tensor | None = None  # [B, T] long: exact accepted depth of the engine's tree (tree.py)
    first: torch.Tensor | None = None  # [B, T] long: step 1's proposal by argmax at every base, in target ids


def step_valid(lengths: torch.Tensor, T: int, k: int) -> torch.Tensor:
    """[B, T] bool: step k (1-based) at base t has a label, t + 1 + k <= len - 1 (lengths [B] on the device)."""
    return torch.arange(T, device=lengths.device)[None, :] + 1 + k <= lengths[:, None] - 1


def step1_outcomes(first: torch.Tensor, labels: Callable[[int], torch.Tensor], lengths: Sequence[int]) -> StepOutputs:
    """Step 1's outcomes from its proposals ``first`` [B, T] (an unroll's :attr:`StepOutputs.first`) against other
    labels: what a one-step unroll would return, without running the draft again."""
    v = step_valid(torch.as_tensor(list(lengths), device=first.device), first.shape[1], 1)
    return StepOutputs(((first == labels(1)) & v)[:, None], v[:, None], first=first)


@torch.inference_mode()
def labels_fn(rb: Any, amax: torch.Tensor, greedy: bool) -> Callable[[int], torch.Tensor]:
    """The target's choice the draft's step k+1 is scored against at every base: along the target's own greedy
    continuation its next tokens; along a given text its argmax ``amax`` there."""
    tokens = rb.tokens

    def labels(k: int) -> torch.Tensor:
        if greedy:
            return torch.roll(tokens, -(1 + k), dims=1)  # x_{t+1+k}: the target's own greedy tokens
        return torch.roll(amax, -k, dims=1)  # a_{t+k}: the target's choice along the given text

    return labels


def unroll_outcomes(
    draft: Eagle3Draft,
    aux: torch.Tensor,
    tokens: torch.Tensor,
    labels: Callable[[int], torch.Tensor],
    lengths: Sequence[int],
    num_steps: int,
    *,
    topk: int = 1,
    temperature: float = 0.0,
    target_logits: Callable[[int], Iterable[tuple[slice, torch.Tensor]]] | None = None,
    temp_mode: str = "sampled",
    rank_width: int = 0,
    from_base: int = 0,
) -> StepOutputs:
    """aux [B,T,nH], tokens [B,T] (right-padded); labels(k) -> [B,T] verifier token for step k at base t.

    target_logits(k) (temperature > 0) yields (slice over the B*T flattened positions, target logits
    float32 [n, V] at position t+k for those bases), as :func:`target.head_chunks` does.

    Step k (1-based) at base t proposes for x_{t+1+k}; it has a label when t + 1 + k <= len - 1.
    ``from_base``: no base before it is scored past step 1 (every row's first scored base is there or later):
    steps 2..K run from it on (:func:`.unroll_steps`) and hold ``valid`` False before it. Step 1 runs everywhere.
    """
    B, T = tokens.shape
    from_base = 0 if target_logits is not None else from_base  # its chunks are slices of every base, flattened
    dev, ids, lens = tokens.device, torch.roll(tokens, -1, dims=1), torch.as_tensor(list(lengths), device=tokens.device)
    match = torch.zeros(B, num_steps, T, dtype=torch.bool, device=dev)
    valid = torch.zeros_like(match)
    hit = torch.zeros_like(match) if topk > 1 else None
    alpha = torch.zeros(B, num_steps, T, dtype=torch.float32, device=dev) if temperature > 0 else None
    ranks = torch.full((B, num_steps, T), rank_width, dtype=torch.long, device=dev) if rank_width else None
    first = None
    for k0, h in enumerate(draft.unroll(aux, ids, num_steps, from_base=from_base)):
        k, t = k0 + 1, slice(0 if k0 == 0 else from_base, T)  # t: the bases this step ran at
        v, lab, logits = step_valid(lens, T, k)[:, t], labels(k)[:, t], draft.logits(h)
        if hit is not None:  # topk > 1
            top = draft.to_target_ids(logits.topk(topk, dim=-1).indices)
            hit[:, k0, t] = (top == lab[..., None]).any(-1) & v
            prop = top[..., 0]
        else:
            prop = draft.to_target_ids(logits.argmax(-1))
        match[:, k0, t] = (prop == lab) & v
        if k0 == 0 and hit is None:  # by argmax (top-k's order among tied logits need not be argmax's)
            first = prop
        valid[:, k0, t] = v
        if ranks is not None:
            # rank of the verifier's token in this step's draft distribution (rank_width = absent)
            top = draft.to_target_ids(logits.topk(rank_width, dim=-1).indices)
            eq = top == lab[..., None]
            ranks[:, k0, t] = torch.where(eq.any(-1), eq.long().argmax(-1), torch.full_like(lab, rank_width))
        if alpha is not None:  # temperature > 0
            assert target_logits is not None
            a = _expected_alpha(draft, logits, prop, target_logits(k), temperature, temp_mode).view(B, T)
            alpha[:, k0] = torch.where(v, a, torch.zeros_like(a))
    return StepOutputs(match, valid, hit, alpha, ranks, first=first)


def _expected_alpha(
    draft: Eagle3Draft,
    logits: torch.Tensor,
    prop: torch.Tensor,
    target_chunks: Iterable[tuple[slice, torch.Tensor]],
    temperature: float,
    mode: str,
) -> torch.Tensor:
    """Acceptance probability at every flattened position [B*T], a chunk of positions at a time: the
    target's and the draft's distributions over the target vocabulary never exist for all [B, T] at once."""
    lg = logits.reshape(-1, logits.shape[-1])  # [B*T, Vd]
    pr = prop.reshape(-1)
    out = torch.zeros(lg.shape[0], dtype=torch.float32, device=lg.device)
    for sl, tl in target_chunks:
        p = torch.softmax(tl / temperature, dim=-1)  # [n, V]
        q = draft_probs_in_target_vocab(draft, lg[sl], temperature, p.shape[-1])
        out[sl] = expected_accept_prob(p, q, pr[sl], mode)
    return out
