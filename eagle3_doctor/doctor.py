"""Library entry points behind every command: load, resolve both feature paths, run, return data.

The CLI adds nothing but parsing and rendering; everything here is usable from Python. Each entry
point is a short list of named steps: :mod:`loader` (what is loaded), :mod:`replay` (the one
capture loop), :mod:`compare` (compare-hidden's accumulators and verdict) and :mod:`acceptance`
(the estimator, its paths, reference loop and findings).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

# re-exported: the library's acceptance API
from .analyses.acceptance.findings import acc_fix, acceptance_findings, threshold_findings  # noqa: F401
from .analyses.acceptance.options import AcceptanceOptions, Progress, _no_progress, options_from_serve  # noqa: F401
from .analyses.acceptance.run import measure_acceptance, tree_plan  # noqa: F401
from .analyses.compare.comparison import CompareResult, HiddenComparison, comparison_result
from .analyses.results import AcceptanceRun  # noqa: F401
from .analyses.weights_fit import candidates as scan_candidates  # noqa: F401
from .core.errors import BadInput
from .core.findings import Finding
from .model.replay import check_seq_len, iter_captures, load_sources, prompt_sequences  # noqa: F401
from .model.setup import Setup, load_setup  # noqa: F401  (re-exported)


@torch.inference_mode()
def compare_hidden(
    setup: Setup,
    *,
    prompts_path: str | None = None,
    train_dump: str | None = None,
    max_tokens: int | None = 512,
    batch_size: int = 8,
    matrix: bool = False,
    limit: int | None = None,
    prompt_ids: Sequence[Sequence[int]] | None = None,
    progress: Progress = _no_progress,
) -> CompareResult:
    """Training features vs the serving engine's, slot by slot, on replayed prompts or a training dump.

    prompt_ids: token sequences to replay as they are (library use; overrides prompts_path).
    Returns a :class:`compare.CompareResult`: ``serving`` (the engine's resolved ids and capture points),
    ``train_spec``/``train_source`` (what was trained on; for a dump, identified numerically),
    ``findings`` (symbolic CAP/ENG, dump NUM003/NUM004, numeric NUM001/NUM002), ``slots`` (per slot:
    mean/min cosine, relative L2, worst positions), ``matrix`` (slot x capture-point similarities, with
    --matrix or a dump), ``dump`` (what the dump holds), ``n_sequences``/``n_tokens`` and ``notes``.
    """
    tgt = setup.target
    if not train_dump and setup.train_spec is None:
        raise BadInput("no training side: nothing to compare against", "pass --train-recipe, --train-dump or --draft")
    src = load_sources(tgt, prompts_path, train_dump, max_tokens, limit, prompt_ids)
    seqs = src.sequences
    for s in seqs:
        check_seq_len(tgt, len(s))
    cmp = HiddenComparison(setup.serving, setup.train_spec, src.dump, tgt.num_layers, tgt.hidden_size, matrix)
    from .analyses.weights_fit import WeightsFit, fit_candidates, fit_outcome, text_labels
    from .model.stream import begin_replay, replay_note

    # the weights' own fit beside the config's training side, on the same replay (a dump's side is its own tensors)
    cands = fit_candidates(setup, setup.train_spec) if setup.train_spec is not None and src.dump is None else None
    fit = WeightsFit(setup.draft, setup.train_spec, cands) if cands and setup.draft is not None and setup.train_spec else None
    points = cmp.points | (fit.points if fit is not None else set())
    begin_replay(tgt)
    for rb in iter_captures(
        tgt,
        seqs,
        points,
        batch_size=batch_size,
        want_logits=fit is not None,
        progress=lambda d, n: progress("compare-hidden", d, n),
    ):
        cmp.add(rb)
        if fit is not None:
            fit.add(rb, text_labels(tgt, rb), [0] * len(rb.index))
    res = comparison_result(cmp, setup, src, train_dump)
    if fit is not None:
        finding, line = fit_outcome(fit.rows(), setup)
        res.findings += [finding] if finding is not None else []
        res.notes += [line] if line else []
    elif src.dump is None:
        res.notes.append(
            "the weights' own fit was not measured (no EAGLE-3 draft with aux slots): the training side is the config's"
        )
    if (note := replay_note(tgt)) is not None:
        res.notes.append(note)
    return res


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


@dataclass
class FormatRequest:
    """Replay conversations rendered the training way and the serving way: what the prompt format costs."""

    prompts: str | None
    requests: str | None
    train_template: str | None
    serve_template: str | None
    train_system_prompt: str | None
    seed: int = 0


@dataclass
class AcceptanceReport:
    """The acceptance command's result: the run, plus the server's figures and the prompt-format table."""

    run: AcceptanceRun
    server: Any = None  # serving.ServingComparison
    formats: Any = None  # templates.FormatComparison

    def to_dict(self) -> dict[str, Any]:
        doc = self.run.to_dict()
        if self.server is not None:
            doc["server"] = self.server.to_dict()
        if self.formats is not None:
            doc["prompt_format"] = self.formats.to_dict()
        return doc


def format_acceptance(setup: Setup, req: FormatRequest, opts: AcceptanceOptions, progress: Progress = _no_progress) -> Any:
    """Acceptance with the same conversations in both prompt formats (templates.acceptance_by_format)."""
    from .analyses.templates.by_format import acceptance_by_format
    from .analyses.templates.chat_template import load_template
    from .io.conversations import load_dataset, load_requests

    if req.requests:
        convs = load_requests(req.requests)
    elif req.prompts:
        convs = load_dataset(req.prompts, "prompts file").conversations
    else:
        raise BadInput(
            "the prompt-format comparison needs conversations", "pass --prompts FILE or --requests FILE (chat messages)"
        )
    if not convs:
        raise BadInput("no chat conversations to render in two formats", "pass --prompts or --requests with messages")
    convs = convs[: opts.limit] if opts.limit else convs
    tok, tdir = setup.target.tokenizer, setup.target.name
    train = load_template(req.train_template, tdir, tok, side="train", system_prompt=req.train_system_prompt)
    serve = load_template(req.serve_template, tdir, tok, side="serve")
    return acceptance_by_format(setup, convs, train, serve, opts, seed=req.seed, progress=progress)


def acceptance_report(
    setup: Setup,
    opts: AcceptanceOptions,
    *,
    prompts_path: str | None = None,
    train_dump: str | None = None,
    formats: FormatRequest | None = None,
    serve: Any = None,
    measured: Any = None,
    min_accept_rate: float | None = None,
    min_tau: float | None = None,
    progress: Progress = _no_progress,
) -> AcceptanceReport:
    """The acceptance command: the run (or both prompt formats), threshold checks (ACC003), the
    launch command's settings, and the server's own figures against the prediction."""
    fmt = None
    if formats is not None:
        fmt = format_acceptance(setup, formats, opts, progress)
        run = fmt.serve
        run.findings = fmt.findings + run.findings
    else:
        run = measure_acceptance(setup, opts, prompts_path=prompts_path, train_dump=train_dump, progress=progress)
    run.findings += threshold_findings(run.paths, min_accept_rate, min_tau)
    if serve is not None:
        run.settings.serve = serve.to_dict()
    server = None
    if measured is not None:
        from .analyses.server_metrics.prediction import compare_to_prediction

        server, srv_findings = compare_to_prediction(
            measured, run.paths, run.settings, acc_fix(setup) if "training" in run.paths else None
        )
        run.findings.extend(srv_findings)
    return AcceptanceReport(run, server, fmt)


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
]
