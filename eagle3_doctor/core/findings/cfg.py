"""CFG: the draft's config.json against the target and the engines (inspect)."""

from __future__ import annotations

from .record import ERROR, INFO, WARNING, Code

RECORDS = (
    Code(
        "CFG001",
        ERROR,
        "layer ids are out of range for the target",
        meaning="Configured layer ids are outside the range the engine accepts for this target's depth.",
        why="The engine refuses them, crashes, or captures nothing for that slot.",
        confirm="the finding names the valid range for the engine's numbering",
    ),
    Code(
        "CFG002",
        WARNING,
        "layer ids are unsorted: engines that sort will permute the fc input",
        meaning="The layer ids are not in ascending order.",
        why=(
            "SGLang concatenates in the listed order while vLLM, TensorRT-LLM and ModelOpt sort: the fc input is permuted "
            "in one engine and not in the other."
        ),
        confirm="compare the slot tables of `compare-hidden --engine sglang` and `--engine vllm`",
    ),
    Code(
        "CFG003",
        WARNING,
        "rope_theta differs between draft and target",
        meaning="rope_theta differs between draft and target.",
        why="The draft attends with other rotary frequencies than it was trained with when a converter changed the value.",
        confirm="compare rope_theta in the two config.json files",
    ),
    Code(
        "CFG004",
        WARNING,
        "rope_scaling / partial_rotary_factor / max_position_embeddings differ between draft and target",
        meaning=(
            "rope_scaling, partial_rotary_factor or max_position_embeddings differ between draft and target (compared on "
            "the inverse frequencies transformers computes)."
        ),
        why=(
            "Converters drop or shorten these; scaled RoPE types then rotate positions differently from training, worst "
            "on long prompts."
        ),
        confirm="compare the RoPE sections of the two config.json files",
    ),
    Code(
        "CFG005",
        WARNING,
        "draft and target dtypes differ",
        meaning="Draft weights and target are stored in different dtypes.",
        why="An fp16 draft against a bf16 target overflows and rounds differently from training.",
        confirm="run `acceptance --dtype` with each dtype and compare",
    ),
    Code(
        "CFG006",
        INFO,
        "a forward-changing flag means different things in different engines",
        meaning="A forward-changing flag (norm_output, norm_before_residual) means different things in different engines and trainers.",
        why="The engine may run the draft with another norm placement than training used.",
        confirm="check how the engine reads the flag (docs/draft-forward.md)",
    ),
    Code(
        "CFG007",
        WARNING,
        "the draft config's architecture is not the one the engine registers for EAGLE-3",
        meaning="The draft config's architecture is not one the engine registers for EAGLE-3.",
        why="The engine refuses the draft or loads it as another model class.",
        confirm="the finding lists the architectures the engine registers",
    ),
    Code(
        "CFG008",
        INFO,
        "config keys no modelled engine reads: check that your engine applies them",
        meaning=(
            "The draft's config.json (or its eagle_config / transformer_layer_config section) holds keys that no engine "
            "the doctor models reads, and that are not on the list of keys known to leave the forward alone (provenance, "
            "token ids, dropout, the proposal policy). Every key is classified: modelled, known inert, or unknown; only "
            "the unknown ones are listed, so a quiet inspect means every key was checked."
        ),
        why=(
            "A key the modelled engines ignore may still change the forward in the engine or trainer that wrote it (a "
            "sliding window, a softcap, another activation): if training applied it and serving does not, the draft runs "
            "another function than the one it learned."
        ),
        confirm=(
            "`eagle3-doctor inspect --json` lists every key with its class under forensics.keys; look the key up in the "
            "training code and in your engine's draft model"
        ),
    ),
)
