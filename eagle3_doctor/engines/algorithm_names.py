"""The speculative algorithm names each engine serves the measured drafter kinds under, and the others it has, in
the engine's own spelling: what the launch command's notes and CMD008 (engines/drafter_algorithms.py) both read.
SGLang's names are upper case (0.5.12+ upper-cases what is typed; earlier parsers refuse other spellings, CMD004),
NEXTN its alias of EAGLE; vLLM's as its SpeculativeConfig keeps them, the deprecated ``*_mtp`` names being mtp;
TensorRT-LLM's ``speculative_config.decoding_type`` (the union's members in tensorrt_llm/llmapi/llm_args.py, 1.2: Eagle
and Eagle3 both run its EAGLE-3 modes, MTP the target's own MTP layers; older releases' spellings kept), compared in
lower case as the doctor reads the YAML. TensorRT-LLM serves no DFlash or P-EAGLE draft (those kinds refuse it)."""

from __future__ import annotations

# the names that serve each kind as trained
SERVES: dict[str, dict[str, tuple[str, ...]]] = {
    "sglang": {"eagle3": ("EAGLE3",), "peagle": ("EAGLE3",), "mtp": ("NEXTN", "EAGLE"), "dflash": ("DFLASH",)},
    "vllm": {"eagle3": ("eagle3",), "peagle": ("eagle3",), "mtp": ("mtp",), "dflash": ("dflash",)},
    "trtllm": {"eagle3": ("Eagle3", "Eagle"), "mtp": ("MTP",)},
}
# the name a fix sets for each kind: SGLang's MTP heads as NEXTN, as its documentation launches them
FIX_NAME = {"sglang": {"eagle3": "EAGLE3", "peagle": "EAGLE3", "mtp": "NEXTN", "dflash": "DFLASH"},
            "vllm": {"eagle3": "eagle3", "peagle": "eagle3", "mtp": "mtp", "dflash": "dflash"},
            "trtllm": {"eagle3": "Eagle3", "mtp": "MTP"}}  # fmt: skip
# names that serve none of the measured kinds, read against them (CMD008), with the drafter each runs
OTHER: dict[str, dict[str, str]] = {
    "sglang": {"STANDALONE": "a plain draft model", "NGRAM": "n-gram lookup (no draft model)"},
    "vllm": {
        "eagle": "an EAGLE-1/2 draft (no aux hidden states)",
        "draft_model": "a plain draft model",
        "ngram": "n-gram lookup (no draft model)",
        "suffix": "suffix decoding (no draft model)",
        "medusa": "Medusa heads",
        "mlp_speculator": "an MLP speculator",
    },
    "trtllm": {
        "draft_target": "a plain draft model",
        "drafttarget": "a plain draft model",
        "lookahead": "lookahead decoding (no draft model)",
        "medusa": "Medusa heads",
        "ngram": "n-gram lookup (no draft model)",
        "user_provided": "a user-provided drafter",
        "userprovided": "a user-provided drafter",
        "savestate": "no drafting (it saves hidden states)",
        "pard": "PARD drafts",
        "auto": "a draft-free algorithm TensorRT-LLM picks",
    },
}


def canonical(engine: str, algorithm: str) -> str:
    """The name as the engine acts on it: SGLang upper case with NEXTN as EAGLE, vLLM ``*_mtp`` as mtp."""
    if engine == "sglang":
        a = algorithm.upper()
        return "EAGLE" if a == "NEXTN" else a
    a = algorithm.lower()
    return "mtp" if engine == "vllm" and a.endswith("_mtp") else a


def serving(engine: str, kind: str) -> tuple[str, ...]:
    """The canonical names that serve ``kind`` as trained on ``engine`` (empty: an engine not read)."""
    return tuple(canonical(engine, a) for a in SERVES.get(engine, {}).get(kind, ()))


def serves(engine: str, kind: str, algorithm: str) -> bool:
    """``algorithm`` (as the launch names it) serves a draft of ``kind`` as trained on ``engine``."""
    return canonical(engine, algorithm) in serving(engine, kind)


def judged(engine: str, algorithm: str) -> bool:
    """``algorithm`` serves a measured kind, or was read against them (CMD008 names what it does with them)."""
    a = canonical(engine, algorithm)
    return any(a in serving(engine, k) for k in SERVES.get(engine, {})) or a in OTHER.get(engine, {})
