"""SRV: serving evidence: the live server's counters against the prediction (issue 16), and an engine's dump."""

from __future__ import annotations

from .record import ERROR, INFO, Code

RECORDS = (
    Code(
        "SRV001",
        ERROR,
        "engine: the server accepts well below the prediction for its own capture points",
        meaning="The live server accepts well below the doctor's prediction for its own capture points.",
        why="The wiring and the draft predict more: the engine's runtime (CUDA graphs, batching, kernels) loses acceptance.",
        confirm="rerun the workload eagerly (vLLM --enforce-eager, SGLang --disable-cuda-graph) and one request at a time",
    ),
    Code(
        "SRV002",
        ERROR,
        "wiring: the server matches the serving-feature prediction; the capture mismatch explains the gap",
        meaning=(
            "The server's acceptance matches the prediction under the serving features, and the training features "
            "would give clearly more."
        ),
        why="The capture mismatch explains the gap between training and serving.",
        confirm="`compare-hidden` names the ids to write",
    ),
    Code(
        "SRV003",
        ERROR,
        "draft: the server matches the prediction and the draft is weak even on its training features",
        meaning="The server matches the prediction and the draft is weak even on its training features.",
        why="Neither wiring nor engine: the draft itself needs work.",
        confirm="`inspect` and `template-diff` check the draft and the data",
    ),
    Code(
        "SRV004",
        INFO,
        "server vs prediction undetermined: the intervals neither separate nor agree",
        meaning="The server's figures and the prediction neither separate nor agree (or the server measures more).",
        why="No verdict is supported by the data; the workloads probably differ.",
        confirm="replay the server's own prompts with its settings and scrape before and after exactly that workload",
    ),
    Code(
        "SRV010",
        ERROR,
        "an engine dump slot matches no training-dump slot and is not the embeddings",
        meaning="A slot of the engine's own dump matches no slot of the training dump and is not the embeddings.",
        why="The engine captures other layers (or another model) than training did.",
        confirm="`compare-hidden --target ... --matrix` names the capture points",
    ),
)
