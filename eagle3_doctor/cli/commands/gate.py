"""eagle3-doctor gate: inspect + compare-hidden + acceptance under one policy, for CI (cli/gate.py runs it)."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

from ...core.findings import exit_code, locate
from ...io.positions import place
from ..formats import check_format, emit, report_to_stderr
from ..options import (
    BASELINE,
    DEVICE,
    DRAFT_FORMAT,
    DTYPE,
    ENGINE_VERSION,
    FAIL_ON,
    FORMAT,
    GATE_DRAFT,
    GATE_ENGINE,
    GATE_MIN_TAU,
    JSON_OUT,
    LIMIT,
    MAX_REGRESSION,
    MIN_COSINE,
    MIN_STEP1_ACCURACY,
    POLICY,
    PROMPTS,
    SARIF,
    SUMMARY,
    TARGET,
    TRAIN_DUMP,
    TRAIN_RECIPE,
    TRAINED_WITH,
    TRUST_REMOTE_CODE,
    options,
)
from ..output import console, write_result
from ..resolve import RESOLVED_LATER, preflight_given, resolve_models, train_recipe_of


@options(
    target=TARGET,
    draft=GATE_DRAFT,
    policy=POLICY,
    train_recipe=TRAIN_RECIPE,
    trained_with=TRAINED_WITH,
    train_dump=TRAIN_DUMP,
    baseline=BASELINE,
    engine=GATE_ENGINE,
    engine_version=ENGINE_VERSION,
    draft_format=DRAFT_FORMAT,
    prompts=PROMPTS,
    min_cosine=MIN_COSINE,
    min_step1_accuracy=MIN_STEP1_ACCURACY,
    min_tau=GATE_MIN_TAU,
    max_regression=MAX_REGRESSION,
    fail_on=FAIL_ON,
    limit=LIMIT,
    dtype=DTYPE,
    device=DEVICE,
    trust_remote_code=TRUST_REMOTE_CODE,
    json_out=JSON_OUT,
    format=FORMAT,
    summary=SUMMARY,
    sarif=SARIF,
)
def gate_cmd(**given: Any) -> int:
    """CI gate: inspect + compare-hidden + acceptance under one policy. Exit 0 pass, 1 fail, 2 bad input."""
    a = SimpleNamespace(**given)
    check_format(a.format, a.json_out)
    preflight_given(a, skip=RESOLVED_LATER)
    from ...io.hub import role_paths
    from ...report.render import render_gate
    from ..gate import run_gate
    from ..gate_policy import Policy
    from ..gate_report import markdown, write_sarif, write_summary
    from ..validate import check_policy_values

    flags = {k: getattr(a, k) for k in ("engine_version", "min_cosine", "min_step1_accuracy", "min_tau", "max_regression")}
    engine = a.engine.lower() if a.engine else a.engine
    pol = Policy.load(a.policy, {"engine": engine, **flags, "fail_on": a.fail_on, "limit": a.limit})
    check_policy_values(pol, f"policy file {a.policy}" if a.policy else "gate options")
    target_dir, draft_dir = resolve_models(a.target, a.draft, a.draft_format)
    assert target_dir is not None and draft_dir is not None  # both options required, non-empty (preflight_given)
    res = run_gate(
        target=target_dir,
        draft=draft_dir,
        policy=pol,
        prompts=a.prompts,
        baseline=a.baseline,
        dtype=a.dtype,
        device=a.device,
        draft_format=a.draft_format,
        trust_remote_code=a.trust_remote_code,
        train_recipe=train_recipe_of(a),
        train_dump=a.train_dump,
    )
    locate(res.findings, role_paths(a.target, a.draft, target_dir=target_dir, draft_dir=draft_dir))
    place(res.findings)  # each config key at its line and column in the file the run read
    text = markdown(res, a.draft)
    con = console(stderr=report_to_stderr(a.format, a.json_out))
    render_gate(con, res)
    if os.environ.get("GITHUB_ACTIONS") == "true":  # annotations on the PR, at the config key to change
        from ..gate_report import github_annotations

        for line in github_annotations(res, a.draft):
            print(line, flush=True)
    write_summary(text, a.summary)
    write_sarif(res, a.draft, a.sarif)
    write_result(a.json_out, res.to_dict, a.trust_remote_code)
    emit(a.format, res.findings)
    return exit_code(res.findings, pol.fail_on, passed=res.passed)
