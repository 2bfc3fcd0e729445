"""eagle3-doctor diagnose: where the acceptance gap lives, measured lever by lever."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ...core.errors import BadInput
from ..drive import drive
from ..options import (
    ACCEPTANCE,
    ENGINE_DUMP,
    FORMAT,
    JSON_OUT,
    LAYER_IDS,
    LOADING,
    PROMPTS,
    QUIET,
    REPORT,
    SERVED,
    SERVER_LOG,
    SERVER_MODEL,
    SERVER_TEMPERATURE,
    TRAIN_DATA,
    TRAIN_RECIPE,
    TRAINED_WITH,
    options,
)
from ..resolve import RESOLVED_LATER, preflight_given
from ..server_batches import SERVER_METRICS_AT, SERVER_METRICS_BEFORE_AT, diagnose_evidence, split_evidence


@options(
    **SERVED,
    layer_ids=LAYER_IDS,
    train_recipe=TRAIN_RECIPE,
    trained_with=TRAINED_WITH,
    prompts=PROMPTS,
    train_data=TRAIN_DATA,
    **ACCEPTANCE,
    # SERVER_EVIDENCE, its scrapes repeatable: one per batch size
    server_metrics=SERVER_METRICS_AT,
    server_metrics_before=SERVER_METRICS_BEFORE_AT,
    server_log=SERVER_LOG,
    server_model=SERVER_MODEL,
    server_temperature=SERVER_TEMPERATURE,
    **LOADING,
    json_out=JSON_OUT,
    format=FORMAT,
    report=REPORT,
    quiet=QUIET,
    engine_dump=ENGINE_DUMP,
)
def diagnose_cmd(**given: Any) -> int:
    """Where the acceptance gap lives, measured: levers set back to training, module ablation, context; with the
    server's figures, the runtime fault classes that would produce them, simulated and ranked."""
    a = SimpleNamespace(**given)
    # the scrapes as FILE@N: the files themselves join the preflight (an output written over one is refused)
    after, prior = split_evidence(a.server_metrics, a.server_metrics_before)
    files = {"server_metrics": [p for p, _ in after] or None, "server_metrics_before": [p for p, _ in prior] or None}
    preflight_given(SimpleNamespace(**{**vars(a), **files}), skip=RESOLVED_LATER)
    # read (and reject) server evidence before torch is imported: one profile, or one per batch size
    measured = diagnose_evidence(after, prior, a.server_log, a.server_model)
    if a.server_temperature is not None:
        if measured is None:
            raise BadInput("--server-temperature states the live workload's temperature: it needs --server-metrics",
                           "pass the server's figures with --server-metrics, or drop --server-temperature")  # fmt: skip
        for m in [p.measured for p in measured] if isinstance(measured, list) else [measured]:
            m.temperature = a.server_temperature  # the sampled classes are predicted at it (analyses/faults)
    # --engine-dump: the engine did the target's forward; the draft runs alone on its capture
    return drive("diagnose", diagnose_cmd, a, need_target=a.engine_dump is None, evidence={"measured": measured},
                 preflighted=True)  # fmt: skip
