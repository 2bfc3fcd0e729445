"""FIX: the corrected copy of the draft, measured (fix)."""

from __future__ import annotations

from .record import ERROR, INFO, Code

RECORDS = (
    Code(
        "FIX001",
        INFO,
        "the corrected copy of the draft recovers acceptance (measured, paired over prompts)",
        meaning=(
            "`eagle3-doctor fix` wrote a copy of the draft with every config edit the findings carry (the same edits "
            "the terminal prints as fixes), then measured acceptance on the original and on the copy on the same "
            "prompts: the copy accepts more, with a paired interval over prompts above zero."
        ),
        why="Nothing is wrong any more with what the edits touched; serve the copy.",
        confirm="`eagle3-doctor diagnose` on the copy: its verdict should be DGN005",
    ),
    Code(
        "FIX002",
        ERROR,
        "the corrected copy does not recover acceptance, or no fix is a config edit",
        meaning=(
            "Either no finding's fix is an edit of the draft's config.json (the cause is the checkpoint, the data or "
            "the launch command), or the copy with the edits applied does not accept more than the original "
            "(the paired interval of the change reaches zero)."
        ),
        why="The edits were not the cause, or not all of it; a fix is reported as done only when it is measured.",
        confirm="`eagle3-doctor diagnose` on the copy",
    ),
    Code(
        "FIX003",
        INFO,
        "nothing to fix: the diagnosis found no problem",
        meaning="`eagle3-doctor fix` ran the diagnosis first, and it found nothing at warning or error: no copy is written.",
        why="Offline the draft accepts as it did in training; a gap on the live server is the engine's runtime.",
        confirm="`eagle3-doctor server-metrics`",
    ),
)
