"""TPL: prompt format: training vs serving chat template, tokenizer and data (issue 15, template-diff)."""

from __future__ import annotations

from .record import ERROR, WARNING, Code

RECORDS = (
    Code(
        "TPL001",
        ERROR,
        "the serving template renders role tags or turn layout differently from training",
        meaning="The serving chat template renders role tags or the turn layout differently from the training template.",
        why=(
            "The draft was trained on features of other tokens than it sees in serving, and the tokens it must predict "
            "follow another layout."
        ),
        confirm="`eagle3-doctor template-diff` prints the first differing tokens",
    ),
    Code(
        "TPL002",
        ERROR,
        "BOS handling differs between training and serving (missing or duplicated BOS)",
        meaning="BOS handling differs: a BOS missing on one side, or two (the template's plus the tokenizer's).",
        why="Every position is shifted by one token relative to training.",
        confirm="`template-diff` shows the first tokens of both renderings",
    ),
    Code(
        "TPL003",
        ERROR,
        "a system prompt is present on one side only",
        meaning="A system prompt is present on one side only (e.g. the training recipe inserted one).",
        why="The context the draft conditions on differs from training.",
        confirm="`template-diff` shows the system section",
    ),
    Code(
        "TPL004",
        ERROR,
        "the generation prompt the draft continues from differs",
        meaning="The generation prompt (the assistant header the draft continues from) differs.",
        why="The draft's first proposals follow another prefix than in training.",
        confirm="`template-diff` shows the end of both renderings",
    ),
    Code(
        "TPL005",
        WARNING,
        "training and serving renderings differ only in whitespace",
        meaning="Training and serving renderings differ only in whitespace.",
        why="Usually small, but whitespace tokens shift positions and change the features.",
        confirm="`template-diff`, then `acceptance` to measure it",
    ),
    Code(
        "TPL006",
        ERROR,
        "the thinking section is rendered on one side only",
        meaning="The thinking section is rendered on one side only (enable_thinking or template kwargs differ).",
        why="The draft predicts inside a section it never saw in training, or misses one it did.",
        confirm="`template-diff` with --train-template-kwargs / --serve-template-kwargs",
    ),
    Code(
        "TPL007",
        WARNING,
        "the tool section differs between training and serving",
        meaning="The tool section differs between training and serving.",
        why="Tool-calling prompts carry other tokens than in training.",
        confirm="`template-diff` on requests with tools",
    ),
    Code(
        "TPL008",
        ERROR,
        "acceptance is significantly lower with prompts in the serving format than in the training format",
        meaning=(
            "Acceptance is significantly lower with prompts rendered the serving way than the training way "
            "(a paired bootstrap interval over prompts below zero)."
        ),
        why="The measured cost of the template differences above.",
        confirm="`acceptance` with --train-template / --serve-template prints the table",
    ),
    Code(
        "TPL009",
        ERROR,
        "the draft was trained with another tokenizer (vocabulary) than the target's",
        meaning="The draft was trained with another tokenizer (vocabulary) than the target's.",
        why="Token ids mean different tokens: the draft's proposals and features do not line up.",
        confirm="`template-diff --train-tokenizer DIR` compares vocabulary hashes",
    ),
    Code(
        "TPL010",
        WARNING,
        "special tokens, added tokens or BOS/EOS handling differ between the training tokenizer and the target's",
        meaning="Special tokens, added tokens or BOS/EOS handling differ between the training tokenizer and the target's.",
        why="Prompts tokenize differently at the special tokens.",
        confirm="`template-diff --train-tokenizer DIR`",
    ),
    Code(
        "TPL011",
        ERROR,
        "the training loss mask does not match what serving drafts for (assistant replies)",
        meaning=(
            "The training loss mask does not match what serving drafts for: it misses the assistant replies, or also "
            "trains on other roles."
        ),
        why="The draft learned to predict other tokens than it proposes in serving.",
        confirm="`template-diff --train-data FILE` counts trained tokens by role",
    ),
)
