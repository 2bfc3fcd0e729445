"""Preflight: every argument, path and input file checked before anything heavy.

Nothing here imports torch or transformers, so a bad argument is refused in well under a second
(docs/reliability.md has the measured times), and nothing here can block: FIFOs and devices are
refused by their type before anything opens them. Checks run in the order a user fixes things:
arguments, then paths (inputs, then outputs), then the contents of configs, policies, baselines,
prompt files and dumps.

Only the CLI imports this module. The low-level checks the input readers share (file types, JSON,
Only the CLI imports this module. The low-level checks the input readers share (file types, JSON,
safetensors headers, target configs, draft layer ids) live in checks.py, so that target, draft.formats
and the inspect command need not import the preflight, which itself imports gate, draft.formats and engines.
The checks of paths and file contents are validate_files.py; the arguments and the entry points are here.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.errors import BadInput
from ..engines.launch_args import MAX_DRAFT_TOKENS, MAX_NUM_STEPS, MAX_TOPK  # one range for options and commands
from ..io.checks import MAX_LAYERS, check_target, kind, looks_local, require_dir, require_file
from ..io.conversations import DATA_FIX as TRAIN_DATA_FIX
from .validate_files import (
    check_baseline,
    check_cache_estimate,
    check_draft,
    check_dump,
    check_new_dir,
    check_output_dir,
    check_output_file,
    check_outputs_separate,
    check_policy_file,
    check_prompts,
    check_roles,
    check_target_tensors,
    check_tokenizer_dir,
)

MAX_NEW_TOKENS = 1 << 20
MAX_BATCH = 1 << 16

CONTINUATIONS = ("greedy", "speculative", "text")
GENERATED = ("greedy", "speculative")  # the continuations the target generates
DTYPES = ("auto", "bfloat16", "bf16", "float16", "fp16", "float32", "fp32")
_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d{1,3})?)$")
_SIZE = re.compile(r"^\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)?$", re.IGNORECASE)


# ----------------------------------------------------------------------------- commands that load no model


_NO_MODEL_INPUTS = (
    ("train_template", "--train-template"),
    ("serve_template", "--serve-template"),
    ("requests", "--requests"),
    ("train_data", "--train-data"),
    ("metrics", "--metrics"),
    ("before", "--before"),
    ("log", "--server-log"),
)


def preflight_no_model(**kw: Any) -> None:
    """For commands that load no model (template-diff, server-metrics): arguments, outputs kept apart
    from inputs, output paths, and the input files and tokenizer directories by type, before transformers."""
    check_arguments(**kw)
    check_outputs_separate(kw)
    check_output_file(kw.get("json_out"), "--json")
    check_output_file(kw.get("write_template"), "--write-template")
    for key in ("target", "train_tokenizer", "train_template", "serve_template"):
        v = kw.get(key)
        if isinstance(v, str) and v != "target" and kind(v) == "dir":
            check_tokenizer_dir(Path(v), "--" + key.replace("_", "-"))
    for key, flag in _NO_MODEL_INPUTS:
        v = kw.get(key)
        # by type only: a FIFO or device is refused now; a missing file is worded by its reader
        if isinstance(v, str) and "://" not in v and kind(v) not in ("missing", "dir", "file"):
            require_file(v, flag, "pass a regular file")
    check_prompts(kw.get("prompts"))


def preflight_named_models(target: str | None, draft: str | None) -> None:
    """The local models a launch command names, checked as --target and --draft are, before the
    command's summary line is printed: a bad one is then the run's only line."""
    check_roles(target, draft)
    if target and kind(target) == "dir":
        check_target(target)
    if draft and kind(draft) == "dir":
        check_draft(draft)


def is_hub_id(name: str) -> bool:
    """A name no local path holds and that reads as org/name: resolved through the hub (or its cache)."""
    return bool(name and name.strip()) and kind(name) == "missing" and not looks_local(name)


def check_resolved(name: str | None, local: str | None, role: str, fmt: str | None = None) -> None:
    """A hub model's snapshot, checked as a local --target or --draft is, once it is on disk: the
    preflight could only check the id's form."""
    if name is None or local is None or local == name:
        return
    if role == "draft":
        check_draft(local, fmt)
    else:
        check_roles(local, None)
        check_target(local)


# ----------------------------------------------------------------------------- arguments


def _int_range(opt: str, v: int | None, lo: int, hi: int, fix: str) -> None:
    if v is None:
        return
    if not lo <= v <= hi:
        bound = f"at least {lo}" if v < lo else f"at most {hi}"
        raise BadInput(f"{opt} {v} is out of range: it must be {bound}", fix)


def _float_range(opt: str, v: float | None, lo: float, hi: float, fix: str) -> None:
    if v is None:
        return
    if not math.isfinite(v) or not lo <= v <= hi:
        raise BadInput(f"{opt} {v} is out of range: it must be a number in [{lo:g}, {hi:g}]", fix)


def parse_layer_ids(text: str | None) -> list[int] | None:
    """--layer-ids as written ('1,3,4', '[1, 3, 4]', '-1,1,3'); '' and ',' are refused, not 'no ids'."""
    if text is None:
        return None
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1]
    parts = [x.strip() for x in body.split(",")]
    if not body.strip() or any(not re.fullmatch(r"[+-]?\d{1,6}", x) for x in parts):
        raise BadInput(
            f"--layer-ids {text!r} is not a comma-separated list of integers",
            "write e.g. --layer-ids 1,3,4 (omit the option to use the ids in the draft config)",
        )
    return [int(x) for x in parts]


def parse_max_memory(text: str) -> dict[int | str, str]:
    out: dict[int | str, str] = {}
    for part in text.split(","):
        key, sep, val = part.partition("=")
        key, val = key.strip(), val.strip()
        if not sep or not key or not val:
            raise BadInput(f"--max-memory entry {part!r} is not DEVICE=SIZE", "write e.g. 0=70GiB,1=70GiB,cpu=200GiB")
        if not (key.isdigit() or key in ("cpu", "disk", "mps")):
            raise BadInput(f"--max-memory device {key!r} is not a GPU index, cpu or disk", "write e.g. 0=70GiB,cpu=200GiB")
        if not _SIZE.match(val):
            raise BadInput(
                f"--max-memory size {val!r} for device {key} is not a size", "write sizes like 70GiB, 500MB or a byte count"
            )
        out[int(key) if key.isdigit() else key] = val
    return out


# (option, low, high, fix); the keyword is the option's name in snake case
_INT_OPTIONS: tuple[tuple[str, int, int, str], ...] = (
    ("--max-tokens", 1, 1 << 24, "use a positive token count, e.g. --max-tokens 512"),
    ("--limit", 1, 1 << 31, "use a positive count, or omit --limit for all prompts"),
    ("--num-steps", 1, MAX_NUM_STEPS, "use the engine's draft length, e.g. --num-steps 5"),
    ("--max-new-tokens", 0, MAX_NEW_TOKENS, "use e.g. --max-new-tokens 128"),
    ("--topk", 1, MAX_TOPK, "use 1 for chain drafting, or the engine's --speculative-eagle-topk"),
    ("--num-draft-tokens", 1, MAX_DRAFT_TOKENS, "use the engine's --speculative-num-draft-tokens"),
    # a dump vs dump takes the target's layer count on trust: each layer id of the fix is checked against it
    ("--num-layers", 1, MAX_LAYERS, "pass num_hidden_layers of the target's config.json"),
    ("--context", 1, 1 << 24, "use the KV cache length the server sees, e.g. --context 2048"),
    ("--repeats", 1, 1000, "use e.g. --repeats 5"),
)
_FLOAT_OPTIONS: tuple[tuple[str, float, float, str], ...] = (
    ("--temperature", 0.0, 100.0, "use 0 for greedy, or the sampling temperature served"),
    ("--server-temperature", 0.0, 100.0, "use 0 for greedy requests, or the temperature the requests were sampled at"),
    ("--min-accept-rate", 0.0, 1.0, "use a rate between 0 and 1, e.g. 0.6"),
    ("--min-tau", 0.0, 1e6, "use a positive tau, e.g. --min-tau 2.5"),
    ("--min-cosine", -1.0, 1.0, "use a cosine in [-1, 1], e.g. 0.999"),
    ("--min-step1-accuracy", 0.0, 1.0, "use an accuracy in [0, 1], e.g. 0.5"),
    ("--max-regression", 0.0, 1e6, "use a non-negative drop, e.g. 0.02"),
)


def _check_streaming(g: Callable[[str], Any]) -> None:
    """--stream-layers replays given sequences through one resident layer at a time: nothing that generates."""
    if g("device_map") is not None:
        raise BadInput("--stream-layers and --device-map both place the target's layers", "pass one of them")
    if g("reference_loop"):
        raise BadInput(
            "--reference-loop decodes token by token: a layer-streamed target would read every layer per token",
            "drop --reference-loop (or --stream-layers)",
        )
    if g("continuation") in GENERATED and not g("train_dump"):
        raise BadInput(
            "--stream-layers measures acceptance on given text: the greedy continuation reads every layer per token",
            "pass --continuation text (the responses in --prompts) or --train-dump",
        )


def check_arguments(**kw: Any) -> None:
    """Options whose validity needs no file and no model. Unknown keys are ignored (other commands' options)."""
    g: Callable[[str], Any] = kw.get  # an option's value, None when not given
    for opt, lo, hi, fix in _INT_OPTIONS:
        _int_range(opt, g(opt[2:].replace("-", "_")), lo, hi, fix)
    for opt, flo, fhi, fix in _FLOAT_OPTIONS:
        _float_range(opt, g(opt[2:].replace("-", "_")), flo, fhi, fix)
    if g("fail_on") is not None and g("fail_on") not in ("error", "warning", "info"):
        raise BadInput(f"--fail-on {g('fail_on')!r} is not a severity", "use error, warning or info")
    if g("temperature_mode") is not None and g("temperature_mode") not in ("sampled", "argmax"):
        raise BadInput(f"unknown --temperature-mode {g('temperature_mode')!r}", "use sampled or argmax")
    if g("continuation") is not None and g("continuation") not in CONTINUATIONS:
        raise BadInput(f"unknown --continuation {g('continuation')!r}", "use greedy, speculative or text")
    if g("stream_layers"):
        _check_streaming(g)
    _check_batch_size(g("batch_size"))
    if g("max_new_tokens") == 0 and g("continuation") in GENERATED:
        raise BadInput(
            "--max-new-tokens 0 leaves no greedy continuation to measure acceptance on",
            "use e.g. --max-new-tokens 128, or --continuation text to score the prompts as written",
        )
    if g("dtype") is not None and g("dtype") not in DTYPES:
        raise BadInput(f"unknown --dtype {g('dtype')!r}", "use auto, bfloat16, float16 or float32")
    if g("device") is not None and not _DEVICE.match(g("device")):
        raise BadInput(f"unknown --device {g('device')!r}", "use auto, cpu, cuda or cuda:N")
    if g("device") == "mps" and sys.platform != "darwin":  # torch builds MPS for macOS alone
        raise BadInput(f"--device mps is Apple's GPU, which {sys.platform} does not have", "use --device cpu, cuda or auto")
    if g("draft_format") is not None and g("draft_format") not in ("eagle", "sglang", "speculators"):
        raise BadInput(f"unknown --draft-format {g('draft_format')!r}", "use eagle, sglang or speculators (or omit it to detect)")
    if g("engine") is not None:
        from ..engines.releases import check_engine

        check_engine(g("engine").lower(), g("engine_version"))  # --engine is case-insensitive (VLLM, SGLang)
    parse_layer_ids(g("layer_ids"))
    if g("train_recipe") is not None:
        from ..engines.recipes import training_spec

        if not g("train_recipe").strip():
            raise BadInput(
                "--train-recipe is empty", "omit it to use what the draft config declares, or write e.g. specforge:1,3,4"
            )
        training_spec(g("train_recipe"), MAX_LAYERS)  # syntax only here; ranges are checked against the target later
    if g("max_memory") is not None:
        parse_max_memory(g("max_memory"))
    _check_device_map(g("device_map"))
    if g("settings") is not None or g("batch_sizes") is not None:
        from ..engines.spec_settings import parse_batch_sizes, parse_settings

        parse_settings(g("settings"))
        if g("batch_sizes") is not None:
            parse_batch_sizes(g("batch_sizes"))


def _check_batch_size(bs: Any) -> None:
    if bs is not None and bs != "auto":
        if not re.fullmatch(r"\d{1,9}", str(bs).strip()):
            raise BadInput(f"--batch-size {bs!r} is not a number", "use a positive integer or auto")
        _int_range("--batch-size", int(bs), 1, MAX_BATCH, "use a positive integer or auto")


def _check_device_map(dm: str | None) -> None:
    """A named accelerate strategy, or a JSON map whose values accelerate can place (a GPU index, 'cpu', 'disk')."""
    if dm is not None:
        if dm.strip().startswith("{"):
            try:
                m = json.loads(dm)
            except json.JSONDecodeError as e:
                raise BadInput(
                    f"--device-map is not valid JSON ({e.msg})", 'write e.g. {"model.layers.0": 0, ...} or auto'
                ) from None
            if not isinstance(m, dict) or not all(isinstance(v, (int, str)) and not isinstance(v, bool) for v in m.values()):
                raise BadInput(
                    "--device-map JSON must map module names to a GPU index, 'cpu' or 'disk'",
                    'write e.g. {"model.embed_tokens": 0, "model.layers.0": 0, ...}',
                )
        elif dm not in ("auto", "balanced", "balanced_low_0", "sequential"):
            raise BadInput(f"unknown --device-map {dm!r}", "use auto, balanced, sequential or a JSON device map")


# ----------------------------------------------------------------------------- policy


def check_policy_values(pol: Any, where: str) -> None:
    """A gate Policy's field types and ranges (TOML gives strings, booleans and arrays as easily as numbers)."""

    def num(key: str, lo: float, hi: float) -> None:
        v = getattr(pol, key)
        if v is None:
            return
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise BadInput(
                f"{where}: {key} = {json.dumps(v, default=str)[:40]} is not a number",
                f"write e.g. {key} = {lo if lo > 0 else 0.5}",
            )
        _float_range(f"{where}: {key}", float(v), lo, hi, f"use a value in [{lo:g}, {hi:g}]")

    def integer(key: str, lo: int, hi: int, optional: bool = False) -> None:
        v = getattr(pol, key)
        if v is None and optional:
            return
        if not isinstance(v, int) or isinstance(v, bool):
            raise BadInput(
                f"{where}: {key} = {json.dumps(v, default=str)[:40]} is not an integer", f"write e.g. {key} = {max(lo, 5)}"
            )
        _int_range(f"{where}: {key}", v, lo, hi, f"use an integer in [{lo}, {hi}]")

    for key in ("engine", "fail_on"):
        if not isinstance(getattr(pol, key), str):
            raise BadInput(
                f"{where}: {key} is not a string", f'write e.g. {key} = "{ {"engine": "sglang", "fail_on": "error"}[key] }"'
            )
    if pol.engine_version is not None and not isinstance(pol.engine_version, str):
        raise BadInput(f"{where}: engine_version is not a string", 'write it quoted, e.g. engine_version = "0.5.23"')
    num("min_cosine", -1.0, 1.0)
    num("min_step1_accuracy", 0.0, 1.0)
    num("min_tau", 0.0, 1e6)
    num("max_regression", 0.0, 1e6)
    integer("num_steps", 1, MAX_NUM_STEPS)
    integer("max_new_tokens", 1, MAX_NEW_TOKENS)  # the gate's acceptance needs a greedy continuation to measure
    integer("limit", 1, 1 << 31, optional=True)
    check_arguments(engine=pol.engine, engine_version=pol.engine_version, fail_on=pol.fail_on)


# ----------------------------------------------------------------------------- one entry point


def _check_models(target: str | None, draft: str | None, fmt: str | None) -> None:
    """What the two models hold: first whether they were passed the wrong way round, then each as what it is."""
    check_roles(target, draft)
    if target is not None:
        check_target(target)
        check_target_tensors(target)
    if draft is not None and not is_hub_id(draft):  # a hub id's files are checked once resolved (check_resolved)
        check_draft(draft, fmt)


def preflight(**kw: Any) -> None:
    """Everything a command was given, checked cheapest and most fixable first. Unknown keys are ignored.

    Keys: the command's option names (``max_tokens``, ``limit``, ...), plus ``target``, ``draft``,
    ``prompts``, ``train_dump``, ``policy``, ``baseline``, ``json_out``, ``report``, ``plot``, ``summary``.
    """
    check_arguments(**kw)
    # where things are, before what they hold: a wrong path is the cheapest thing to fix
    t = kw.get("target")
    if t is not None and t.strip() and not (kind(t) == "missing" and not looks_local(t)):
        require_dir(
            t,
            "target directory" if kind(t) in ("missing", "dir") else "--target",
            "pass --target DIR (config.json + weights) or a hub id like org/name",
        )
    d = kw.get("draft")
    if d is not None and not is_hub_id(d):
        require_dir(
            d,
            "draft directory" if kind(d) in ("missing", "dir") else "--draft",
            "pass --draft DIR with the draft's config.json and *.safetensors, or a hub id like org/name",
        )
    if kw.get("reference_target") is not None:
        require_dir(kw["reference_target"], "--reference-target", "pass the 16-bit target's local directory")
    if kw.get("prompts") is not None:
        require_file(kw["prompts"], "prompts file", "pass --prompts FILE (JSONL chat messages or text lines)")
    if kw.get("train_data") is not None:
        require_file(kw["train_data"], "--train-data", TRAIN_DATA_FIX)
    for key, what, fix in (
        ("policy", "policy file", "pass --policy FILE.toml"),
        ("baseline", "baseline", "pass the JSON written by an earlier `eagle3-doctor gate --json`"),
        ("serve_config", "--serve-config", "pass the launch command or JSON/YAML server args as a file"),
        ("server_metrics", "--server-metrics", "pass a saved scrape (curl -s http://HOST:PORT/metrics > FILE) or the URL"),
        ("server_metrics_before", "--server-metrics-before", "pass a saved scrape or the URL"),
        ("server_log", "--server-log", "pass the server's log file"),
    ):
        for v in kw[key] if isinstance(kw.get(key), list) else [kw.get(key)]:  # diagnose's scrapes: one per batch size
            if v is not None and "://" not in str(v):
                require_file(v, what, fix)
    ed = kw.get("engine_dump")
    if ed is not None and kind(ed) not in ("file", "dir", "missing"):  # a file or a directory of them
        require_file(ed, "--engine-dump", "pass the directory the engine wrote (or one of its files)")
    check_outputs_separate(kw)
    check_output_file(kw.get("json_out"), "--json")
    check_output_file(kw.get("plot"), "--plot")
    check_output_file(kw.get("summary"), "--summary")
    check_output_file(kw.get("sarif"), "--sarif")
    check_output_dir(kw.get("report"), "--report")
    check_new_dir(kw.get("out"), "--out")
    # then what the files hold
    _check_models(kw.get("target"), d, kw.get("draft_format"))
    check_prompts(kw.get("prompts"))
    check_prompts(kw.get("train_data"), "training data", TRAIN_DATA_FIX)
    check_dump(kw.get("train_dump"))
    check_cache_estimate(kw)
    check_policy_file(kw.get("policy"))
    check_baseline(kw.get("baseline"))
