"""DRF: the draft checkpoint itself: its tensors, their values and their shapes (inspect)."""

from __future__ import annotations

from .record import ERROR, WARNING, Code

RECORDS = (
    Code(
        "DRF001",
        ERROR,
        "the draft checkpoint has no lm_head",
        meaning="The draft checkpoint has no lm_head weight.",
        why=(
            "Loaders warn about unexpected keys, not missing ones: SGLang keeps a random head, so the accept length is "
            "1.00 (sgl#27908)."
        ),
        confirm="list the checkpoint's tensors (`eagle3-doctor inspect`); a healthy draft has lm_head.weight [draft_vocab, H]",
    ),
    Code(
        "DRF002",
        ERROR,
        "the draft has a smaller vocabulary than the target but no d2t table",
        meaning="The draft vocabulary is smaller than the target's and the checkpoint has no d2t table mapping draft ids to target ids.",
        why=(
            "vLLM then maps draft id i to target id i and SGLang builds hot_token_id from a missing table: the draft "
            "proposes the wrong tokens."
        ),
        confirm="`eagle3-doctor inspect` shows draft_vocab_size and whether d2t is present",
    ),
    Code(
        "DRF003",
        ERROR,
        "d2t maps draft ids outside the target vocabulary",
        meaning=(
            "d2t maps draft ids outside the target vocabulary, or holds absolute target ids instead of offsets "
            "(target_id - draft_id)."
        ),
        why="Engines compute target id = draft id + d2t[draft id]; wrong offsets propose tokens the target never accepts.",
        confirm="`eagle3-doctor inspect` prints the first draft ids that map out of range",
    ),
    Code(
        "DRF004",
        ERROR,
        "t2d disagrees with d2t",
        meaning="t2d (the target-vocabulary mask of draft tokens) disagrees with d2t.",
        why=(
            "SGLang ignores t2d, but training tools that select targets with it trained the draft on another vocabulary "
            "than d2t serves."
        ),
        confirm="`eagle3-doctor inspect` counts the target ids where the two disagree",
    ),
    Code(
        "DRF005",
        ERROR,
        "the fc input width does not equal number of aux states x target hidden size",
        meaning="The fc input width is not the number of aux states times the target hidden size.",
        why=(
            "The engine cannot feed the concatenated features: it refuses the checkpoint, or the draft was trained for "
            "another target."
        ),
        confirm="compare fc.weight's shape with the target's hidden_size in `eagle3-doctor inspect`",
    ),
    Code(
        "DRF006",
        WARNING,
        "the draft head looks untrained (weight statistics)",
        meaning=(
            "The draft's lm_head weight statistics look like a fresh initialisation, not a trained head: its top singular "
            "value sits at the i.i.d. edge and its row norms are no more spread than i.i.d. entries give (the same "
            "statistic DRF011 applies to every other module), or it is all zero."
        ),
        why="An untrained head proposes near-random tokens: acceptance close to zero.",
        confirm="compare the head's weight statistics with the training checkpoint's",
    ),
    Code(
        "DRF007",
        WARNING,
        "the draft ships its own embed_tokens and they differ from the target's",
        meaning="The draft ships its own embed_tokens and they differ from the target's.",
        why=(
            "SGLang always uses the target's embeddings, vLLM keeps the draft's when they differ: the same checkpoint "
            "runs with different embeddings per engine."
        ),
        confirm="`eagle3-doctor inspect` compares the two tables",
    ),
    Code(
        "DRF008",
        ERROR,
        "draft and target hidden or vocabulary sizes disagree",
        meaning="Draft and target hidden or vocabulary sizes disagree.",
        why="The draft was trained for another target: its features or token ids do not line up with this one.",
        confirm="compare hidden_size and vocab_size of the two config.json files",
    ),
    Code(
        "DRF009",
        ERROR,
        "draft weights hold NaN or Inf",
        meaning="Draft weights hold NaN or Inf.",
        why="One non-finite weight makes every proposal NaN: nothing is accepted.",
        confirm="`eagle3-doctor inspect` names the tensors",
    ),
    Code(
        "DRF010",
        WARNING,
        "the draft checkpoint has weights its format does not use",
        meaning="The draft checkpoint has weights its format does not use.",
        why=(
            "Loaders drop them with a warning: often a sign that the export renamed tensors (a layer the draft needs "
            "then loads as random)."
        ),
        confirm="read the loader warnings of your engine, or the list in `eagle3-doctor inspect`",
    ),
    Code(
        "DRF011",
        ERROR,
        "a draft module is left at its initialisation (weight statistics), e.g. a layer a non-strict load skipped",
        meaning=(
            "A module of the draft (a decoder layer, its attention or MLP, fc, a norm) still holds its initialisation: "
            "every matrix in it has i.i.d. entries (its top singular value at the i.i.d. edge std*(sqrt(m)+sqrt(n)), its "
            "row norms no more spread than i.i.d. entries give, its std near initializer_range or torch's default "
            "1/sqrt(3*fan_in)), its RMSNorm weights are exactly 1.0 and its biases exactly 0. The usual cause is a "
            "converter whose key map renames the layer (model.layers.0.* vs midlayer.* vs layers.0.*) followed by a "
            "non-strict load: the trained tensors are dropped, the freshly built module is saved, and fc and lm_head, "
            "whose names matched, stay trained."
        ),
        why=(
            "The draft's one decoder layer is where the features become a prediction: left at init it passes noise to "
            "the head, and acceptance falls to near the floor while every loader reports success."
        ),
        confirm=(
            "`eagle3-doctor inspect --json` lists every tensor's statistics under forensics.tensors (trained matrices "
            "of the fixture draft measure spectral ratio 1.27-3.33, fresh inits 0.91-1.04); re-export with a strict "
            "load and compare"
        ),
    ),
    Code(
        "DRF012",
        ERROR,
        "a dimension in config.json disagrees with the tensor shapes (the fix is the implied value)",
        meaning=(
            "A dimension config.json states disagrees with what the tensor shapes determine: hidden size (fc rows), "
            "heads x head_dim and KV heads x head_dim (q_proj/k_proj rows), intermediate size (gate_proj rows), the "
            "vocabulary (t2d or embed_tokens rows), the draft vocabulary (lm_head or d2t rows), the target hidden "
            "size (fc width / aux slots) or the number of decoder layers. The fix is the value the shapes imply, at "
            "the key the engine reads; where the shapes leave several readings (heads vs head_dim), the ones "
            "consistent with them are listed."
        ),
        why=(
            "Engines build the draft from config.json and then load the tensors into it: a mismatch either refuses to "
            "load or, where a loader reshapes or defaults silently, runs attention with the wrong head split."
        ),
        confirm="read the shapes with `safetensors` (or `eagle3-doctor inspect --json`, forensics.geometry) and compare with config.json",
    ),
    Code(
        "DRF013",
        WARNING,
        "draft tensors are duplicated, or have rows exactly zero",
        meaning=(
            "Two stored tensors hold identical values, or a matrix has rows that are exactly zero: one tensor written "
            "under two names by an export, or rows zeroed by a pruning or padding step."
        ),
        why=(
            "A duplicated tensor means one of the two modules is not the trained one; zero rows in lm_head are tokens "
            "the draft can never propose."
        ),
        confirm="`eagle3-doctor inspect --json` names the pairs and the rows; compare them with the training checkpoint",
    ),
    Code(
        "DRF014",
        WARNING,
        "a parallel drafter's mask token has no usable embedding row in the target",
        meaning=(
            "DFlash and P-EAGLE drafts fill their parallel slots with one mask token, embedded by the target's "
            "embedding. The id is outside the target's vocabulary (the engine fails on the first draft), or its row "
            "is exactly zero (a padding row): every slot of a pass then reads the same zero token input, and only the "
            "positions tell the slots apart."
        ),
        why=(
            "Trained on a zero row, the slots of a block attend alike and propose alike: the fixture's first DFlash "
            "training on the pad token learned nothing past the anchor."
        ),
        confirm="read the row: `safetensors` get_slice of the target's embed_tokens at the mask id, or `inspect --json`",
    ),
)
