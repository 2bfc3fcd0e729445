"""Weight quantization of the target and the draft, and whether each engine builds the draft with its own.

A checkpoint names its scheme in ``config.json`` ``quantization_config`` (``quant_method`` fp8,
compressed-tensors, modelopt, awq, gptq, ...) or, for a ModelOpt export, in ``hf_quant_config.json``
``quantization.quant_algo``. Each engine rule below was read in the engine's own source at the commit
named; what was not read is said so ("undetermined") with the file to read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# tensor names and dtypes only a quantized checkpoint stores (compressed-tensors weight_packed /
# weight_scale, fp8 weight_scale_inv, awq/gptq qweight / qzeros / scales, modelopt weight_scale_2)
QUANT_TENSOR_SUFFIXES = (
    ".weight_scale",
    ".weight_scale_inv",
    ".weight_scale_2",
    ".input_scale",
    ".weight_packed",
    ".weight_zero_point",
    ".qweight",
    ".qzeros",
    ".scales",
    ".g_idx",
)
QUANT_DTYPES = ("float8_e4m3fn", "float8_e5m2", "int8", "uint8", "int32", "float4_e2m1fn_x2")


@dataclass(frozen=True)
class Quant:
    """One checkpoint's weight quantization as its files write it."""

    method: str  # quant_method (lower case), or "modelopt" for hf_quant_config.json
    scheme: str  # what it says in words: "fp8 block [128, 128]", "modelopt NVFP4", ...
    source: str  # the file and key it was read from
    kv_cache: str | None = None  # a KV-cache quantization the same config names


def _compressed_scheme(q: dict[str, Any]) -> str:
    groups = cg if isinstance(cg := q.get("config_groups"), dict) else {}
    parts = []
    for g in groups.values():
        w = g.get("weights") if isinstance(g, dict) and isinstance(g.get("weights"), dict) else {}
        if w:
            parts.append(f"w{w.get('num_bits', '?')} {w.get('type', '?')} {w.get('strategy', '?')}")
    fmt = q.get("format")
    return "compressed-tensors" + (f" {fmt}" if fmt else "") + (f" ({', '.join(parts)})" if parts else "")


def _scheme(method: str, q: dict[str, Any]) -> str:
    if method == "compressed-tensors":
        return _compressed_scheme(q)
    if method == "fp8":
        block = q.get("weight_block_size")
        return f"fp8 block {block}" if block else f"fp8 per-tensor ({q.get('activation_scheme', 'static')} activations)"
    if method == "modelopt":
        return f"modelopt {q.get('quant_algo', '?')}"
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin"):
        return f"{method} {q.get('bits', q.get('w_bit', '?'))}-bit group {q.get('group_size', q.get('q_group_size', '?'))}"
    return method


def read_quant(cfg: dict[str, Any], hf_quant: dict[str, Any] | None = None) -> Quant | None:
    """The scheme ``config.json`` (``cfg``) or a ModelOpt ``hf_quant_config.json`` (``hf_quant``) names; None = unquantized."""
    q = cfg.get("quantization_config")
    if not isinstance(q, dict) and isinstance(cfg.get("text_config"), dict):
        q = cfg["text_config"].get("quantization_config")  # multimodal targets nest it with the text model
    if isinstance(q, dict) and q:
        method = str(q.get("quant_method") or "unnamed").lower()
        kv = q.get("kv_cache_scheme") or q.get("kv_cache_quant_algo")
        return Quant(method, _scheme(method, q), "config.json quantization_config", None if kv is None else str(kv))
    mq = hf_quant.get("quantization") if isinstance(hf_quant, dict) else None
    if isinstance(mq, dict) and mq.get("quant_algo"):
        kv = mq.get("kv_cache_quant_algo")
        return Quant(
            "modelopt", f"modelopt {mq['quant_algo']}", "hf_quant_config.json quantization", None if kv is None else str(kv)
        )
    return None


def quantized_tensors(names_dtypes: list[tuple[str, str]]) -> list[str]:
    """The stored tensors that only a quantized checkpoint holds (scales, packed weights, 8-bit or packed dtypes)."""
    return [n for n, dt in names_dtypes if n.endswith(QUANT_TENSOR_SUFFIXES) or dt.replace("torch.", "") in QUANT_DTYPES]


@dataclass(frozen=True)
class DraftQuantRule:
    """How one engine chooses the quantization the draft model is built with."""

    engine: str
    inherits: str  # "flag": the server's --quantization; "own": the draft's own config; "undetermined"
    says: str  # one sentence, what the source does
    cite: str  # file, function and the commit read
    draft_flag: str | None = None  # the launch option that sets the draft's own method


SGLANG_RULE = DraftQuantRule(
    "sglang",
    "flag",
    "SGLang builds the draft with --speculative-draft-model-quantization, which defaults to the server's "
    "--quantization (the target's); 'unquant' turns it off",
    "python/sglang/srt/server_args.py, the 'In speculative scenario' block of ServerArgs.__post_init__'s handlers "
    "(`if self.speculative_draft_model_quantization is None: self.speculative_draft_model_quantization = "
    "self.quantization`); python/sglang/srt/configs/model_config.py ModelConfig.from_server_args (the draft's "
    "ModelConfig takes speculative_draft_model_quantization)",
    "--speculative-draft-model-quantization",
)
VLLM_RULE = DraftQuantRule(
    "vllm",
    "own",
    "vLLM builds the draft's ModelConfig with speculative_config['quantization'] (default None: read from the "
    "draft's own config.json) and its EAGLE-3 layers take the drafter's quant config, not the verifier's; only "
    "MTP/DSpark drafts without their own model copy the target's quantization",
    "vllm/config/speculative.py SpeculativeConfig.__post_init__ (draft ModelConfig(..., quantization=self.quantization)); "
    "vllm/model_executor/models/llama_eagle3.py LlamaDecoderLayer.get_quant_config and LlamaModel.__init__ -> "
    "vllm/model_executor/models/utils.py get_draft_quant_config (read at vllm-project/vllm: speculative.py 002e77c1, llama_eagle3.py 00bd1493)",
    "speculative_config 'quantization'",
)
TRTLLM_RULE = DraftQuantRule(
    "trtllm",
    "own",
    "TensorRT-LLM (PyTorch backend, one-model EAGLE-3) reads the draft's ModelConfig from its own directory and "
    "copies only the target's kv_cache_quant_algo onto it; the two-model path builds a separate engine from the "
    "draft directory (its quantization handling there is undetermined: read "
    "tensorrt_llm/_torch/pyexecutor/py_executor_creator.py)",
    "tensorrt_llm/_torch/models/modeling_speculative.py SpecDecOneEngineForCausalLM.__init__ "
    "(ModelConfig.from_pretrained(spec_config.speculative_model_dir); draft_config.quant_config.kv_cache_quant_algo = "
    "model_config.quant_config.kv_cache_quant_algo; read at NVIDIA/TensorRT-LLM b35ac1b6)",
)
RULES = {r.engine: r for r in (SGLANG_RULE, VLLM_RULE, TRTLLM_RULE)}
# where to read for the engines no rule models
UNREAD = {
    "modelopt": "modelopt/torch/speculative/plugins/hf_eagle.py (the draft is trained, not served, by ModelOpt)",
    "eagle": "eagle/model/ea_model.py EaModel.from_pretrained (SafeAILab/EAGLE)",
}


def draft_rule(engine: str) -> DraftQuantRule:
    if engine in RULES:
        return RULES[engine]
    where = UNREAD.get(engine, "the engine's draft model loader")
    return DraftQuantRule(engine, "undetermined", f"not read: {where}", where)
