"""CAP: capture points, symbolically: what each slot of the draft's fc is fed in serving against the capture
point it was trained on (compare-hidden, inspect, acceptance)."""

from __future__ import annotations

from .record import ERROR, INFO, WARNING, Code

_CONFIRM = (
    "run `eagle3-doctor compare-hidden` with the same --engine/--engine-version: the slot table shows what "
    "each slot is fed; `acceptance` then measures the cost on replayed prompts"
)

RECORDS = (
    Code(
        "CAP001",
        ERROR,
        "every serving slot is shifted by the same number of layers from training",
        meaning=(
            "Every serving slot is the trained capture point moved by the same number of layers: the classic off-by-one. "
            "The same id list means different layers in different engines (SGLang's Llama path captures layer_out[k] for id k, "
            "vLLM layer_out[k-1]), so ids copied between engines, or written out from a default that is stored without "
            "the engine's +1, shift every slot."
        ),
        why=(
            "Adjacent layer outputs are similar but not interchangeable (cosine 0.90-0.98 on the fixtures): the draft's fc "
            "was fitted to specific layers, so its input moves off the trained distribution and step-1 accuracy falls "
            "while nothing crashes."
        ),
        confirm=_CONFIRM,
    ),
    Code(
        "CAP002",
        ERROR,
        "the embeddings are fed in a slot that was trained on a layer output",
        meaning=(
            "A slot trained on a layer output is fed the token embeddings. Typically an id of -1 or 0 that the engine maps "
            "to the embeddings, which also pushes the remaining trained points one slot later (the seed incident: "
            "[-1, 2, 30] instead of [2, 30, 58])."
        ),
        why=(
            "The embeddings carry no context at all, so the draft loses one third of its features and the other slots are "
            "permuted: acceptance per token fell from about 75% to about 30% in the seed case."
        ),
        confirm=_CONFIRM,
    ),
    Code(
        "CAP003",
        ERROR,
        "final_norm fed where a pre-norm layer output was trained, or the reverse",
        meaning=(
            "A slot trained on the pre-norm output of the last decoder layer is fed final_norm (the normalised state "
            "output_hidden_states returns last), or the reverse. vLLM id L and SGLang's GPT-OSS boundary are pre-norm; "
            "hs[L] in Hugging Face and TensorRT-LLM's -1 are post-norm."
        ),
        why=(
            "The two states differ in scale far more than their cosine (about 0.999) suggests; feeding final_norm for "
            "layer_out[L-1] cost 8 points of step-1 accuracy on the fixtures."
        ),
        confirm=_CONFIRM + " (relative L2, not cosine, separates the two)",
    ),
    Code(
        "CAP004",
        ERROR,
        "the serving slots are the training slots in another order",
        meaning=(
            "The engine feeds exactly the trained capture points but in another order. SGLang concatenates in the listed "
            "order; vLLM, TensorRT-LLM and ModelOpt sort the ids."
        ),
        why="The fc weight columns are tied to slot positions: a permutation feeds each block of fc the wrong layer.",
        confirm=_CONFIRM,
    ),
    Code(
        "CAP005",
        ERROR,
        "the engine feeds a different number of slots than the draft was trained on",
        meaning=(
            "The engine feeds a different number of slots than the draft's fc was trained on, e.g. an id dropped because "
            "it is past the last layer the engine can capture, or duplicates removed by an engine that de-duplicates."
        ),
        why="The fc input width no longer matches: the engine either refuses the checkpoint or feeds a truncated input.",
        confirm=_CONFIRM,
    ),
    Code(
        "CAP006",
        ERROR,
        "serving slots differ from training slots (no simpler pattern)",
        meaning=(
            "Serving slots differ from the training slots in a way that is not a uniform shift, an embeddings slot, a "
            "norm swap or a permutation."
        ),
        why="Any slot fed another capture point moves the draft's input off the distribution it was trained on.",
        confirm=_CONFIRM,
    ),
    Code(
        "CAP007",
        WARNING,
        "layer ids sit in a config key this engine version does not read",
        meaning=(
            "The draft config holds layer ids in a key this engine version never reads (SGLang reads only the nested "
            "eagle_config key; vLLM's Model Runner V2 only the top-level key). The engine uses its default or another key."
        ),
        why=(
            "Harmless when the default is what was trained (then reported as info); otherwise the configured ids have no "
            "effect and the engine silently serves its default."
        ),
        confirm="check which key the engine reads (docs/engines.md) and run `eagle3-doctor inspect` with --engine-version",
    ),
    Code(
        "CAP008",
        WARNING,
        "the engine version uses different ids in CUDA-graph decode than in prefill",
        meaning=(
            "The engine version captures with different ids in CUDA-graph decode than in eager prefill (SGLang before PR "
            "#22836 captured the decode/verify graphs with the default ids)."
        ),
        why="Prefill is right and every decode step is fed other layers, so acceptance drops only with CUDA graphs on.",
        confirm="run the server with --disable-cuda-graph: if acceptance recovers, this is the cause",
    ),
    Code(
        "CAP009",
        ERROR,
        "the named engine cannot capture what the draft was trained on",
        meaning=(
            "No id list makes this engine capture what the draft was trained on (e.g. SGLang's Llama path never captures "
            "past layer_out[L-2]; only TensorRT-LLM's -1 reaches final_norm)."
        ),
        why="Whatever ids are written, at least one slot is fed another capture point.",
        confirm="compare the trained capture points with the engine's reachable range in docs/engines.md",
    ),
    Code(
        "CAP010",
        INFO,
        "the engine reorders or de-duplicates the configured ids",
        meaning="The engine sorts or de-duplicates the configured ids before capturing (vLLM, TensorRT-LLM, ModelOpt).",
        why=(
            "Only matters when the ids are not written in ascending order: then this engine and an order-keeping one "
            "(SGLang) feed the fc different permutations."
        ),
        confirm="write the ids sorted and compare the slot tables of two engines with `compare-hidden`",
    ),
    Code(
        "CAP011",
        INFO,
        "an architecture- or version-specific id rule decided what these ids capture",
        meaning=(
            "An architecture- or version-specific rule decided what the ids capture (SGLang DeepSeek adds +1 only when "
            "ids[0] == 1; GPT-OSS uses ids raw when max(ids) == L)."
        ),
        why="Informational: the doctor applied the rule; ids written without it in mind capture other layers.",
        confirm="the engine table row cited in the finding names the source file of the rule",
    ),
)
