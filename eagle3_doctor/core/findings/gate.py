"""GATE: the CI gate: a metric regressed against the baseline, and the gate's own evidence (issue 14)."""

from __future__ import annotations

from .record import ERROR, WARNING, Code

RECORDS = (
    Code(
        "GATE001",
        ERROR,
        "a metric regressed against the baseline beyond the allowed margin",
        meaning="A metric regressed against the baseline gate JSON beyond the allowed margin.",
        why="The new checkpoint accepts fewer tokens than the old one on the same prompts.",
        confirm="compare the two training runs; the finding states how the drop was decided",
    ),
    Code(
        "GATE002",
        WARNING,
        "the gate's only training-side truth is the config the engine reads",
        meaning="The gate's only training-side truth is the config the engine reads, so training and serving agree by construction.",
        why="A wrong id in that config is invisible to the gate: it would pass a mis-wired draft.",
        confirm="name the training side in the policy's [training] table, or pass --train-recipe / --train-dump",
    ),
)
