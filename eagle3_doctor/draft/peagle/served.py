"""How each engine runs a P-EAGLE draft: in parallel (one forward, K slots), as an EAGLE-3 chain (its
``mask_hidden`` unused), or not at all; with which K and which mask token.

vLLM's reading of the config is executed release by release (``conformance/peagle_exec.py``, table
``draft/peagle/serving.json``; tests/draft/test_peagle_conformance.py holds these rules to it); the loader and
SGLang are read, not executed:

- vLLM reads speculators' ``"peagle"`` type from 0.22.0 (``transformers_utils/configs/speculators/algos.py``
  ``update_peagle``: ``pard_token = config_dict["mask_token_id"]``, a KeyError without it, and architectures
  ``Peagle{Llama,Qwen3}ForCausalLM``); ``base.py`` ``build_vllm_speculative_config`` turns it into
  ``method: eagle3, parallel_drafting: True`` with ``num_speculative_tokens`` the proposal's ``speculative_tokens``.
  Before 0.22.0 the type is refused (``extract_transformers_pre_trained_config``: "Expected one of ...").
- With parallel drafting, ``model_executor/models/llama_eagle3.py`` ``load_weights`` (mask_hidden from 0.16.0)
  raises "mask_hidden not found in weights but model is configured for parallel drafting"; without it, it skips
  the tensor with a warning, and the draft runs as a chain.
- The slots' token: ``v1/spec_decode/llm_base_proposer.py`` ``_init_parallel_drafting_params`` takes the draft
  config's ``dflash_config.mask_token_id``, then (from 0.28.0) ``mask_token_id``, then ``pard_token``: the
  config it reads is ``transformer_layer_config`` with the P-EAGLE keys added, so from 0.28.0 a ``mask_token_id``
  inside ``transformer_layer_config`` wins over the top-level one (0.22.0-0.27.1 read ``pard_token`` only).
- SGLang (0.5.23, and no release before it) has no parallel drafting for EAGLE-3 drafts: its ``llama_eagle3.py``
  ``load_weights`` drops every name not among its parameters (``mask_hidden`` included) and drafts a chain. It
  loads only the architectures its model files register (``EntryClass``): speculators' ``PEagleSpeculator`` is
  not one of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...engines.releases import release_key

VLLM_TYPE_FROM = "0.22.0"
VLLM_MASK_KEY_FROM = "0.28.0"  # the proposer reads mask_token_id before pard_token from here on
_ALGOS = "vllm transformers_utils/configs/speculators/algos.py update_peagle (from 0.22.0)"
_BASE = "vllm transformers_utils/configs/speculators/base.py build_vllm_speculative_config"
_LOAD = "vllm model_executor/models/llama_eagle3.py load_weights"
_TOKEN = "vllm v1/spec_decode/llm_base_proposer.py _init_parallel_drafting_params"
_SGL = "sglang srt/models/llama_eagle3.py load_weights (0.5.23): names not among its parameters are dropped"
_SGL_ARCH = "sglang srt/models/*eagle3*.py EntryClass (0.5.23)"
SGLANG_EAGLE3 = ("LlamaForCausalLMEagle3", "Eagle3DeepseekV2ForCausalLM")


@dataclass(frozen=True)
class PEagleServing:
    engine: str
    mode: str  # "parallel" | "chain" | "refused"
    k: int | None  # the tokens drafted per pass
    mask_token_id: int | None  # the parallel slots' token (parallel only)
    why: str  # the engine's own words or the reading that decides it
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"engine": self.engine, "mode": self.mode, "k": self.k, "mask_token_id": self.mask_token_id,
                "why": self.why, "source": self.source}  # fmt: skip


def peagle_serving(engine: str, version: str | None, info: Any) -> PEagleServing:
    """The served side of a P-EAGLE checkpoint (``info`` a :class:`~.formats.PEagleInfo`) on an engine release
    (None: the newest modelled)."""
    k = info.depths
    if engine == "sglang":
        archs = info.config.get("architectures") or []
        if not any(a in SGLANG_EAGLE3 for a in archs):
            why = (
                f"no SGLang model class is registered for architectures {archs} (its EAGLE-3 classes: {', '.join(SGLANG_EAGLE3)})"
            )
            return PEagleServing(engine, "refused", None, None, why, _SGL_ARCH)
        return PEagleServing(engine, "chain", k, None, "SGLang drafts EAGLE-3 drafts as a chain; mask_hidden is dropped", _SGL)
    if engine != "vllm":
        return PEagleServing(engine, "refused", None, None, f"P-EAGLE serving is modelled for vllm and sglang, not {engine}", "")
    if info.model_type != "peagle":
        why = f"speculators_model_type {info.model_type!r}: no parallel_drafting; mask_hidden skipped with a warning"
        return PEagleServing(engine, "chain", k, None, why, f"{_BASE}; {_LOAD}")
    if version is not None and release_key(version) < release_key(VLLM_TYPE_FROM):
        why = f"vllm before {VLLM_TYPE_FROM} reads no speculators_model_type 'peagle' (Expected one of: eagle3, ...)"
        return PEagleServing(engine, "refused", None, None, why, _ALGOS)
    if info.mask_token_id is None:
        return PEagleServing(engine, "refused", None, None, "KeyError: 'mask_token_id' (update_peagle)", _ALGOS)
    if info.mask_hidden_shape is None:
        why = "ValueError: mask_hidden not found in weights but model is configured for parallel drafting"
        return PEagleServing(engine, "refused", None, None, why, _LOAD)
    inner = (info.config.get("transformer_layer_config") or {}).get("mask_token_id")
    inner_first = version is None or release_key(version) >= release_key(VLLM_MASK_KEY_FROM)
    token = inner if isinstance(inner, int) and inner_first else info.mask_token_id
    return PEagleServing(engine, "parallel", k, token, "method eagle3 with parallel_drafting", f"{_ALGOS}; {_BASE}; {_TOKEN}")
