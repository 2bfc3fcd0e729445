"""The engine table: one row of data per (engine, release range, target family), saying what decides capture.

The SGLang and vLLM rows are checked case by case against conformance/table.json, which `make conformance`
writes by EXECUTING each release's own functions (tests/engines/test_conformance.py); a row's `src` names the file
the fact comes from. The TensorRT-LLM and ModelOpt rules (capture.py) are hand-read or executed apart, and
do not depend on the target family. capture.py runs a row; keys.py reads which config key a release reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from .families import enumerated_table
from .releases import covering, release_key


@dataclass(frozen=True)
class Row:
    first: str  # first release this row covers (inclusive); rows of one family are in order
    rule: str  # absent | unsupported | default_only | plus1 | first1 (deepseek) | maxL (gpt-oss) | raw (vLLM)
    src: str  # the engine file the rule comes from
    guard0: bool = True  # index 0 captures the embeddings (False: residual is None there -> crash)
    end: bool = False  # index L captures the pre-norm output of the last layer
    packer: bool = False  # capture count must equal the id count (sglang AuxHiddenStatePacker)
    index_check: bool = False  # the setter indexes layers[id]: an id past the last layer raises at start-up
    reads: str = "nested"  # sglang: nested | none; vllm: none | top | top,nested
    aux_flag: bool = False  # sglang reads eagle_config.use_aux_hidden_state (false: capture off)
    loop: str = "before"  # before: id k captures the input of layer k; after: k = output of layer k-1
    message: str = ""  # the engine's own error text for `unsupported` / `absent`
    branch: bool = False  # the loop appends a layer's MLP branch output, not the residual stream (sglang gemma3)


_SG_NOSETTER = "{cls} defines no set_eagle3_layers_to_capture, which the model runner calls at start-up"
_SG_ABSENT = "ValueError: Model architectures ['{cls}'] are not supported for now (sglang/srt/models/registry.py)"

# sglang: model files srt/models/<family>.py (setter), reader srt/model_executor/model_runner.py
SGLANG_ROWS: dict[str, list[Row]] = {
    "llama": [
        Row("0.0", "unsupported", "srt/models/llama.py", message=_SG_NOSETTER),
        Row("0.4.4.post2", "default_only", "srt/models/llama.py", guard0=False, reads="none"),
        Row("0.4.9", "plus1", "srt/models/llama.py", guard0=False),
        Row("0.5.8", "plus1", "srt/models/llama.py", guard0=False, aux_flag=True),
        Row("0.5.22", "plus1", "srt/models/llama.py", aux_flag=True),
    ],
    "qwen": [
        Row("0.0", "unsupported", "srt/models/qwen3.py", message=_SG_NOSETTER),
        Row("0.4.9", "plus1", "srt/models/qwen3.py"),
        Row("0.5.8", "plus1", "srt/models/qwen3.py", aux_flag=True),
    ],
    "qwen3_moe": [
        Row("0.0", "unsupported", "srt/models/qwen3_moe.py", message=_SG_NOSETTER),
        Row("0.4.9", "plus1", "srt/models/qwen3_moe.py"),
        Row("0.5.4.post2", "plus1", "srt/models/qwen2_moe.py (Qwen2MoeModel.set_eagle3_layers_to_capture)", index_check=True),
        Row(
            "0.5.8",
            "plus1",
            "srt/models/qwen2_moe.py (Qwen2MoeModel.set_eagle3_layers_to_capture)",
            index_check=True,
            aux_flag=True,
        ),
    ],
    "deepseek": [
        Row("0.0", "unsupported", "srt/models/deepseek_v2.py", message=_SG_NOSETTER),
        Row("0.5.4.post2", "plus1", "srt/models/deepseek_v2.py", guard0=False),
        Row("0.5.8", "plus1", "srt/models/deepseek_v2.py", guard0=False, aux_flag=True),
        Row("0.5.13", "first1", "srt/models/deepseek_v2.py", guard0=False, aux_flag=True),
        Row("0.5.14", "first1", "srt/models/deepseek_v2.py", aux_flag=True),
        Row("0.5.17", "first1", "srt/models/deepseek_v2.py + srt/layers/aux_hidden_states.py", aux_flag=True, packer=True),
    ],
    "gpt_oss": [
        Row("0.0", "unsupported", "srt/models/gpt_oss.py", message=_SG_NOSETTER),
        Row("0.5.1", "plus1", "srt/models/gpt_oss.py", guard0=False),
        Row("0.5.8", "plus1", "srt/models/gpt_oss.py", guard0=False, aux_flag=True),
        Row("0.5.17", "maxL", "srt/models/gpt_oss.py", end=True, aux_flag=True),
    ],
}
SGLANG_ROWS["mistral"] = SGLANG_ROWS["llama"]  # sglang serves Mistral through llama.py's LlamaForCausalLM

# Families with their own setter or a wrapper that delegates to its language model. Each row
# was executed by make conformance (conformance/sglang_exec.py FAMILIES) from its first release; `absent`
# rows are releases whose model registry does not know the architecture at all.
_GEMMA_SRC = "srt/models/gemma3_causal.py (Gemma3TextModel.forward)"
SGLANG_ROWS.update(
    {
        "glm4_moe": [
            Row("0.0", "absent", "srt/models/glm4_moe.py", message=_SG_ABSENT),
            Row("0.4.9.post5", "unsupported", "srt/models/glm4_moe.py", message=_SG_NOSETTER),
            Row("0.5.5", "plus1", "srt/models/glm4_moe.py", guard0=False),
            Row("0.5.8", "plus1", "srt/models/glm4_moe.py", guard0=False, aux_flag=True),
            Row("0.5.21", "plus1", "srt/models/glm4_moe.py", aux_flag=True),
        ],
        "glm4_moe_lite": [
            Row("0.0", "absent", "srt/models/glm4_moe_lite.py", message=_SG_ABSENT),
            # Glm4MoeLiteForCausalLM(DeepseekV2ForCausalLM): the DeepSeek setter of that release
            Row("0.5.8", "plus1", "srt/models/glm4_moe_lite.py -> deepseek_v2.py", guard0=False, aux_flag=True),
            Row("0.5.13", "first1", "srt/models/glm4_moe_lite.py", guard0=False, aux_flag=True),
            Row("0.5.21", "first1", "srt/models/glm4_moe_lite.py", aux_flag=True),
        ],
        "minimax_m2": [
            Row("0.0", "absent", "srt/models/minimax_m2.py", message=_SG_ABSENT),
            Row("0.5.4.post1", "unsupported", "srt/models/minimax_m2.py", message=_SG_NOSETTER),
            Row("0.5.5.post1", "plus1", "srt/models/minimax_m2.py", guard0=False),
            Row("0.5.8", "plus1", "srt/models/minimax_m2.py", guard0=False, aux_flag=True),
            Row("0.5.11", "plus1", "srt/models/minimax_m2.py", aux_flag=True),
        ],
        "kimi_linear": [  # no release defines set_eagle3_layers_to_capture for KimiLinearForCausalLM
            Row("0.0", "absent", "srt/models/kimi_linear.py", message=_SG_ABSENT),
            Row("0.5.4.post2", "unsupported", "srt/models/kimi_linear.py", message=_SG_NOSETTER),
        ],
        "kimi_k25": [  # KimiK25ForConditionalGeneration delegates to its DeepseekV3ForCausalLM language model
            Row("0.0", "absent", "srt/models/kimi_k25.py", message=_SG_ABSENT),
            Row("0.5.9", "unsupported", "srt/models/kimi_k25.py", message=_SG_NOSETTER),
            Row("0.5.10", "plus1", "srt/models/kimi_k25.py -> deepseek_v2.py", guard0=False, aux_flag=True),
            Row("0.5.13", "first1", "srt/models/kimi_k25.py -> deepseek_v2.py", guard0=False, aux_flag=True),
            Row("0.5.14", "first1", "srt/models/kimi_k25.py -> deepseek_v2.py", aux_flag=True),
            Row(
                "0.5.17",
                "first1",
                "srt/models/kimi_k25.py -> deepseek_v2.py + srt/layers/aux_hidden_states.py",
                aux_flag=True,
                packer=True,
            ),
        ],
        "llama4": [  # mllama4.py Llama4ForConditionalGeneration delegates to llama4.py Llama4ForCausalLM (llama.py's setter)
            Row("0.0", "absent", "srt/models/mllama4.py", message=_SG_ABSENT),
            Row("0.4.5", "unsupported", "srt/models/mllama4.py", message=_SG_NOSETTER),
            Row("0.4.9", "plus1", "srt/models/mllama4.py -> llama4.py", guard0=False),
            Row("0.5.8", "plus1", "srt/models/mllama4.py -> llama4.py", guard0=False, aux_flag=True),
            Row("0.5.21", "plus1", "srt/models/mllama4.py -> llama4.py", aux_flag=True),
        ],
        "gemma3_text": [
            Row("0.0", "absent", "srt/models/gemma3_causal.py", message=_SG_ABSENT),
            Row("0.4.4.post2", "unsupported", "srt/models/gemma3_causal.py", message=_SG_NOSETTER),
            Row("0.5.12", "plus1", _GEMMA_SRC, end=True, aux_flag=True),
            # the decoder layer keeps the residual apart from 0.5.17 ("Keep the residual live across layers"),
            # but the loop still appends the bare hidden_states: the MLP branch, not the residual stream
            Row("0.5.17", "plus1", _GEMMA_SRC, end=True, aux_flag=True, branch=True),
        ],
    }
)
SGLANG_ROWS["gemma3"] = [  # gemma3_mm.py Gemma3ForConditionalGeneration delegates to Gemma3ForCausalLM
    Row(
        r.first,
        r.rule,
        r.src if r.first == "0.0" else r.src.replace("srt/models/", "srt/models/gemma3_mm.py -> ", 1),
        guard0=r.guard0,
        end=r.end,
        aux_flag=r.aux_flag,
        branch=r.branch,
        message=r.message,
    )
    for r in SGLANG_ROWS["gemma3_text"]
]

_VL_NOIFACE = (
    "v1/worker/gpu_model_runner.py: Model does not support EAGLE3 interface but "
    "aux_hidden_state_outputs was requested ({cls} does not implement SupportsEagle3)"
)
# the substrings vllm's check accepts, by first release (config/__init__.py, later config/speculative.py)
VLLM_CHECK: list[tuple[str, tuple[str, ...] | None]] = [
    ("0.0", None),
    ("0.8.5", ("llama",)),
    ("0.10.1", ("llama", "qwen")),
    ("0.11.0", ("llama", "qwen", "minicpm", "gpt_oss")),
    ("0.16.0", ("llama", "qwen", "minicpm", "gpt_oss", "hunyuan_vl", "hunyuan_v1_dense", "afmoe")),
    ("0.17.0", ("llama", "qwen", "minicpm", "gpt_oss", "hunyuan_vl", "hunyuan_v1_dense", "afmoe", "nemotron_h")),
    (
        "0.18.0",
        (
            "llama",
            "qwen",
            "minicpm",
            "gpt_oss",
            "hunyuan_vl",
            "hunyuan_v1_dense",
            "afmoe",
            "nemotron_h",
            "deepseek_v2",
            "deepseek_v3",
            "kimi_k2",
            "kimi_k25",
        ),
    ),
    (
        "0.19.1",
        (
            "llama",
            "qwen",
            "minicpm",
            "gpt_oss",
            "hunyuan_vl",
            "hunyuan_v1_dense",
            "afmoe",
            "nemotron_h",
            "deepseek_v2",
            "deepseek_v3",
            "kimi_k2",
            "kimi_k25",
            "minimax_m2",
            "gemma4",
        ),
    ),
    (
        "0.21.0",
        (
            "llama",
            "qwen",
            "minicpm",
            "gpt_oss",
            "hunyuan_vl",
            "hunyuan_v1_dense",
            "afmoe",
            "nemotron_h",
            "deepseek_v2",
            "deepseek_v3",
            "kimi_k2",
            "kimi_k25",
            "minimax_m2",
            "gemma4",
            "laguna",
        ),
    ),
    ("0.22.0", None),  # the check is gone: SupportsEagle3 on the model class decides
]
# V1 runner: which draft-config keys it reads (v1/worker/gpu_model_runner.py _get_eagle3_aux_layers_from_config)
VLLM_V1_READS: list[tuple[str, str]] = [("0.0", "none"), ("0.11.1", "top"), ("0.22.0", "top,nested")]
VLLM_V2_FIRST = "0.17.0"  # Model Runner V2 (v1/worker/gpu/spec_decode/eagle/eagle3_utils.py): top-level key only
VLLM_V2_DEFAULT_FROM = "0.33.0"  # hand-read: from 0.33 a stock launch runs Model Runner V2
# model class support and capture loop, by family (model_executor/models/<family>.py + interfaces.py)
VLLM_ROWS: dict[str, list[Row]] = {
    "llama": [
        Row("0.0", "unsupported", "model_executor/models/llama.py", message=_VL_NOIFACE),
        Row("0.8.5", "raw", "model_executor/models/llama.py", guard0=False),
        Row("0.18.0", "raw", "model_executor/models/llama.py + interfaces.py _maybe_add_hidden_state", loop="after", end=True),
    ],
    "qwen": [
        Row("0.0", "unsupported", "model_executor/models/qwen3.py", message=_VL_NOIFACE),
        Row("0.8.5", "raw", "model_executor/models/qwen3.py (Qwen2Model)", guard0=False),
        Row("0.18.0", "raw", "model_executor/models/qwen2.py + interfaces.py _maybe_add_hidden_state", loop="after", end=True),
    ],
    "qwen3_moe": [
        Row("0.0", "unsupported", "model_executor/models/qwen3_moe.py", message=_VL_NOIFACE),
        Row("0.11.1", "raw", "model_executor/models/qwen3_moe.py"),
        Row(
            "0.18.0", "raw", "model_executor/models/qwen3_moe.py + interfaces.py _maybe_add_hidden_state", loop="after", end=True
        ),
    ],
    "deepseek": [
        Row("0.0", "unsupported", "model_executor/models/deepseek_v2.py", message=_VL_NOIFACE),
        Row("0.18.0", "raw", "model_executor/models/deepseek_v2.py (DeepseekV2Model.forward)", guard0=False),
        Row("0.25.0", "raw", "model_executor/models/deepseek_v2.py (DeepseekV2Model.forward)", guard0=False, end=True),
    ],
    "gpt_oss": [
        Row("0.0", "unsupported", "model_executor/models/gpt_oss.py", message=_VL_NOIFACE),
        Row("0.11.0", "raw", "model_executor/models/gpt_oss.py"),
        Row("0.18.0", "raw", "model_executor/models/gpt_oss.py + interfaces.py _maybe_add_hidden_state", loop="after", end=True),
    ],
    "mistral": [
        Row("0.0", "unsupported", "model_executor/models/llama.py", message=_VL_NOIFACE),
        Row("0.8.5", "raw", "model_executor/models/llama.py", guard0=False),
        Row("0.18.0", "raw", "model_executor/models/mistral.py -> llama.py", loop="after", end=True),
    ],
}

_VL_ABSENT = "ValueError: Model architectures ['{cls}'] are not supported for now (model_executor/models/registry.py)"
# executed by make conformance (conformance/vllm_exec.py FAMILIES): the wrappers (mllama4, gemma3_mm, kimi_k25)
# are followed into the language model vLLM builds for them (model_class= / architectures=[...])
VLLM_ROWS.update(
    {
        "glm4_moe": [  # never SupportsEagle3: refused by the target check, then (0.22+) at load
            Row("0.0", "absent", "model_executor/models/glm4_moe.py", message=_VL_ABSENT),
            Row("0.10.0", "unsupported", "model_executor/models/glm4_moe.py", message=_VL_NOIFACE),
        ],
        "glm4_moe_lite": [
            Row("0.0", "absent", "model_executor/models/glm4_moe_lite.py", message=_VL_ABSENT),
            Row("0.15.0", "unsupported", "model_executor/models/glm4_moe_lite.py", message=_VL_NOIFACE),
        ],
        "minimax_m2": [
            Row("0.0", "absent", "model_executor/models/minimax_m2.py", message=_VL_ABSENT),
            Row("0.11.1", "unsupported", "model_executor/models/minimax_m2.py", message=_VL_NOIFACE),
            Row(
                "0.20.0",
                "raw",
                "model_executor/models/minimax_m2.py + interfaces.py _maybe_add_hidden_state",
                loop="after",
                end=True,
            ),
        ],
        "kimi_linear": [
            Row("0.0", "absent", "model_executor/models/kimi_linear.py", message=_VL_ABSENT),
            Row("0.11.1", "unsupported", "model_executor/models/kimi_linear.py", message=_VL_NOIFACE),
            # from 0.27 registered from vllm/models/kimi_k3 (SupportsEagle3, its own _capture_aux_hidden_stream):
            # recorded by the harness, not executed, so the doctor refuses to guess
            Row("0.27.0", "unmodelled", "vllm/models/kimi_k3 (nvidia/model.py KimiLinearForCausalLM)"),
        ],
        "kimi_k25": [  # KimiK25ForConditionalGeneration -> DeepseekV2ForCausalLM: the deepseek rows
            Row("0.0", "absent", "model_executor/models/kimi_k25.py", message=_VL_ABSENT),
            Row("0.15.0", "unsupported", "model_executor/models/kimi_k25.py", message=_VL_NOIFACE),
            Row("0.18.0", "raw", "model_executor/models/kimi_k25.py -> deepseek_v2.py (DeepseekV2Model.forward)", guard0=False),
            Row(
                "0.25.0",
                "raw",
                "model_executor/models/kimi_k25.py -> deepseek_v2.py (DeepseekV2Model.forward)",
                guard0=False,
                end=True,
            ),
        ],
        "llama4": [  # mllama4.py Llama4ForConditionalGeneration -> llama4.py Llama4ForCausalLM (llama.py's loop)
            Row("0.0", "unsupported", "model_executor/models/mllama4.py", message=_VL_NOIFACE),
            Row("0.11.1", "raw", "model_executor/models/mllama4.py -> llama4.py / llama.py", guard0=False),
            Row(
                "0.18.0",
                "raw",
                "model_executor/models/mllama4.py -> llama.py + interfaces.py _maybe_add_hidden_state",
                loop="after",
                end=True,
            ),
        ],
        "gemma3": [  # no release implements SupportsEagle3 for Gemma-3
            Row("0.0", "unsupported", "model_executor/models/gemma3_mm.py", message=_VL_NOIFACE),
        ],
        "gemma3_text": [
            Row("0.0", "unsupported", "model_executor/models/gemma3.py", message=_VL_NOIFACE),
        ],
    }
)


def _derived(engine: str, messages: dict[str, str]) -> dict[str, list[Row]]:
    """The rows of every family enumerated from the releases' code (data/engine_families.json), as the harness
    derived them from each release's executed setter, reader and decoder loop (conformance/families_enum.py)."""
    out: dict[str, list[Row]] = {}
    for fam, rows in enumerated_table()["rows"][engine].items():
        out[fam] = [
            Row(
                r["first"],
                r["rule"],
                r["src"],
                guard0=r.get("guard0", True),
                end=r.get("end", False),
                packer=r.get("packer", False),
                index_check=r.get("index_check", False),
                reads=r.get("reads", "nested"),
                aux_flag=r.get("aux_flag", False),
                loop=r.get("loop", "before"),
                message=r.get("why") or messages.get(r["rule"], ""),
                branch=r.get("branch", False),
            )
            for r in rows
        ]
    return out


# the named families above keep their rows; the enumerated ones never share a name with them
SGLANG_ROWS.update(
    {f: r for f, r in _derived("sglang", {"unsupported": _SG_NOSETTER, "absent": _SG_ABSENT}).items() if f not in SGLANG_ROWS}
)
VLLM_ROWS.update(
    {f: r for f, r in _derived("vllm", {"unsupported": _VL_NOIFACE, "absent": _VL_ABSENT}).items() if f not in VLLM_ROWS}
)


def engine_row(engine: str, version: str, family: str) -> Row:
    """The engine-table row that covers ``version`` (any release string) for a target family."""
    table = SGLANG_ROWS if engine == "sglang" else VLLM_ROWS
    return covering(table[family if family in table else "llama"], version)


def vllm_runner(version: str) -> str:
    version = version.split("+")[0]
    if version.endswith("-v1") or version.endswith("-v2"):
        return version[-2:]
    return "v2" if release_key(version) >= release_key(VLLM_V2_DEFAULT_FROM) else "v1"
