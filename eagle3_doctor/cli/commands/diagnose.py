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
    SERVER_EVIDENCE,
    SERVER_TEMPERATURE,
    TRAIN_DATA,
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
    prompts=PROMPTS,
    train_data=TRAIN_DATA,
    **ACCEPTANCE,
    **SERVER_EVIDENCE,
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
    preflight_given(a, skip=RESOLVED_LATER)
    # read (and reject) server evidence before torch is imported
    measured = server_evidence(a.server_metrics, a.server_metrics_before, a.server_log, a.server_model)
    if a.server_temperature is not None:
        if measured is None:
            raise BadInput("--server-temperature states the live workload's temperature: it needs --server-metrics",
                           "pass the server's figures with --server-metrics, or drop --server-temperature")  # fmt: skip
        measured.temperature = a.server_temperature  # the sampled classes are predicted at it (analyses/faults)
    # --engine-dump: the engine did the target's forward; the draft runs alone on its capture
    return drive("diagnose", diagnose_cmd, a, need_target=a.engine_dump is None, evidence={"measured": measured},
                 preflighted=True)  # fmt: skip
