"""Every command-line option, declared once, and the groups of them that commands share.

An option is an ``Opt``: the typer ``Annotated`` type that says its flags and help, and its default.
A command names its options, in --help order, with ``@options(name=OPT, **GROUP, ...)``: the
parameter name is the keyword the command receives (its key in the preflight), the group a set of
options that travel together (the served models, the acceptance measurement, the target's loading).
Choices are shown in --help as metavars and validated in the library, so a wrong value is one error
line (case-insensitive for --engine); tests/cli/test_progress.py keeps them equal to the library's tuples.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Optional, TypeVar

import typer

F = TypeVar("F", bound=Callable[..., Any])
REQUIRED = inspect.Parameter.empty

ENGINE_CHOICES = ("sglang", "vllm", "trtllm", "modelopt", "eagle", "declared")
FORMAT_CHOICES = ("eagle", "sglang", "speculators")
DTYPE_CHOICES = ("auto", "bfloat16", "float16", "float32")


@dataclass(frozen=True)
class Opt:
    """One option: the Annotated type typer reads (flags, help, metavar) and the default (REQUIRED: none)."""

    annotation: Any
    default: Any = REQUIRED


def options(**given: Opt) -> Callable[[F], F]:
    """Give a command these options, in this order: typer reads the signature set here, and the command
    takes them as keyword arguments (``def cmd(**given)``)."""

    def declare(fn: F) -> F:
        kw = inspect.Parameter.KEYWORD_ONLY
        params = [inspect.Parameter(name, kw, default=o.default, annotation=o.annotation) for name, o in given.items()]
        fn.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]  # read by typer via inspect.signature
        return fn

    return declare


def defaults(group: dict[str, Opt]) -> dict[str, Any]:
    """The value each option of ``group`` takes when a command does not offer it."""
    return {name: o.default for name, o in group.items()}


def opt(kind: Any, default: Any, *decls: str, **kw: Any) -> Opt:
    """An option of type ``kind``: its flags (``decls``) and help as ``typer.Option`` takes them."""
    return Opt(Annotated[kind, typer.Option(*decls, **kw)], default)


def _engine(kind: Any, default: Any, help: str) -> Opt:
    """--engine, as every command that names a serving engine declares it; only the default it says differs."""
    return opt(kind, default, "--engine", "-e", metavar="[" + "|".join(ENGINE_CHOICES) + "]", help=help)


# ----------------------------------------------------------------------------- the models and the engine that serves them
TARGET = opt(str, REQUIRED, "--target", "-t", help="Target model: local directory or hub id.")
SERVE_TARGET = opt(
    Optional[str], None, "--target", "-t", help="Target model: local directory or hub id (default: the model of --serve-cmd)."
)
DUMP_TARGET = opt(
    Optional[str],
    None,
    "--target",
    "-t",
    help="Target model: local directory or hub id (default: the model of --serve-cmd). Leave out to diff --train-dump against --engine-dump without loading it.",
)
DRAFT = opt(
    Optional[str],
    None,
    "--draft",
    "-d",
    help="EAGLE-3 draft checkpoint: local directory or hub id (default: the draft of --serve-cmd).",
)
REQUIRED_DRAFT = opt(str, REQUIRED, "--draft", "-d", help="EAGLE-3 draft checkpoint: local directory or hub id.")
GATE_DRAFT = opt(str, REQUIRED, "--draft", "-d", help="EAGLE-3 draft checkpoint to gate: local directory or hub id.")
DRAFT_FORMAT = opt(
    Optional[str],
    None,
    "--draft-format",
    metavar="[" + "|".join(FORMAT_CHOICES) + "]",
    help="Force the draft format: eagle, sglang or speculators (default: detect).",
)
ENGINE = _engine(
    str, "sglang", "Serving engine: sglang, vllm, trtllm, modelopt, eagle, or declared (with --serving-description)."
)
SERVE_ENGINE = _engine(Optional[str], None, "Serving engine, any case (default: from --serve-cmd, else sglang).")
GATE_ENGINE = _engine(Optional[str], None, "Serving engine, any case (policy default: sglang).")
ENGINE_VERSION = opt(
    Optional[str],
    None,
    "--engine-version",
    metavar="VERSION",
    help="Engine release whose rules apply: any sglang/vllm release (0.5.10, 0.33, 0.33.1); vllm -v1/-v2 picks the model runner; sglang +minus-one-embed for a build patched to map id -1 to the embeddings; modelopt any release from 0.35.0; trtllm any release from 0.20 (-two-model: the two-model path, e.g. 1.0-two-model).",
)
SERVING_DESCRIPTION = opt(
    Optional[str],
    None,
    "--serving-description",
    metavar="FILE",
    help="An engine the doctor does not model (llama.cpp, MLX, your own), described in a JSON file by what it feeds the draft: its capture points and the draft's forward; measured like a modelled release (docs/engines.md). Same as --engine declared --engine-version FILE.",
)
SERVE_CMD = opt(
    Optional[str],
    None,
    "--serve-cmd",
    help="Your server launch command (python -m sglang.launch_server ... | vllm serve MODEL --speculative-config '{...}'): engine, draft, steps, topk, draft-token budget and dtype are read from it; explicit options win.",
)
SERVE_CONFIG = opt(
    Optional[str],
    None,
    "--serve-config",
    help="File with the launch command, or a JSON/YAML of SGLang server args, vLLM engine args or vLLM's speculative config.",
)
REVISION = opt(Optional[str], None, "--revision", help="Hub revision (branch, tag or commit) of a hub-id --target.")
DRAFT_REVISION = opt(Optional[str], None, "--draft-revision", help="Hub revision (branch, tag or commit) of a hub-id --draft.")


# ----------------------------------------------------------------------------- what training fed, and what to replay
LAYER_IDS = opt(
    Optional[str],
    None,
    "--layer-ids",
    help="Try these serving ids (as the engine's key would hold them) without editing files, e.g. 1,3,4.",
)
TRAIN_RECIPE = opt(
    Optional[str],
    None,
    "--train-recipe",
    help="How training features were made: hf-hidden-states:I,J,K | eagle-default | specforge[:ids] | speculators[:ids] | modelopt[:ids] | spec:POINTS. Default: what the draft config declares.",
)
TRAINED_WITH = opt(
    Optional[str],
    None,
    "--trained-with",
    metavar="TRAINER==VERSION",
    help="The trainer release that made the draft, e.g. specforge==0.2.0 or speculators==0.9.0: the training side is the capture that release trains on (its pinned engine, its default ids; docs/engines.md).",
)
TRAIN_DUMP = opt(
    Optional[str],
    None,
    "--train-dump",
    help="Training feature dump: SpecForge rows_*/data_*.ckpt(.gz) directory, or safetensors files.",
)
PROMPTS = opt(
    Optional[str],
    None,
    "--prompts",
    help='JSONL chat messages ({"messages": [...]}) or plain text, one prompt per line. Default: built-in prompts.',
)
TRAIN_DATA = opt(
    Optional[str],
    None,
    "--train-data",
    help="The draft's training conversations (JSONL, as --prompts reads them): the draft's accuracy along them is "
    "measured against its accuracy on the prompts.",
)
MAX_TOKENS = opt(int, 512, "--max-tokens", help="Truncate each prompt or dump sequence to this many tokens.")
# auto by default: the greedy continuation runs once per batch, and a GPU holds far more than 8 sequences
# (an H200 with an 8B pair, 16 prompts: 25.7 s with auto against 39.6 s at 8 in one call, 33.2 against 32.2 s
# in another, bench/RESULTS.md); on the CPU auto is 8, as before
BATCH_SIZE = opt(str, "auto", "--batch-size", help="Sequences per forward, or 'auto' (sized from free GPU memory; 8 on the CPU).")
LIMIT = opt(Optional[int], None, "--limit", help="Use only the first N prompts or dump files.")


# ----------------------------------------------------------------------------- how the target loads
DTYPE = opt(str, "auto", "--dtype", metavar="[" + "|".join(DTYPE_CHOICES) + "]", help="auto, bfloat16, float16 or float32.")
DEVICE = opt(str, "auto", "--device", help="auto, cpu, cuda or cuda:N.")
DEVICE_MAP = opt(
    Optional[str], None, "--device-map", help="Shard the target: auto, balanced or a JSON device map (needs accelerate)."
)
MAX_MEMORY = opt(
    Optional[str], None, "--max-memory", help="With --device-map: memory per device, e.g. 0=70GiB,1=70GiB,cpu=200GiB."
)
STREAM_LAYERS = opt(
    Optional[bool],
    None,
    "--stream-layers/--no-stream-layers",
    help="Replay a target larger than the GPU one decoder layer at a time, every sequence through a layer before the next is read from disk (each weight read once per group of sequences; given text only, no greedy continuation). Default: on when the weights exceed free GPU memory.",
)
REFERENCE_TARGET = opt(
    Optional[str],
    None,
    "--reference-target",
    help="The 16-bit target a quantized --target was made from (local directory): compare-hidden measures the features' drift at every capture point, acceptance measures the draft both ways (QNT006 when the quantization costs acceptance).",
)
TRUST_REMOTE_CODE = opt(
    bool, False, "--trust-remote-code", help="Allow the target's own modelling code to run (off unless you ask)."
)


# ----------------------------------------------------------------------------- what a command writes
JSON_OUT = opt(Optional[str], None, "--json", help="Write the result as JSON to this path.")
REPORT = opt(
    Optional[str],
    None,
    "--report",
    help="Write a Markdown report (with PNG plots if matplotlib is installed) into this directory.",
)
QUIET = opt(bool, False, "--quiet", "-q", help="No progress bars.")
# sarif: GitHub code scanning and editors; gitlab: GitLab's code quality report (cli/formats.py)
FORMAT = opt(str, "text", "--format", metavar="[text|sarif|gitlab]", help="sarif|gitlab: findings on stdout, report on stderr.")


# ----------------------------------------------------------------------------- acceptance: how to measure
NUM_STEPS = opt(
    Optional[int],
    None,
    "--num-steps",
    "-k",
    help="Draft steps K per verify pass (SGLang --speculative-num-steps, vLLM num_speculative_tokens). Default: from --serve-cmd, else 7.",
)
CONTINUATION = opt(
    str,
    "greedy",
    "--continuation",
    metavar="[greedy|speculative|text]",
    help="greedy: the target's own greedy continuation; speculative: the same tokens, generated with the draft (faster where it accepts); text: the text as given.",
)
MAX_NEW_TOKENS = opt(int, 128, "--max-new-tokens", help="Tokens the target generates per prompt (greedy continuation).")
TEMPERATURE = opt(float, 0.0, "--temperature", help="> 0: expected acceptance from the distributions (no sampling noise).")
TEMPERATURE_MODE = opt(
    str,
    "sampled",
    "--temperature-mode",
    metavar="[sampled|argmax]",
    help="sampled: draft samples, sum min(p,q); argmax: draft proposes argmax (vLLM V1), p(token).",
)
TOPK = opt(
    Optional[int],
    None,
    "--topk",
    help="Tree drafting: children per node (SGLang --speculative-eagle-topk). Default: from --serve-cmd, else 1.",
)
NUM_DRAFT_TOKENS = opt(
    Optional[int],
    None,
    "--num-draft-tokens",
    help="Tree node budget incl. the root (SGLang --speculative-num-draft-tokens); on a DFlash draft, the block the server drafts, anchor included. Default: from --serve-cmd.",
)
REFERENCE_LOOP = opt(
    bool,
    False,
    "--reference-loop",
    help="Also run a plain sequential speculative-decoding loop and check the estimator against it.",
)
SCAN = opt(bool, False, "--scan", help="Rank candidate capture-point triples around the configured one by step-1 accuracy.")
COMPILE_DRAFT = opt(
    bool,
    False,
    "--compile",
    help="torch.compile the draft's step pieces: on a GPU acceptance runs at 1.34x a bare target forward instead of 1.40x (bench/RESULTS.md); the first batch pays the compilation; no gain on CPU.",
)
MIN_ACCEPT_RATE = opt(
    Optional[float], None, "--min-accept-rate", help="Gate: exit 1 if the serving path's first-position acceptance is below this."
)
MIN_TAU = opt(Optional[float], None, "--min-tau", help="Gate: exit 1 if the serving path's tau is below this.")
ACCEPTANCE_PLOT = opt(Optional[str], None, "--plot", help="Write per-position acceptance bars as PNG here.")


# ----------------------------------------------------------------------------- acceptance: what the live server counted
SERVER_METRICS = opt(
    Optional[str],
    None,
    "--server-metrics",
    help="The server's Prometheus scrape (vLLM or SGLang /metrics) as a file or http(s) URL, taken after the workload.",
)
SERVER_METRICS_BEFORE = opt(
    Optional[str], None, "--server-metrics-before", help="A scrape taken before the workload: figures become after minus before."
)
SERVER_LOG = opt(Optional[str], None, "--server-log", help="SGLang server log: its 'Decode batch ... accept len' lines.")
SERVER_MODEL = opt(Optional[str], None, "--server-model", help="model_name label to read when a scrape holds several models.")
SERVER_TEMPERATURE = opt(
    Optional[float],
    None,
    "--server-temperature",
    help="The sampling temperature the live workload ran at (no counter records it).",
)


# ----------------------------------------------------------------------------- acceptance: the prompt format, both ways
FORMAT_TRAIN_TEMPLATE = opt(
    Optional[str],
    None,
    "--train-template",
    help="With --serve-template: replay the --prompts/--requests conversations rendered the training way and the serving way, side by side (target, a .jinja file or a tokenizer directory).",
)
FORMAT_SERVE_TEMPLATE = opt(
    Optional[str],
    None,
    "--serve-template",
    help="The chat template the server renders with: target, or the file passed to the server's --chat-template.",
)
FORMAT_TRAIN_SYSTEM_PROMPT = opt(
    Optional[str],
    None,
    "--train-system-prompt",
    help="System prompt the training recipe inserted into conversations without one.",
)
FORMAT_REQUESTS = opt(
    Optional[str],
    None,
    "--requests",
    help="With the template options: serving requests (OpenAI chat-completions JSON) to replay in both formats.",
)
FORMAT_SEED = opt(int, 0, "--seed", help="Seed of the bootstrap interval over prompts (prompt-format comparison).")


# ----------------------------------------------------------------------------- speedup
SPEED_SETTINGS = opt(
    Optional[str],
    None,
    "--settings",
    help="Settings to predict: K for a chain of K draft tokens, STEPS/TOPK/DRAFT_TOKENS for an SGLang tree, comma-separated (default: chains 1..7, and three SGLang trees with --engine sglang).",
)
BATCH_SIZES = opt(str, "1", "--batch-sizes", help="Batch sizes (concurrent sequences) to time and predict at, e.g. 1,8.")
SPEED_CONTEXT = opt(
    Optional[int],
    None,
    "--context",
    help="KV cache positions the timed forwards attend to (default: the mean position a verify pass sees).",
)
REPEATS = opt(int, 5, "--repeats", help="Timed runs of every forward (the median is used).")
SPEED_LOOP = opt(
    bool,
    False,
    "--loop",
    help="Also time a real speculative decode loop (batch 1, greedy, exact) at every other chain setting and the current one.",
)


# ----------------------------------------------------------------------------- compare-hidden
MATRIX = opt(
    bool, False, "--matrix", help="Compare every serving slot against every capture point (holds all L+2 states per batch)."
)
HEATMAP_PLOT = opt(Optional[str], None, "--plot", help="Write the slot x capture-point heatmap PNG here (implies --matrix).")
ENGINE_DUMP = opt(
    Optional[str],
    None,
    "--engine-dump",
    help="The engine's own capture of the hidden states (an SGLang dumper directory, vLLM hidden-states files). With compare-hidden and no --target: diffed against --train-dump. With acceptance and diagnose: the draft runs alone on the engine's capture of prompt + greedy continuation (--prompts: what it was sent; --target only for embed_tokens the draft lacks, read by header); every rank's files are read.",
)
NUM_LAYERS = opt(
    Optional[int],
    None,
    "--num-layers",
    help="Without --target: the target's number of decoder layers (for the layer ids in the fix).",
)


# ----------------------------------------------------------------------------- fix, explain, server-metrics
FIX_OUT = opt(str, REQUIRED, "--out", "-o", help="New directory for the corrected copy of the draft (must not exist).")
CODE = Opt(
    Annotated[Optional[str], typer.Argument(help="A finding code, e.g. CAP002 (any case). Leave out to list every code.")], None
)
SCRAPE_METRICS = opt(
    Optional[str], None, "--metrics", help="Prometheus scrape (vLLM or SGLang /metrics) as a file or http(s) URL."
)
SCRAPE_BEFORE = opt(
    Optional[str], None, "--before", help="A scrape taken before the workload: figures become after minus before."
)
SCRAPE_ENGINE = opt(str, "auto", "--engine", "-e", help="auto, vllm, sglang or llamacpp (checked against the scrape).")


# ----------------------------------------------------------------------------- gate
POLICY = opt(Optional[str], None, "--policy", help="TOML policy file ([gate] table); flags override it.")
BASELINE = opt(
    Optional[str], None, "--baseline", help="gate JSON of an earlier checkpoint: fail on regression beyond max_regression."
)
MIN_COSINE = opt(Optional[float], None, "--min-cosine", help="Minimum mean cosine of every serving slot vs its training slot.")
MIN_STEP1_ACCURACY = opt(
    Optional[float], None, "--min-step1-accuracy", help="Minimum step-1 draft accuracy on the serving features."
)
GATE_MIN_TAU = opt(Optional[float], None, "--min-tau", help="Minimum tau on the serving features.")
MAX_REGRESSION = opt(Optional[float], None, "--max-regression", help="Allowed absolute drop vs --baseline.")
FAIL_ON = opt(Optional[str], None, "--fail-on", help="Findings at or above this severity fail: error, warning or info.")
SUMMARY = opt(
    Optional[str], None, "--summary", help="Write the Markdown summary here (also appended to $GITHUB_STEP_SUMMARY when set)."
)
SARIF = opt(
    Optional[str], None, "--sarif", help="Write the findings as a SARIF 2.1.0 log here (GitHub code scanning, GitLab, editors)."
)


# ----------------------------------------------------------------------------- fingerprint
FINGERPRINT_STEPS = opt(int, 3, "--num-steps", "-k", help="Teacher-forced draft steps scored (the fixtures were trained with 3).")
FINGERPRINT_NEW_TOKENS = opt(int, 64, "--max-new-tokens", help="Target greedy tokens appended to each prompt before scoring.")


# ----------------------------------------------------------------------------- template-diff
TRAIN_TEMPLATE = opt(
    Optional[str],
    None,
    "--train-template",
    help="Chat template the draft's training data was rendered with: target (the target tokenizer's own), a .jinja file, a tokenizer_config.json or a tokenizer directory. Default: target.",
)
SERVE_TEMPLATE = opt(
    Optional[str],
    None,
    "--serve-template",
    help="Chat template the server renders with: target, or the file passed to the server's --chat-template. Default: target.",
)
TRAIN_SYSTEM_PROMPT = opt(
    Optional[str],
    None,
    "--train-system-prompt",
    help="System prompt the training recipe inserted into conversations without one (SpecForge's --chat-template NAME does).",
)
TRAIN_ADD_SPECIAL_TOKENS = opt(
    bool,
    False,
    "--train-add-special-tokens",
    help="Training tokenized the rendered text with add_special_tokens=True (a BOS on top of the template's).",
)
TRAIN_TEMPLATE_KWARGS = opt(
    Optional[str],
    None,
    "--train-template-kwargs",
    help="JSON template variables training rendered with, e.g. '{\"enable_thinking\": false}'.",
)
SERVE_TEMPLATE_KWARGS = opt(
    Optional[str], None, "--serve-template-kwargs", help="JSON template variables the server renders with (chat_template_kwargs)."
)
TRAIN_DATA = opt(
    Optional[str],
    None,
    "--train-data",
    help="Training data: JSONL of OpenAI messages, ShareGPT or SpecForge conversations, or input_ids/loss_mask rows.",
)
TEMPLATE_REQUESTS = opt(
    Optional[str], None, "--requests", help="Serving requests: OpenAI chat-completions JSON (object, array or JSONL)."
)
TRAIN_TOKENIZER = opt(
    Optional[str],
    None,
    "--train-tokenizer",
    help="Tokenizer directory the draft's training data was made with: compared with the target's (vocabulary hash, special and added tokens, BOS/EOS).",
)
WRITE_TEMPLATE = opt(
    Optional[str],
    None,
    "--write-template",
    help="Write the training chat template to this file (to pass to the server's --chat-template).",
)


# ----------------------------------------------------------------------------- the app itself
VERSION = opt(bool, False, "--version", help="Print the version and exit.")


# ----------------------------------------------------------------------------- groups
# the models and the engine, from the options or the user's own launch command (--serve-cmd)
SERVED: dict[str, Opt] = dict(
    target=SERVE_TARGET,
    draft=DRAFT,
    draft_format=DRAFT_FORMAT,
    engine=SERVE_ENGINE,
    engine_version=ENGINE_VERSION,
    serving_description=SERVING_DESCRIPTION,
    serve_cmd=SERVE_CMD,
    serve_config=SERVE_CONFIG,
    revision=REVISION,
    draft_revision=DRAFT_REVISION,
)
# the prompts replayed, and the target's greedy continuation of them
REPLAY: dict[str, Opt] = dict(max_new_tokens=MAX_NEW_TOKENS, max_tokens=MAX_TOKENS, batch_size=BATCH_SIZE, limit=LIMIT)
# the acceptance measurement acceptance, diagnose and fix share
ACCEPTANCE: dict[str, Opt] = dict(num_steps=NUM_STEPS, continuation=CONTINUATION, **REPLAY)
# acceptance's own knobs; diagnose and fix measure at their defaults
SAMPLING: dict[str, Opt] = dict(
    temperature=TEMPERATURE,
    temperature_mode=TEMPERATURE_MODE,
    topk=TOPK,
    num_draft_tokens=NUM_DRAFT_TOKENS,
    reference_loop=REFERENCE_LOOP,
    scan=SCAN,
)
SERVER_EVIDENCE: dict[str, Opt] = dict(
    server_metrics=SERVER_METRICS, server_metrics_before=SERVER_METRICS_BEFORE, server_log=SERVER_LOG, server_model=SERVER_MODEL
)
PROMPT_FORMAT: dict[str, Opt] = dict(
    train_template=FORMAT_TRAIN_TEMPLATE,
    serve_template=FORMAT_SERVE_TEMPLATE,
    train_system_prompt=FORMAT_TRAIN_SYSTEM_PROMPT,
    requests=FORMAT_REQUESTS,
    seed=FORMAT_SEED,
)
LOADING: dict[str, Opt] = dict(
    dtype=DTYPE, device=DEVICE, device_map=DEVICE_MAP, max_memory=MAX_MEMORY, trust_remote_code=TRUST_REMOTE_CODE
)
