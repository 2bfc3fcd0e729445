"""DGN: where the gap lives (diagnose: measured attribution)."""

from __future__ import annotations

from .record import ERROR, INFO, WARNING, Code

RECORDS = (
    Code(
        "DGN001",
        ERROR,
        "the gap lives in the pipeline: setting a serving-vs-training difference back recovers acceptance",
        meaning=(
            "`diagnose` measured acceptance with each difference between serving and training (a lever: the capture "
            "points the engine feeds, the draft forward as the engine runs it) set back to the training side, one at a "
            "time, on the same prompts. Setting this lever back recovers acceptance by a practical amount: the paired "
            "interval over prompts excludes zero and the point recovers at least 0.1 tokens per verify pass, or a tenth "
            "of what is missing between serving and the best path measured where that is more (a smaller recovery is "
            "a lead, printed with its share, never the verdict)."
        ),
        why="The draft is fed or run differently from training; the lever's own finding (CAP, FWD) says exactly how.",
        confirm=(
            "the lever table of `eagle3-doctor diagnose` (recovery per lever, paired interval); `eagle3-doctor fix` "
            "writes the corrected copy and re-measures it"
        ),
    ),
    Code(
        "DGN002",
        ERROR,
        "a draft module contributes nothing: its mean-ablation costs no accuracy (inconsistent checkpoint)",
        meaning=(
            "The module's output was replaced by its mean over the batch's positions (mean-ablation) on the training-side "
            "features, and step-1 accuracy did not fall: a trained module always carries information its mean does not."
        ),
        why=(
            "A module that contributes nothing was most likely saved at initialisation (a non-strict load under a renamed "
            "key), converted in another layout, or taken from another checkpoint; the draft runs, but badly."
        ),
        confirm=(
            "`eagle3-doctor inspect` examines the module's tensors for the signatures of initialisation; the module "
            "table of `diagnose` shows what every module's ablation costs"
        ),
    ),
    Code(
        "DGN003",
        WARNING,
        "step-1 accuracy falls past a position of the context",
        meaning=(
            "Step-1 accuracy, measured per prompt in buckets of absolute position, falls past this position by 0.15 "
            "or more with the whole paired interval over the prompts that reach past it beyond 0.15 (size and "
            "interval together: a fall whose interval reaches under 0.15 is printed as a lead, not a finding)."
        ),
        why=(
            "Drafts are trained on sequences of a fixed maximum length (SpecForge, speculators: --max-length); past it "
            "their attention and RoPE positions are untrained, and long multi-turn contexts accept less."
        ),
        confirm="the context table of `eagle3-doctor diagnose`; rerun with shorter prompts (--max-tokens)",
    ),
    Code(
        "DGN004",
        WARNING,
        "undetermined: the measurements cannot place the gap",
        meaning=(
            "Either acceptance is low even with every lever on the training side, every module of the draft costs "
            "accuracy when ablated, and accuracy does not fall along the context; or a measurement leans towards a "
            "cause (a lever, a gap, weights that fit other capture points) without deciding it, because its interval "
            "over prompts reaches 0 or the run has fewer than 5 prompts. The doctor then names what would decide "
            "instead of calling the draft healthy."
        ),
        why=(
            "Left, in the first case: the draft was trained for another target or revision, on other data, or with "
            "another template; in the second, any of the causes the leaning measurement points at."
        ),
        confirm=(
            "a training dump (`compare-hidden --train-dump`, `acceptance --train-dump`), `template-diff` with the "
            "training template, and `fingerprint` decide the first; the same diagnose on more prompts the second"
        ),
    ),
    Code(
        "DGN005",
        INFO,
        "the offline prediction is healthy: a gap seen in serving lives in the engine's runtime",
        meaning=(
            "Offline, as the engine feeds and runs it, the draft accepts as it did in training: no lever recovers "
            "anything, every module is trained, and the context does not matter."
        ),
        why=(
            "A gap that shows only on the live server comes from the engine's runtime (CUDA graphs, batching, "
            "a scheduler or kernel bug), which an offline replay cannot see."
        ),
        confirm="`eagle3-doctor server-metrics` with the server's /metrics and log",
    ),
    Code(
        "DGN006",
        WARNING,
        "prompts carry another model family's chat markup as plain text",
        meaning=(
            "Some prompts hold chat markup of another model family (ChatML's <|im_start|>, Llama 3's headers, [INST], "
            "Gemma's turns) inside a message's text, typically a rendered conversation pasted into one user turn."
        ),
        why=(
            "The server wraps that text in the target's own template: the draft reads tags as words it was never "
            "trained on, and the target's continuation follows a layout neither was trained for."
        ),
        confirm="the prompt numbers in the finding; `eagle3-doctor template-diff` shows how the server renders them",
    ),
    Code(
        "DGN007",
        WARNING,
        "the prompts lie outside what the draft was trained on",
        meaning=(
            "The draft predicts the target much worse on these prompts than along its own training conversations "
            "(--train-data), on the same features and the same draft forward: the traffic is another distribution "
            "(another language, domain or format) than the training data."
        ),
        why=(
            "A draft learns the target's behaviour on its training distribution; outside it, its guesses miss however "
            "well the engine feeds and runs it."
        ),
        confirm=(
            "the two step-1 accuracies and acceptance lengths in the finding, each with its interval over its own "
            "prompts; retraining on (or adding) traffic like these prompts is the cure"
        ),
    ),
)
