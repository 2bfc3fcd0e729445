"""eagle3-doctor fingerprint: which capture points the draft was trained on, from its weights alone."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ...core.findings import exit_code
from ..formats import check_format, drop_ignored, emit, report_to_stderr
from ..options import (
    DEVICE,
    DRAFT_FORMAT,
    DTYPE,
    ENGINE,
    ENGINE_VERSION,
    FINGERPRINT_NEW_TOKENS,
    FINGERPRINT_STEPS,
    FORMAT,
    JSON_OUT,
    LAYER_IDS,
    LIMIT,
    PROMPTS,
    QUIET,
    REQUIRED_DRAFT,
    SERVING_DESCRIPTION,
    TARGET,
    TRAIN_RECIPE,
    TRAINED_WITH,
    TRUST_REMOTE_CODE,
    options,
)
from ..output import console, progress, write_result
from ..resolve import RESOLVED_LATER, preflight_given, resolve_serve


@options(
    target=TARGET,
    draft=REQUIRED_DRAFT,
    draft_format=DRAFT_FORMAT,
    engine=ENGINE,
    engine_version=ENGINE_VERSION,
    serving_description=SERVING_DESCRIPTION,
    layer_ids=LAYER_IDS,
    train_recipe=TRAIN_RECIPE,
    trained_with=TRAINED_WITH,
    prompts=PROMPTS,
    limit=LIMIT,
    num_steps=FINGERPRINT_STEPS,
    max_new_tokens=FINGERPRINT_NEW_TOKENS,
    dtype=DTYPE,
    device=DEVICE,
    trust_remote_code=TRUST_REMOTE_CODE,
    json_out=JSON_OUT,
    format=FORMAT,
    quiet=QUIET,
)
def fingerprint_cmd(**given: Any) -> int:
    """Which capture points was the draft trained on? Ranked from the draft's weights and the target alone."""
    a = SimpleNamespace(**given)
    check_format(a.format, a.json_out)
    preflight_given(a, skip=RESOLVED_LATER)
    from ...analyses.fingerprint import fingerprint, render_fingerprint
    from ...drafters.registry import refuse_other_kinds
    from ...drafters.run import load_models

    run = resolve_serve(a, need_draft=True)
    refuse_other_kinds(run.draft)
    setup = load_models(run)
    with progress(a.quiet) as cb:
        fp = fingerprint(
            setup, prompts_path=a.prompts, num_steps=a.num_steps, max_new_tokens=a.max_new_tokens, limit=a.limit, progress=cb
        )
    render_fingerprint(console(stderr=report_to_stderr(a.format, a.json_out)), fp)
    write_result(a.json_out, fp.to_dict, a.trust_remote_code)
    from ..gate import fingerprint_findings

    # FPR001 (an error) is the determined fingerprint ranking the configured capture points below the best
    findings = drop_ignored(fingerprint_findings(fp, setup))
    run.locate(findings)
    emit(a.format, findings)
    return exit_code(findings, "error")
