"""Serving config in: read the server launch command a user already wrote, derive the doctor's settings.

Accepted forms (``--serve-cmd`` text, or a ``--serve-config`` file holding any of them):
- SGLang: ``python -m sglang.launch_server --model-path ... --speculative-algorithm EAGLE3 ...``
  (also ``sglang serve``), or a JSON/YAML object of server-args fields (``{"model_path": ...}``).
- vLLM: ``vllm serve MODEL --speculative-config '{...}'`` (also ``--speculative-config.KEY VALUE``,
  ``python -m vllm.entrypoints.openai.api_server --model ...``), a JSON/YAML object of engine args
  (``{"model": ..., "speculative_config": {...}}``) or the speculative-config JSON alone.

Which flags exist, and which take a value, comes from ``data/serve_flags.json``: extracted from the
engines' own argument definitions by ``tools/gen_serve_flags.py`` (SGLang 0.5.23
``srt/arg_groups/fields/*.py``; vLLM 0.33.0 ``engine/arg_utils.py`` and
``entrypoints/common/cli_args.py``), each flag with the file:line it was read from. When the engine
itself is importable its installed parser is not needed: the table names the version it holds.
Flags missing from the table are listed as unknown, never dropped silently.

Defaults follow the engine's own resolution when a flag is absent:
- SGLang 0.5.23 ``srt/arg_groups/speculative_hook.py``: with ``--speculative-num-steps`` unset,
  (steps, topk, draft tokens) come from ``_auto_choose_speculative_params`` (line 1430) by the target's
  architecture: (5, 4, 8) for ``LlamaForCausalLM`` and Grok-1, (3, 1, 4) for DeepSeek-V2/V3, GPT-OSS,
  GLM-4-MoE and everything else (lines 1438-1461); with topk 1 the draft-token budget is forced to
  steps + 1 (lines 1255-1267).
- vLLM 0.33.0 ``config/speculative.py``: ``num_speculative_tokens`` unset takes the draft config's
  ``n_predict`` or is an error (lines 1601-1617); ``method`` unset is detected from the draft path
  name ("eagle3" in it, line 1447). vLLM 0.33 EAGLE drafts a chain (no token tree); older vLLM took
  ``speculative_token_tree``, a list of child-rank paths, parsed here when present.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..core.errors import BadInput

# SGLang's per-architecture defaults, speculative_hook.py:1430-1461 (0.5.23)
_SGLANG_AUTO_548 = {"LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM"}
_SGLANG_SRC = "sglang 0.5.23 srt/arg_groups/speculative_hook.py"
_VLLM_SRC = "vllm 0.33.0 config/speculative.py"


MAX_SERVE_CONFIG = 4 << 20  # a launch command or server-args file is a few KB


@lru_cache(maxsize=1)
def flag_table() -> dict[str, Any]:
    return json.loads((Path(__file__).resolve().parent.parent / "data" / "serve_flags.json").read_text())


@dataclass
class ServeConfig:
    """What a server launch command configures, in the doctor's terms."""

    engine: str
    engine_version: str
    target: str | None = None
    target_revision: str | None = None
    draft: str | None = None
    draft_revision: str | None = None
    algorithm: str | None = None
    num_steps: int | None = None
    topk: int | None = None
    num_draft_tokens: int | None = None
    token_tree: list[list[int]] | None = None
    dtype: str = "auto"
    chat_template: str | None = None
    tp_size: int = 1
    pp_size: int = 1
    trust_remote_code: bool = False
    token_map: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    image: str | None = None
    unknown_flags: list[str] = field(default_factory=list)
    ignored_flags: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        tree = f", tree {self.token_tree}" if self.token_tree else ""
        return (
            f"{self.engine} {self.engine_version}: target {self.target}, draft {self.draft}, steps {self.num_steps}, "
            f"topk {self.topk}, draft tokens {self.num_draft_tokens}{tree}, dtype {self.dtype}, tp {self.tp_size}, "
            f"pp {self.pp_size}"
        )


# --------------------------------------------------------------------------- tokenising


def _tokens(text: str) -> list[str]:
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
    r"^(?:[\w.\-]+(?::\d+)?/)?(vllm/vllm-openai|lmsysorg/sglang)(?:-[\w.]+)?(?::([\w.\-]+))?(?:@sha256:[0-9a-f]+)?$"
)
_ENV_WORD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_TAG_VERSION = re.compile(r"^v?(\d+\.\d+(?:\.\d+)?(?:rc\d+|\.post\d+)?)(?:[-+].*)?$")


def _prefix_env(words: list[str]) -> dict[str, str]:
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


def _find_entry(toks: list[str]) -> tuple[str, int]:
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
    for i, t in enumerate(toks):
        m = _IMAGE.match(t)
        if m and m.group(1) == "vllm/vllm-openai" and "--entrypoint" not in " ".join(toks[:i]):
            return "vllm", i + 1
    raise BadInput(
        "--serve-cmd names no SGLang or vLLM server",
        "pass the launch command: python -m sglang.launch_server ... or vllm serve MODEL ...",
    )


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


def _parse_flags(engine: str, args: list[str]) -> tuple[dict[str, Any], list[str], list[str], list[str]]:
    """argv -> ({dest: value}, unknown flags, positionals, dotted vLLM sub-keys as 'key=value')."""
    table = flag_table()[engine]["flags"]
    values: dict[str, Any] = {}
    unknown: list[str] = []
    positional: list[str] = []
    dotted: list[str] = []
    abbrev: list[str] = []
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
                continue
        if engine == "sglang" and name.startswith("--") and "_" in name and name not in table:
            _refuse_underscore(name, table)
        spec = table.get(name)
        if spec is None and name.startswith("--") and len(name) > 3:
            # both engines parse with argparse's default allow_abbrev=True: a unique prefix is that flag
            hits = sorted({table[f]["dest"]: f for f in table if f.startswith(name)}.values())
            if len(hits) == 1:
                abbrev.append(f"{name} -> {hits[0]}")
                spec = table[hits[0]]
            elif hits:
                unknown.append(f"{name} (ambiguous: {', '.join(hits[:4])}{', ...' if len(hits) > 4 else ''})")
                if not eq and i < len(args) and not args[i].startswith("-"):
                    i += 1
                continue
        if spec is None:
            unknown.append(tok if eq else name)
            # an unknown flag's value (if any) is not a flag: skip it so it is not read as positional
            if not eq and i < len(args) and not args[i].startswith("-"):
                unknown[-1] += f" {args[i]}"
                i += 1
            continue
        values[spec["dest"]], i = _take_value(name, spec["value"], inline if eq else None, args, i)
    if abbrev:
        values["__abbrev__"] = abbrev
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


def _refuse_measured_unknown(engine: str, unknown: list[str]) -> None:
    """Unknown flags are listed and the run goes on (a flag of another release, a typo in --port), except
    one that names what the doctor measures under: reading past it would default that setting silently,
    and the engine itself refuses to start on it (argparse: unrecognized arguments)."""
    for u in unknown:
        flag = u.split()[0]
        if any(w in flag for w in _MEASURED_WORDS) and "(ambiguous" not in u:
            ver = flag_table()[engine]["version"]
            how = (
                "put it in --speculative-config '{...}' (vLLM reads draft settings only there)"
                if engine == "vllm"
                else "use the flag as `python -m sglang.launch_server --help` names it"
            )
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


def _abbrev_notes(values: dict[str, Any], sc: ServeConfig) -> None:
    for a in values.pop("__abbrev__", []):
        sc.notes.append(f"abbreviated flag {a} (argparse accepts unique prefixes)")


def _int(value: Any, what: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise BadInput(f"--serve-cmd: {what} {value!r} is not an integer", f"write an integer for {what}") from None


# --------------------------------------------------------------------------- engines


_RELEVANT_SGLANG = {
    "model_path",
    "revision",
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_draft_model_revision",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "dtype",
    "chat_template",
    "tp_size",
    "pp_size",
    "trust_remote_code",
    "speculative_token_map",
    "config",
}


def _sglang(values: dict[str, Any], unknown: list[str], positional: list[str], arch: str | None) -> ServeConfig:
    version = flag_table()["sglang"]["version"]
    sc = ServeConfig("sglang", version, unknown_flags=unknown)
    src = sc.sources
    _abbrev_notes(values, sc)
    sc.target = values.get("model_path")
    sc.target_revision = values.get("revision")
    sc.draft = values.get("speculative_draft_model_path")
    sc.draft_revision = values.get("speculative_draft_model_revision")
    sc.algorithm = values.get("speculative_algorithm")
    sc.dtype = values.get("dtype") or "auto"
    sc.chat_template = values.get("chat_template")
    sc.tp_size = _int(values.get("tp_size", 1), "--tp-size")
    sc.pp_size = _int(values.get("pp_size", 1), "--pp-size")
    sc.trust_remote_code = bool(values.get("trust_remote_code", False))
    sc.token_map = values.get("speculative_token_map")
    for k in ("num_steps", "topk", "num_draft_tokens"):
        flag = {
            "num_steps": "speculative_num_steps",
            "topk": "speculative_eagle_topk",
            "num_draft_tokens": "speculative_num_draft_tokens",
        }[k]
        if values.get(flag) is not None:
            setattr(sc, k, _int(values[flag], "--" + flag.replace("_", "-")))
            src[k] = "--" + flag.replace("_", "-")
    if positional:
        sc.notes.append(f"positional words ignored by SGLang's parser: {' '.join(positional)}")
    if sc.algorithm is None:
        sc.notes.append("no --speculative-algorithm: this server runs without speculative decoding")
    elif sc.algorithm.upper() != "EAGLE3":
        sc.notes.append(f"--speculative-algorithm {sc.algorithm}: eagle3-doctor measures EAGLE-3 drafts")
    _sglang_tree_shape(sc, arch)
    if sc.draft is None and sc.algorithm and sc.algorithm.upper() == "EAGLE3":
        sc.notes.append("EAGLE3 without --speculative-draft-model-path: SGLang refuses to start without a draft")
    sc.ignored_flags = sorted(k for k in values if k not in _RELEVANT_SGLANG)
    return sc


def _sglang_tree_shape(sc: ServeConfig, arch: str | None) -> None:
    """Steps/topk/draft tokens as SGLang's server_args resolves them from what the command left unset
    (architecture defaults, topk 1 alone, draft tokens forced to steps + 1 under topk 1)."""
    src = sc.sources
    if sc.num_steps is None:
        if sc.topk is not None or sc.num_draft_tokens is not None:
            sc.notes.append(
                "SGLang asserts that --speculative-eagle-topk and --speculative-num-draft-tokens are unset "
                f"when --speculative-num-steps is ({_SGLANG_SRC}:1159): set all three"
            )
        if arch is None:
            sc.notes.append(
                "SGLang picks steps/topk/draft tokens from the target's architecture "
                f"({_SGLANG_SRC}:1430); the target config was not readable here"
            )
        else:
            steps, topk, ndt = (5, 4, 8) if arch in _SGLANG_AUTO_548 else (3, 1, 4)
            sc.num_steps, sc.topk, sc.num_draft_tokens = steps, topk, ndt
            for k in ("num_steps", "topk", "num_draft_tokens"):
                src[k] = f"SGLang default for {arch} ({_SGLANG_SRC}:1430-1461)"
    if sc.num_steps is not None and sc.topk is None:
        sc.topk = 1
        src["topk"] = "assumed 1: SGLang resolves topk only together with --speculative-num-steps"
        sc.notes.append(src["topk"])
    if sc.topk == 1 and sc.num_steps is not None and sc.num_draft_tokens != sc.num_steps + 1:
        if sc.num_draft_tokens is not None:
            sc.notes.append(
                f"SGLang sets --speculative-num-draft-tokens to steps + 1 = {sc.num_steps + 1} when topk is 1 "
                f"(was {sc.num_draft_tokens}; {_SGLANG_SRC}:1255-1267)"
            )
        sc.num_draft_tokens = sc.num_steps + 1
        src["num_draft_tokens"] = f"steps + 1 with topk 1 ({_SGLANG_SRC}:1255-1267)"


def _vllm_spec(spec: dict[str, Any], sc: ServeConfig) -> None:
    known = {
        "method",
        "model",
        "num_speculative_tokens",
        "revision",
        "draft_tensor_parallel_size",
        "speculative_token_tree",
        "max_model_len",
        "quantization",
        "enforce_eager",
        "code_revision",
        "disable_padded_drafter_batch",
        "parallel_drafting",
        "attention_backend",
        "kv_cache_dtype",
        "moe_backend",
        "draft_sample_method",
        "rejection_sample_method",
    }
    for k in spec:
        if k not in known:
            sc.notes.append(f"speculative-config key {k!r} is not read by eagle3-doctor")
    sc.draft = spec.get("model", sc.draft)
    sc.draft_revision = spec.get("revision", sc.draft_revision)
    sc.algorithm = spec.get("method", sc.algorithm)
    if spec.get("num_speculative_tokens") is not None:
        sc.num_steps = _int(spec["num_speculative_tokens"], "num_speculative_tokens")
        sc.sources["num_steps"] = "--speculative-config num_speculative_tokens"
    tree = spec.get("speculative_token_tree")
    if tree:
        sc.token_tree = parse_token_tree(tree)
        sc.sources["token_tree"] = "--speculative-config speculative_token_tree"


def parse_token_tree(tree: Any) -> list[list[int]]:
    """vLLM's ``speculative_token_tree``: a list of paths of child ranks, e.g. "[(0,), (1,), (0, 0)]"."""
    import ast

    try:
        paths = ast.literal_eval(tree) if isinstance(tree, str) else tree
        out = sorted({tuple(int(x) for x in p) for p in paths}, key=lambda p: (len(p), p))
    except (ValueError, SyntaxError, TypeError):
        raise BadInput(
            f"speculative_token_tree {tree!r} is not a list of tuples", 'write it as vLLM does, e.g. "[(0,), (1,), (0, 0)]"'
        ) from None
    for p in out:
        if not p or min(p) < 0 or (len(p) > 1 and p[:-1] not in set(out)):
            raise BadInput(f"speculative_token_tree path {p} has no parent in the tree", "list every prefix of every path")
    return [list(p) for p in out]


def _vllm_engine_args(sc: ServeConfig, args: dict[str, Any], name: Callable[[str], str]) -> None:
    """The engine args a `vllm serve` command line and a JSON engine-args file both set, by dest;
    ``name`` spells a dest the way the user wrote it (--tensor-parallel-size or tensor_parallel_size)."""
    sc.target_revision = args.get("revision")
    sc.dtype = args.get("dtype") or "auto"
    sc.chat_template = args.get("chat_template")
    sc.tp_size = _int(args.get("tensor_parallel_size") or 1, name("tensor_parallel_size"))
    sc.pp_size = _int(args.get("pipeline_parallel_size") or 1, name("pipeline_parallel_size"))
    sc.trust_remote_code = bool(args.get("trust_remote_code", False))


def _vllm(values: dict[str, Any], unknown: list[str], positional: list[str], dotted: list[str]) -> ServeConfig:
    version = flag_table()["vllm"]["version"]
    sc = ServeConfig("vllm", version, unknown_flags=unknown)
    _abbrev_notes(values, sc)
    sc.target = values.get("model") or (positional[0] if positional else None)
    if len(positional) > 1:
        sc.notes.append(f"extra positional words: {' '.join(positional[1:])}")
    _vllm_engine_args(sc, values, lambda dest: "--" + dest.replace("_", "-"))
    spec: dict[str, Any] = {}
    if values.get("speculative_config"):
        spec = _json_obj(values["speculative_config"], "--speculative-config")
    for d in dotted:
        key, _, val = d.partition("=")
        head, _, sub = key.partition(".")
        if head == "speculative_config":
            try:
                spec[sub] = json.loads(val)
            except json.JSONDecodeError:
                spec[sub] = val
    _finish_vllm(sc, spec)
    sc.ignored_flags = sorted(
        k
        for k in values
        if k
        not in {
            "model",
            "revision",
            "dtype",
            "chat_template",
            "tensor_parallel_size",
            "pipeline_parallel_size",
            "trust_remote_code",
            "speculative_config",
        }
    )
    return sc


def _finish_vllm(sc: ServeConfig, spec: dict[str, Any]) -> None:
    if not spec:
        sc.notes.append("no --speculative-config: this server runs without speculative decoding")
    _vllm_spec(spec, sc)
    if sc.algorithm is None and sc.draft and "eagle3" in sc.draft.lower():
        sc.algorithm = "eagle3"
        sc.sources["algorithm"] = f"detected from the draft path name ({_VLLM_SRC}:1447)"
    if sc.algorithm is not None and str(sc.algorithm).lower() != "eagle3":
        sc.notes.append(f"speculative method {sc.algorithm}: eagle3-doctor measures EAGLE-3 drafts")
    if sc.num_steps is None and spec:
        sc.notes.append(
            f"num_speculative_tokens unset: vLLM takes the draft config's n_predict or refuses to start ({_VLLM_SRC}:1601-1617)"
        )
    if sc.token_tree:
        sc.topk = max(p[-1] for p in sc.token_tree) + 1
        sc.num_draft_tokens = len(sc.token_tree) + 1
        depth = max(len(p) for p in sc.token_tree)
        if sc.num_steps is not None and sc.num_steps != depth:
            sc.notes.append(f"num_speculative_tokens {sc.num_steps} differs from the tree depth {depth}: the tree is used")
        sc.num_steps = depth
    elif sc.num_steps is not None:
        sc.topk, sc.num_draft_tokens = 1, sc.num_steps + 1
        sc.sources["topk"] = "vLLM EAGLE drafts a chain (no speculative_token_tree)"


def _json_obj(text: str, what: str) -> dict[str, Any]:
    from ..io.safeio import loads_json

    try:
        obj = loads_json(text, what, 'write a flat object, e.g. {"method": "eagle3", "num_speculative_tokens": 3}')
    except json.JSONDecodeError as e:
        raise BadInput(
            f"{what} is not valid JSON ({e.msg} at column {e.colno})",
            'quote it for the shell: --speculative-config \'{"method": "eagle3", ...}\'',
        ) from None
    if not isinstance(obj, dict):
        raise BadInput(f"{what} is JSON but not an object", 'write {"method": "eagle3", "model": ..., ...}')
    return obj


def _target_arch(target: str | None) -> str | None:
    if not target:
        return None
    p = Path(target) / "config.json"
    if not p.is_file():  # never open a FIFO here: the preflight says what it is
        return None
    try:
        arch = json.loads(p.read_text()).get("architectures") or []
        return arch[0] if arch else None
    except (OSError, ValueError, AttributeError):
        return None


# --------------------------------------------------------------------------- entry points


def _config_args(engine: str, args: list[str]) -> list[str]:
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


def _image(words: list[str]) -> tuple[str | None, str | None]:
    """(the engine image the command runs, the release its tag names) from ``docker run ... IMAGE``."""
    for w in words:
        m = _IMAGE.match(w)
        if m:
            tag = _TAG_VERSION.match(m.group(2) or "")
            return w, tag.group(1) if tag else None
    return None, None


def parse_serve_cmd(text: str, arch: str | None = None) -> ServeConfig:
    """Parse one launch command. arch: the target's architecture name when already known."""
    toks = _tokens(text)
    engine, start = _find_entry(toks)
    args = _config_args(engine, toks[start:])
    values, unknown, positional, dotted = _parse_flags(engine, args)
    _refuse_measured_unknown(engine, unknown)
    if engine == "sglang":
        sc = _sglang(values, unknown, positional, arch or _target_arch(values.get("model_path")))
    else:
        sc = _vllm(values, unknown, positional, dotted)
        speculators_verifier(sc, local_config(sc.target))
    sc.env = _prefix_env(toks[:start])
    sc.image, release = _image(toks[:start])
    if sc.image:
        if release:
            sc.notes.append(
                f"image {sc.image}: the {engine} {release} rules apply (flags read from the {sc.engine_version} table)"
            )
            sc.engine_version = release
        else:
            sc.notes.append(
                f"image {sc.image} names no release: the {engine} {sc.engine_version} rules apply (pin --engine-version)"
            )
    if "config" in values:
        sc.notes.append("--config is not the word --config here (--config=FILE?): the engine does not read that file")
    return sc


def local_config(model: str | None) -> dict[str, Any] | None:
    if not model:
        return None
    p = Path(os.path.expanduser(model)) / "config.json"
    if not p.is_file():
        return None
    try:
        cfg = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    return cfg if isinstance(cfg, dict) else None


def speculators_verifier(sc: ServeConfig, cfg: dict[str, Any] | None) -> None:
    """``vllm serve DRAFT`` where DRAFT is a speculators checkpoint: vLLM reads its config's
    ``speculators_config`` and serves the verifier named there as the target, with the checkpoint as
    the draft (vllm transformers_utils/config.py ``maybe_override_with_speculators``)."""
    spec = cfg.get("speculators_config") if cfg else None
    if sc.engine != "vllm" or sc.draft is not None or not isinstance(spec, dict):
        return
    verifier = spec.get("verifier") if isinstance(spec.get("verifier"), dict) else {}
    name = verifier.get("name_or_path")
    if not isinstance(name, str) or not name:
        raise BadInput(
            f"{sc.target} is a speculators checkpoint without speculators_config.verifier.name_or_path",
            "vLLM needs it to load the target: write it into the checkpoint's config.json",
        )
    methods = spec.get("proposal_methods") or [{}]
    sc.draft, sc.target = sc.target, name
    sc.algorithm = str(spec.get("algorithm") or sc.algorithm or "eagle3")
    sc.sources["target"] = "speculators_config.verifier.name_or_path of the served checkpoint"
    tokens = methods[0].get("speculative_tokens") if isinstance(methods[0], dict) else None
    if sc.num_steps is None and tokens is not None:
        sc.num_steps = _int(tokens, "speculators_config.proposal_methods[0].speculative_tokens")
        sc.topk, sc.num_draft_tokens = 1, sc.num_steps + 1
        sc.sources["num_steps"] = "speculators_config.proposal_methods[0].speculative_tokens"
    sc.notes = [n for n in sc.notes if not n.startswith("no --speculative-config")]
    sc.notes.append(f"speculators checkpoint: vLLM serves its verifier {name} as the target and the checkpoint as the draft")


def parse_serve_config(path: str, arch: str | None = None) -> ServeConfig:
    """A file: a launch command, or a JSON/YAML object (SGLang server args, vLLM engine args or speculative config)."""
    from ..io.safeio import read_regular_text

    p = Path(path)
    text = read_regular_text(p, "--serve-config", "pass the launch command or JSON/YAML server args as a file", MAX_SERVE_CONFIG)
    stripped = text.strip()
    obj: Any = None
    if stripped.startswith("{"):
        obj = _json_obj(stripped, f"--serve-config {path}")
    elif p.suffix in (".yaml", ".yml"):
        from ..io.safeio import load_yaml

        obj = load_yaml(stripped, f"--serve-config {path}", "fix the YAML (plain key: value lines, no aliases needed)")
        if not isinstance(obj, dict):
            raise BadInput(f"--serve-config {path} holds no mapping", "write key: value lines")
    if obj is None:
        return parse_serve_cmd(text, arch)
    keys = {k.replace("-", "_") for k in obj}
    obj = {k.replace("-", "_"): v for k, v in obj.items()}
    if keys & {"speculative_algorithm", "model_path", "speculative_num_steps", "speculative_eagle_topk"}:
        table = flag_table()["sglang"]["flags"]
        dests = {v["dest"] for v in table.values()}
        unknown = [f"{k} (not a SGLang {flag_table()['sglang']['version']} server arg)" for k in obj if k not in dests]
        return _sglang({k: v for k, v in obj.items() if k in dests}, unknown, [], arch or _target_arch(obj.get("model_path")))
    if "num_speculative_tokens" in keys or ("method" in keys and "speculative_config" not in keys):
        sc = ServeConfig("vllm", flag_table()["vllm"]["version"])
        _finish_vllm(sc, obj)
        sc.notes.append("a speculative config alone names no target: pass --target")
        return sc
    if keys & {"speculative_config", "model"}:
        table = flag_table()["vllm"]["flags"]
        dests = {v["dest"] for v in table.values()}
        unknown = [f"{k} (not a vLLM {flag_table()['vllm']['version']} engine arg)" for k in obj if k not in dests]
        spec = obj.get("speculative_config") or {}
        if isinstance(spec, str):
            spec = _json_obj(spec, "speculative_config")
        sc = ServeConfig("vllm", flag_table()["vllm"]["version"], unknown_flags=unknown)
        sc.target = obj.get("model")
        _vllm_engine_args(sc, obj, lambda dest: dest)
        _finish_vllm(sc, spec)
        return sc
    raise BadInput(
        f"--serve-config {path}: cannot tell which engine this configures",
        "use SGLang server-arg names (model_path, speculative_algorithm, ...) or vLLM's (model, speculative_config)",
    )


def load(serve_cmd: str | None, serve_config: str | None) -> ServeConfig | None:
    if serve_cmd and serve_config:
        raise BadInput("both --serve-cmd and --serve-config given", "pass one of them")
    if serve_cmd:
        return parse_serve_cmd(serve_cmd)
    if serve_config:
        return parse_serve_config(serve_config)
    return None


# --------------------------------------------------------------------------- findings the command alone shows

_TRUE = ("1", "true", "yes", "on")
_SGLANG_WORKER = "sglang 0.5.23 srt/speculative/eagle_worker_v2.py:323-333 (init_token_map)"


def launch_findings(sc: ServeConfig) -> list[Any]:
    """What the launch command itself does to the draft, before any model is read: an FR-Spec token map
    (the draft's vocabulary), spec v2 asked for with a token tree."""
    out = []
    if sc.token_map:
        out.append(_token_map_finding(sc))
    v2 = sc.env.get("SGLANG_ENABLE_SPEC_V2")
    if sc.engine == "sglang" and v2 is not None and v2.strip().lower() in _TRUE and (sc.topk or 1) > 1:
        out.append(_spec_v2_finding(sc, v2))
    return out


def _token_map_finding(sc: ServeConfig) -> Any:
    from ..core.findings import SERVER_COMMAND, Finding, Fix

    algo = (sc.algorithm or "").upper()
    fix = Fix(
        "drop --speculative-token-map from the launch command (an EAGLE-3 draft's vocabulary is its own d2t table)",
        file=SERVER_COMMAND,
        key="--speculative-token-map",
        op="delete",
    )
    if algo == "EAGLE3":
        return Finding(
            "CMD001",
            f"--speculative-token-map {sc.token_map} is ignored: SGLang serves an EAGLE3 draft with its own d2t vocabulary",
            [f"--speculative-algorithm {sc.algorithm}", f"SGLang logs 'Ignoring the specified token map' ({_SGLANG_WORKER})"],
            fix,
            severity="warning",
            data={"token_map": sc.token_map, "algorithm": sc.algorithm, "applied": False},
        )
    return Finding(
        "CMD001",
        f"--speculative-token-map {sc.token_map} replaces the draft's vocabulary with the hot tokens it lists (FR-Spec)",
        [
            f"--speculative-algorithm {sc.algorithm}: SGLang loads the map as hot_token_id and overrides the draft's "
            f"hot_vocab_size with its length ({_SGLANG_WORKER})",
            "a target token outside the map can never be drafted, and the draft's lm_head rows are read in the map's order",
        ],
        Fix(
            "drop --speculative-token-map, or serve the draft as EAGLE3 with its trained d2t table "
            "(--speculative-algorithm EAGLE3), or rebuild the map from the serving traffic's token frequencies",
            file=SERVER_COMMAND,
            key="--speculative-token-map",
            op="delete",
        ),
        data={"token_map": sc.token_map, "algorithm": sc.algorithm, "applied": True},
    )


def _spec_v2_finding(sc: ServeConfig, v2: str) -> Any:
    from ..core.findings import SERVER_COMMAND, Finding, Fix

    steps = sc.num_steps or 1
    return Finding(
        "CMD002",
        f"SGLANG_ENABLE_SPEC_V2={v2} with --speculative-eagle-topk {sc.topk}: spec v2 drafts a chain (topk 1) only",
        [
            f"topk {sc.topk} ({sc.sources.get('topk', 'from the command')}), {sc.num_draft_tokens} draft tokens",
            "SGLang releases that read SGLANG_ENABLE_SPEC_V2 turn the overlap scheduler off and run spec v1 "
            "('spec v2 currently only supports topk = 1'); hybrid (Mamba/GDN) targets raise that error",
            f"SGLang {flag_table()['sglang']['version']} no longer reads the variable",
        ],
        Fix(
            f"--speculative-eagle-topk 1 --speculative-num-draft-tokens {steps + 1} for spec v2, "
            "or drop SGLANG_ENABLE_SPEC_V2 to keep the tree",
            file=SERVER_COMMAND,
            key="--speculative-eagle-topk",
            value=1,
        ),
        data={"SGLANG_ENABLE_SPEC_V2": v2, "topk": sc.topk, "num_steps": sc.num_steps},
    )
