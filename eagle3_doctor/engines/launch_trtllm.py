"""TensorRT-LLM launch lines: ``trtllm-serve MODEL ... --extra_llm_api_options config.yaml``.

Read by hand from NVIDIA/TensorRT-LLM (the search index's copies; TensorRT-LLM is not on PyPI):
- ``tensorrt_llm/commands/serve.py`` @00209af1: ``main`` is a click ``DefaultGroup`` whose words go to the
  ``serve`` command unless the first names another subcommand; ``serve`` takes one positional MODEL and
  click options spelled with underscores (``--tp_size`` is an alias of ``--tensor_parallel_size``; click
  neither abbreviates nor rewrites ``-`` to ``_``). ``--config`` is an alias of ``--extra_llm_api_options``:
  a YAML file loaded with ``yaml.safe_load`` whose keys overwrite the command's
  (``update_llm_args_with_extra_dict``).
- ``tensorrt_llm/llmapi/llm_args.py`` (the 1.2 series: its MTP two-model warning names release 1.3):
  ``speculative_config`` is a union discriminated by ``decoding_type``. ``DecodingBaseConfig`` holds
  ``max_draft_len`` and ``speculative_model`` (validation alias ``speculative_model_dir``, the older
  releases' name). ``EagleDecodingConfig`` ("Eagle") and ``Eagle3DecodingConfig`` ("Eagle3") both run the
  PyTorch backend's EAGLE-3 modes (``spec_dec_mode``: ``EAGLE3_ONE_MODEL`` when ``eagle3_one_model``, the
  default, else ``EAGLE3``); ``eagle_choices`` is a static tree of child-rank paths whose depth resets
  ``max_draft_len``; ``eagle3_layers_to_capture`` is a set of layer ids. ``MTPDecodingConfig`` ("MTP")
  sets ``max_draft_len`` to ``num_nextn_predict_layers`` (default 1) and drafts with the target's own
  MTP layers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..core.errors import BadInput
from .algorithm_names import judged, serving
from .launch_args import DRAFT_TOKENS, MAX_SERVE_CONFIG, STEPS, TOPK, cut_value, to_int
from .launch_config import ServeConfig, algorithm_note, parse_token_tree
from .releases import TRTLLM_RELEASE

ARGS_SRC = "tensorrt_llm/llmapi/llm_args.py (1.2)"

# decoding_type -> what the doctor does with it (engines/algorithm_names.py holds every name TensorRT-LLM reads)
_EAGLE3 = serving("trtllm", "eagle3")  # Eagle3, Eagle
_MTP = serving("trtllm", "mtp")
_KNOWN_KEYS = {
    "decoding_type",
    "max_draft_len",
    "max_total_draft_tokens",
    "speculative_model",
    "speculative_model_dir",
    "eagle_choices",
    "greedy_sampling",
    "posterior_threshold",
    "use_dynamic_tree",
    "dynamic_tree_max_topK",
    "num_eagle_layers",
    "max_non_leaves_per_layer",
    "eagle3_one_model",
    "eagle3_layers_to_capture",
    "num_nextn_predict_layers",
    "max_concurrency",
    "load_format",
}


def read_api_options(path: str) -> dict[str, Any]:
    """The ``--extra_llm_api_options`` YAML, read bounded: relative to where the server is launched, as
    trtllm-serve opens it."""
    from ..io.safeio import load_yaml, read_regular_text

    p = Path(os.path.expanduser(path))
    fix = "run eagle3-doctor from the directory the server is launched in, or write the path absolute"
    text = read_regular_text(p, "--extra_llm_api_options file", fix, MAX_SERVE_CONFIG)
    obj = load_yaml(text, f"--extra_llm_api_options {p}", "fix the YAML (key: value lines, speculative_config: a mapping)")
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise BadInput(f"--extra_llm_api_options {p} holds no mapping at the top level", "write key: value lines")
    return obj


def trtllm_config(values: dict[str, Any], unknown: list[str], positional: list[str], api: dict[str, Any]) -> ServeConfig:
    """The command's options and its LLM API options (``api``, which win, as trtllm-serve merges them)."""
    sc = ServeConfig("trtllm", TRTLLM_RELEASE, unknown_flags=unknown)
    merged = {**values, **api}
    sc.target = api.get("model") or (positional[0] if positional else None)
    if "model" in api:
        sc.sources["target"] = "model in the --extra_llm_api_options file"
    if len(positional) > 1:
        sc.notes.append(f"extra positional words: {' '.join(positional[1:])} (trtllm-serve takes one MODEL)")
    if sc.target is None:
        sc.notes.append("no MODEL: trtllm-serve refuses to start without one (Missing argument 'MODEL')")
    sc.target_revision = merged.get("revision")
    sc.dtype = str(merged.get("dtype") or "auto")
    sc.chat_template = merged.get("chat_template")
    sc.tp_size = to_int(merged.get("tensor_parallel_size") or 1, "tensor_parallel_size")
    sc.pp_size = to_int(merged.get("pipeline_parallel_size") or 1, "pipeline_parallel_size")
    sc.trust_remote_code = bool(merged.get("trust_remote_code", False))
    backend = str(merged.get("backend") or "pytorch")
    if backend != "pytorch":
        sc.notes.append(
            f"backend {backend}: the doctor's TensorRT-LLM rules are the PyTorch backend's (_torch/speculative/eagle3.py)"
        )
    spec = api.get("speculative_config")
    if spec is None:
        sc.notes.append("no speculative_config (--extra_llm_api_options): this server runs without speculative decoding")
    elif not isinstance(spec, dict):
        raise BadInput(
            f"--extra_llm_api_options: speculative_config is {cut_value(spec)}, not a mapping",
            "write speculative_config: with decoding_type, max_draft_len, speculative_model indented below it",
        )
    else:
        _speculative(sc, spec)
    sc.ignored_flags = sorted(
        k
        for k in values
        if k
        not in {
            "revision",
            "chat_template",
            "tensor_parallel_size",
            "pipeline_parallel_size",
            "trust_remote_code",
            "backend",
            "extra_llm_api_options",
        }
    )
    return sc


def _speculative(sc: ServeConfig, spec: dict[str, Any]) -> None:
    src = "speculative_config"
    for k in spec:
        if k not in _KNOWN_KEYS:
            sc.notes.append(f"speculative_config key {k!r} is not read by eagle3-doctor")
    kind = spec.get("decoding_type")
    if not isinstance(kind, str) or not judged("trtllm", kind):
        raise BadInput(
            f"--extra_llm_api_options: speculative_config.decoding_type {cut_value(kind)} is not one TensorRT-LLM reads: "
            "it refuses to start",
            f"write decoding_type: Eagle3 (an EAGLE-3 draft) or MTP (the target's MTP layers), as {ARGS_SRC} names them",
        )
    sc.algorithm = kind
    low = kind.lower()
    draft = spec.get("speculative_model", spec.get("speculative_model_dir"))
    sc.draft = str(draft) if draft is not None else None
    if draft is not None:
        key = "speculative_model" if "speculative_model" in spec else "speculative_model_dir"
        sc.sources["draft"] = f"{src}.{key}"
    if low not in (*_EAGLE3, *_MTP):
        sc.notes.append(f"decoding_type {algorithm_note('trtllm', kind)}")
        return
    if low in _MTP:
        n = spec.get("num_nextn_predict_layers", 1)
        sc.num_steps = to_int(n, f"{src}.num_nextn_predict_layers", STEPS)
        sc.sources["num_steps"] = f"{src}.num_nextn_predict_layers" + (
            "" if "num_nextn_predict_layers" in spec else " (default 1)"
        )
        if sc.draft is None:
            sc.draft = sc.target
            sc.sources["draft"] = f"decoding_type {kind}: the target's own MTP layers ({ARGS_SRC} MTPDecodingConfig)"
        sc.topk, sc.num_draft_tokens = 1, sc.num_steps + 1
        sc.sources["topk"] = "TensorRT-LLM MTP drafts a chain (max_total_draft_tokens = num_nextn_predict_layers)"
        return
    _eagle3(sc, spec, kind)


def _eagle3(sc: ServeConfig, spec: dict[str, Any], kind: str) -> None:
    src = "speculative_config"
    if spec.get("eagle3_one_model") is False:
        sc.engine_version = f"{TRTLLM_RELEASE}-two-model"
        sc.sources["engine_version"] = f"{src}.eagle3_one_model: false (the two-model EAGLE-3 path)"
    if sc.draft is None:
        sc.notes.append(f"decoding_type {kind} without speculative_model: TensorRT-LLM refuses to start without a draft")
    if spec.get("max_draft_len") is not None:
        sc.num_steps = to_int(spec["max_draft_len"], f"{src}.max_draft_len", STEPS)
        sc.sources["num_steps"] = f"{src}.max_draft_len"
    ids = spec.get("eagle3_layers_to_capture")
    if ids is not None:
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise BadInput(
                f"--extra_llm_api_options: {src}.eagle3_layers_to_capture {cut_value(ids)} is not a list of layer ids",
                "write it as TensorRT-LLM reads it, e.g. eagle3_layers_to_capture: [1, 15, 28]",
            )
        sc.layer_ids = list(ids)
        joined = ",".join(map(str, ids))
        sc.notes.append(
            f"{src}.eagle3_layers_to_capture {list(ids)}: the ids TensorRT-LLM captures with; "
            f"pass --layer-ids {joined} to measure under them"
        )
    if spec.get("eagle_choices"):
        sc.token_tree = parse_token_tree(spec["eagle_choices"])
        sc.sources["token_tree"] = f"{src}.eagle_choices"
        depth = max(len(p) for p in sc.token_tree)
        if sc.num_steps is not None and sc.num_steps != depth:
            sc.notes.append(f"max_draft_len {sc.num_steps} differs from the eagle_choices depth {depth}: TensorRT-LLM resets it")
        sc.num_steps = depth
        sc.topk = max(p[-1] for p in sc.token_tree) + 1
        sc.num_draft_tokens = len(sc.token_tree) + 1
        return
    if sc.num_steps is None:
        sc.notes.append(f"decoding_type {kind} without max_draft_len: TensorRT-LLM refuses to start (max_draft_len must be > 0)")
        return
    if spec.get("use_dynamic_tree"):
        sc.topk = to_int(spec.get("dynamic_tree_max_topK"), f"{src}.dynamic_tree_max_topK", TOPK)
        total = to_int(spec.get("max_total_draft_tokens"), f"{src}.max_total_draft_tokens", DRAFT_TOKENS)
        sc.num_draft_tokens = total + 1
        for k in ("topk", "num_draft_tokens"):
            sc.sources[k] = f"{src}.use_dynamic_tree"
        sc.notes.append(
            f"use_dynamic_tree: TensorRT-LLM grows an EAGLE-2 tree (topK {sc.topk}, {total} nodes); the doctor "
            "measures a tree of that shape by SGLang's selection, not checked against TensorRT-LLM's"
        )
        return
    sc.topk, sc.num_draft_tokens = 1, sc.num_steps + 1
    sc.sources["topk"] = "TensorRT-LLM EAGLE-3 drafts a chain (no eagle_choices, no use_dynamic_tree)"
