"""ENG: engine failures (issue 12: engine truth, from the engines' own code, executed)."""

from __future__ import annotations

from .record import ERROR, WARNING, Code

RECORDS = (
    Code(
        "ENG001",
        ERROR,
        "the engine refuses to start with this target, draft config or ids",
        meaning=(
            "The engine refuses to start with this target, draft config or ids (its own error, from the engine table "
            "that executes the engines' code)."
        ),
        why="No draft runs at all.",
        confirm="the finding cites the engine file that raises",
    ),
    Code(
        "ENG002",
        ERROR,
        "the engine crashes on the first forward with these ids",
        meaning=(
            "The engine starts but crashes on the first forward with these ids: its own capture code fails, or the ids "
            "capture fewer states than the draft's fc takes (an id the engine's rule maps past the last layer, a repeated "
            "layer, an empty list), so the fc matmul or the unpacking of the captured states fails."
        ),
        why="No draft runs at all.",
        confirm="the finding cites the engine file that raises",
    ),
    Code(
        "ENG003",
        ERROR,
        "the engine runs but feeds the draft a tensor that is no capture point (an MLP branch, an unwritten slot, a state past fc)",
        meaning=(
            "The engine runs, but a slot it feeds the draft is no residual-stream capture point: a layer's MLP branch "
            "instead of hidden_states + residual, a slot the engine never writes (an id past the last layer), or, when "
            "ids capture fewer states than the draft's fc takes, a single state SGLang hands the decoder layer without "
            "the fc (srt/models/llama_eagle3.py applies fc only when the width differs from the draft's hidden size)."
        ),
        why="The draft gets a tensor it was never trained on in that slot, with no error anywhere.",
        confirm="the finding cites the engine file that captures the wrong tensor (engine table, executed by make conformance)",
    ),
    Code(
        "ENG004",
        WARNING,
        "undetermined: the engine's capture for this target family is not modelled",
        meaning=(
            "SGLang and vLLM decide what each layer id captures in the target's own model file (the setter and the "
            "decoder loop of that class), and the engine table holds those files executed for a list of families. "
            "This target's family is not on that list, so what the engine feeds the draft is not predicted: the "
            "doctor does not fall back to another family's rule, because families differ exactly there (+1 or raw "
            "ids, an index check that raises, a capture at the end of the stack)."
        ),
        why="Nothing is claimed about the serving side: a mismatch there would go unreported, and so would a start-up failure.",
        confirm=(
            "measure what the engine really feeds: dump its aux hidden states and run `compare-hidden --engine-dump` "
            "(docs/serving-evidence.md); or add the family to conformance/ and run `make conformance`"
        ),
    ),
    Code(
        "ENG005",
        WARNING,
        "the engine release is newer than any the engine table models: the newest modelled rules were applied",
        meaning=(
            "The --engine-version is newer than the newest release the engine table models (executed by make conformance "
            "for SGLang, vLLM and ModelOpt; hand-read for TensorRT-LLM), but inside the next minor series, so the doctor "
            "applies the newest modelled release's capture rules, id keys and draft forward to it. A release can change "
            "any of them: which key is read, the +1 rule, the capture loop."
        ),
        why="Every other finding about capture points holds only if the release kept those rules.",
        confirm=(
            "add the release to conformance/releases.py and run make conformance (commit conformance/table.json), or pin "
            "--engine-version to the modelled release your build runs"
        ),
    ),
)
