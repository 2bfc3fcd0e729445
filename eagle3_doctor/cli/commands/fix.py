"""eagle3-doctor fix: a corrected copy of the draft, and what it recovers, measured."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ...core.findings import exit_code, locate
from ..options import ACCEPTANCE, FIX_OUT, JSON_OUT, LOADING, PROMPTS, QUIET, SERVED, TRAIN_RECIPE, options
from ..output import console, progress, write_result
from ..resolve import RESOLVED_LATER, acceptance_options, load_models, preflight_given, resolve_serve


# no --layer-ids: the edits go into the copy's config, and an override would hide them
@options(
    out=FIX_OUT, **SERVED, train_recipe=TRAIN_RECIPE, prompts=PROMPTS, **ACCEPTANCE, **LOADING, json_out=JSON_OUT, quiet=QUIET
)
def fix_cmd(**given: Any) -> int:
    """Write a corrected copy of the draft (config edits the findings carry) and measure what it recovers."""
    a = SimpleNamespace(**given)
    preflight_given(a, skip=RESOLVED_LATER)
    r = resolve_serve(a, need_draft=True)  # the launch command is read (and refused) before torch is imported
    from ...analyses.fixing import check_out, fix_draft
    from ...report.diagnosis import render_fix

    check_out(a.out, r.draft)
    from .drafters import dflash_run, is_dflash, is_mtp, mtp_fix

    if is_dflash(r):
        return dflash_run(a, r, "fix")
    from .peagle_cmd import is_peagle, peagle_run

    if is_peagle(r):
        return peagle_run(a, r, "fix")
    if is_mtp(r):
        return mtp_fix(a, r)
    setup = load_models(a, r)
    opts = acceptance_options(a, r, setup)
    with progress(a.quiet) as cb:
        res = fix_draft(
            setup, opts, a.out, prompts_path=a.prompts, draft_format=a.draft_format, train_recipe=a.train_recipe, progress=cb
        )
    locate(res.findings, r.paths)
    render_fix(console(stderr=a.json_out == "-"), res)
    from ...analyses.fixing import SCHEMA

    write_result(a.json_out, {"schema": SCHEMA, **res.to_dict()}, a.trust_remote_code)
    return exit_code(res.findings, "error")
