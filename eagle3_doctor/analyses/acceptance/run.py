"""The acceptance run, each step named: options -> sequences -> feature paths -> replay (estimator per path,
scan) -> results in prompt order -> reference loop -> findings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from ...core.errors import BadInput, ResourceError
from ...core.taps import FeatureSpec
from ...model.replay import Sources, check_seq_len, load_sources
from ..results import AcceptanceRun, RunSettings, TreePlan
from .findings import acceptance_findings, triage
from .measurement import Measurement, path_results
from .options import AcceptanceOptions, Progress, Replay, _no_progress
from .reference import run_reference

if TYPE_CHECKING:
    from ...model.setup import Setup


def acceptance_sequences(setup: Setup, src: Sources, opts: AcceptanceOptions, progress: Progress) -> Replay:
    """Prompts plus the target's greedy continuation, or the text (or dump) as given."""
    from ...model.continuation import greedy_continue

    tgt = setup.target
    notes = list(setup.notes) + src.notes
    if src.dump is not None:
        seqs, starts = src.sequences, [0] * len(src.dump)
        if opts.continuation == "greedy":
            notes.append("a training dump fixes the text: acceptance is measured along it (--continuation text)")
            opts = replace(opts, continuation="text")
    elif opts.continuation == "greedy":
        from ...model.stream import refuse_generation

        refuse_generation(tgt, "the greedy continuation")
        for p in src.prompts:
            check_seq_len(tgt, len(p.ids) + opts.max_new_tokens)
        batch = opts.batch_size
        if opts.continuation_auto:
            from ...model.static import decode_batch_size

            longest = max((len(p.ids) for p in src.prompts), default=1)
            batch = decode_batch_size(tgt, longest, longest + opts.max_new_tokens)
        try:
            seqs = greedy_continue(
                tgt,
                src.sequences,
                opts.max_new_tokens,
                batch,
                progress=lambda d, n: progress("greedy continuation (tokens x batches)", d, n),
            )
        except torch.cuda.OutOfMemoryError:
            raise ResourceError(
                "CUDA out of memory while generating continuations",
                f"retry with --batch-size {max(1, batch // 2)}",
            ) from None
        starts = [len(p.ids) - 1 for p in src.prompts]
    else:
        seqs, starts = src.sequences, [0] * len(src.prompts)
    for s in seqs:
        check_seq_len(tgt, len(s))
    return Replay(src, seqs, starts, opts, notes)


def feature_paths(setup: Setup, dump: bool, n_aux: int, notes: list[str]) -> dict[str, FeatureSpec | None]:
    """The measurable paths: serving, and training where it differs (None = the dump's own tensors)."""
    serving = setup.serving
    paths: dict[str, FeatureSpec | None] = {"serving": serving.spec}
    if serving.failure is not None:
        notes.append(f"{serving.label} fails at {serving.failure.when}: {serving.failure.message}")
    if dump:
        paths["training"] = None
    elif setup.train_spec is not None and setup.train_spec != serving.spec:
        paths["training"] = setup.train_spec
    elif setup.train_spec is not None:
        notes.append("training and serving feature paths are the same capture points: one path measured")
    for name, spec in paths.items():
        if spec is not None and len(spec) != n_aux:
            notes.append(f"{name} path feeds {len(spec)} slot(s) but the draft's fc takes {n_aux}: not measurable")
    return {n: s for n, s in paths.items() if s is None or len(s) == n_aux}


def run_settings(setup: Setup, rep: Replay, tree: TreePlan | None, train_dump: str | None) -> RunSettings:
    """What was measured and how."""
    tgt, serving, o, seqs = setup.target, setup.serving, rep.opts, rep.seqs
    return RunSettings(
        target=tgt.name,
        draft=setup.draft_summary(),
        engine=serving.label,
        num_steps=o.num_steps,
        continuation=o.continuation,
        max_new_tokens=o.max_new_tokens if o.continuation == "greedy" else None,
        temperature=o.temperature,
        temperature_mode=o.temp_mode if o.temperature > 0 else None,
        topk=o.topk,
        num_draft_tokens=o.num_draft_tokens,
        dtype=str(tgt.dtype).replace("torch.", ""),
        device=str(tgt.device),
        compiled=setup.compiled,
        sequences=len(seqs),
        tokens=sum(len(s) for s in seqs),
        serving_spec=tuple(serving.spec),
        serving_source=serving.source,
        training_spec=tuple(setup.train_spec) if setup.train_spec else None,
        training_source=setup.train_source if rep.src.dump is None else f"dump {train_dump}",
        tree=tree,
    )


@torch.inference_mode()
def measure_acceptance(
    setup: Setup,
    opts: AcceptanceOptions,
    *,
    prompts_path: str | None = None,
    train_dump: str | None = None,
    prompt_ids: Sequence[Sequence[int]] | None = None,
    progress: Progress = _no_progress,
) -> AcceptanceRun:
    """Acceptance of ``setup.draft`` on each feature path (see :func:`doctor.acceptance` for the fields)."""
    if setup.draft is None:
        raise BadInput("acceptance needs a draft", "pass --draft DIR")
    opts.check()
    if opts.reference:
        from ...model.stream import refuse_generation

        refuse_generation(setup.target, "the reference loop (--reference-loop)")
    tree = tree_plan(setup.serving.engine, opts.num_steps, opts.topk, opts.num_draft_tokens, opts.token_tree)
    if tree is not None and tree.kind == "static":
        opts = replace(opts, num_steps=tree.depth)
    src = load_sources(setup.target, prompts_path, train_dump, opts.max_tokens, opts.limit, prompt_ids)
    rep = acceptance_sequences(setup, src, opts, progress)
    paths = feature_paths(setup, src.dump is not None, setup.draft.config.num_aux_states, rep.notes)
    # issue 13: the serving features also through the draft as the engine runs it (draft/as_served.py)
    from ..as_served import measured_findings, served_paths

    served = served_paths(setup)
    drafts = dict.fromkeys(paths, setup.draft)
    if "serving" in paths:
        for n, d in served.drafts.items():
            paths[n], drafts[n] = setup.serving.spec, d
    # the weights' own fit, always: the one training side a config edited after training cannot mislead
    from ..weights_fit import fit_candidates

    configured = setup.train_spec or setup.serving.spec
    cands = fit_candidates(setup, configured, product=opts.scan)
    m = Measurement(setup, rep, paths, tree, drafts, cands=cands)
    from ...model.stream import begin_replay, replay_note

    begin_replay(setup.target)
    m.replay(opts.batch_size, "acceptance", progress)
    if (note := replay_note(setup.target)) is not None:
        rep.notes.append(note)
    results = path_results(m)
    ref = run_reference(setup, rep, results, tree, progress) if opts.reference else None
    scan_res = m.scan_result()
    settings = run_settings(setup, rep, tree, train_dump)
    measured = measured_findings(served, results, rep.opts.num_steps)
    findings = acceptance_findings(results, scan_res, setup, measured) + measured
    for res in results.values():
        res.triage = triage(res, settings.dtype)
    return AcceptanceRun(results, settings, findings, rep.notes, ref, scan_res if opts.scan else None)


def tree_plan(
    engine: str, num_steps: int, topk: int, num_draft_tokens: int | None, token_tree: Sequence[Sequence[int]] | None
) -> TreePlan | None:
    """Which tree the engine builds for these settings (exact acceptance for it: tree.py)."""
    if token_tree:
        paths = [list(p) for p in token_tree]
        depth, width = max(len(p) for p in paths), max(p[-1] for p in paths) + 1
        label = f"exact greedy acceptance of the vLLM speculative_token_tree ({len(paths)} nodes, depth {depth})"
        return TreePlan("static", depth, len(paths) + 1, label, paths=paths, width=width)
    if topk <= 1:
        return None
    if engine == "vllm":
        return _full_static_tree(num_steps, topk)
    return _sglang_tree(num_steps, topk, num_draft_tokens)


def _full_static_tree(num_steps: int, topk: int) -> TreePlan:
    import itertools

    paths = [list(p) for d in range(1, num_steps + 1) for p in itertools.product(range(topk), repeat=d)]
    if len(paths) > 20000:
        raise BadInput(
            f"a full top-{topk} tree of depth {num_steps} has {len(paths)} nodes",
            "pass the server's speculative_token_tree (--serve-cmd) or a smaller --topk/--num-steps",
        )
    label = f"exact greedy acceptance of a full top-{topk} static tree of depth {num_steps} ({len(paths)} nodes)"
    return TreePlan("static", num_steps, len(paths) + 1, label, paths=paths, width=topk)


def _sglang_tree(num_steps: int, topk: int, num_draft_tokens: int | None) -> TreePlan:
    from ..tree import check_tree_settings, full_candidates

    ndt = num_draft_tokens if num_draft_tokens is not None else full_candidates(topk, num_steps) + 1
    check_tree_settings(topk, num_steps, ndt)
    label = (
        f"exact greedy acceptance of SGLang's tree: topk {topk}, {num_steps} steps, {ndt} draft tokens "
        f"(best {ndt - 1} of {full_candidates(topk, num_steps)} scored candidates)"
    )
    if num_draft_tokens is None:
        label += "; --num-draft-tokens not given: every candidate kept"
    return TreePlan("sglang", num_steps, ndt, label, topk=topk)
