"""Library entry points behind every command: load, resolve both feature paths, run, return data.

The CLI adds nothing but parsing and rendering; everything here is usable from Python. Each entry
point is a short list of named steps: :mod:`loader` (what is loaded), :mod:`replay` (the one
capture loop), :mod:`compare` (compare-hidden's accumulators and verdict) and :mod:`acceptance`
(the estimator, its paths, reference loop and findings).
"""

from __future__ import annotations

from collections.abc import Sequence

# re-exported: the library's acceptance API
from .analyses.acceptance.findings import acc_fix, acceptance_findings, threshold_findings  # noqa: F401
from .analyses.acceptance.options import AcceptanceOptions, Progress, _no_progress, options_from_serve  # noqa: F401
from .analyses.acceptance.report import AcceptanceReport, FormatRequest, acceptance_report, format_acceptance  # noqa: F401
from .analyses.acceptance.run import measure_acceptance, tree_plan  # noqa: F401
from .analyses.compare.comparison import CompareResult  # noqa: F401
from .analyses.compare.run import compare_hidden  # noqa: F401
from .analyses.results import AcceptanceRun  # noqa: F401
from .analyses.weights_fit import candidates as scan_candidates  # noqa: F401
from .core.errors import BadInput
from .core.findings import Finding
from .drafters.kind import Outcome
from .drafters.run import Run
from .model.replay import check_seq_len, iter_captures, load_sources, prompt_sequences  # noqa: F401
from .model.setup import Setup, load_setup  # noqa: F401  (re-exported)


def acceptance(
    setup: Setup,
    *,
    prompts_path: str | None = None,
    train_dump: str | None = None,
    num_steps: int = 7,
    continuation: str = "greedy",
    max_new_tokens: int = 128,
    max_tokens: int | None = 512,
    batch_size: int = 8,
    temperature: float = 0.0,
    temp_mode: str = "sampled",
    topk: int = 1,
    num_draft_tokens: int | None = None,
    token_tree: Sequence[Sequence[int]] | None = None,
    reference: bool = False,
    scan: bool = False,
    limit: int | None = None,
    prompt_ids: Sequence[Sequence[int]] | None = None,
    progress: Progress = _no_progress,
) -> AcceptanceRun:
    """Per-position acceptance of the draft fed the serving (and the training) features.

    prompt_ids: prompts as token ids (library use; overrides prompts_path). Returns a
    :class:`results.AcceptanceRun` (typed; ``to_dict()`` is the JSON document):

    - ``paths``: name -> :class:`results.PathResult` ("serving", "training" when it differs, and the
      draft as the engine runs it where that differs); each: ``acc_k``, ``tau``, ``chain``
      (:class:`results.ChainMetrics`, every engine's convention), ``accepted_lengths`` per prompt,
      ``intervals`` over prompts, ``tree`` / ``temperature`` figures when asked, ``triage`` hints;
    - ``settings``: :class:`results.RunSettings`, what was measured and how (with the engine's ``tree``);
    - ``findings`` (ACC001/ACC002/ACC004, FWD), ``notes``;
    - ``reference``: :class:`results.ReferenceResult`, the sequential loop's figures and whether the
      estimator agrees (reference=True);
    - ``scan``: :class:`results.ScanRow` candidates ranked by step-1 accuracy (scan=True).
    """
    opts = AcceptanceOptions(
        num_steps=num_steps,
        continuation=continuation,
        max_new_tokens=max_new_tokens,
        max_tokens=max_tokens,
        batch_size=batch_size,
        temperature=temperature,
        temp_mode=temp_mode,
        topk=topk,
        num_draft_tokens=num_draft_tokens,
        token_tree=token_tree,
        reference=reference,
        scan=scan,
        limit=limit,
    )
    return measure_acceptance(
        setup, opts, prompts_path=prompts_path, train_dump=train_dump, prompt_ids=prompt_ids, progress=progress
    )


def run_command(command: str, run: Run) -> Outcome:
    """inspect, compare-hidden, acceptance, diagnose or fix on whichever drafter kind ``run.draft`` is (EAGLE-3, MTP,
    DFlash, P-EAGLE; the registry decides, once). Returns the :class:`~eagle3_doctor.drafters.kind.Outcome`:
    ``findings``, ``document()`` (the JSON document), ``render(console)``, ``served`` (the figures the acceptance
    gate reads). Options the kind does not honour are the caller's to refuse (``Kind.honours``)."""
    from .drafters.registry import kind_of

    kind, _ = kind_of(run.draft)
    if command not in kind.commands:
        raise BadInput(f"{command} does not run {kind.label}", f"run one of {', '.join(kind.commands)}")
    if command != "inspect" and run.draft is not None:  # as the CLI: inspect names them, the rest cannot measure
        from .analyses.inspect.tensors import refuse_nonfinite

        refuse_nonfinite(run.draft, run.target)
    return kind.commands[command].run(run)


__all__ = [
    "AcceptanceOptions",
    "AcceptanceReport",
    "AcceptanceRun",
    "CompareResult",
    "Finding",
    "FormatRequest",
    "Setup",
    "acceptance",
    "acceptance_report",
    "compare_hidden",
    "load_setup",
    "options_from_serve",
    "Run",
    "Outcome",
    "run_command",
]
