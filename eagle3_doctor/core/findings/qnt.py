"""QNT: quantization: the target's and the draft's scheme, and what the engine builds the draft with."""

from __future__ import annotations

from .record import ERROR, INFO, WARNING, Code

RECORDS = (
    Code(
        "QNT001",
        ERROR,
        "the engine builds the draft with the target's quantization, not the draft's own (start-up failure or another precision than trained)",
        meaning=(
            "SGLang builds the draft model with --speculative-draft-model-quantization, which defaults to the server's "
            "--quantization (server_args.py; ModelConfig.from_server_args): a target launched with --quantization fp8 "
            "or modelopt_fp4 builds a 16-bit draft with that method too, and a quantized draft with the target's method "
            "instead of its own."
        ),
        why=(
            "A draft quantized online runs in another precision than it was trained in; a method that loads stored "
            "scales finds none in a 16-bit draft and the server fails to start."
        ),
        confirm=(
            "`eagle3-doctor inspect --engine sglang` names the target's scheme; the server log prints the draft's "
            "quantization; `--speculative-draft-model-quantization unquant` keeps the draft as trained"
        ),
    ),
    Code(
        "QNT002",
        ERROR,
        "the draft checkpoint's quantization config and its stored tensors disagree: no engine loads it as written",
        meaning=(
            "The draft's config.json names a quantization_config while every stored tensor is 16-bit, or the checkpoint "
            "stores scales, packed or 8-bit tensors while config.json names no quantization_config."
        ),
        why=(
            "Engines build the draft's layers from the config: quantized layers expect the scales the checkpoint lacks, "
            "or 16-bit layers receive quantized bytes and scale tensors they do not know."
        ),
        confirm="`eagle3-doctor inspect` lists the tensors (names, dtypes) and the config key",
    ),
    Code(
        "QNT003",
        WARNING,
        "the target is quantized: the features the draft is fed shift from a bf16-trained draft's",
        meaning=(
            "The target's config names a weight quantization (fp8, compressed-tensors, ModelOpt FP8/NVFP4, AWQ, GPTQ). "
            "EAGLE-3 drafts are trained on the hidden states of a bf16 target unless they were trained on the quantized one."
        ),
        why=(
            "Quantized layers produce slightly different hidden states; the draft is fed features it was not trained "
            "on and accepts fewer tokens, most where the quantization error is largest."
        ),
        confirm=(
            "run `eagle3-doctor compare-hidden` and `acceptance` with the bf16 target and with the quantized one on the "
            "same prompts: the difference is the cost of the quantization to the draft"
        ),
    ),
    Code(
        "QNT004",
        INFO,
        "the engine builds the draft with its own scheme, not the target's (cited)",
        meaning=(
            "The engine builds the draft with the draft's own quantization (its config.json, or the option that names "
            "the draft's method), not the target's: vLLM's draft ModelConfig and llama_eagle3.py get_draft_quant_config, "
            "TensorRT-LLM's one-model EAGLE-3 draft ModelConfig read from the draft's directory."
        ),
        why="A 16-bit draft stays 16-bit under a quantized target: no precision change from the engine itself.",
        confirm="the finding names the engine file and function read",
    ),
    Code(
        "QNT005",
        WARNING,
        "undetermined whether the engine builds the draft with the target's quantization",
        meaning="No rule for this engine says whether it builds the draft with the target's quantization or its own.",
        why="If it applies the target's scheme, the draft runs in another precision than trained or fails to load.",
        confirm="read the file the finding names, or measure acceptance as served",
    ),
    Code(
        "QNT006",
        WARNING,
        "the quantized target's features cost the draft acceptance against the 16-bit target's (measured both ways)",
        meaning=(
            "The same draft, on the same prompts, accepts fewer tokens fed the quantized target's hidden states and "
            "verified by the quantized target than fed and verified by the 16-bit reference target (--reference-target): "
            "the paired interval over prompts of the difference in mean acceptance length lies below zero."
        ),
        why=(
            "Weight and activation quantization shift every layer's residual stream a little; a draft trained on the "
            "16-bit target's features meets features it never saw, and the quantized target's own token choices differ."
        ),
        confirm=(
            "`eagle3-doctor compare-hidden --reference-target BF16_DIR` shows the drift at each capture point; "
            "`acceptance --reference-target BF16_DIR` prints acceptance both ways with the paired interval"
        ),
    ),
)
