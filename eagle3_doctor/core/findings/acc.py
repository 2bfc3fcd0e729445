"""ACC: acceptance, measured on replayed prompts (acceptance, and its thresholds)."""

from __future__ import annotations

from .record import ERROR, INFO, WARNING, Code

RECORDS = (
    Code(
        "ACC001",
        ERROR,
        "acceptance under the serving features is far below the training features",
        meaning=(
            "Replayed through the target, the draft's step-1 accuracy under the features the engine feeds is far below "
            "its accuracy under the features it was trained on."
        ),
        why="This is the measured cost of a capture mismatch: the fix of the CAP finding removes it.",
        confirm="`eagle3-doctor acceptance` prints both paths side by side with intervals over prompts",
    ),
    Code(
        "ACC002",
        ERROR,
        "acceptance is low on the training features too: the draft itself is weak",
        meaning="Step-1 accuracy is low even on the training features.",
        why=(
            "The wiring is not the (only) problem: the draft itself is weak or broken (lm_head, d2t, embeddings, chat "
            "template, another target)."
        ),
        confirm="run `eagle3-doctor inspect` and `template-diff`",
    ),
    Code(
        "ACC003",
        WARNING,
        "acceptance is below the gate's threshold",
        meaning="A measured acceptance figure is below a threshold you set (--min-accept-rate, --min-tau, the gate's policy).",
        why="It states the threshold, not a cause: the other findings name the cause.",
        confirm="rerun with more prompts if the interval is wide",
    ),
    Code(
        "ACC004",
        INFO,
        "a capture-point scan found features that fit the draft better than the configured ones",
        meaning=(
            "A scan over capture-point triples found features that fit the draft better than the configured ones: "
            "the paired 95% interval over prompts of the step-1 accuracy difference lies above 0, on at least 5 prompts "
            "(with fewer, or an interval reaching 0, the scan table shows the gap and no finding is made). Candidates "
            "the prompts cannot separate from the best one are listed with it."
        ),
        why="The draft was probably trained on those points: the declared training recipe is wrong.",
        confirm="`eagle3-doctor fingerprint` ranks candidates from the draft's weights",
    ),
)
