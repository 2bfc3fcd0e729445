"""eagle3-doctor diagnose: where the acceptance gap lives, measured lever by lever."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ..drive import drive
from ..options import ACCEPTANCE, JSON_OUT, LAYER_IDS, LOADING, PROMPTS, QUIET, REPORT, SERVED, TRAIN_DATA, TRAIN_RECIPE, options


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
    return drive("diagnose", diagnose_cmd, SimpleNamespace(**given))
