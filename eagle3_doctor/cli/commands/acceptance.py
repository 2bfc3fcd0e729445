"""eagle3-doctor acceptance: per-position acceptance and draft accuracy, serving features vs training's,
with the live server's own counters and the prompt format beside them when given."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ..drive import drive
from ..options import (
    ACCEPTANCE,
    ACCEPTANCE_PLOT,
    COMPILE_DRAFT,
    ENGINE_DUMP,
    FORMAT,
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
    TRAINED_WITH,
    options,
)
from ..resolve import RESOLVED_LATER, preflight_given, server_evidence


@options(
    **SERVED,
    layer_ids=LAYER_IDS,
    train_recipe=TRAIN_RECIPE,
    trained_with=TRAINED_WITH,
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
    format=FORMAT,
    report=REPORT,
    quiet=QUIET,
    **PROMPT_FORMAT,
    engine_dump=ENGINE_DUMP,
)
def acceptance_cmd(**given: Any) -> int:
    """Per-position acceptance and draft accuracy under the serving and the training features."""
    a = SimpleNamespace(**given)
    preflight_given(a, skip=RESOLVED_LATER)
    # read (and reject) server evidence before torch is imported
    measured = server_evidence(a.server_metrics, a.server_metrics_before, a.server_log, a.server_model)
    # --engine-dump: the engine did the target's forward; the draft runs alone on its capture
    return drive("acceptance", acceptance_cmd, a, need_target=a.engine_dump is None, evidence={"measured": measured},
                 preflighted=True)  # fmt: skip
