"""The acceptance run, each step named: options -> sequences -> feature paths -> replay (estimator per path,
scan) -> results in prompt order -> reference loop -> findings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch

from ...core.errors import BadInput, ResourceError
from ...core.taps import CapturePoint, FeatureSpec, TapWindow
from ...model.replay import Sources, check_seq_len, load_sources
from ..results import AcceptanceRun, RunSettings, TreePlan
from .findings import acceptance_findings, triage
from .kv_dtype import kv_dtype_findings
from .measurement import Measurement, configured_spec, logits_window, path_results, replay_taps
from .options import AcceptanceOptions, Progress, Replay, _no_progress
from .reference import run_reference

if TYPE_CHECKING:
    from ...model.recorded import Recording
    from ...model.setup import Setup
    from ...model.target import Target


def acceptance_sequences(
    setup: Setup,
    src: Sources,
    opts: AcceptanceOptions,
    progress: Progress,
    record: Mapping[CapturePoint, TapWindow] | None = None,
) -> Replay:
    """Prompts plus the target's greedy continuation, or the text (or dump) as given. The taps ``record`` names are
    kept, each in its window, as the plain continuation's decode runs them, where they fit (model/recorded.py): the
    replay then reads them and runs no second target forward."""
    from ...model.continuation import greedy_continue

    tgt = setup.target
    notes = list(setup.notes) + src.notes
    recorded = None
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
        batch, recorded, label = _plan(tgt, src, opts, record)
        try:
            got = _speculative(setup, src.sequences, opts, batch, progress, notes) if opts.speculative else None
            seqs = (
                got
                if got is not None
                else greedy_continue(
                    tgt,
                    src.sequences,
                    opts.max_new_tokens,
                    batch,
                    progress=lambda d, n: progress(label, d, n),
                    record=recorded,
                )
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
    return Replay(src, seqs, starts, opts, notes, recorded)


def _plan(
    tgt: Target, src: Sources, opts: AcceptanceOptions, record: Mapping[CapturePoint, TapWindow] | None
) -> tuple[int, Recording | None, str]:
    """(sequences per continuation batch, the recording of ``record``'s taps or None, the plan's progress label)."""
    batch, recorded = opts.batch_size, None
    # a speculative pass writes 1 + K slots past a row's end before it stops
    extra = 2 * opts.num_steps + 2 if opts.speculative else 0
    longest = max((len(p.ids) for p in src.prompts), default=1)
    if record and not opts.speculative:
        from ...model.recorded import plan_recording

        recorded = plan_recording(tgt, record, len(src.prompts), longest + opts.max_new_tokens, longest)
    if opts.continuation_auto:
        from ...model.recorded import recording_bytes
        from ...model.static import decode_batch_size

        n = max(1, len(src.prompts))  # a prompt token's taps, on average over the sequences (some points keep a few)
        reserve, taps = (
            (recorded.nbytes, recording_bytes(tgt, recorded.windows, n, 1, 1) // n) if recorded is not None else (0, 0)
        )
        batch = decode_batch_size(tgt, longest, longest + opts.max_new_tokens + extra, reserve=reserve, taps_per_token=taps)
        # as many batches as the memory asks for, of equal size: 1,024 sequences where 599 fit run as 512 + 512,
        # not 599 + 425, so no batch holds a cache larger than the work needs
        batch = -(-len(src.prompts) // -(-len(src.prompts) // batch)) if src.prompts else batch
    return batch, recorded, _plan_label(tgt, len(src.prompts), batch, longest + opts.max_new_tokens + extra, recorded)


def _plan_label(tgt: Target, n: int, batch: int, length: int, recorded: Recording | None) -> str:
    """The continuation's plan, its first progress line: "greedy continuation (512 sequences in 1 batch, 61.2 GB)",
    the KV cache of one batch plus the taps recorded for the replay."""
    from ...core.graphs import slots
    from ...model.static import kv_bytes_per_token

    batch = max(1, min(batch, n))
    nb = -(-n // batch)
    gb = (kv_bytes_per_token(tgt) * batch * slots(length) + (recorded.nbytes if recorded is not None else 0)) / 1e9
    return f"greedy continuation ({n} sequences in {nb} batch{'es' if nb > 1 else ''}, {gb:.1f} GB)"


def _speculative(
    setup: Setup, prompts: list[list[int]], opts: AcceptanceOptions, batch: int, progress: Progress, notes: list[str]
) -> list[list[int]] | None:
    """The greedy continuation generated by speculative decoding with the draft on the serving path's features
    (the same tokens, analyses/spec_continuation.py); None, with a note, where it cannot run."""
    from ..spec_continuation import speculative_continue

    draft, spec = setup.draft, setup.serving.spec
    why = None
    # an MTP head or a DFlash draft sits in the same slot under another class (its kind says which)
    if draft is None or getattr(draft, "kind", None) != "eagle3":
        why = f"a {getattr(draft, 'kind', 'missing')} draft has no chain decoder"
    elif spec is None or setup.serving.failure is not None or len(spec) != draft.config.num_aux_states:
        why = "the serving path does not feed the draft"
    got = None
    if why is None:
        assert draft is not None and spec is not None  # the two checks above set why otherwise
        got = speculative_continue(setup.target, draft, spec, prompts, opts, batch, progress)
    if got is None:
        notes.append(f"--continuation speculative: {why or 'this target runs without the native cache'}; "
                     "the continuation was generated plainly (the same tokens)")  # fmt: skip
        return None
    seqs, counted = got
    notes.append(
        f"the greedy continuation was generated by speculative decoding with the draft (K = {opts.num_steps}, serving "
        f"path): {counted.tokens_per_pass:.2f} tokens per verify pass, {counted.passes} passes over "
        f"{len(prompts)} prompts in batches of up to {batch}"
    )
    return seqs


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
    serve: Any = None,
) -> AcceptanceRun:
    """Acceptance of ``setup.draft`` on each feature path (see :func:`doctor.acceptance` for the fields); ``serve``: the
    launch command, where one was given."""
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
    path_notes: list[str] = []
    paths = feature_paths(setup, src.dump is not None, setup.draft.config.num_aux_states, path_notes)
    # the serving features also through the draft as the engine runs it (draft/as_served.py)
    from ..as_served import measured_findings, served_paths

    served = served_paths(setup)
    drafts = dict.fromkeys(paths, setup.draft)
    if "serving" in paths:
        for n, d in served.drafts.items():
            paths[n], drafts[n] = setup.serving.spec, d
    # the weights' own fit, always: the one training side a config edited after training cannot mislead
    from ..weights_fit import fit_candidates

    cands = fit_candidates(setup, configured_spec(setup), product=opts.scan)
    reads = replay_taps(setup, paths, cands or [], len(src.sequences), logits_window(opts))
    rep = acceptance_sequences(setup, src, opts, progress, reads)
    rep.notes += path_notes
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
    findings += kv_dtype_findings(setup, serve, rep, paths, drafts)  # after the judgment's: a cost, not a verdict
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
