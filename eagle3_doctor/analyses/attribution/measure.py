"""The measurement: the levers, the module ablations and the context on one replay of the prompts, then the
verdict; and the lever the draft's weights themselves point at, in a second replay."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..acceptance.kv_dtype import kv_dtype_findings
from ..acceptance.measurement import Measurement, _labels_fn, logits_window, path_results, replay_taps
from ..acceptance.options import AcceptanceOptions, _no_progress
from ..acceptance.run import acceptance_sequences
from ..weights_fit import STEP1_POSITIONS, candidates
from ..weights_fit import leaning as weights_leaning
from .context import ContextCounts
from .data import data_finding, training_sample
from .markup import _markup_finding, markup_in_prompts
from .plan import SERVING, WEIGHTS, Plan, _plan, _spec
from .result import Diagnosis, LeverRow, _mal, _step1
from .verdict import _verdict

if TYPE_CHECKING:
    from ...model.replay import ReplayBatch
    from ...model.setup import Setup
    from ..results import PathResult


Progress = Callable[[str, int, int], None]


def diagnose_gap(
    setup: Setup,
    opts: AcceptanceOptions,
    *,
    prompts_path: str | None = None,
    train_data: str | None = None,
    bucket: int = 32,
    progress: Progress = _no_progress,
    serve: Any = None,
) -> Diagnosis:
    """Levers, module ablations and context on one replay of the prompts, then the verdict; with
    ``train_data`` (the draft's training conversations), the prompts measured against them too; ``serve``: the
    launch command, where one was given."""
    return measure_gap(setup, opts, prompts_path=prompts_path, train_data=train_data, bucket=bucket, progress=progress,
                       serve=serve)[0]  # fmt: skip


def measure_gap(
    setup: Setup,
    opts: AcceptanceOptions,
    *,
    prompts_path: str | None = None,
    train_data: str | None = None,
    bucket: int = 32,
    progress: Progress = _no_progress,
    then: Callable[[Any, Plan, Diagnosis], None] | None = None,
    serve: Any = None,
) -> tuple[Diagnosis, dict[str, PathResult]]:
    """:func:`diagnose_gap` with the per-path results the verdict rests on (fix reads the serving side); ``then``
    is handed the replay, the plan and the diagnosis once it is made (the fault signatures run on them)."""
    from ...core.errors import BadInput
    from ...model.replay import load_sources

    if setup.draft is None:
        raise BadInput("diagnose needs a draft", "pass --draft DIR")
    opts.check()
    from ..acceptance.run import tree_plan

    # what the server drafts is what is measured: every path and lever through the engine's own tree where it
    # builds one (module health and the context are step-1 figures, the same for a chain and a tree)
    tree = tree_plan(setup.serving.engine, opts.num_steps, opts.topk, opts.num_draft_tokens, opts.token_tree)
    if tree is not None and tree.kind == "static":
        opts = replace(opts, num_steps=tree.depth)
    src = load_sources(setup.target, prompts_path, None, opts.max_tokens, opts.limit, None)
    plan = _plan(setup)
    if not plan.paths:
        raise BadInput(
            "neither the serving nor the training side feeds the draft's fc its width of features",
            "run eagle3-doctor inspect for the engine and draft findings",
        )
    cands = candidates(plan.paths[plan.base], setup.target.num_layers)
    # the replays read the decode's taps (True: each batch's reader takes the target's choice over the prompts)
    reads = replay_taps(setup, plan.paths, cands, len(src.sequences), logits_window(opts, True))
    rep = acceptance_sequences(setup, src, opts, progress, reads)
    m = Measurement(setup, rep, plan.paths, tree, plan.drafts, cands=cands, prompt_choice=True)
    ctx = ContextCounts(bucket, len(rep.seqs))
    # one bucket spanning every position: per prompt step-1 [hits, positions], the unablated draft first
    step1 = {name: ContextCounts(1 << 40, len(rep.seqs), STEP1_POSITIONS) for name in ("", *plan.ablations)}
    _replay(setup, rep, plan, m, ctx, step1, opts, progress)
    results = path_results(m)
    for alias, real in plan.aliases.items():
        results[alias] = results[real]
    plan.step1 = {n: c.counts.get(0, np.zeros((len(rep.seqs), 2))) for n, c in step1.items()}
    scan = m.scan_result() or []
    extra = _weights_lever(setup, plan, rep, scan, opts, tree)
    leaning = [] if extra is not None else weights_leaning(scan)
    notes, data = rep.notes + plan.notes + ([f"every path measured for the engine's tree: {tree.label}"] if tree else []), None
    if train_data is not None and plan.base in results:
        sample = training_sample(setup, opts, train_data, plan, bucket, progress)
        data, line = data_finding(ctx, sample, plan.base, train_data)
        if data is None:  # how the two compared, or why they could not be
            notes.append(line)
    d = _verdict(setup, plan, results, ctx, opts.num_steps, notes, len(rep.seqs), extra, leaning, data, train_data is not None)
    d.findings += _beside_verdict(setup, serve, rep, plan, prompts_path)
    if then is not None:
        then(rep, plan, d)
    return d, results


def _beside_verdict(setup: Setup, serve: Any, rep: Any, plan: Plan, prompts_path: str | None) -> list[Any]:
    """The findings that sit beside the verdict rather than decide it: chat markup in the prompts, and (as acceptance
    adds it) the measured cost of the draft's served KV dtype."""
    out = []
    if markup := markup_in_prompts(prompts_path, getattr(setup.target.tokenizer, "chat_template", None)):
        out.append(_markup_finding(markup, len(rep.seqs)))
    return out + kv_dtype_findings(setup, serve, rep, plan.paths, plan.drafts)


def _weights_lever(setup: Setup, plan: Plan, rep: Any, rows: list[Any], opts: AcceptanceOptions, tree: Any) -> LeverRow | None:
    """Where the draft's weights fit other capture points than the configured ones (weights_fit.fitted: a lead of
    practical size with its paired interval above zero on enough prompts), acceptance is measured on those points
    as a lever of its own, in a second replay: the general form of a config whose ids were edited after training.
    That replay runs the target's forward again: the continuation's recording keeps the fit's wirings in the fit's
    window alone (model/recorded.py), where every wiring everywhere passed the memory of a long run."""
    from ..compare.fixes import fix_for
    from ..weights_fit import fitted

    best = fitted(rows)
    if best is None or SERVING not in plan.paths:
        return None
    d = best.diff_to_configured
    assert d is not None  # fitted
    paths = {SERVING: plan.paths[SERVING], "lever:weights": best.spec}
    drafts = {n: plan.drafts[SERVING] for n in paths}
    m = Measurement(setup, rep, paths, tree, drafts, cands=[])
    m.replay(opts.batch_size, "", _no_progress)  # a second, short replay: no second progress bar
    res = path_results(m)
    own, diff = _mal(res, [SERVING, "lever:weights"], opts.num_steps)
    _, s1 = _step1(res, [SERVING, "lever:weights"])
    fix, _ = fix_for(setup.serving, best.spec)
    what = f"feed {_spec(best.spec)}, which the weights fit best (step-1 {d.text()} above the configured points)"
    return LeverRow(WEIGHTS, what, own[1], diff[1], s1[1], fix or None)


def _replay(
    setup: Setup,
    rep: Any,
    plan: Plan,
    m: Measurement,
    ctx: ContextCounts,
    step1: dict,
    opts: AcceptanceOptions,
    progress: Progress,
) -> None:
    """One pass over the prompts: every path, the context buckets and the step-1 ablations, batch by batch."""
    from ..acceptance.measurement import target_choice

    greedy = opts.continuation == "greedy"

    def each(rb: ReplayBatch) -> None:
        starts = [rep.starts[i] for i in rb.index]
        amax = target_choice(setup.target, rb, starts, greedy)
        aux = torch.cat([rb.captured[p] for p in plan.paths[plan.base]], dim=-1)
        # the base path's unroll of this batch has proposed step 1 at every position: counted again, not run again
        done = m.outcomes.get(plan.base)  # m runs plan.drafts: the base path's draft is the one counted here
        first = done.first if done is not None else None
        ctx.add_along(rb, plan.drafts[plan.base], aux, amax, first)
        labels = _labels_fn(rb, amax, greedy)
        for name, counts in step1.items():
            counts.add(rb, plan.ablations.get(name, plan.drafts[plan.base]), aux, labels, starts, None if name else first)

    m.replay(opts.batch_size, "diagnose", progress, each)
