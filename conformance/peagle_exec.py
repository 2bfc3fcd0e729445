"""Execute each vLLM release's own reading of a P-EAGLE checkpoint's config: whether the draft is drafted in
parallel, as an EAGLE-3 chain or refused, with how many tokens and which mask token.

Executed from the release (never re-typed here):
- ``transformers_utils/configs/speculators/algos.py``, whole (pure Python): the registry of speculators types
  and each type's config update (``update_peagle`` from 0.22.0);
- ``transformers_utils/configs/speculators/base.py``: ``SpeculatorsConfig``'s classmethods
  ``extract_transformers_pre_trained_config`` and ``extract_vllm_speculative_config`` (and what they call), the
  module run over permissive stubs (speculators_reader.py, the loader mtp_exec uses too);
- ``v1/spec_decode/llm_base_proposer.py`` (``v1/spec_decode/eagle.py`` before 0.20.0)
  ``_init_parallel_drafting_params``: the parallel slots' token, read from the config the two steps above build.

The loader's ``mask_hidden`` check (``model_executor/models/llama_eagle3.py`` ``load_weights``) needs torch
modules and stays read (``eagle3_doctor/draft/peagle/served.py``).
"""

from __future__ import annotations

import ast
import types
from pathlib import Path
from typing import Any

import mtp_stubs as S
from speculators_reader import SPEC_DIR, load_reader

ALGOS = f"{SPEC_DIR}/algos.py"
PROPOSER = "vllm/v1/spec_decode/llm_base_proposer.py"
PROPOSERS = (PROPOSER, "vllm/v1/spec_decode/eagle.py")  # from 0.20.0 the proposer's base class has its own file


class PeagleCodeMoved(Exception):
    """The release's speculators reader no longer has the shape the harness lifts: read it again."""


def reader(src: Path) -> types.SimpleNamespace:
    """The release's speculators reader (``cls``, its SpeculatorsConfig) and the proposer's token reading."""
    loaded = load_reader(src)
    if loaded is None:
        raise PeagleCodeMoved(f"{SPEC_DIR}/base.py not found")
    cls, _ = loaded
    missing = [m for m in ("extract_transformers_pre_trained_config", "extract_vllm_speculative_config") if not hasattr(cls, m)]
    if missing:  # the reader of 0.10-0.15 has another shape: no P-EAGLE, no peagle type
        raise PeagleCodeMoved(f"{SPEC_DIR}/base.py: {', '.join(missing)} not found")
    proposer = next((_proposer_method(src / f) for f in PROPOSERS if (src / f).is_file()), {}).get(
        "_init_parallel_drafting_params"
    )
    return types.SimpleNamespace(cls=cls, proposer=proposer, src=src)


def _proposer_method(path: Path) -> dict[str, ast.FunctionDef]:
    """The proposer's ``_init_parallel_drafting_params``, in whichever class of the file defines it."""
    tree = ast.parse(path.read_text(), str(path))
    for n in tree.body:
        if isinstance(n, ast.ClassDef):
            for m in n.body:
                if isinstance(m, ast.FunctionDef) and m.name == "_init_parallel_drafting_params":
                    return {m.name: m}
    return {}


def read_config(r: types.SimpleNamespace, config: dict[str, Any]) -> dict[str, Any]:
    """What the release makes of a speculators config: mode, K, the slots' token, or the error it raises."""
    import copy

    cfg = copy.deepcopy(config)
    try:
        pre = r.cls.extract_transformers_pre_trained_config(cfg)
        spec = r.cls.extract_vllm_speculative_config(cfg)
    except Exception as e:  # the engine's own refusal, kept as it says it
        return {"mode": "refused", "error": f"{type(e).__name__}: {e}"}
    parallel = bool(spec.get("parallel_drafting"))
    out = {"mode": "parallel" if parallel else "chain", "method": spec["method"], "k": spec["num_speculative_tokens"],
           "architectures": pre.get("architectures"), "token": None}  # fmt: skip
    if parallel and r.proposer is not None:
        out["token"] = _token(r, pre)
    return out


def _token(r: types.SimpleNamespace, pre: dict[str, Any]) -> Any:
    init = S.compile_method(r.proposer, str(r.src / PROPOSER))
    me = types.SimpleNamespace(draft_model_config=types.SimpleNamespace(hf_config=types.SimpleNamespace(**pre)),
                               pass_hidden_states_to_model=False, parallel_drafting_token_id=None)  # fmt: skip
    try:
        init(me)
    except Exception as e:
        return f"!{type(e).__name__}: {e}"
    return me.parallel_drafting_token_id


PACKAGE_TABLE = "eagle3_doctor/draft/peagle/serving.json"
# a speculators P-EAGLE config as speculators writes it (PEagleSpeculatorConfig), and the variants users ship
_BASE_CONFIG: dict[str, Any] = {
    "speculators_model_type": "peagle", "architectures": ["PEagleSpeculator"], "mask_token_id": 1,
    "draft_vocab_size": 256, "norm_before_residual": False, "eagle_aux_hidden_state_layer_ids": [2, 4, 5],
    "speculators_config": {"algorithm": "peagle", "default_proposal_method": "greedy",
                           "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 4}],
                           "verifier": {"name_or_path": "target", "architectures": ["LlamaForCausalLM"]}},
    "transformer_layer_config": {"model_type": "llama", "hidden_size": 128, "vocab_size": 320},
}  # fmt: skip


def cases() -> dict[str, dict[str, Any]]:
    """The configs every release reads: as speculators writes it, typed eagle3 (a converted config), without
    mask_token_id, and with a mask_token_id inside transformer_layer_config."""
    import copy

    eagle3 = {**copy.deepcopy(_BASE_CONFIG), "speculators_model_type": "eagle3", "architectures": ["Eagle3Speculator"]}
    no_mask = {k: v for k, v in copy.deepcopy(_BASE_CONFIG).items() if k != "mask_token_id"}
    inner = copy.deepcopy(_BASE_CONFIG)
    inner["transformer_layer_config"]["mask_token_id"] = 7
    return {"peagle": copy.deepcopy(_BASE_CONFIG), "eagle3 type": eagle3, "no mask_token_id": no_mask,
            "mask_token_id in transformer_layer_config": inner}  # fmt: skip


def _short(outcome: dict[str, Any]) -> dict[str, Any]:
    """An outcome without the parts that name Python objects (the registry's repr lists function addresses)."""
    out = dict(outcome)
    if "error" in out:
        out["error"] = out["error"].split(": {")[0] if "Expected one of" in out["error"] else out["error"]
    return out


def build_table(src_dir: Any, releases: dict[str, list[str]], proposer_dir: Any = None) -> dict[str, Any]:
    """Every vLLM release's reading of each case; releases whose outcomes agree share a row. ``proposer_dir(v)``,
    where given, is where a release's llm_base_proposer.py lies when the capture cache lacks it."""
    rows: list[dict[str, Any]] = []
    for v in releases["vllm"]:
        src = Path(src_dir("vllm", v))
        if not (src / ALGOS).is_file():
            outcome: dict[str, Any] = {n: {"mode": "absent"} for n in cases()}
        else:
            try:
                r = reader(src)
            except PeagleCodeMoved:
                outcome = {n: {"mode": "absent"} for n in cases()}  # the reader of 0.10-0.15: no P-EAGLE, no peagle type
            else:
                if r.proposer is None and proposer_dir is not None and (Path(proposer_dir(v)) / PROPOSER).is_file():
                    r.proposer = _proposer_method(Path(proposer_dir(v)) / PROPOSER).get("_init_parallel_drafting_params")
                outcome = {n: _short(read_config(r, c)) for n, c in cases().items()}
        if rows and rows[-1]["outcome"] == outcome:
            rows[-1]["releases"].append(v)
        else:
            rows.append({"executed_from": v, "releases": [v], "outcome": outcome})
    return {"engine": "vllm", "cases": cases(), "releases": list(releases["vllm"]), "rows": rows}
