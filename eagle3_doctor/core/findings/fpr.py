"""FPR: the draft's own fingerprint: the capture points its weights fit (the CI gate's evidence, issue 14)."""

from __future__ import annotations

from .record import ERROR, INFO, WARNING, Code

RECORDS = (
    Code(
        "FPR001",
        ERROR,
        "the draft's own fingerprint names other capture points than the engine feeds",
        meaning=(
            "The draft's own weights fit other capture points better than those the engine feeds (a paired difference "
            "over prompts, excluding zero)."
        ),
        why="The draft was trained on other layers than the engine serves.",
        confirm="`eagle3-doctor fingerprint` ranks the candidates with intervals",
    ),
    Code(
        "FPR002",
        WARNING,
        "the draft's own fingerprint disagrees with the declared training side",
        meaning="The draft's weights fit other capture points better than the declared training side.",
        why="The training record (recipe, ids, config) disagrees with the checkpoint: one of them is wrong.",
        confirm="`eagle3-doctor fingerprint`",
    ),
    Code(
        "FPR003",
        INFO,
        "the draft's fingerprint cannot tell the candidate capture points apart",
        meaning="The fingerprint cannot tell the candidate capture points apart (ties within noise, or no better than chance).",
        why="Nothing is concluded from it.",
        confirm="replay more prompts or tokens",
    ),
)
