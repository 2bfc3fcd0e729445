"""ACC: acceptance, measured on replayed prompts (acceptance, and its thresholds)."""

from __future__ import annotations

from .record import ERROR, WARNING, Code

RECORDS = (
    Code(
        "ACC001",
        ERROR,
        "acceptance under the serving features is far below the training features",
        meaning=(
            "Replayed through the target, the draft's mean acceptance length under the features the engine feeds is "
            "below its acceptance under the features it was trained on by a practical amount: the paired interval over "
            "prompts of training - serving excludes zero and its point is at least 0.1 tokens per verify pass."
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
        ERROR,
        "the draft's weights fit other capture points than the configured ones",
        meaning=(
            "Step-1 accuracy of the draft on each plausible wiring around the configured capture points (each slot +-1 "
            "layer, the embeddings in front, the final norm at the back, the seed-style shifts), over the same replay: "
            "another wiring leads the configured one by at least 0.02, with the paired 95% interval over prompts above 0 "
            "on at least 5 prompts (a smaller lead, or an interval reaching 0, is shown in the scan table and decides "
            "nothing). acceptance and compare-hidden measure it on every EAGLE-3 run; diagnose measures the acceptance "
            "it recovers (DGN001)."
        ),
        why=(
            "The weights were trained on those points: the ids in the config were changed after training (the seed "
            "incident), or the declared training recipe is wrong. The config then names the same points for serving and "
            "training, so every comparison of the two agrees while the draft is fed what it was never trained on."
        ),
        confirm="`eagle3-doctor diagnose` measures what feeding them recovers; `eagle3-doctor fingerprint` ranks candidates",
    ),
)
