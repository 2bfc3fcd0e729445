"""The RoPE each release's EAGLE-3 draft is built with, from a draft config stating its own theta and scaling.

A draft config reaches the engine's model through transformers: what the model sees depends on the transformers the
release runs with and on the layout the config.json was written in. Executed once on transformers' own wheels
(`LlamaConfig.from_dict`, 2026-12-03; conformance/README.md has the command), the three presentations are:
- transformers 4.57.1, a config.json with top-level ``rope_theta`` + ``rope_scaling``: both attributes as written;
- transformers 4.57.1, a config.json with only ``rope_parameters`` (the layout transformers 5 writes): ``rope_theta``
  is its default 10000.0, ``rope_scaling`` None, ``rope_parameters`` an unread extra attribute;
- transformers 5.0.0rc0 and 5.24.0, either layout: ``rope_parameters`` and ``rope_scaling`` (the same dict, theta
  inside), and no ``rope_theta`` attribute at all.
For each presentation and rope type, the release's draft is built on its own base layer (draft_exec's window probe:
llama.py's attention lifted in place of the stub) with the release's own ``get_rope`` (its module functions lifted
from the rotary embedding file or package, its rotary classes replaced by recorders), after vLLM's own RoPE patch of
``get_config`` (``patch_rope_parameters`` / ``patch_rope_scaling`` of transformers_utils/config.py, run with the
presentation's transformers version). The recorder that ``get_rope`` builds says which rotary class the draft gets
and the base and scaling numbers it is given: the RoPE as the release reads it.
"""

from __future__ import annotations

import ast
import builtins
import copy
import re
import typing
from pathlib import Path
from typing import Any

THETA = 500000.0  # the probe's theta: any value the recorder can tell from every release's default
SCALINGS: dict[str, dict[str, Any]] = {
    "default": {},
    "llama3": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
    "yarn": {"factor": 4.0, "original_max_position_embeddings": 32768},
    "linear": {"factor": 2.0},
}
TF_DEFAULT_THETA = 10000.0  # transformers 4.57.1's LlamaConfig default, executed (see the module text)
PRESENTATIONS = ("tf4_rope_scaling", "tf4_rope_parameters", "tf5")
TF_VERSION = {"tf4_rope_scaling": "4.57.1", "tf4_rope_parameters": "4.57.1", "tf5": "5.0.0"}
ROTARY = {
    "sglang": ("sglang/srt/layers/rotary_embedding.py", "sglang/srt/layers/rotary_embedding"),
    "vllm": ("vllm/model_executor/layers/rotary_embedding.py", "vllm/model_executor/layers/rotary_embedding"),
}
VLLM_CONFIG = "vllm/transformers_utils/config.py"
VLLM_CONFIG_UTILS = "vllm/config/utils.py"
PATCHES = ("patch_rope_parameters", "patch_rope_scaling")
NOT_SCALING = {"head_size", "rotary_dim", "is_neox_style", "dtype"}  # the rest: theta, scaling, the positions


def presented(presentation: str, rope_type: str) -> dict[str, Any]:
    """The draft config's RoPE attributes as that transformers hands them to the model."""
    scaling = {"rope_type": rope_type, **SCALINGS[rope_type]}
    if presentation == "tf4_rope_scaling":
        return {"rope_theta": THETA, "rope_scaling": None if rope_type == "default" else scaling}
    params = {**scaling, "rope_theta": THETA}
    if presentation == "tf4_rope_parameters":
        return {"rope_theta": TF_DEFAULT_THETA, "rope_scaling": None, "rope_parameters": params}
    return {"rope_parameters": params, "rope_scaling": copy.deepcopy(params)}


class Made:
    """A rotary class as get_rope builds it: the class name and the arguments, named by the class's own __init__."""

    def __init__(self, cls: str, params: list[str], args: tuple, kwargs: dict) -> None:
        named = dict(zip(params, args)) | kwargs
        self.cls = cls
        self.numbers = {k: v for k, v in named.items() if k not in NOT_SCALING and isinstance(v, (int, float, str))}


def _rotary_files(engine: str, root: Path) -> list[Path]:
    single, package = (root / p for p in ROTARY[engine])
    if single.exists():
        return [single]
    files = sorted(package.glob("*.py"))
    if not files:
        raise FileNotFoundError(f"{engine} {root.name}: neither {ROTARY[engine][0]} nor {ROTARY[engine][1]}/")
    return files


def _init_params(classes: dict[str, ast.ClassDef], name: str) -> list[str]:
    """The positional parameters of a class's __init__, from its own def or the nearest base that has one."""
    node = classes.get(name)
    while node is not None:
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                return [a.arg for a in item.args.args][1:]  # without self
        base = node.bases[0] if node.bases else None
        node = classes.get(base.id) if isinstance(base, ast.Name) else None
    return []


class ReleaseRope:
    """The release's get_rope with the module-level functions and assignments of its rotary file(s) (lifted once),
    every rotary class a recorder that appends to ``made``."""

    def __init__(self, engine: str, root: Path) -> None:
        import torch

        trees = [ast.parse(f.read_text()) for f in _rotary_files(engine, root)]
        classes = {n.name: n for t in trees for n in t.body if isinstance(n, ast.ClassDef)}
        self.made: list[Made] = []
        g: dict[str, Any] = {"__builtins__": builtins, "__name__": "engine_rope", "torch": torch}
        for name in classes:
            g[name] = lambda *a, _n=name, **k: self.made.append(Made(_n, _init_params(classes, _n), a, k)) or self.made[-1]
        body = [n for t in trees for n in t.body if isinstance(n, (ast.FunctionDef, ast.Assign, ast.AnnAssign))]
        for node in body:
            if isinstance(node, ast.FunctionDef):
                node.decorator_list = []
        mod = ast.fix_missing_locations(ast.Module(body, []))
        for name in {n.id for n in ast.walk(mod) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}:
            if name not in g and not hasattr(builtins, name):
                g[name] = getattr(typing, name, None) or _loose()
        self.g = g
        # the module's caches (vLLM's _ROPE_DICT, SGLang's live-entry cache) are set afresh before each build: a cached
        # embedding from an earlier probe would hide what this one builds
        self.state = [compile(ast.Module([n], []), "engine_rope", "exec") for n in body if not isinstance(n, ast.FunctionDef)]
        for node in body:
            if isinstance(node, ast.FunctionDef):
                exec(compile(ast.Module([node], []), "engine_rope", "exec"), g)
        if not callable(g.get("get_rope")):
            raise FileNotFoundError(f"{engine} {root.name}: no get_rope in the rotary embedding code")
        self.get_rope = g["get_rope"]

    def fresh(self) -> None:
        self.made.clear()
        for code in self.state:  # an assignment over an engine-only value is not what decides RoPE
            try:
                exec(code, self.g)
            except Exception:
                pass


def _loose() -> Any:
    from draft_exec import Loose

    return Loose()


def lift_patch(root: Path, tf_version: str) -> Any:
    """vLLM's RoPE patch of get_config (the first of PATCHES its transformers_utils/config.py has), with the
    functions it calls from that file and getattr_iter from vllm/config/utils.py; None where the release has none."""
    from packaging.version import Version
    from transformers.configuration_utils import ALLOWED_LAYER_TYPES

    path = root / VLLM_CONFIG
    if not path.exists():
        return None
    funcs = {n.name: n for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef)}
    utils = root / VLLM_CONFIG_UTILS
    if utils.exists():
        funcs |= {
            n.name: n for n in ast.parse(utils.read_text()).body if isinstance(n, ast.FunctionDef) and n.name == "getattr_iter"
        }
    name = next((p for p in PATCHES if p in funcs), None)
    if name is None:
        return None
    g: dict[str, Any] = {
        "__builtins__": builtins,
        "Version": Version,
        "version": lambda package: tf_version,
        # transformers' names for the layer types a nested rope_parameters is keyed by (0.23 imports it under another)
        "ALLOWED_LAYER_TYPES": ALLOWED_LAYER_TYPES,
        "ALLOWED_ATTENTION_LAYER_TYPES": ALLOWED_LAYER_TYPES,
        "logger": _loose(),
    }
    for fn in funcs.values():
        fn.decorator_list = []
        # imports inside the function (vllm.config.utils' getattr_iter) are the lifted functions themselves
        fn.body = [s for s in fn.body if not isinstance(s, (ast.Import, ast.ImportFrom))] or [ast.Pass()]
        fn.args = _drop_annotations(fn.args)
        fn.returns = None
    mod = ast.fix_missing_locations(ast.Module(list(funcs.values()), []))
    for n in {n.id for n in ast.walk(mod) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}:
        if n not in g and n not in funcs and not hasattr(builtins, n):
            g[n] = getattr(typing, n, None) or _loose()
    exec(compile(mod, str(path), "exec"), g)
    return g[name]


def _drop_annotations(args: ast.arguments) -> ast.arguments:
    for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
        if a is not None:
            a.annotation = None
    return args


def _config(presentation: str, rope_type: str) -> Any:
    from draft_exec import RecConfig, base_config

    values = base_config(max_position_embeddings=131072, **presented(presentation, rope_type))
    if presentation == "tf5":
        # transformers 5's own methods that vLLM's patch calls; the config it loaded is already standard (rope_parameters
        # with rope_type and rope_theta, executed on 5.0.0rc0 and 5.24.0), so the patch's call changes nothing
        values |= {"standardize_rope_params": lambda: None, "validate_rope": lambda: None}
    return RecConfig(values)


def built_rope(engine: str, g: dict[str, Any], rope: ReleaseRope, patch: Any, cfg: Any) -> dict[str, Any] | str:
    """{"class", "numbers"} of the rotary embedding the release's draft attention is built with from a presented
    config (after vLLM's patch), or the error the release raises on it."""
    from draft_exec import DraftCodeMoved, _construct_top

    rope.fresh()
    try:
        if patch is not None:
            patch(cfg)
        _construct_top(engine, g, cfg)
    except DraftCodeMoved:
        raise
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    kinds = {(m.cls, tuple(sorted(m.numbers.items()))) for m in rope.made}
    if len(kinds) != 1:
        raise DraftCodeMoved(f"{engine}: the draft built {len(kinds)} kinds of rotary embedding: {kinds}")
    return {"class": rope.made[0].cls, "numbers": rope.made[0].numbers}


DRAFT_FILE = {"sglang": "sglang/srt/models/llama_eagle3.py", "vllm": "vllm/model_executor/models/llama_eagle3.py"}


def transformers_requirement(root: Path) -> str | None:
    """The release's own requirement on transformers, from its wheel's METADATA (Requires-Dist)."""
    for meta in sorted(root.glob("*.dist-info/METADATA")):
        for line in meta.read_text(errors="replace").splitlines():
            m = re.match(r"Requires-Dist:\s*transformers\s*([^;]*)", line, re.I)
            if m:
                return m.group(1).strip().strip("()") or "any"
    return None


def probe_rope(engine: str, root: Path) -> dict[str, Any]:
    """Per presentation and rope type, the rotary embedding the release's draft is built with; the transformers the
    release requires."""
    from draft_exec import load_module, own_base_bindings

    rope = ReleaseRope(engine, root)
    patches = {v: lift_patch(root, v) if engine == "vllm" else None for v in set(TF_VERSION.values())}
    built: dict[str, Any] = {}
    with own_base_bindings(engine, root, {"get_rope": rope.get_rope}):
        g = load_module(root / DRAFT_FILE[engine])
        for p in PRESENTATIONS:
            built[p] = {t: built_rope(engine, g, rope, patches[TF_VERSION[p]], _config(p, t)) for t in SCALINGS}
    return {"transformers": transformers_requirement(root), "built": built}
