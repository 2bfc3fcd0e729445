"""Target families: one record per family the engine table models, with every name it goes by.

A family is the unit the engine table speaks in (``SGLANG_ROWS["deepseek"]``): the model file of
SGLang and vLLM that decides what is captured. Its record says which Hugging Face ``model_type``
values and architecture classes map to it, the text-config ``model_type`` vLLM's EAGLE-3 target
check reads, and the SGLang class that serves it (named in that engine's start-up errors). The
lookups the other modules use are derived from these records, so a family is added in one place.

Two kinds of record. The named families below are the ones the conformance harness executes under the
doctor's own names (conformance/sglang_exec.py, vllm_exec.py FAMILIES). Every other target class a
release serves with an EAGLE-3 draft is enumerated from the releases' own code by `make conformance`
(conformance/families_enum.py) and read from data/engine_families.json, one family per architecture,
named by the Hugging Face model_type transformers maps that class to. Tests derive every harness family
through arch_family, the way the CLI does. Two SGLang/vLLM facts shape it: the model class comes from
`architectures`, and vLLM's EAGLE-3 target check reads `model_type`, so a Mistral checkpoint is
"mistral" whichever class it names.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class Family:
    name: str  # the engine-table family
    model_types: tuple[str, ...]  # HF config model_type values that map to it
    architectures: tuple[str, ...]  # HF architecture classes that map to it (matched in any case)
    vllm_model_type: str | None  # hf_text_config.model_type, what vLLM's EAGLE-3 target check sees (None: the checkpoint's)
    sglang_class: str  # the SGLang class that serves it


@functools.cache
def enumerated_table() -> dict:
    """data/engine_families.json: the families enumerated from the releases' code and their derived rows."""
    return json.loads(resources.files("eagle3_doctor").joinpath("data/engine_families.json").read_text())


def _enumerated() -> tuple[Family, ...]:
    return tuple(
        Family(name, tuple(r["model_types"]), tuple(r["architectures"]), r["vllm_model_type"], r["sglang_class"])
        for name, r in enumerated_table()["families"].items()
    )


NAMED_FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("llama", ("llama",), ("LlamaForCausalLM",), "llama", "LlamaForCausalLM"),
        # sglang serves Mistral through llama.py's LlamaForCausalLM
        Family("mistral", ("mistral",), ("MistralForCausalLM",), "mistral", "LlamaForCausalLM"),
        Family("qwen", ("qwen3",), ("Qwen3ForCausalLM",), "qwen3", "Qwen3ForCausalLM"),
        Family("qwen3_moe", ("qwen3_moe",), ("Qwen3MoeForCausalLM",), "qwen3_moe", "Qwen3MoeForCausalLM"),
        Family(
            "deepseek",
            ("deepseek_v2", "deepseek_v3", "kimi_k2"),
            ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"),
            "deepseek_v3",
            "DeepseekV2ForCausalLM",
        ),
        Family("gpt_oss", ("gpt_oss",), ("GptOssForCausalLM",), "gpt_oss", "GptOssForCausalLM"),
        # the families SGLang gives their own setter, or a wrapper that delegates to its language model
        Family("glm4_moe", ("glm4_moe",), ("Glm4MoeForCausalLM",), "glm4_moe", "Glm4MoeForCausalLM"),
        Family("glm4_moe_lite", ("glm4_moe_lite",), ("Glm4MoeLiteForCausalLM",), "glm4_moe_lite", "Glm4MoeLiteForCausalLM"),
        Family("minimax_m2", ("minimax_m2",), ("MiniMaxM2ForCausalLM",), "minimax_m2", "MiniMaxM2ForCausalLM"),
        Family("kimi_linear", ("kimi_linear",), ("KimiLinearForCausalLM",), "kimi_linear", "KimiLinearForCausalLM"),
        Family(
            "kimi_k25",
            ("kimi_k25",),
            ("KimiK25ForConditionalGeneration",),
            "kimi_k25",
            "KimiK25ForConditionalGeneration",
        ),
        Family(
            "llama4",
            ("llama4", "llama4_text"),
            ("Llama4ForConditionalGeneration", "Llama4ForCausalLM"),
            "llama4_text",
            "Llama4ForConditionalGeneration",
        ),
        Family(
            "gemma3",
            ("gemma3",),
            ("Gemma3ForConditionalGeneration",),
            "gemma3_text",
            "Gemma3ForConditionalGeneration",
        ),
        Family("gemma3_text", ("gemma3_text",), ("Gemma3ForCausalLM",), "gemma3_text", "Gemma3ForCausalLM"),
    )
}
FAMILIES: dict[str, Family] = {**{f.name: f for f in _enumerated()}, **NAMED_FAMILIES}

# the lookups, derived from the records
FAMILY_OF_TYPE: dict[str, str] = {mt: f.name for f in FAMILIES.values() for mt in f.model_types}
FAMILY_OF_ARCH: dict[str, str] = {a.lower(): f.name for f in FAMILIES.values() for a in f.architectures}
VLLM_MODEL_TYPE: dict[str, str | None] = {f.name: f.vllm_model_type for f in FAMILIES.values()}
SGLANG_CLASS: dict[str, str] = {f.name: f.sglang_class for f in FAMILIES.values()}
MODELLED_FAMILIES = frozenset(FAMILY_OF_TYPE.values())


def arch_family(config: dict) -> str:
    """The engine-table family of a target config: by model_type, else by architecture class.

    A target no row models comes back under its own model_type (or its first architecture, or
    "unknown"), never as "llama": resolve_serving turns it into an undetermined serving side.
    """
    mt = str(config.get("model_type", "")).lower()
    archs = [str(a).lower() for a in config.get("architectures") or []]
    if mt in FAMILY_OF_TYPE:
        return FAMILY_OF_TYPE[mt]
    for a in archs:
        if a in FAMILY_OF_ARCH:
            return FAMILY_OF_ARCH[a]
    return mt or (archs[0] if archs else "unknown")


def is_modelled(engine: str, family: str) -> bool:
    """Whether the engine's capture for this family is in the engine table (sglang, vllm: per model
    file, executed); the other engines' rules do not depend on the target's model file."""
    return engine not in ("sglang", "vllm") or family in MODELLED_FAMILIES
