"""One replay, every feature path: the estimator's counts per path and the capture-point scan's, batch by batch,
and each path's results in prompt order."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from ...core.taps import EVERYWHERE, CapturePoint, FeatureSpec, TapWindow, final_norm, merge_windows
from ...draft.model import Eagle3Draft
from ...model.replay import ReplayBatch, iter_captures, replay_order
from ..results import PathResult, ScanRow, TreePlan
from .accumulate import PathAccumulator
from .estimator import StepOutputs, unroll_outcomes
from .estimator import labels_fn as _labels_fn  # diagnose, context and speedup import it from here
from .options import AcceptanceOptions, Progress, Replay

if TYPE_CHECKING:
    from ...model.setup import Setup
    from ...model.target import Target


def _target_logits_fn(tgt: Target, last: torch.Tensor) -> Callable[[int], Iterable[tuple[slice, torch.Tensor]]]:
    """Target logits at t+k for every base t, in chunks of positions (never [B, T, V] whole)."""
    from ...model.target import head_chunks

    def tl(k: int) -> Iterable[tuple[slice, torch.Tensor]]:
        return head_chunks(tgt, torch.roll(last, -k, dims=1))

    return tl


def target_choice(tgt: Target, rb: ReplayBatch, starts: Sequence[int], greedy: bool) -> torch.Tensor:
    """The target's next-token choice at every position [B, T]. Along its own greedy continuation, past each prompt
    (from base ``starts[row]``, the prompt's last token) that is the continuation's next token, which its head chose
    there: the full-vocabulary head runs over the prompts' positions alone (about a tenth of them at 512 x 512,
    where over every position it took 0.5 s, bench/RESULTS.md 2026-12-04). Along a given text, the head everywhere."""
    from ...model.target import target_argmax

    assert rb.last is not None  # replayed with want_logits
    if not greedy:
        return target_argmax(tgt, rb.last)
    amax = torch.roll(rb.tokens, -1, dims=1)
    w = rb.last.shape[1]  # read over the prompts alone where the recording kept it there (:func:`logits_window`)
    pos = torch.arange(w, device=amax.device)
    inside = pos[None, :] < torch.as_tensor(list(starts), device=amax.device)[:, None]
    if bool(inside.any()):
        amax[:, :w][inside] = target_argmax(tgt, rb.last[inside])
    return amax


def replay_taps(
    setup: Setup,
    paths: Mapping[str, FeatureSpec | None],
    cands: list[FeatureSpec],
    sequences: int,
    logits: TapWindow | None,
) -> dict[CapturePoint, TapWindow]:
    """What a :class:`Measurement` of ``paths`` and the fit's candidate wirings ``cands`` reads over ``sequences``,
    and where: every path's capture points at every position, the wirings the fit scores (:func:`fit_wirings`) in
    the fit's window (:func:`weights_fit.fit_window`), the final norm in ``logits`` (None: no logits read). The
    continuation's recording keeps exactly this."""
    from ..weights_fit import fit_window

    reads = {p: EVERYWHERE for s in paths.values() if s for p in s}
    fit = fit_window(sequences)
    reads.update({p: fit for c in fit_wirings(setup, cands) for p in c if p not in reads})
    return merge_windows(reads, {final_norm(): logits}) if logits is not None else reads


def configured_spec(setup: Setup) -> FeatureSpec:
    """The capture points the draft is configured with: the training side's where given, else the serving side's."""
    return setup.train_spec or setup.serving.spec


def fit_wirings(setup: Setup, cands: list[FeatureSpec]) -> list[FeatureSpec]:
    """The wirings the weights' fit of a :class:`Measurement` scores for ``cands`` (none without a draft)."""
    from ..weights_fit import scored_wirings

    return scored_wirings(configured_spec(setup), cands) if cands and setup.draft is not None else []


def logits_window(opts: AcceptanceOptions, prompt_choice: bool = False) -> TapWindow | None:
    """Where a replay reads the target's final norm (its head's input): along a given text, or at a temperature,
    everywhere; along the target's own greedy continuation nowhere (its tokens are the labels), or over the prompts
    where ``prompt_choice`` asks for the target's choice there (:func:`target_choice`)."""
    if opts.continuation != "greedy" or opts.temperature > 0:
        return EVERYWHERE
    return TapWindow(after=0) if prompt_choice else None


class Measurement:
    """Per-path estimator counts and the scan's step-1 hits, over the replayed batches."""

    def __init__(
        self,
        setup: Setup,
        rep: Replay,
        paths: Mapping[str, FeatureSpec | None],  # read only: a dict of specs passes too
        tree: TreePlan | None,
        drafts: dict[str, Eagle3Draft],
        cands: list[FeatureSpec] | None = None,
        prompt_choice: bool = False,
    ):
        """``prompt_choice``: a reader of each batch (``replay``'s ``each``) takes the target's choice over the prompts
        (:func:`target_choice`), so the replay reads the final norm there."""
        from ..weights_fit import WeightsFit, candidates

        self.setup, self.rep, self.paths, self.tree = setup, rep, paths, tree
        self.drafts = drafts  # per path: the draft as trained, or a copy as the engine runs it (as_served)
        opts = rep.opts
        configured = configured_spec(setup)
        if cands is None:
            cands = candidates(configured, setup.target.num_layers, product=True) if opts.scan else []
        self.cands = cands
        self.accs = {n: PathAccumulator(n, opts.num_steps) for n in paths}
        self.outcomes: dict[str, StepOutputs] = {}  # the batch just added, per path (its step 1 read again by diagnose)
        # the weights' own fit: per replayed sequence, step-1 [hits, positions] on each candidate wiring
        self.fit = WeightsFit(setup.draft, configured, cands, len(rep.seqs)) if cands and setup.draft is not None else None
        self.logits = logits_window(opts, prompt_choice)

    def taps(self, logits: TapWindow | None = None) -> dict[CapturePoint, TapWindow]:
        """What the replay reads and where (:func:`replay_taps`), the final norm in ``logits``."""
        return replay_taps(self.setup, self.paths, self.cands, len(self.rep.seqs), logits)

    def _aux(self, rb: ReplayBatch, spec: FeatureSpec | None) -> torch.Tensor:
        if spec is not None:
            return torch.cat([rb.captured[p] for p in spec], dim=-1)
        from ...model.replay import dump_slots

        tgt, draft, dump = self.setup.target, self.setup.draft, self.rep.src.dump
        assert draft is not None and dump is not None  # run_acceptance: a draft; a None spec: the dump's own path
        return dump_slots(dump, rb, draft.config.num_aux_states * tgt.hidden_size, tgt.dtype)

    def add(self, rb: ReplayBatch) -> None:
        from ...model.target import target_argmax

        tgt, draft, opts, tree, last = self.setup.target, self.setup.draft, self.rep.opts, self.tree, rb.last
        greedy = opts.continuation == "greedy"
        # run_acceptance: a draft; replayed with want_logits, or (an engine's own capture, no target head) greedy
        assert draft is not None and (last is not None or greedy)
        # along the target's own greedy continuation the labels are its tokens: the full-vocabulary head over every
        # position (0.5 s of this phase at 512 x 512, under a profiler) would compute what nothing reads
        amax = target_argmax(tgt, last) if last is not None and not greedy else rb.tokens
        labels = _labels_fn(rb, amax, greedy)
        tl = _target_logits_fn(tgt, last) if opts.temperature > 0 and last is not None else None
        lens, st = rb.batch.lengths, [self.rep.starts[i] for i in rb.index]
        known: dict[FeatureSpec, StepOutputs] = {}
        self.outcomes = {}
        t0 = min(st, default=0)  # the accumulator counts a row from its start on
        for name, spec in self.paths.items():
            aux, d = self._aux(rb, spec), self.drafts[name]
            out = unroll_outcomes(
                d,
                aux,
                rb.tokens,
                labels,
                lens,
                opts.num_steps,
                topk=1 if tree else opts.topk,
                temperature=opts.temperature,
                target_logits=tl,
                temp_mode=opts.temp_mode,
                rank_width=(tree.width or 0) if tree is not None and tree.kind == "static" else 0,
                from_base=t0,
            )
            if tree is not None:
                out.tree_accepted = _tree_accepted(tree, d, aux, rb.tokens, labels, lens, opts.num_steps, out, t0)
            self.accs[name].add(out, st, lens, walk=greedy)
            self.outcomes[name] = out
            if spec is not None and d is self.setup.draft and out.topk_hit is None:
                known[tuple(spec)] = out  # step 1 by argmax: the weights' fit of this wiring, already run
        if self.fit is not None:
            self.fit.add(rb, labels, st, known)

    def replay(self, batch_size: int, label: str, progress: Progress, each: Callable[[ReplayBatch], None] | None = None) -> None:
        """Every sequence through the target once, each batch added to every path (and handed to ``each``)."""
        if self.rep.opts.continuation_auto:
            from ...model.runtime import token_capped

            batch_size = token_capped(batch_size, max(map(len, self.rep.seqs), default=1))
        for rb in iter_captures(
            self.setup.target,
            self.rep.seqs,
            self.taps(),
            batch_size=batch_size,
            want_logits=self.logits is not None,
            progress=lambda d, n: progress(label, d, n),
            recorded=self.rep.recorded,
            windows=self.taps(self.logits),
        ):
            self.add(rb)
            if each is not None:
                each(rb)

    def scan_result(self) -> list[ScanRow] | None:
        """Candidates by step-1 accuracy, each with its interval over prompts and, paired on the same
        prompts, its difference to the configured capture points (what ACC004 decides on)."""
        return self.fit.rows() if self.fit is not None else None


def _to_prompt_order(values: list[Any], order: Sequence[int]) -> list[Any]:
    """Batches ran longest first: ``values[j]`` belongs to sequence ``order[j]``."""
    out: list[Any] = [None] * len(order)
    for j, i in enumerate(order):
        out[i] = values[j]
    return out


def path_results(m: Measurement) -> dict[str, PathResult]:
    """Each path's metrics, per-prompt lists in prompt order, with intervals over prompts (issue 14)."""
    from ...core.stats import acceptance_intervals

    order, K = replay_order(m.rep.seqs), m.rep.opts.num_steps
    results = {n: a.result() for n, a in m.accs.items()}
    for n, res in results.items():
        res.spec = m.paths[n]
        res.accepted_lengths = _to_prompt_order(res.accepted_lengths, order)
        res.acc_k_by_request = _to_prompt_order(res.acc_k_by_request, order)
        res.step1_counts = _to_prompt_order(res.step1_counts, order)
        if res.tree is not None and res.tree.accepted_lengths is not None:
            res.tree.accepted_lengths = _to_prompt_order(res.tree.accepted_lengths, order)
        res.intervals = acceptance_intervals(res.counts(K), K)
    return results


def _tree_accepted(
    tree: TreePlan,
    draft: Eagle3Draft,
    aux: torch.Tensor,
    tokens: torch.Tensor,
    labels: Callable[[int], torch.Tensor],
    lens: Sequence[int],
    num_steps: int,
    out: StepOutputs,
    from_base: int,
) -> torch.Tensor:
    from ..tree import sglang_tree_accepted, static_tree_accepted

    if tree.kind == "sglang":
        assert tree.topk is not None  # an sglang plan has its topk (tree_plan)
        acc, _ = sglang_tree_accepted(
            draft, aux, tokens, labels, lens, num_steps, tree.topk, tree.num_draft_tokens, from_base=from_base
        )
        return acc
    assert out.ranks is not None and tree.paths is not None  # a static plan: its paths, unrolled with rank_width
    return static_tree_accepted(out.ranks, out.valid, tree.paths)
