"""eagle3-doctor diagnose: where the acceptance gap lives, measured lever by lever."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ...core.findings import exit_code
from ..options import ACCEPTANCE, JSON_OUT, LAYER_IDS, LOADING, PROMPTS, QUIET, REPORT, SERVED, TRAIN_DATA, TRAIN_RECIPE, options
from ..output import console, progress, write_result
from ..resolve import RESOLVED_LATER, acceptance_options, load_models, preflight_given, resolve_serve


@options(
    **SERVED,
    layer_ids=LAYER_IDS,
    train_recipe=TRAIN_RECIPE,
    prompts=PROMPTS,
    train_data=TRAIN_DATA,
    **ACCEPTANCE,
    **LOADING,
    json_out=JSON_OUT,
    report=REPORT,
    quiet=QUIET,
)
def diagnose_cmd(**given: Any) -> int:
    """Where the acceptance gap lives, measured: levers set back to training, module ablation, context."""
    a = SimpleNamespace(**given)
    preflight_given(a, skip=RESOLVED_LATER)
    r = resolve_serve(a, need_draft=True)  # the launch command is read (and refused) before torch is imported
    from .drafters import dflash_run, is_dflash, is_mtp, mtp_diagnose

    if is_dflash(r):
        return dflash_run(a, r, "diagnose")
    from .peagle_cmd import is_peagle, peagle_run

    if is_peagle(r):
        return peagle_run(a, r, "diagnose")
    if is_mtp(r):
        return mtp_diagnose(a, r)
    from ...analyses.attribution.measure import diagnose_gap
    from ...report.diagnosis import render_diagnosis

    setup = load_models(a, r)
    opts = acceptance_options(a, r, setup)
    with progress(a.quiet) as cb:
        d = diagnose_gap(setup, opts, prompts_path=a.prompts, train_data=a.train_data, progress=cb)
    r.locate(d.findings)
    render_diagnosis(console(stderr=a.json_out == "-"), d)
    from ...analyses.attribution.result import SCHEMA

    write_result(a.json_out, {"schema": SCHEMA, **d.to_dict()}, a.trust_remote_code)
    if a.report:
        from ...report.render import write_diagnosis_report

        write_diagnosis_report(d, a.report)
    return exit_code(d.findings, "error")
