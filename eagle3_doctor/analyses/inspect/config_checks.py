"""The draft config against the target and the engine: layer ids in range and sorted (CFG001, CFG002),
dtypes (CFG005), forward flags read differently per tool (CFG006), the registered architecture (CFG007)."""

from __future__ import annotations

from typing import Any

from ...core.findings import DRAFT_CONFIG, Finding, Location, config_fix
from ...draft.formats import DraftInfo
from ...draft.served import draft_serving
from ...engines.keys import id_range
from ...engines.releases import rules_release

# The draft architecture names each engine registers for EAGLE-3 (sglang srt/models/llama_eagle3.py
# EntryClass; vllm model_executor/models/registry.py _SPECULATIVE_DECODING_MODELS; speculators).
REGISTERED = {
    "sglang": {"LlamaForCausalLMEagle3", "Qwen3ForCausalLMEagle3", "LlamaForCausalLMEagle"},
    "vllm": {
        "Eagle3LlamaForCausalLM",
        "LlamaForCausalLMEagle3",
        "Eagle3Speculator",
        "Eagle3Qwen3vlForCausalLM",
        "Eagle3Qwen3ForCausalLM",
    },  # registry.py:700-705 (0.33.0)
    "modelopt": {"LlamaForCausalLMEagle3"},
}


def preferred_architecture(engine: str, fmt: str) -> str:
    """The registered class to name in a draft's config without changing how it is read: vLLM's
    Eagle3Speculator is the speculators format's own (`detect_format` reads that name as it), so a
    draft in another layout keeps LlamaForCausalLMEagle3, which both engines register."""
    return "Eagle3Speculator" if engine == "vllm" and fmt == "speculators" else "LlamaForCausalLMEagle3"


def _ids_in_range(ids: list[int], L: int, engine: str) -> list[int]:
    # the same range compare-hidden takes (engines.id_range), so both commands accept the same ids
    lo, hi = id_range(engine, L)
    return [i for i in ids if i < lo or i > hi]


def _layer_id_findings(info: DraftInfo, L: int, engine: str) -> tuple[dict[str, list[int]], list[Finding]]:
    """CFG001/CFG002 on every layer-id list the config holds, and those lists by key (the capture check reads them)."""
    out: list[Finding] = []
    config_ids = info.config_layer_ids()
    for key, ids in config_ids.items():
        if L:
            oob = _ids_in_range(ids, L, engine)
            if oob:
                out.append(
                    Finding(
                        "CFG001",
                        f"{key} = {ids}: id(s) {oob} are out of range for a {L}-layer target under {engine}",
                        [f"{engine} ids run {id_range(engine, L)[0]}..{id_range(engine, L)[1]}"],
                        "use ids inside the target's depth",
                        location=Location(DRAFT_CONFIG, key),
                    )
                )
        if ids != sorted(ids):
            out.append(
                Finding(
                    "CFG002",
                    f"{key} = {ids} is not sorted",
                    [
                        "SGLang concatenates in the listed order; vLLM, TensorRT-LLM and ModelOpt sort: the fc input is permuted in one and not the other"
                    ],
                    config_fix(f"write the ids sorted ({sorted(ids)}) and make sure training used that order", key, sorted(ids)),
                )
            )
    return config_ids, out


def _dtype_and_flag_findings(
    info: DraftInfo, tcfg: dict[str, Any], engine: str, engine_version: str | None
) -> tuple[list[Finding], list[tuple[str, str]]]:
    """CFG005/CFG006, and the forward flags the config sets as a fact."""
    out: list[Finding] = []
    tdt = str(tcfg.get("torch_dtype") or tcfg.get("dtype") or "").replace("torch.", "")
    if tdt and info.weight_dtype and tdt != info.weight_dtype:
        out.append(
            Finding(
                "CFG005",
                f"draft weights are {info.weight_dtype}, target is {tdt}",
                ["an fp16 draft against a bf16 target overflows and rounds differently"],
                f"serve the draft in {tdt} (engines cast to the target dtype; check accuracy with acceptance --dtype {tdt})",
            )
        )
    flags: dict[str, Any] = {
        k: info.config.get(k) for k in ("norm_before_residual", "norm_output", "norm_before_fc", "fc_norm") if k in info.config
    }
    ec = e if isinstance(e := info.config.get("eagle_config"), dict) else {}
    if "norm_before_fc" in ec:
        flags["eagle_config.norm_before_fc"] = ec["norm_before_fc"]
    if "norm_before_residual" not in info.config and info.format == "speculators":
        out.append(
            Finding(
                "CFG006",
                "norm_before_residual is missing from a speculators config",
                ["vLLM's native default is False, its speculators adapter defaults it to True"],
                'write "norm_before_residual" explicitly (the value used in training)',
                location=Location(DRAFT_CONFIG, "norm_before_residual"),
            )
        )
    if "norm_output" in info.config and draft_serving(engine, rules_release(engine, engine_version), info.format) is None:
        out.append(
            Finding(
                "CFG006",
                f"norm_output = {info.config['norm_output']} means different things per tool",
                [
                    "SGLang/vLLM/TensorRT-LLM/speculators: feed the normed state to the next draft step; SpecForge: norm before lm_head"
                ],
                "make sure the serving engine's reading matches how the draft was trained",
                location=Location(DRAFT_CONFIG, "norm_output"),
            )
        )
    facts = [("forward flags", ", ".join(f"{k}={v}" for k, v in flags.items()))] if flags else []
    return out, facts


def _registration_findings(info: DraftInfo, engine: str) -> list[Finding]:
    archs = set(info.config.get("architectures") or [])
    if engine not in REGISTERED or not archs or archs & REGISTERED[engine]:
        return []
    return [
        Finding(
            "CFG007",
            f"{engine} does not register {sorted(archs)} as an EAGLE-3 draft",
            [f"{engine} registers: {', '.join(sorted(REGISTERED[engine]))}"],
            config_fix(
                f'set "architectures": ["{preferred_architecture(engine, info.format)}"]',
                "architectures",
                [preferred_architecture(engine, info.format)],
            ),
        )
    ]
