"""The KV cache dtype each release runs its EAGLE-3 draft's attention with, from the launch's target --kv-cache-dtype
and the draft-only setting where the release has one, executed from the release's own code.

- SGLang: the draft is a ModelRunner with ``is_draft_worker=True`` over the same server args as the target. Its
  ``configure_kv_cache_dtype`` (model_executor/model_runner.py; from 0.5.16 delegating to mem_cache/kv_cache_dtype.py)
  is lifted and run on stub server args for every (target, draft) pair; before that method existed, the branch over
  ``self.server_args.kv_cache_dtype`` inside the runner is lifted and run alike. The draft-only setting is the
  ``speculative_draft_kv_cache_dtype`` server-args field (server_args.py, from 0.5.20 arg_groups/fields/spec.py).
- vLLM: the proposer hands ``get_model`` a VllmConfig; its ``cache_config.cache_dtype`` is what the draft's
  Attention layers read (model_executor/layers/attention). V1 (v1/spec_decode): ``_create_draft_vllm_config`` where
  the proposer has one, run on stub configs with ``dataclasses.replace``; Model Runner V2
  (v1/worker/gpu/spec_decode/eagle/utils.py): ``load_eagle_model`` run with a ``get_model`` that records the config
  it is given (``apply_draft_overrides`` lifted from config/speculative.py where it calls it). Where neither function
  exists, the one ``get_model`` call (or ``set_current_vllm_config``) must take the target's own config: the draft
  inherits; any other shape stops the run. The draft-only setting is SpeculativeConfig's ``kv_cache_dtype`` field.

The model dtype is a sentinel (float16) so that "the model's own dtype" reads apart from an explicit bfloat16:
the table says ``model`` there. vLLM's strings are named as its config/cache.py documents them ("auto" the model
dtype, "fp8" = fp8_e4m3 on CUDA).
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import functools
import json
import sys
import time
import typing
from pathlib import Path
from types import SimpleNamespace
from typing import Any

HERE = Path(__file__).resolve().parent
PACKAGE_TABLE = "eagle3_doctor/data/draft_kv_dtype.json"
TARGET = {
    "sglang": ("auto", "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2"),
    "vllm": ("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2"),
}
DRAFT = {e: (None, *v) for e, v in TARGET.items()}
VLLM_NAMES = {"auto": "model", "fp8": "fp8_e4m3"}  # config/cache.py cache_dtype: auto = model dtype, fp8 (=fp8_e4m3)
SG_RUNNER = "sglang/srt/model_executor/model_runner.py"
SG_RESOLVE = "sglang/srt/mem_cache/kv_cache_dtype.py"
SG_FLAG = ("sglang/srt/server_args.py", "sglang/srt/arg_groups/fields/spec.py")
V1 = ("vllm/v1/spec_decode/llm_base_proposer.py", "vllm/v1/spec_decode/eagle.py")
V2 = ("vllm/v1/worker/gpu/spec_decode/eagle/utils.py", "vllm/v1/worker/gpu/spec_decode/eagle.py")
V_SPEC = ("vllm/config/speculative.py", "vllm/config.py")


class KvCodeMoved(Exception):
    """The code that decides the draft's KV dtype no longer has a shape this harness runs."""


def _dtype_name(d: Any) -> str:
    import torch

    names = {torch.float16: "model", torch.bfloat16: "bfloat16", torch.float8_e4m3fn: "fp8_e4m3", torch.float8_e5m2: "fp8_e5m2"}
    return names.get(d, str(d))


def _loose() -> Any:
    from draft_exec import Loose

    return Loose()


def _undecorated(fn: ast.FunctionDef) -> ast.FunctionDef:
    fn.decorator_list = []
    fn.returns = None
    for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs, fn.args.vararg, fn.args.kwarg):
        if a is not None:
            a.annotation = None
    fn.body = [s for s in fn.body if not isinstance(s, (ast.Import, ast.ImportFrom))] or [ast.Pass()]
    return fn


def _run(nodes: list[ast.stmt], g: dict[str, Any], where: str) -> dict[str, Any]:
    """Exec ``nodes`` in ``g``, every free name not bound there a Loose (the engine's helpers the rule never reaches)."""
    mod = ast.fix_missing_locations(ast.Module(nodes, []))
    for n in {n.id for n in ast.walk(mod) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}:
        if n not in g and not hasattr(builtins, n):
            # a platform probe (_is_hip, is_npu()) answered as on CUDA
            cuda = n.lstrip("_") == "is_cuda"
            g[n] = cuda if n.startswith("_is_") else (lambda *a, _c=cuda, **k: _c) if n.startswith("is_") else None
            g[n] = g[n] if g[n] is not None else getattr(typing, n, None) or _loose()
    exec(compile(mod, where, "exec"), g)
    return g


@functools.lru_cache(maxsize=8)
def _tree(path: Path) -> ast.Module:
    """A file parsed once for every probe of its release (each reads it; the functions it lifts are only undecorated)."""
    return ast.parse(path.read_text())


def _field_line(root: Path, files: tuple[str, ...], cls_part: str, name: str) -> str | None:
    """file:line of ``name: ...`` in a class whose name contains ``cls_part``, in the first file that has one."""
    for rel in files:
        p = root / rel
        if not p.exists() or name not in p.read_text():  # most releases: no such field, no parse
            continue
        for node in _tree(p).body:
            if isinstance(node, ast.ClassDef) and cls_part in node.name:
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.target.id == name:
                        return f"{rel}:{item.lineno}"
    return None


# --------------------------------------------------------------------------- SGLang


def _sglang_rule(root: Path) -> tuple[Any, str]:
    """(args -> the draft runner's KV torch dtype, the source it runs)."""
    import torch

    tree = ast.parse((root / SG_RUNNER).read_text())
    runner = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelRunner"), None)
    if runner is None:
        raise KvCodeMoved(f"sglang {root.name}: no ModelRunner in {SG_RUNNER}")
    method = next((n for n in runner.body if isinstance(n, ast.FunctionDef) and n.name == "configure_kv_cache_dtype"), None)
    base = {"__builtins__": builtins, "torch": torch, "_is_hip": False, "logger": _loose(), "getattr": getattr}
    if method is not None and "kv_cache_dtype.configure_kv_cache_dtype" in ast.unparse(method):
        resolve = ast.parse((root / SG_RESOLVE).read_text())
        g = dict(base)
        for node in resolve.body:  # the module's tables; an engine-only value is replaced below
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                try:
                    _run([node], g, SG_RESOLVE)
                except Exception:
                    pass
        cuda = SimpleNamespace(is_cpu=lambda: False, is_hip=lambda: False, is_cuda=lambda: True)
        g |= {"_is_hip": False, "fp8_dtype": torch.float8_e4m3fn, "current_platform": cuda}
        fn = next(n for n in resolve.body if isinstance(n, ast.FunctionDef) and n.name == "configure_kv_cache_dtype")
        _run([_undecorated(fn)], g, SG_RESOLVE)
        where = f"{SG_RUNNER}:{method.lineno} configure_kv_cache_dtype -> {SG_RESOLVE}:{fn.lineno}"
        inner = SimpleNamespace(configure_kv_cache_dtype=g["configure_kv_cache_dtype"])
        mg = _run([_undecorated(method)], {**base, "kv_cache_dtype": inner}, SG_RUNNER)
        return mg["configure_kv_cache_dtype"], where
    branch = next(
        (
            n
            for n in ast.walk(method or runner)
            if isinstance(n, ast.If) and ast.unparse(n.test) == "self.server_args.kv_cache_dtype == 'auto'"
        ),
        None,
    )
    if branch is None:
        raise KvCodeMoved(f"sglang {root.name}: no branch over self.server_args.kv_cache_dtype in ModelRunner")
    fn = ast.FunctionDef("_rule", ast.arguments([], [ast.arg("self")], None, [], [], None, []), [branch], [], None, None)
    g = _run([fn], {**base, "is_hip": lambda: False}, SG_RUNNER)
    return g["_rule"], f"{SG_RUNNER}:{branch.lineno} (ModelRunner, the branch over server_args.kv_cache_dtype)"


def _sglang(root: Path) -> dict[str, Any]:
    import torch

    rule, where = _sglang_rule(root)
    key = _field_line(root, SG_FLAG, "", "speculative_draft_kv_cache_dtype")
    served: dict[str, str] = {}
    for t in TARGET["sglang"]:
        for d in DRAFT["sglang"] if key else (None,):
            args = SimpleNamespace(kv_cache_dtype=t, speculative_draft_kv_cache_dtype=d, speculative_draft_attention_backend=None)
            self = SimpleNamespace(server_args=args, model=None, dtype=torch.float16, is_draft_worker=True,
                                   spec_algorithm=None, draft_attention_backend=None)  # fmt: skip
            rule.__globals__["get_model"] = rule.__globals__["get_spec"] = lambda _a=args: _a
            try:
                rule(self)
                served[f"{t}|{d or '-'}"] = _dtype_name(self.kv_cache_dtype)
            except Exception as e:
                served[f"{t}|{d or '-'}"] = f"!{type(e).__name__}: {e}"
    return {"key": key, "runners": {"draft runner": (where, served)}}


# --------------------------------------------------------------------------- vLLM


@dataclasses.dataclass
class _Sub:
    cache_dtype: Any = None
    backend: Any = None
    moe_backend: Any = None


@dataclasses.dataclass
class _Vllm:
    cache_config: Any = None
    attention_config: Any = None
    kernel_config: Any = None
    load_config: Any = None
    speculative_config: Any = None


class _Got(Exception):
    def __init__(self, config: Any) -> None:
        self.config = config


def _record(**k: Any) -> Any:
    raise _Got(k.get("vllm_config"))


def _functions(path: Path) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in ast.walk(_tree(path)) if isinstance(n, ast.FunctionDef)}


def _get_model_arg(fn: ast.FunctionDef) -> tuple[str, int] | None:
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and ast.unparse(n.func) in ("get_model", "set_current_vllm_config"):
            arg = next((k.value for k in n.keywords if k.arg == "vllm_config"), n.args[0] if n.args else None)
            if arg is not None:
                return ast.unparse(arg), n.lineno
    return None


def _spec_overrides(root: Path) -> Any:
    """SpeculativeConfig.apply_draft_overrides with its override table, where the release has one."""
    p = root / V_SPEC[0]
    if not p.exists():
        return None
    tree = _tree(p)
    fn = _functions(p).get("apply_draft_overrides")
    if fn is None:
        return None
    table = [n for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign)) and "OVERRIDES" in ast.unparse(n).split("=")[0]]
    g = _run([*table, _undecorated(fn)], {"__builtins__": builtins, "replace": dataclasses.replace}, V_SPEC[0])
    return g["apply_draft_overrides"]


def _vllm_runner(root: Path, files: tuple[str, ...], name: str) -> tuple[Any, str] | None:
    """(spec kv dtype, target cache dtype -> the cache dtype the draft's get_model gets; the source), or None where
    the release has no such runner."""
    path = next((root / f for f in files if (root / f).exists()), None)
    if path is None:
        return None
    rel = str(path.relative_to(root))
    funcs = _functions(path)
    g: dict[str, Any] = {"__builtins__": builtins, "replace": dataclasses.replace, "get_model": _record,
                         "set_model_tag": lambda *a, **k: _loose(), "get_draft_load_config": lambda c: c.load_config,
                         "get_pp_safe_draft_load_config": lambda c: c}  # fmt: skip
    if name in funcs:
        fn = funcs[name]
        _run([_undecorated(fn)], g, rel)

        def served(spec: Any, base: Any) -> Any:
            try:
                if name == "load_eagle_model":
                    g[name](None, base)
                    raise KvCodeMoved(f"vllm {root.name}: {rel} load_eagle_model never called get_model")
                return g[name](SimpleNamespace(speculative_config=spec, vllm_config=base)).cache_config.cache_dtype
            except _Got as got:
                return got.config.cache_config.cache_dtype

        if name == "_create_draft_vllm_config":  # the config it makes must be the one get_model gets
            caller = next((f for f in funcs.values() if _get_model_arg(f)), None)
            if caller is None or "self._create_draft_vllm_config()" not in ast.unparse(caller):
                raise KvCodeMoved(f"vllm {root.name}: {rel} has {name} but get_model is not given its config")
        return served, f"{rel}:{fn.lineno} {name}, executed"
    for fn in funcs.values():
        arg = _get_model_arg(fn)
        if arg is not None and arg[0] in ("self.vllm_config", "vllm_config"):
            return (lambda spec, base: base.cache_config.cache_dtype), f"{rel}:{arg[1]} the draft gets {arg[0]}: the target's"
    if any(_get_model_arg(fn) for fn in funcs.values()):
        raise KvCodeMoved(f"vllm {root.name}: {rel} builds the draft from a config this harness does not know")
    return None


def _vllm(root: Path) -> dict[str, Any]:
    key = _field_line(root, V_SPEC, "SpeculativeConfig", "kv_cache_dtype")
    overrides = _spec_overrides(root)
    runners: dict[str, Any] = {}
    for label, files, name in (("V1", V1, "_create_draft_vllm_config"), ("V2", V2, "load_eagle_model")):
        got = _vllm_runner(root, files, name)
        if got is None:
            continue
        fn, where = got
        served: dict[str, str] = {}
        for t in TARGET["vllm"]:
            for d in DRAFT["vllm"] if key else (None,):
                spec = SimpleNamespace(kv_cache_dtype=d, moe_backend=None, attention_backend=None, draft_model_config=None)
                if overrides is not None:
                    spec.apply_draft_overrides = lambda c, _s=spec: overrides(_s, c)
                base = _Vllm(_Sub(cache_dtype=t), _Sub(), _Sub(), None, spec)
                try:
                    v = fn(spec, base)
                    served[f"{t}|{d or '-'}"] = VLLM_NAMES.get(v, v)
                except (KvCodeMoved, _Got):
                    raise
                except Exception as e:
                    served[f"{t}|{d or '-'}"] = f"!{type(e).__name__}: {e}"
        runners[label] = (where, served)
    if not runners:
        raise KvCodeMoved(f"vllm {root.name}: no EAGLE proposer that builds the draft")
    return {"key": key, "runners": runners}


# --------------------------------------------------------------------------- the table


def build_table(src_dir: Any, releases: dict[str, list[str]]) -> dict[str, Any]:
    """Per release with an EAGLE-3 draft model: the draft-only key (file:line or None) and, per runner, the source run
    and the served KV dtype for every (target, draft) setting; releases whose served dtypes agree share a row."""
    from draft_exec import DRAFT_FILES

    rows: list[dict[str, Any]] = []
    release_rows: dict[str, dict[str, int]] = {}
    for engine, probe in (("sglang", _sglang), ("vllm", _vllm)):
        release_rows[engine] = {}
        for v in releases[engine]:
            root = src_dir(engine, v)
            if not (root / DRAFT_FILES[engine]).exists():
                continue  # no EAGLE-3 draft model in this release
            got = probe(root)
            served = {r: s for r, (_, s) in got["runners"].items()}
            same = next((i for i, r in enumerate(rows) if r["engine"] == engine and r["served"] == served), None)
            if same is None:
                rows.append({"engine": engine, "releases": [], "served": served})
                same = len(rows) - 1
            rows[same]["releases"].append(v)
            sources = {r: w for r, (w, _) in got["runners"].items()}
            release_rows[engine][v] = {"row": same, "key": got["key"], "sources": sources}
    return {"targets": TARGET, "drafts": DRAFT, "rows": rows, "release_rows": release_rows}


def main() -> int:
    import fetch
    from releases import RELEASES

    t0 = time.time()
    table = build_table(fetch.src_dir, RELEASES)
    (HERE.parent / PACKAGE_TABLE).write_text(json.dumps(table, indent=1) + "\n")
    print(f"conformance: draft KV dtype table, {len(table['rows'])} rows in {time.time() - t0:.1f} s -> {PACKAGE_TABLE}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main())
