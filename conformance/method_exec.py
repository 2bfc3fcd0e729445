"""Which speculative method each vLLM release runs a draft under, executed from the release's own code.

``SpeculativeConfig.__post_init__`` settles the method in two places: statements near its top that rewrite the name
as typed (an unset method becomes ``draft_model`` from 0.20.0; the deprecated ``*_mtp`` names become ``mtp`` in the
newest releases), and the chain after the comment "Automatically detect the method" that keeps a typed name, or
detects one from the draft's path ("eagle-" in it, "eagle3", "dflash"), its config's ``model_type`` or its
``architectures``, and otherwise falls back to ``draft_model`` or raises. A draft saved under a path with "eagle-"
in its name is served as EAGLE-1 whatever its kind, from the first release to the newest.

For every release in releases.py (config modules under .cache/flags/, as flags_exec fetches them) this harness
1. reads the chain's branches off its AST into data (the test of each: a typed name kept, a path substring, a
   ``model_type`` or ``architectures`` set, any/all of those; what it does: keep the name, set one, raise);
2. executes the release's own statements (the rewrites and the chain, compiled from its source with stand-ins for
   the objects they read) over a grid of typed names, draft paths, model types and architectures;
3. checks that the package's resolver (eagle3_doctor/engines/vllm_method.py) applied to the branches read gives
   what the release's code gave, case by case, and stops if any differs;
and writes the rows (runs of releases with the same rules) to eagle3_doctor/data/vllm_method_detect.json.

Usage: python conformance/method_exec.py [OUT.json]   (fetches what the cache lacks)
"""

from __future__ import annotations

import ast
import builtins
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import fetch  # noqa: E402
import flags_exec  # noqa: E402
from releases import FLAG_FILE_PATTERNS, RELEASES  # noqa: E402

from eagle3_doctor.engines.vllm_method import resolve_rules  # noqa: E402

OUT = ROOT / "eagle3_doctor" / "data" / "vllm_method_detect.json"
MARK = "Automatically detect the method"

# the grid: names a user types, draft paths as users save them, the config fields the chain reads
TYPED = (None, "eagle", "eagle3", "dflash", "mtp", "deepseek_mtp", "qwen3_next_mtp", "draft_model", "medusa", "peagle")
PATHS = ("/m/draft", "/m/llama-eagle-draft", "/m/EAGLE3-llama", "/m/Llama-Eagle-3", "/m/eagle3-dflash",
         "/m/qwen3-dflash-b16", "/m/eagle-eagle3", "/m/dspark-x", "/m/eagle3")  # fmt: skip
MODEL_TYPES = ("llama", "qwen3", "deepseek_mtp", "qwen3_next_mtp", "medusa", "mlp_speculator", "glm4_moe_mtp")
ARCHS = (("LlamaForCausalLM",), ("LlamaForCausalLMEagle3",), ("DFlashDraftModel",), ("Qwen3DSparkModel",))


class _Stub:
    """Whatever the statements read that the grid does not set: falsy, equal to nothing, holding nothing."""

    def __getattr__(self, _name: str) -> _Stub:
        return self

    def __call__(self, *_a: Any, **_k: Any) -> _Stub:
        return self

    def __bool__(self) -> bool:
        return False

    def __contains__(self, _x: Any) -> bool:
        return False

    def __iter__(self) -> Any:
        return iter(())

    def __eq__(self, _o: object) -> bool:
        return False

    def __hash__(self) -> int:
        return 0

    def __gt__(self, _o: Any) -> bool:
        return False

    __lt__ = __ge__ = __le__ = __gt__


class _NS:
    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)

    def __getattr__(self, _name: str) -> Any:
        return _Stub()


def _post_init(root: Path) -> tuple[str, str, ast.Module, ast.FunctionDef] | None:
    """(file, source, module, SpeculativeConfig.__post_init__) of a release, where its class has one."""
    found = flags_exec.speculative_config(root)
    if found is None:
        return None
    name, source, module, cls = found
    fn = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__post_init__"), None)
    return (name, source, module, fn) if fn is not None else None


def _chain(source: str, fn: ast.FunctionDef) -> ast.If:
    lines = source.splitlines()
    mark = next(i + 1 for i, text in enumerate(lines) if MARK in text and fn.lineno <= i + 1 <= (fn.end_lineno or 0))
    return min((n for n in ast.walk(fn) if isinstance(n, ast.If) and n.lineno > mark), key=lambda n: n.lineno)


def _mentions_method(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "method" and getattr(n.value, "id", "") == "self"
               for n in ast.walk(node))  # fmt: skip


def _rewrites(fn: ast.FunctionDef, chain: ast.If) -> list[ast.If]:
    """The top-level ``if`` statements before the one holding the chain whose test reads ``self.method`` and whose
    body sets it (the unset default, the deprecated names)."""
    out = []
    for st in fn.body:
        if st.lineno >= chain.lineno or (st.end_lineno or 0) >= chain.lineno:
            break
        sets = any(isinstance(n, ast.Assign) and any(getattr(t, "attr", "") == "method" for t in n.targets) for n in ast.walk(st))
        tests, node = [], st
        while isinstance(node, ast.If):  # the if and its elifs
            tests.append(node.test)
            node = node.orelse[0] if len(node.orelse) == 1 else None
        if isinstance(st, ast.If) and any(_mentions_method(t) for t in tests) and sets:
            out.append(st)
    return out


def _consts(module: ast.Module) -> dict[str, Any]:
    """Module-level names the statements read: string constants, and a Literal's names (``get_args`` of it)."""
    env: dict[str, Any] = {}
    aliases = {t.id: n.value for n in module.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    aliases.update(
        {n.target.id: n.value for n in module.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value}
    )
    for name, value in aliases.items():
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            env[name] = value.value
        elif (names := flags_exec._literal_names(value, aliases)) is not None:
            env[name] = tuple(names)
        elif isinstance(value, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Constant) for e in value.elts):
            env[name] = tuple(e.value for e in value.elts)
    return env


def _run(stmts: list[ast.stmt], env: dict[str, Any], self_: _NS) -> None:
    code = compile(ast.Module(body=stmts, type_ignores=[]), "<release>", "exec")
    exec(code, {**env, "self": self_})  # noqa: S102 - the release's own statements, on stand-ins


def executed(root: Path) -> dict[str, Any] | None:
    """The release's statements run over the grid: {"rewrites": {typed: after}, "cases": [[typed, path, model_type,
    archs, method or None, raised or None]], "source": file:line of the chain}."""
    found = _post_init(root)
    if found is None:
        return None
    name, source, module, fn = found
    chain = _chain(source, fn)
    rewrites = _rewrites(fn, chain)
    env = {**_consts(module), "get_args": lambda x: x if isinstance(x, tuple) else (), "logger": _Stub(),
           "envs": _NS(VLLM_USE_V1=True), "using_transformers_mtp": False, "__builtins__": builtins}  # fmt: skip
    stand_in = {"__name__": "<release>"}
    for n in (n for st in [*rewrites, chain] for n in ast.walk(st)):  # a name no assignment gives: a stand-in
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in env and not hasattr(builtins, n.id):
            stand_in[n.id] = _Stub()
    env = {**stand_in, **env}
    after = {}
    for typed in TYPED:
        s = _NS(method=typed, model="/m/draft", num_speculative_tokens=3)
        _run(rewrites, env, s)  # type: ignore[arg-type]
        after[str(typed)] = s.method
    cases = []
    for typed in TYPED:
        for path in PATHS:
            for mt in MODEL_TYPES:
                for archs in ARCHS:
                    target = _NS(hf_config=_NS(model_type="llama"), using_transformers_backend=lambda: False)
                    draft = _NS(model=path, hf_config=_NS(model_type=mt), architectures=list(archs))
                    s = _NS(method=after[str(typed)], model=path, draft_model_config=draft, target_model_config=target,
                            num_speculative_tokens=3, enable_chunked_prefill=False)  # fmt: skip
                    try:
                        _run([chain], env, s)
                        cases.append([typed, path, mt, list(archs), s.method, None])
                    except (NotImplementedError, ValueError) as e:
                        cases.append([typed, path, mt, list(archs), None, f"{type(e).__name__}: {e}"])
    return {"rewrites": after, "cases": cases, "source": f"{name}:{chain.lineno}", "branches": branches(chain, env)}


# --------------------------------------------------------------------------- the chain read as data


def _is_self_attr(node: ast.AST, *path: str) -> bool:
    for attr in reversed(path):
        if not (isinstance(node, ast.Attribute) and node.attr == attr):
            return False
        node = node.value
    return isinstance(node, ast.Name) and node.id == "self"


def _strs(node: ast.AST, env: dict[str, Any]) -> list[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        got = [_strs(e, env) for e in node.elts]
        return None if any(g is None for g in got) else [x for g in got for x in g or []]
    if isinstance(node, ast.Name) and isinstance(env.get(node.id), (str, tuple)):
        v = env[node.id]
        return [v] if isinstance(v, str) else list(v)
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "get_args" and node.args:
        return _strs(node.args[0], env)
    return None


def test_of(node: ast.AST, env: dict[str, Any]) -> dict[str, Any]:
    """A branch's test as data the package's resolver evaluates; {"unread": source} where it is none of these."""
    if isinstance(node, ast.BoolOp):
        return {"any" if isinstance(node.op, ast.Or) else "all": [test_of(v, env) for v in node.values]}
    if isinstance(node, ast.Name) and env.get(node.id) is False:
        return {"never": node.id}
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, op, right = node.left, node.ops[0], node.comparators[0]
        if _is_self_attr(left, "method") and isinstance(op, (ast.Eq, ast.In)) and (names := _strs(right, env)) is not None:
            return {"typed": names}
        if _is_self_attr(left, "draft_model_config", "hf_config", "model_type") and isinstance(op, (ast.Eq, ast.In)):
            if (names := _strs(right, env)) is not None:  # ``in ("longcat_flash_mtp")`` is a substring test on a str
                return (
                    {"model_type": names}
                    if isinstance(op, ast.Eq) or not isinstance(right, ast.Constant)
                    else {"model_type_within": names[0]}
                )
        if isinstance(op, ast.In) and (sub := _strs(left, env)) is not None and len(sub) == 1:
            if (
                isinstance(right, ast.Call)
                and getattr(right.func, "attr", "") == "lower"
                and _is_self_attr(right.func.value, "draft_model_config", "model")
            ):
                return {"path_has": sub[0]}
            if _is_self_attr(right, "draft_model_config", "architectures"):
                return {"arch": sub[0]}
    return {"unread": ast.unparse(node)}


def _then(body: list[ast.stmt]) -> dict[str, Any]:
    """What a branch does: a raise at its top level wins over a name set before it (0.10's draft_model)."""
    for st in body:
        if isinstance(st, ast.Raise):
            return {"raises": ast.unparse(st.exc) if st.exc else "raise", "line": st.lineno}
    for st in body:
        if isinstance(st, ast.Assign) and any(_is_self_attr(t, "method") for t in st.targets):
            if isinstance(st.value, ast.Constant):
                return {"method": st.value.value}
        if isinstance(st, ast.Raise):
            return {"raises": ast.unparse(st.exc) if st.exc else "raise", "line": st.lineno}
        if isinstance(st, ast.Pass):
            return {"keep": True}
    return {"unread": ast.unparse(body[0]) if body else ""}


def branches(chain: ast.If, env: dict[str, Any]) -> list[dict[str, Any]]:
    out, node = [], chain
    while True:
        out.append({"when": test_of(node.test, env), **_then(node.body), "line": node.lineno})
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            node = node.orelse[0]
            continue
        if node.orelse:
            out.append({"when": {"else": True}, **_then(node.orelse), "line": node.orelse[0].lineno})
        return out


# --------------------------------------------------------------------------- the table


def check(ex: dict[str, Any]) -> list[str]:
    """The cases where the package's resolver, on the branches read, says otherwise than the release's code."""
    bad = []
    for typed, path, mt, archs, method, raised in ex["cases"]:
        got = resolve_rules({"rewrites": ex["rewrites"], "branches": ex["branches"]}, typed, path, mt, archs)
        if (got.method, bool(got.raises)) != (method, raised is not None):
            bad.append(f"{typed!r} {path} {mt} {archs}: release {method or raised}, resolver {got.method or got.raises}")
    return bad


def build(releases: list[str]) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    not_read: dict[str, str] = {}
    for v in releases:
        root = fetch.src_dir("vllm", v, "flags")
        ex = executed(root) if (root / ".complete").exists() else None
        if ex is None:
            not_read[v] = "not fetched" if not (root / ".complete").exists() else "no SpeculativeConfig.__post_init__"
            continue
        if bad := check(ex):
            raise SystemExit(
                f"vllm {v}: the resolver differs from the release's code in {len(bad)} cases:\n  " + "\n  ".join(bad[:10])
            )
        rule = {"rewrites": ex["rewrites"], "branches": [{k: b[k] for k in b if k != "line"} for b in ex["branches"]]}
        if rows and rows[-1]["rule"] == rule:
            rows[-1]["releases"][-1] = v
        else:
            rows.append({"releases": [v, v], "rule": rule, "source": f"vllm {v} {ex['source']}",
                         "lines": [b["line"] for b in ex["branches"]], "cases": len(ex["cases"])})  # fmt: skip
        print(f"vllm {v}: {len(ex['cases'])} cases executed, resolver agrees", flush=True)
    for r in rows:
        r["releases"] = f"{r['releases'][0]}..{r['releases'][1]}" if r["releases"][0] != r["releases"][1] else r["releases"][0]
    return {"generated_by": "conformance/method_exec.py", "releases": releases, "not_read": not_read, "rows": rows}


def main(out: str = str(OUT)) -> None:
    for v in RELEASES["vllm"]:
        fetch.fetch("vllm", v, patterns=FLAG_FILE_PATTERNS, kind="flags")
    data = build(RELEASES["vllm"])
    Path(out).write_text(json.dumps(data, indent=1) + "\n")
    print(f"{out}: {len(data['rows'])} rows over {len(RELEASES['vllm']) - len(data['not_read'])} releases")


if __name__ == "__main__":
    main(*sys.argv[1:])
