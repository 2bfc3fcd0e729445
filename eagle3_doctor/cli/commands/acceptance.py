"""eagle3-doctor acceptance: per-position acceptance and draft accuracy, serving features vs training's,
with the live server's own counters and the prompt format beside them when given."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Optional

from ...core.findings import exit_code
from ..options import (
    ACCEPTANCE,
    ACCEPTANCE_PLOT,
    COMPILE_DRAFT,
    JSON_OUT,
    LAYER_IDS,
    LOADING,
    MIN_ACCEPT_RATE,
    MIN_TAU,
    PROMPT_FORMAT,
    PROMPTS,
    QUIET,
    REFERENCE_TARGET,
    REPORT,
    SAMPLING,
    SERVED,
    SERVER_EVIDENCE,
    STREAM_LAYERS,
    TRAIN_DUMP,
    TRAIN_RECIPE,
    options,
)
from ..output import console, progress, write_result
from ..resolve import RESOLVED_LATER, acceptance_options, load_models, preflight_given, resolve_serve


@options(
    **SERVED,
    layer_ids=LAYER_IDS,
    train_recipe=TRAIN_RECIPE,
    train_dump=TRAIN_DUMP,
    prompts=PROMPTS,
    **ACCEPTANCE,
    **SAMPLING,
    compile_draft=COMPILE_DRAFT,
    min_accept_rate=MIN_ACCEPT_RATE,
    min_tau=MIN_TAU,
    plot=ACCEPTANCE_PLOT,
    **SERVER_EVIDENCE,
    **LOADING,
    stream_layers=STREAM_LAYERS,
    reference_target=REFERENCE_TARGET,
    json_out=JSON_OUT,
    report=REPORT,
    quiet=QUIET,
    **PROMPT_FORMAT,
)
def acceptance_cmd(**given: Any) -> int:
    """Per-position acceptance and draft accuracy under the serving and the training features."""
    a = SimpleNamespace(**given)
    preflight_given(a, skip=RESOLVED_LATER)
    # read (and reject) server evidence and the launch command before torch is imported
    measured = _server_evidence(a.server_metrics, a.server_metrics_before, a.server_log, a.server_model)
    r = resolve_serve(a, need_draft=True)
    from .drafters import dflash_run, is_dflash, is_mtp, mtp_acceptance

    if is_dflash(r):
        return dflash_run(a, r, "acceptance")
    from .peagle_cmd import is_peagle, peagle_run

    if is_peagle(r):
        return peagle_run(a, r, "acceptance")
    if is_mtp(r):
        return mtp_acceptance(a, r)
    from ...doctor import FormatRequest, acceptance_report

    setup = load_models(a, r)
    if a.compile_draft:
        setup.compile_draft()
    opts = acceptance_options(a, r, setup)
    fmt = None
    if a.train_template or a.serve_template or a.train_system_prompt is not None or a.requests:
        fmt = FormatRequest(a.prompts, a.requests, a.train_template, a.serve_template, a.train_system_prompt, a.seed)
    with progress(a.quiet) as cb:
        rep = acceptance_report(
            setup,
            opts,
            prompts_path=a.prompts,
            train_dump=a.train_dump,
            formats=fmt,
            serve=r.serve,
            measured=measured,
            min_accept_rate=a.min_accept_rate,
            min_tau=a.min_tau,
            progress=cb,
        )
    both = _both_ways(a, setup, opts, rep)
    r.locate(rep.run.findings)
    _render_acceptance(rep, a.json_out, a.report, a.plot, a.trust_remote_code, both)
    return exit_code(rep.run.findings, "error")  # an ACC003 threshold the user set fails too


def _both_ways(a: SimpleNamespace, setup: Any, opts: Any, rep: Any) -> Any:
    """--reference-target: the same measurement with the 16-bit target; QNT006 joins the run's findings."""
    if not a.reference_target:
        return None
    from ...analyses.quant_drift import acceptance_reference, load_reference

    ref = load_reference(setup, a.reference_target, a.trust_remote_code)
    both, found = acceptance_reference(setup, ref, opts, prompts_path=a.prompts, train_dump=a.train_dump, run=rep.run)
    rep.run.findings.extend(found)
    return both


def _server_evidence(metrics: Optional[str], before: Optional[str], log: Optional[str], model: Optional[str]) -> Any:
    if not (metrics or before or log):
        return None
    from ...analyses.server_metrics.measured import load_measured

    return load_measured(metrics, before, log, engine=None, model=model)


def _render_acceptance(
    rep: Any, json_out: Optional[str], report: Optional[str], plot: Optional[str], trust_remote_code: bool, both: Any = None
) -> None:
    from ...report.render import render_acceptance

    run = rep.run
    con = console(stderr=json_out == "-")
    render_acceptance(con, run)
    doc = rep.to_dict()
    if both is not None:
        from ...analyses.quant_drift import both_ways_lines

        for line in both_ways_lines(both):
            con.print(line, markup=False, highlight=False)
        doc["reference_target"] = both.to_dict()
    if rep.server is not None:
        from ...report.server_metrics import render_comparison

        render_comparison(con, rep.server)
    if rep.formats is not None:
        from ...report.templates import render_format_table

        render_format_table(con, rep.formats)
    write_result(json_out, doc, trust_remote_code)
    if plot or report:
        from ...report.render import write_acceptance_report

        write_acceptance_report(run, report, plot)
    if run.reference is not None and not run.reference.agrees_with_estimator:
        console(stderr=True).print("warning: the estimator and the reference loop disagree (see JSON 'reference')", markup=False)
