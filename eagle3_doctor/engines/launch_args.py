"""A server launch command as words: shell words, the entry point, the flags each engine's parser knows.

Which flags exist, and which take a value, comes from ``data/serve_flags.json``: extracted from the
engines' own argument definitions by ``tools/gen_serve_flags.py`` (SGLang 0.5.23
``srt/arg_groups/fields/*.py``; vLLM 0.33.0 ``engine/arg_utils.py`` and
``entrypoints/common/cli_args.py``), each flag with the file:line it was read from; TensorRT-LLM's
``trtllm-serve`` options are hand-read below (click: no abbreviations, underscores as written). When the engine
itself is importable its installed parser is not needed: the table names the version it holds.
Flags missing from the table are listed as unknown, never dropped silently.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..core.errors import BadInput
from ..io.checks import MAX_NUM_STEPS  # one ceiling for options, launch commands and draft configs
from .flag_releases import listed_release, registered_by
from .releases import TRTLLM_RELEASE

MAX_SERVE_CONFIG = 4 << 20  # a launch command or server-args file is a few KB
# What the doctor measures, for a launch command's numbers and the equivalent options alike
# (--num-steps, --topk, --num-draft-tokens): served drafts use 1 to 10 steps, a topk up to a few
# dozen and tens of draft tokens; neither engine sets an upper bound of its own, so these are ours.
MAX_TOPK = 64
MAX_DRAFT_TOKENS = 1 << 16
STEPS = (1, MAX_NUM_STEPS)
TOPK = (1, MAX_TOPK)
DRAFT_TOKENS = (1, MAX_DRAFT_TOKENS)


@lru_cache(maxsize=1)
def flag_table() -> dict[str, Any]:
    table = json.loads((Path(__file__).resolve().parent.parent / "data" / "serve_flags.json").read_text())
    flags = {n: {"dest": dest, "value": kind, "source": TRTLLM_SERVE_SRC} for n, (dest, kind) in _TRTLLM_OPTIONS.items()}
    table["trtllm"] = {"version": TRTLLM_RELEASE, "files": [TRTLLM_SERVE_SRC], "flags": flags}
    return table


TRTLLM_SERVE_SRC = "NVIDIA/TensorRT-LLM@00209af1 tensorrt_llm/commands/serve.py"

# trtllm-serve's `serve` click options, name -> (dest, value kind), hand-read from TRTLLM_SERVE_SRC: TensorRT-LLM
# is not on PyPI for tools/gen_serve_flags.py to extract from
_TRTLLM_OPTIONS: dict[str, tuple[str, str]] = {
    "--tokenizer": ("tokenizer", "one"),
    "--custom_tokenizer": ("custom_tokenizer", "one"),
    "--host": ("host", "one"),
    "--port": ("port", "one"),
    "--backend": ("backend", "one"),
    "--custom_module_dirs": ("custom_module_dirs", "one"),
    "--log_level": ("log_level", "one"),
    "--max_beam_width": ("max_beam_width", "one"),
    "--max_batch_size": ("max_batch_size", "one"),
    "--max_num_tokens": ("max_num_tokens", "one"),
    "--max_seq_len": ("max_seq_len", "one"),
    "--tensor_parallel_size": ("tensor_parallel_size", "one"),
    "--tp_size": ("tensor_parallel_size", "one"),
    "--pipeline_parallel_size": ("pipeline_parallel_size", "one"),
    "--pp_size": ("pipeline_parallel_size", "one"),
    "--context_parallel_size": ("context_parallel_size", "one"),
    "--cp_size": ("context_parallel_size", "one"),
    "--moe_expert_parallel_size": ("moe_expert_parallel_size", "one"),
    "--ep_size": ("moe_expert_parallel_size", "one"),
    "--moe_cluster_parallel_size": ("moe_cluster_parallel_size", "one"),
    "--cluster_size": ("moe_cluster_parallel_size", "one"),
    "--gpus_per_node": ("gpus_per_node", "one"),
    "--free_gpu_memory_fraction": ("free_gpu_memory_fraction", "one"),
    "--kv_cache_free_gpu_memory_fraction": ("free_gpu_memory_fraction", "one"),
    "--num_postprocess_workers": ("num_postprocess_workers", "one"),
    "--trust_remote_code": ("trust_remote_code", "none"),
    "--revision": ("revision", "one"),
    "--config": ("extra_llm_api_options", "one"),
    "--extra_llm_api_options": ("extra_llm_api_options", "one"),
    "--reasoning_parser": ("reasoning_parser", "one"),
    "--tool_parser": ("tool_parser", "one"),
    "--metadata_server_config_file": ("metadata_server_config_file", "one"),
    "--server_role": ("server_role", "one"),
    "--fail_fast_on_attention_window_too_large": ("fail_fast_on_attention_window_too_large", "none"),
    "--otlp_traces_endpoint": ("otlp_traces_endpoint", "one"),
    "--disagg_cluster_uri": ("disagg_cluster_uri", "one"),
    "--enable_chunked_prefill": ("enable_chunked_prefill", "none"),
    "--media_io_kwargs": ("media_io_kwargs", "one"),
    "--chat_template": ("chat_template", "one"),
}
TRTLLM_SUBCOMMANDS = ("serve", "grpc", "disaggregated", "disaggregated_mpi_worker", "mm_embedding_serve")


# --------------------------------------------------------------------------- tokenising


def split_words(text: str) -> list[str]:
    text = text.replace("\\\r\n", " ").replace("\\\n", " ")
    try:
        return shlex.split(text, comments=True)
    except ValueError as e:
        raise BadInput(
            f"--serve-cmd cannot be split into shell words ({e})", "paste the command exactly as you run it, quotes balanced"
        ) from None


# the official images: vllm/vllm-openai's entrypoint is the OpenAI API server (`vllm serve`), so the words
# after the image are its arguments; lmsysorg/sglang has no server entrypoint (the command follows the image)
_IMAGE = re.compile(
    r"^(?:[\w.\-]+(?::\d+)?/)?(vllm/vllm-openai|lmsysorg/sglang|nvidia/tensorrt-llm/release)(?:-[\w.]+)?"
    r"(?::([\w.\-]+))?(?:@sha256:[0-9a-f]+)?$"
)
_ENV_WORD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_TAG_VERSION = re.compile(r"^v?(\d+\.\d+(?:\.\d+)?(?:rc\d+|\.post\d+)?)(?:[-+].*)?$")


def prefix_env(words: list[str]) -> dict[str, str]:
    """The environment the command sets before the entry point: ``NAME=VALUE`` words (a shell prefix,
    ``env``, ``export``) and docker's ``-e/--env NAME=VALUE``."""
    env: dict[str, str] = {}
    for i, w in enumerate(words):
        if w.startswith("--env="):
            w = w[len("--env=") :]
        elif w.startswith("-e") and len(w) > 2 and "=" in w:
            w = w[2:]
        elif i > 0 and words[i - 1] in ("-e", "--env"):
            pass
        elif i > 0 and words[i - 1].startswith("-") and not words[i - 1].startswith(("--env", "-e")):
            continue  # another docker option's value (e.g. -v a=b is not the environment)
        m = _ENV_WORD.match(w)
        if m:
            env[m.group(1)] = m.group(2)
    return env


def find_entry(toks: list[str]) -> tuple[str, int]:
    """(engine, index of the first argument after the entry point)."""
    for i, t in enumerate(toks):
        base = os.path.basename(t)
        if t in ("sglang.launch_server", "sglang.launch_server:main") or t.endswith("sglang/launch_server.py"):
            return "sglang", i + 1
        if base == "sglang" and i + 1 < len(toks) and toks[i + 1] == "serve":
            return "sglang", i + 2
        if t in ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"):
            return "vllm", i + 1
        if base == "vllm" and i + 1 < len(toks) and toks[i + 1] == "serve":
            return "vllm", i + 2
        if base == "trtllm-serve" or t == "tensorrt_llm.commands.serve":
            return "trtllm", _trtllm_subcommand(toks, i + 1)
    for i, t in enumerate(toks):
        m = _IMAGE.match(t)
        if m and m.group(1) == "vllm/vllm-openai" and "--entrypoint" not in " ".join(toks[:i]):
            return "vllm", i + 1
    raise BadInput(
        "--serve-cmd names no SGLang, vLLM or TensorRT-LLM server",
        "pass the launch command: python -m sglang.launch_server ..., vllm serve MODEL ... or trtllm-serve MODEL ...",
    )


def _trtllm_subcommand(toks: list[str], i: int) -> int:
    """trtllm-serve's click group sends its words to ``serve`` unless the first names another subcommand
    (commands/serve.py ``DefaultGroup.resolve_command``): ``serve`` is read, the others serve no draft here."""
    word = toks[i] if i < len(toks) else None
    if word == "serve":
        return i + 1
    if word in TRTLLM_SUBCOMMANDS:
        raise BadInput(
            f"--serve-cmd: trtllm-serve {word} is not the serve command the doctor reads",
            "pass the trtllm-serve [serve] MODEL ... command that runs the model with its draft",
        )
    return i


def _take_value(name: str, kind: str, inline: str | None, args: list[str], i: int) -> tuple[Any, int]:
    """The value of flag ``name`` (``--flag=inline`` or the next argument(s) from args[i]) and the next index."""
    if kind == "none":
        return not name.startswith("--no-"), i
    if kind == "many":
        vals = [inline] if inline is not None else []
        while inline is None and i < len(args) and (not args[i].startswith("-") or _is_number(args[i])):
            vals.append(args[i])
            i += 1
        return vals, i
    if inline is not None:
        return inline, i
    if i < len(args):
        return args[i], i + 1
    raise BadInput(f"--serve-cmd: {name} needs a value", f"write {name} VALUE as in your launch command")


def parse_flags(engine: str, args: list[str]) -> tuple[dict[str, Any], list[str], list[str], list[str]]:
    """argv -> ({dest: value}, unknown flags, positionals, dotted vLLM sub-keys as 'key=value')."""
    table = flag_table()[engine]["flags"]
    values: dict[str, Any] = {}
    unknown: list[str] = []
    positional: list[str] = []
    dotted: list[str] = []
    abbrev: list[str] = []
    used: list[str] = []  # the table's names of the flags given (an abbreviation as the flag it stands for)
    i = 0
    while i < len(args):
        tok = args[i]
        i += 1
        if not tok.startswith("-") or tok == "-" or _is_number(tok):
            positional.append(tok)
            continue
        name, eq, inline = tok.partition("=")
        if engine == "vllm" and name.startswith("--"):
            name = "--" + name[2:].replace("_", "-") if "." not in name else name
        if engine == "vllm" and "." in name and name.startswith("--"):
            head, _, sub = name.partition(".")
            head = "--" + head[2:].replace("_", "-")
            if head in table:
                val = inline if eq else (args[i] if i < len(args) else "")
                if not eq:
                    i += 1
                dotted.append(f"{table[head]['dest']}.{sub}={val}")
                used.append(head)
                continue
        if engine == "sglang" and name.startswith("--") and "_" in name and name not in table:
            _refuse_underscore(name, table)
        spec = table.get(name)
        if spec is None and engine != "trtllm" and name.startswith("--") and len(name) > 3:
            # both engines parse with argparse's default allow_abbrev=True: a unique prefix is that flag
            hits = sorted({table[f]["dest"]: f for f in table if f.startswith(name)}.values())
            if len(hits) == 1:
                abbrev.append(f"{name} -> {hits[0]}")
                spec, name = table[hits[0]], hits[0]
            elif hits:
                unknown.append(f"{name} (ambiguous: {', '.join(hits[:4])}{', ...' if len(hits) > 4 else ''})")
                if not eq and i < len(args) and not args[i].startswith("-"):
                    i += 1
                continue
        if spec is None:
            used.append(name)  # a flag of another release is checked against the one the run names, too
            unknown.append(tok if eq else name)
            # an unknown flag's value (if any) is not a flag: skip it so it is not read as positional
            if not eq and i < len(args) and not args[i].startswith("-"):
                unknown[-1] += f" {args[i]}"
                i += 1
            continue
        values[spec["dest"]], i = _take_value(name, spec["value"], inline if eq else None, args, i)
        used.append(name)
    if abbrev:
        values["__abbrev__"] = abbrev
    if used and engine != "trtllm":
        values["__flags__"] = used
    return values, unknown, positional, dotted


def _refuse_underscore(name: str, table: dict[str, Any]) -> None:
    """SGLang registers each flag with dashes only (arg_groups/arg_utils.py ``_field_to_cli_name``) and
    parses with a plain argparse parser (server_args.py ``prepare_server_args``), so an underscored
    spelling stops the server at startup with "unrecognized arguments". vLLM's FlexibleArgumentParser
    rewrites underscores to dashes, so this holds for SGLang alone."""
    dashed = "--" + name[2:].replace("_", "-")
    if dashed in table or any(f.startswith(dashed) for f in table):
        ver = flag_table()["sglang"]["version"]
        raise BadInput(
            f"--serve-cmd: SGLang {ver} refuses {name} at startup (argparse: unrecognized arguments): "
            f"its parser registers {dashed} only",
            f"write {dashed} as SGLang spells it",
        )


# an unknown flag that names one of these would be a setting the doctor measures under, silently defaulted
_MEASURED_WORDS = ("speculative", "draft", "eagle", "model-path", "num-steps", "topk")


def refuse_measured_unknown(engine: str, unknown: list[str], release: str | None = None) -> None:
    """Unknown flags are listed and the run goes on (a flag of another release, a typo in --port), except
    one that names what the doctor measures under and no tracked release registers: reading past it would
    default that setting silently, and the engine itself refuses to start on it (argparse: unrecognized
    arguments). The refusal names ``release`` (the one the launch runs, launch.launch_release) where its flag
    names were extracted, else the argument table's: the releases whose names are known to lack it."""
    for u in unknown:
        flag = u.split()[0]
        if registered_by(engine, flag):
            continue  # an older release's flag, not a misspelling: CMD003 says whether the release run has it
        if any(w in flag for w in _MEASURED_WORDS) and "(ambiguous" not in u:
            ver = (listed_release(engine, release) if release else None) or flag_table()[engine]["version"]
            how = {
                "vllm": "put it in --speculative-config '{...}' (vLLM reads draft settings only there)",
                "trtllm": "put it in the --extra_llm_api_options YAML's speculative_config (trtllm-serve has no draft flags)",
            }.get(engine, "use the flag as `python -m sglang.launch_server --help` names it")
            raise BadInput(
                f"--serve-cmd: {flag} is not a {engine} {ver} flag: the server refuses to start on it, "
                "and the setting it names would otherwise be defaulted",
                how,
            )


def _is_number(tok: str) -> bool:
    try:
        float(tok)
        return True
    except ValueError:
        return False


def cut_value(value: Any, limit: int = 40) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def to_int(value: Any, what: str, bounds: tuple[int, int] | None = None) -> int:
    """``value`` as an integer, refused in one line when it is none or lies outside ``bounds``: a
    launch command's numbers size what the doctor builds (draft unrolls, trees), so a typo such as
    100000 steps must be refused here, not spend hours or all memory being taken at its word."""
    try:
        n = int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: JSON's 1e400 is float('inf')
        raise BadInput(f"--serve-cmd: {what} {cut_value(value)} is not an integer", f"write an integer for {what}") from None
    if bounds is not None and not bounds[0] <= n <= bounds[1]:
        lo, hi = bounds
        raise BadInput(
            f"--serve-cmd: {what} {cut_value(n)} is out of range: the doctor measures {lo} to {hi}",
            f"write {what} between {lo} and {hi}, as the server is (or will be) launched",
        )
    return n


def config_args(engine: str, args: list[str]) -> list[str]:
    """``--config FILE.yaml`` spliced in as the engine does it: each YAML key becomes ``--KEY`` as written
    (True: the bare flag, False: left out, a list: its items, a mapping: JSON), before the command's
    own arguments so that these win (SGLang utils/server_args_config_parser.py ``merge_config_with_args``;
    vLLM ``FlexibleArgumentParser._pull_args_from_config``, after a positional model). The path is the
    one written, relative to the working directory the server is launched from."""
    if "--config" not in args:
        return args
    if args.count("--config") > 1:
        raise BadInput("--serve-cmd: --config is given twice", "both engines read one config file: merge them")
    i = args.index("--config")
    if i + 1 >= len(args):
        raise BadInput("--serve-cmd: --config needs a file", "write --config FILE.yaml")
    path = Path(os.path.expanduser(args[i + 1]))
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise BadInput(f"--serve-cmd: --config {path} is not a .yaml file: the engine refuses it", "pass a YAML file")
    from ..io.safeio import load_yaml, read_regular_text

    fix = "run eagle3-doctor from the directory the server is launched in, or write the path absolute"
    obj = load_yaml(read_regular_text(path, "--config file", fix, MAX_SERVE_CONFIG), f"--config {path}", "fix the YAML")
    if obj is None:
        obj = {}
    if not isinstance(obj, dict):
        raise BadInput(f"--config {path} holds no mapping at the top level", "write key: value lines")
    words: list[str] = []
    for key, value in obj.items():
        if isinstance(value, bool):
            words += [f"--{key}"] if value else []
        elif isinstance(value, list):
            words += [f"--{key}", *map(str, value)] if value else []
        else:
            words += [f"--{key}", json.dumps(value) if isinstance(value, dict) else str(value)]
    rest = args[:i] + args[i + 2 :]
    if engine == "vllm" and rest and not rest[0].startswith("-"):
        return [rest[0], *words, *rest[1:]]
    return words + rest


def docker_image(words: list[str]) -> tuple[str | None, str | None]:
    """(the engine image the command runs, the release its tag names) from ``docker run ... IMAGE``."""
    for w in words:
        m = _IMAGE.match(w)
        if m:
            tag = _TAG_VERSION.match(m.group(2) or "")
            return w, tag.group(1) if tag else None
    return None, None
