"""NUM: capture points, numerically: the training features against the target's own capture points,
tensor by tensor (compare-hidden)."""

from __future__ import annotations

from .record import ERROR, WARNING, Code

RECORDS = (
    Code(
        "NUM001",
        WARNING,
        "each slot matches the right capture point but the values drift (dtype, revision, quantisation)",
        meaning=(
            "Each slot is fed the right capture point, but the values differ from the training features beyond bf16 "
            "rounding: another checkpoint revision, dtype, quantisation or chat template."
        ),
        why=(
            "The draft sees slightly other inputs than in training; the cost ranges from nothing (a dtype gap) to several "
            "points (another revision)."
        ),
        confirm=(
            "run `acceptance` with training and serving features side by side; the worst positions in `compare-hidden` "
            "show where the values drift"
        ),
    ),
    Code(
        "NUM002",
        ERROR,
        "numerically, a serving slot best matches another capture point than the one trained",
        meaning=(
            "Numerically, a training slot best matches another capture point of this target than the one the draft "
            "config declares: the declared recipe is not what produced the training features."
        ),
        why="The serving side is configured from a declaration that is wrong, so fixing ids by it serves the wrong layer.",
        confirm="`compare-hidden --train-dump DIR --matrix` prints the best-matching capture point per slot",
    ),
    Code(
        "NUM003",
        ERROR,
        "the training dump's hidden_state is not the target's final_norm output",
        meaning="A SpecForge training dump's hidden_state is not the target's final_norm output.",
        why=(
            "SpecForge computes the target logits the draft is trained to match from hidden_state; a pre-norm state gives "
            "wrong targets, so the draft learned another distribution than the target samples from."
        ),
        confirm="`compare-hidden --train-dump DIR` reports the relative L2 of hidden_state to final_norm",
    ),
    Code(
        "NUM004",
        ERROR,
        "a training dump's slot matches no capture point of this target",
        meaning=(
            "A slot of the training dump matches no capture point of this target (relative L2 above the match threshold "
            "for every candidate)."
        ),
        why=(
            "The dump was made with another model, revision or tokenizer: the draft was trained on features this target "
            "never produces."
        ),
        confirm="check the dump's model revision and tokenizer; `compare-hidden --train-dump DIR --matrix` shows the distances",
    ),
)
