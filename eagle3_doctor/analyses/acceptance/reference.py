"""The plain sequential loop the estimator is checked against (--reference-loop), chain and tree."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from ...core.errors import BadInput
from ...core.taps import FeatureSpec
from ...draft.model import DraftCache, Eagle3Draft
from ..results import PathResult, ReferenceResult, TreePlan, TreeReference
from .metrics import metrics_from_passes
from .options import Progress, Replay

if TYPE_CHECKING:
    from ...model.setup import Setup
    from ...model.target import Target


@torch.inference_mode()
def reference_loop(
    target_step: Callable[[list[int]], tuple[torch.Tensor, torch.Tensor]],
    draft: Eagle3Draft,
    prompt: list[int],
    total_len: int,
    num_steps: int,
) -> tuple[list[int], list[int], list[int]]:
    """A plain greedy chain speculative-decoding loop, the estimator's independent reference.

    target_step(tokens) -> (aux [1, n, nH] features of every position, argmax [n] next-token ids)
    runs the target over the whole sequence (no cache: simple over fast). Each pass: the draft
    re-extends over positions 0..t from fresh target features (step 1), proposes K-1 more tokens
    one at a time through its KV cache, the target verifies, the matching prefix plus one bonus
    token is kept. Stops when ``total_len`` tokens exist. Returns (tokens, accepted, drafted).
    """
    seq = list(prompt)
    aux, amax = target_step(seq)
    seq.append(int(amax[-1]))  # prefill's bonus token
    accepted, drafted = [], []
    dev = aux.device
    while True:
        t = len(seq) - 2  # base: features of x_t pair with the last token x_{t+1}
        k_eff = min(num_steps, total_len - 2 - t)
        if k_eff <= 0:
            break
        cache = DraftCache()
        ids = torch.tensor([seq[1 : t + 2]], device=dev)
        pos = torch.arange(t + 1, device=dev)[None]
        out = draft.extend(aux[:, : t + 1], ids, pos, cache, from_aux=True)
        h = out[:, -1:]
        props: list[int] = []
        for j in range(1, k_eff + 1):
            d = int(draft.to_target_ids(draft.logits(h).argmax(-1))[0, 0])
            props.append(d)
            if j == k_eff:
                break
            h = draft.extend(h, torch.tensor([[d]], device=dev), torch.tensor([[t + j]], device=dev), cache, from_aux=False)
        aux, amax = target_step(seq + props)
        a = 0
        while a < k_eff and props[a] == int(amax[t + 1 + a]):
            a += 1
        accepted.append(a)
        drafted.append(k_eff)
        seq += props[:a]
        if len(seq) < total_len:
            seq.append(int(amax[t + 1 + a]))  # bonus token
        aux = aux[:, : len(seq)]
    return seq[:total_len], accepted, drafted


def _target_step_fn(tgt: Target, spec: FeatureSpec) -> Callable[[list[int]], tuple[torch.Tensor, torch.Tensor]]:
    from ...model.target import capture, make_batch, target_argmax

    def step(tokens: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        batch = make_batch([tokens], 0, tgt.device)
        got, last = capture(tgt, batch, spec, want_logits=True)
        assert last is not None  # want_logits=True returns the final norm
        aux = torch.cat([got[p] for p in spec], dim=-1)
        return aux, target_argmax(tgt, last)[0]

    return step


def _reference_tree(setup: Setup, rep: Replay, tree: TreePlan, step: Callable, progress: Progress) -> tuple[list, list, bool]:
    from ..tree import sglang_tree_reference_loop, static_tree_reference_loop

    opts, prompts, draft = rep.opts, rep.src.prompts, setup.draft
    assert draft is not None  # run_acceptance refuses a Setup without one
    t_acc, t_drf, same = [], [], True
    for i, p in enumerate(prompts):
        if tree.kind == "sglang":
            toks, a, d = sglang_tree_reference_loop(
                step, draft, list(p.ids), len(rep.seqs[i]), opts.num_steps, opts.topk, tree.num_draft_tokens
            )
        else:
            assert tree.paths is not None  # a static plan has its paths (tree_plan)
            toks, a, d = static_tree_reference_loop(step, draft, list(p.ids), len(rep.seqs[i]), tree.paths)
        same &= toks == rep.seqs[i]
        t_acc.append(a)
        t_drf.append(d)
        progress("reference tree loop", i + 1, len(prompts))
    return t_acc, t_drf, same


def run_reference(
    setup: Setup, rep: Replay, results: dict[str, PathResult], tree: TreePlan | None, progress: Progress
) -> ReferenceResult:
    """The plain sequential loop over every prompt, and whether the estimator agrees with it."""
    if rep.opts.continuation != "greedy":
        raise BadInput("--reference-loop needs --continuation greedy", "drop --continuation text")
    if "serving" not in results:
        raise BadInput("--reference-loop needs a serving path the draft can take", "fix the slot count first (see notes)")
    K, prompts, seqs = rep.opts.num_steps, rep.src.prompts, rep.seqs
    ref_acc, ref_drf, same_each = [], [], []
    step, draft = _target_step_fn(setup.target, setup.serving.spec), setup.draft
    assert draft is not None  # run_acceptance refuses a Setup without one
    for i, p in enumerate(prompts):
        toks, a, d = reference_loop(step, draft, list(p.ids), len(seqs[i]), K)
        same_each.append(toks == seqs[i])
        ref_acc.append(a)
        ref_drf.append(d)
        progress("reference loop", i + 1, len(prompts))
    serving = results["serving"]
    ref = ReferenceResult(
        accepted_lengths=ref_acc,
        chain=metrics_from_passes([x for r in ref_acc for x in r], [x for r in ref_drf for x in r], K),
        agrees_with_estimator=ref_acc == serving.accepted_lengths,
        same_tokens=all(same_each),
        same_tokens_per_prompt=same_each,
    )
    if tree is not None:
        t_acc, t_drf, same = _reference_tree(setup, rep, tree, step, progress)
        est = serving.tree.accepted_lengths if serving.tree is not None else None
        metrics = metrics_from_passes([x for r in t_acc for x in r], [x for r in t_drf for x in r], K)
        ref.tree = TreeReference(t_acc, metrics, t_acc == est)
        ref.same_tokens = ref.same_tokens and same
        ref.agrees_with_estimator = ref.agrees_with_estimator and ref.tree.agrees_with_estimator
    return ref
