"""Which speculative algorithm serves each drafter kind as it was trained, per engine, and what the others do with it
(CMD008): one check for every kind, read off each engine's worker or proposer selection.

The algorithm is the launch's as the engine settles it: SGLang's ``--speculative-algorithm`` (NEXTN its alias of
EAGLE), vLLM's ``method`` as ``SpeculativeConfig`` keeps or detects it per release (engines/vllm_method.py, executed),
TensorRT-LLM's ``decoding_type``. An algorithm the doctor has not read against the kinds (SGLang's DSPARK, vLLM's
dspark or custom_class: not ``judged``, engines/algorithm_names.py) gives no finding; the launch's note says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from .algorithm_names import FIX_NAME, SERVES, canonical, judged, serves
from .launch_config import VLLM_METHOD, ServeConfig

_SG4 = "read in 0.4.6, 0.5.2, 0.5.10 and 0.5.23"
_TRTLLM_EAGLE3 = (
    "loaded as an EAGLE-3 draft: Eagle and Eagle3 run the PyTorch backend's EAGLE-3 modes (spec_dec_mode "
    "EAGLE3_ONE_MODEL or EAGLE3) on speculative_model",
    "tensorrt_llm/llmapi/llm_args.py EagleDecodingConfig, Eagle3DecodingConfig (the 1.2 series, the search index's copy)",
)
# What the engine does with a draft of one kind under an algorithm built for another, where read: (engine, algorithm,
# kinds) -> (served or refused, what happens, where). Keys list the algorithm as the engine settles it.
_READ: dict[tuple[str, str, tuple[str, ...]], tuple[str, str]] = {
    ("sglang", "EAGLE", ("eagle3", "peagle")): (
        "served, wrongly: only EAGLE3 turns on the target's aux hidden-state capture, so the draft is handed the "
        "final hidden state alone and skips its fc (llama_eagle3.py applies fc only to a state wider than the "
        "embedding), and outside EAGLE3 the worker replaces the draft's lm_head with the target's and never reads its "
        "d2t map",
        f"srt/model_executor/model_runner.py (0.5.23: model_runner_components/spec_aux_hidden_state.py) is_eagle3; "
        f"srt/models/llama_eagle3.py; srt/speculative/eagle_worker.py (0.5.23 eagle_worker_v2.py init_lm_head) "
        f"set_embed_and_head: {_SG4}",
    ),
    ("sglang", "EAGLE3", ("mtp",)): (
        "refused at start: the EAGLE3 branch reads the draft model's hot_token_id, which SGLang's MTP classes "
        "(DeepseekV3ForCausalLMNextN, Qwen3NextForCausalLMMTP) do not define: AttributeError (the DeepSeek one has "
        "no set_embed either, which the branch calls first)",
        "srt/speculative/eagle_worker.py (0.5.23 eagle_worker_v2.py init_lm_head); srt/models/deepseek_nextn.py, "
        "deepseek_v2.py, qwen3_next_mtp.py, qwen3_next.py (read in 0.5.10 and 0.5.23)",
    ),
    ("sglang", "STANDALONE", ("eagle3", "peagle", "mtp", "dflash")): (
        "served as a plain draft model: STANDALONE's worker hands the draft no target hidden state and the target "
        "captures none for it",
        "srt/speculative/spec_info.py carries_draft_hidden_states, model_runner_components/spec_aux_hidden_state.py "
        "(read in 0.5.23)",
    ),
    ("sglang", "NGRAM", ("eagle3", "peagle", "mtp", "dflash")): (
        "not loaded: NGRAM drafts from n-grams of the context with the target's own runner, no draft model",
        "srt/speculative/spec_info.py create_worker, srt/speculative/ngram_worker.py NGRAMWorker (read in 0.5.23)",
    ),
    ("sglang", "DFLASH", ("eagle3", "peagle", "mtp")): (
        "loaded into the DFlash worker, which drafts blocks from a DFlash model's taps",
        "srt/speculative/spec_info.py create_worker (read in 0.5.23)",
    ),
    ("sglang", "*", ("dflash",)): (
        "not drafted as DFlash blocks: SGLang builds its DFlash worker for --speculative-algorithm DFLASH alone; any "
        "other algorithm loads the draft into its own worker",
        "srt/speculative/spec_info.py create_worker (read in 0.5.23)",
    ),
    ("vllm", "draft_model", ("eagle3", "peagle", "mtp", "dflash")): (
        "served as an independent draft model: its proposer passes the draft no hidden state of the target",
        "v1/spec_decode/draft_model.py DraftModelProposer(pass_hidden_states_to_model=False) (read in 0.33.0)",
    ),
    ("trtllm", "mtp", ("eagle3",)): (
        "not loaded: MTPDecodingConfig drafts with the target's own MTP layers (max_draft_len becomes "
        "num_nextn_predict_layers); the draft checkpoint is not what it runs",
        "tensorrt_llm/llmapi/llm_args.py MTPDecodingConfig (the 1.2 series, the search index's copy)",
    ),
    ("trtllm", "eagle3", ("mtp",)): _TRTLLM_EAGLE3,
    ("trtllm", "eagle", ("mtp",)): _TRTLLM_EAGLE3,
    ("vllm", "*", ("dflash",)): (
        "not drafted as DFlash blocks: vLLM builds its DFlashProposer for method dflash alone; any other method runs "
        "the draft through that method's proposer",
        "v1/worker/gpu_model_runner.py (read in 0.20.0 and 0.33.0)",
    ),
}


@dataclass(frozen=True)
class Mismatch:
    engine: str
    kind: str
    algorithm: str  # as the engine settles it ("" where it raises before settling one)
    typed: Optional[str]  # as the launch writes it (None: unset)
    why: str  # how the engine came to it ("as typed", "'eagle-' in the draft path", ...)
    what: str  # what the engine does with this kind under it, where read
    where: str  # file, release


_VLLM_EAGLE_WHERE = (
    "v1/worker/gpu_model_runner.py use_aux_hidden_state_outputs (read in 0.10.2, 0.18.0, 0.33.0); "
    "transformers_utils/configs/eagle.py EAGLEConfig (0.33.0); model_executor/models/registry.py (read in 0.10.2, "
    "0.18.0, 0.33.0)"
)


def _vllm_eagle(sc: ServeConfig) -> tuple[str, str]:
    """An EAGLE-3 draft under vLLM's eagle: the architectures EAGLEConfig renames it to, as this draft names them."""
    from ..io.hub import config_if_local
    from .vllm_method import fields

    cfg = config_if_local(sc.draft)
    _mt, archs = fields(cfg)
    renamed = [a if a.startswith("Eagle") else f"Eagle{a}" for a in archs]
    capture = "only eagle3 turns on the target's aux hidden-state outputs, so the draft would get the last layer's state alone"
    if "speculators_model_type" in (cfg or {}):  # EAGLEConfig leaves a speculators config be
        what = f"not run as EAGLE-3: {capture}"
    elif any(a.endswith("Eagle3") and not a.startswith("Eagle3") for a in archs):
        what = f"refused at start: EAGLEConfig renames the draft's architectures to {', '.join(renamed)}, which no "
        what += f"read release registers; and {capture}"
    elif renamed:
        what = f"not run as EAGLE-3: EAGLEConfig renames the draft's architectures to {', '.join(renamed)} (EAGLE-1's "
        what += f"classes), and {capture}"
    else:
        what = f"not run as EAGLE-3: EAGLEConfig renames the draft's architectures to Eagle{{arch}}, EAGLE-1's classes, and {capture}"
    return what, _VLLM_EAGLE_WHERE


def _read(sc: ServeConfig, engine: str, algorithm: str, kind: str) -> tuple[str, str]:
    if (engine, algorithm) == ("vllm", "eagle") and kind in ("eagle3", "peagle"):
        return _vllm_eagle(sc)
    for (e, a, kinds), got in _READ.items():
        if e == engine and kind in kinds and a == algorithm:
            return got
    for (e, a, kinds), got in _READ.items():
        if e == engine and kind in kinds and a == "*":
            return got
    return (f"not what {engine} builds {algorithm} for: how it runs this kind under it is not read here", "")


def mismatch(sc: ServeConfig, kind: str) -> Optional[Mismatch]:
    """The launch's algorithm against the draft's kind; None where it serves the kind as trained, where the doctor
    has not read the algorithm against the kinds, or where the launch names none (CMD005's)."""
    engine = sc.engine
    if engine not in SERVES or kind not in SERVES[engine]:
        return None
    settled = sc.method_settled
    typed = sc.flag_values.get(VLLM_METHOD) if engine == "vllm" else sc.algorithm
    if settled is not None and settled.raises:
        what = f"refused at start: SpeculativeConfig raises {settled.raises}"
        return Mismatch(engine, kind, "", typed, settled.why, what, settled.source)
    if sc.algorithm is None:
        return None
    algo = canonical(engine, str(sc.algorithm))
    if not judged(engine, algo) or serves(engine, kind, algo):
        return None
    why = settled.why if settled is not None else "as typed"
    what, where = _read(sc, engine, algo, kind)
    if settled is not None and settled.why != "as typed":
        where = f"{where}; the method as settled: {settled.source}" if where else settled.source
    return Mismatch(engine, kind, str(sc.algorithm), typed, why, what, where)


def finding(sc: ServeConfig, kind: str, noun: str, draft: Optional[str], beside: list[Any]) -> list[Any]:
    """CMD008 where the launch runs ``draft``, of ``kind`` (``noun``: "an EAGLE-3 draft"), under an algorithm built for
    another kind; none beside a CMD006 or CMD007 on the method itself (``beside``: the launch's findings), which name
    the same fix."""
    from ..core.findings import SERVER_COMMAND, Finding, Fix

    m = mismatch(sc, kind)
    if m is None or any(f.code in ("CMD006", "CMD007") and (f.data or {}).get("flag") == VLLM_METHOD for f in beside):
        return []
    name = FIX_NAME[m.engine][kind]
    if m.engine == "sglang":
        fix = Fix(f"--speculative-algorithm {name}", file=SERVER_COMMAND, key="--speculative-algorithm", value=name)
        launch = f"--speculative-algorithm {m.typed}"
    elif m.engine == "trtllm":
        fix = Fix(f"set decoding_type: {name} under speculative_config in the --extra_llm_api_options YAML",
                  file=SERVER_COMMAND, key="speculative_config.decoding_type", value=name)  # fmt: skip
        launch = f"speculative_config.decoding_type {m.typed}"
    else:
        fix = Fix(f'set "method": "{name}" in --speculative-config', file=SERVER_COMMAND, key=VLLM_METHOD, value=name)
        launch = f'"method": "{m.typed}"' if m.typed is not None else "no method in --speculative-config"
    title = (
        f"the launch runs {noun} under {m.algorithm}: {m.engine} does not serve it as the kind it is"
        if m.algorithm
        else f"the launch leaves {m.engine} no method to run {noun} under: that server refuses to start"
    )
    evidence = [
        f"the draft is {noun} ({draft or sc.draft}); the launch: {launch}; {m.engine} settles {m.algorithm or 'no method'} ({m.why})",
        f"{m.engine} serves {noun} as trained under {' or '.join(SERVES[m.engine][kind])}",
        f"under {m.algorithm or 'this launch'}: {m.what}" + (f" ({m.where})" if m.where else ""),
        "what the doctor measures is the draft as its own algorithm would serve it",
    ]
    return [
        Finding(
            "CMD008",
            title,
            evidence,
            fix,
            data={"engine": m.engine, "kind": kind, "algorithm": m.algorithm or None, "typed": m.typed, "settled_by": m.why},
        )
    ]
