"""eagle3-doctor fix: a corrected copy of the draft, and what it recovers, measured."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ..drive import drive
from ..options import ACCEPTANCE, FIX_OUT, FORMAT, JSON_OUT, LOADING, PROMPTS, QUIET, SERVED, TRAIN_RECIPE, TRAINED_WITH, options


# no --layer-ids: the edits go into the copy's config, and an override would hide them
@options(
    out=FIX_OUT,
    **SERVED,
    train_recipe=TRAIN_RECIPE,
    trained_with=TRAINED_WITH,
    prompts=PROMPTS,
    **ACCEPTANCE,
    **LOADING,
    json_out=JSON_OUT,
    format=FORMAT,
    quiet=QUIET,
)
def fix_cmd(**given: Any) -> int:
    """Write a corrected copy of the draft (config edits the findings carry) and measure what it recovers."""
    a = SimpleNamespace(**given)

    def check(run: Any) -> None:
        from ...analyses.fixing import check_out

        check_out(a.out, run.draft)  # before anything is loaded

    return drive("fix", fix_cmd, a, check=check)
