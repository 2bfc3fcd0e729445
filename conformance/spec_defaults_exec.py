"""SGLang's speculative tree shape (steps, topk, draft tokens) for what a launch leaves unset, executed per release.

With ``--speculative-num-steps`` unset, SGLang picks all three from the target's architecture: the chooser is
``auto_choose_speculative_params`` (server_args.py, from 0.4.4.post4) or ``_auto_choose_speculative_params``
(arg_groups/speculative_hook.py, from 0.5.14); from 0.4.5.post3 topk 1 forces the draft tokens to steps + 1.
Before the chooser the three are plain ServerArgs field defaults. For every release the statements that decide
them are lifted with ``ast`` from the function that calls the chooser (``__post_init__``,
``_handle_speculative_decoding``, ``_handle_eagle_family``) and executed, in the release's order, on a stub
ServerArgs holding the release's own literal field defaults:
- the assignments of the names those statements read before they are bound (``model_arch = get_model_arch(self)``,
  ``model_arch = model_config_of(server_args).hf_config.architectures[0]``, ``cfg = resolving_view(server_args)``);
- the ``if ... speculative_num_steps is None`` block: its assert and the chooser's call;
- every statement after it, in the same block, that writes one of the three (``page_size > 1`` turns topk to 1
  up to 0.4.8.post1: not taken at the default page size 1);
- the ``topk == 1`` adjustment (``speculative_num_draft_tokens = speculative_num_steps + 1``).
The chooser and every module-level helper of the release they call (``get_model_arch``) are lifted and executed
too. Stubbed, as the engine's infrastructure: ``get_config`` (reads the stub target's config.json),
``get_hf_config``/``get_model_config``/``model_config_of`` (its ``hf_config``), ``resolving_view``/``resolved_view``
(the args themselves) and ``declare_resolution`` (sets the fields it names). A name outside these stops the run
("the tree-shape code moved").

Grid: the algorithm EAGLE3 (NEXTN becomes EAGLE before this code, and the chooser tests only STANDALONE) x every
architecture the chooser names in any release plus those the doctor serves (``ARCHS``) plus ``OTHER``, a name no
release lists x 12 launches (each of steps in {unset, 4}, topk in {unset, 1, 4}, draft tokens in {unset, 16}).
Releases whose outcomes agree share a row; each release keeps its own file:line. The chooser must decide by
membership of the architecture in lists of names (a checked pattern), so ``OTHER``'s result is every unlisted
architecture's. The rules the doctor applies (``eagle3_doctor/engines/sglang_tree.py``) are written beside the
outcomes, and ``build_table`` checks that they reproduce every executed case.
"""

from __future__ import annotations

import ast
import builtins
import copy
import functools
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Any

HERE = Path(__file__).resolve().parent
PACKAGE_TABLE = "eagle3_doctor/data/sglang_tree_defaults.json"
FIELDS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
CHOOSERS = ("auto_choose_speculative_params", "_auto_choose_speculative_params")
# the architectures the doctor's families serve (Llama, Qwen2/3, DeepSeek-V2/V3/V3.2, GPT-OSS, Grok-1, GLM-4-MoE,
# Mistral); every name a release's chooser lists is probed as well
ARCHS = (
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM",
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "DeepseekV32ForCausalLM",
    "GptOssForCausalLM",
    "Grok1ForCausalLM",
    "Glm4MoeForCausalLM",
)
OTHER = "EagleDoctorProbeForCausalLM"  # listed by no release: what every architecture a chooser does not name gets
ALGORITHM = "EAGLE3"
GIVEN = [(s, t, n) for s in (None, 4) for t in (None, 1, 4) for n in (None, 16)]
FORCE_TEST = "{o}.speculative_eagle_topk == 1 and {o}.speculative_num_draft_tokens != {o}.speculative_num_steps + 1"


class TreeCodeMoved(Exception):
    """The code that fills SGLang's tree shape no longer has a shape this harness runs."""


def case_key(given: tuple) -> str:
    return "|".join("-" if x is None else str(x) for x in given)


def _shape(values: tuple) -> str:
    return ",".join("-" if x is None else str(x) for x in values)


# --------------------------------------------------------------------------- the release's code, located


def _modules(root: Path) -> dict[str, ast.Module]:
    """server_args.py and the arg_groups/ files that name a speculative field (the fields, the hooks), parsed."""
    files = [root / "sglang/srt/server_args.py", *sorted((root / "sglang/srt/arg_groups").rglob("*.py"))]
    texts = {p.relative_to(root).as_posix(): p.read_text() for p in files if p.exists()}
    return {rel: ast.parse(text) for rel, text in texts.items() if "speculative_" in text}


def _functions(tree: ast.Module) -> list[ast.FunctionDef]:
    """Module-level functions and methods of module-level classes (where SGLang keeps its argument handling)."""
    out = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    out += [m for c in tree.body if isinstance(c, ast.ClassDef) for m in c.body if isinstance(m, ast.FunctionDef)]
    return out


def _field_defaults(mods: dict[str, ast.Module]) -> tuple[dict[str, Any], dict[str, str], set[str]]:
    """Literal defaults of ServerArgs' fields (server_args.py ``ServerArgs``; from 0.5.20 arg_groups/fields/), where
    each of the three is declared, and every field's name."""
    values: dict[str, Any] = {}
    where: dict[str, str] = {}
    names: set[str] = set()
    for rel, tree in mods.items():
        if rel != "sglang/srt/server_args.py" and "/arg_groups/fields/" not in rel:
            continue
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            if rel.endswith("server_args.py") and cls.name != "ServerArgs":
                continue
            for item in cls.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None:
                    try:
                        v = ast.literal_eval(item.value)
                    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                        continue
                    if item.target.id in values and item.target.id in FIELDS:
                        raise TreeCodeMoved(f"{item.target.id} defined twice ({where[item.target.id]}, {rel}:{item.lineno})")
                    values.setdefault(item.target.id, v)
                    where.setdefault(item.target.id, f"{rel}:{item.lineno}")
    missing = [f for f in FIELDS if f not in values]
    if missing:
        raise TreeCodeMoved(f"no literal ServerArgs default for {', '.join(missing)}")
    return values, where, names


def _module_functions(mods: dict[str, ast.Module]) -> dict[str, tuple[str, ast.FunctionDef]]:
    out: dict[str, tuple[str, ast.FunctionDef]] = {}
    for rel, tree in mods.items():
        for n in tree.body:
            if isinstance(n, ast.FunctionDef):
                out.setdefault(n.name, (rel, n))
    return out


def _calls_chooser(node: ast.AST) -> bool:
    return any(isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in CHOOSERS for c in ast.walk(node))


def _is_force(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If):
        return False
    test = ast.unparse(node.test)
    return any(test == FORCE_TEST.format(o=o) for o in ("self", "cfg", "server_args"))


def _writes(node: ast.AST) -> set[str]:
    """The three fields ``node`` assigns (``x.field = ...``) or declares (``declare_resolution(..., field=...)``)."""
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                out |= {x.attr for x in ast.walk(t) if isinstance(x, ast.Attribute) and x.attr in FIELDS}
        if isinstance(n, ast.Call):
            out |= {k.arg for k in n.keywords if k.arg in FIELDS}
    return out


def _parent_body(fn: ast.FunctionDef, node: ast.stmt) -> list[ast.stmt]:
    for n in ast.walk(fn):
        for name in ("body", "orelse", "finalbody"):
            b = getattr(n, name, None)
            if isinstance(b, list) and any(s is node for s in b):
                return b
    raise TreeCodeMoved(f"line {node.lineno}: no enclosing block")


def _call_site(mods: dict[str, ast.Module]) -> dict[str, Any] | None:
    """The function that calls the chooser: its ``speculative_num_steps is None`` block, the writers after it, the
    topk-1 adjustment. None where no release code calls a chooser (the fields' defaults stand)."""
    found = []
    forces = []
    for rel, tree in mods.items():
        for fn in _functions(tree):
            for n in ast.walk(fn):
                if not isinstance(n, ast.If):
                    continue
                if fn.name not in CHOOSERS and "speculative_num_steps is None" in ast.unparse(n.test) and _calls_chooser(n):
                    found.append((rel, fn, n))
                if _is_force(n):
                    forces.append((rel, n))
    if not found:
        if forces:
            raise TreeCodeMoved(f"a topk-1 adjustment ({forces[0][0]}:{forces[0][1].lineno}) but no chooser call")
        return None
    if len(found) > 1:
        raise TreeCodeMoved("the chooser is called from " + ", ".join(f"{r}:{n.lineno}" for r, _, n in found))
    rel, fn, block = found[0]
    body = _parent_body(fn, block)
    after: list[ast.stmt] = []
    force = None
    for s in body[body.index(block) + 1 :]:
        if _is_force(s):
            force = s
            break
        if _writes(s):
            after.append(s)
    if len(forces) != (force is not None):
        raise TreeCodeMoved(f"{rel}: a topk-1 adjustment outside the block that calls the chooser")
    return {"rel": rel, "fn": fn, "block": block, "after": after, "force": force}


# --------------------------------------------------------------------------- executed


def _bare(fn: ast.FunctionDef) -> ast.FunctionDef:
    fn = copy.deepcopy(fn)  # the tree stays as read; the copy keeps the release's line numbers
    fn.decorator_list, fn.returns = [], None
    for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs, fn.args.vararg, fn.args.kwarg):
        if a is not None:
            a.annotation = None
    return fn


def _no_imports(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """The statements with their function-level imports dropped: what they import is bound in the globals."""

    class Drop(ast.NodeTransformer):
        def visit_Import(self, node: ast.AST) -> ast.AST:
            return ast.copy_location(ast.Pass(), node)

        visit_ImportFrom = visit_Import

    return [Drop().visit(copy.deepcopy(s)) for s in stmts]


def _prelude(site: dict[str, Any]) -> list[ast.stmt]:
    """The assignments of the locals the executed statements read before binding them (the architecture, a view)."""
    fn, block = site["fn"], site["block"]
    params = {a.arg for a in fn.args.args}
    stmts = [block, *site["after"], *([site["force"]] if site["force"] else [])]
    stored = {n.id for s in stmts for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    read = {n.id for s in stmts for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    assigns = sorted((s for s in ast.walk(fn) if isinstance(s, ast.Assign) and s.lineno < block.lineno), key=lambda s: s.lineno)
    local_defs = {t.id: s for s in assigns for t in s.targets if isinstance(t, ast.Name)}  # the last one before the block
    out = []
    for name in sorted(read - stored - params):
        if name in local_defs:
            out.append(local_defs[name])
    return sorted(out, key=lambda s: s.lineno)


class _Log:
    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: None


@functools.cache
def _target(arch: str) -> str:
    """A target directory whose config.json names ``arch`` (the oldest choosers open it themselves)."""
    d = tempfile.mkdtemp(prefix="sgtree-")
    Path(d, "config.json").write_text(json.dumps({"architectures": [arch]}))
    return d


def _stubs() -> dict[str, Any]:
    def get_config(path: str, *a: Any, **k: Any) -> SimpleNamespace:
        return SimpleNamespace(**json.loads(Path(path, "config.json").read_text()))

    def declare_resolution(args: Any, _who: str, **fields: Any) -> None:
        for k, v in fields.items():
            setattr(args, k, v)

    return {
        "get_config": get_config,
        "model_config_of": lambda args: args.get_model_config(),
        "resolving_view": lambda args: args,
        "resolved_view": lambda args: args,
        "declare_resolution": declare_resolution,
        "logger": _Log(),
        "os": os,
        "json": json,
    }


STUBBED = ("get_config", "model_config_of", "resolving_view", "resolved_view", "declare_resolution", "logger")


class ServerArgs(SimpleNamespace):
    """ServerArgs as the release's code reads it: its literal field defaults, the launch, the target's config. An
    attribute that is no field of the release's ServerArgs raises as the release's own object would."""

    def get_hf_config(self) -> Any:
        return get_config_of(self)

    def get_model_config(self) -> Any:
        return SimpleNamespace(hf_config=get_config_of(self))


def get_config_of(args: Any) -> SimpleNamespace:
    return SimpleNamespace(**json.loads(Path(args.model_path, "config.json").read_text()))


def _free(nodes: list[ast.AST]) -> set[str]:
    loads = {n.id for s in nodes for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    bound = {n.id for s in nodes for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    bound |= {a.arg for s in nodes for n in ast.walk(s) if isinstance(n, ast.arguments) for a in n.args + n.kwonlyargs}
    bound |= {s.name for s in nodes if isinstance(s, ast.FunctionDef)}
    bound |= {
        (a.asname or a.name).split(".")[0]
        for s in nodes
        for n in ast.walk(s)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
    }
    return {n for n in loads - bound if not hasattr(builtins, n)}


class Release:
    """One release's tree-shape code, compiled once and run on every launch of the grid."""

    def __init__(self, root: Path, version: str):
        self.version = version
        mods = _modules(root)
        if not mods:
            raise TreeCodeMoved(f"sglang {version}: no server_args.py")
        self.fields, self.field_src, self.field_names = _field_defaults(mods)
        self.raised: dict[str, str] = {}  # an error the release raises -> file:line
        funcs = _module_functions(mods)
        chooser = next((funcs[n] for n in CHOOSERS if n in funcs), None)
        self.site = _call_site(mods)
        if (chooser is None) != (self.site is None):
            raise TreeCodeMoved(f"sglang {version}: a chooser without its call, or a call without the chooser")
        self.sources: dict[str, Any] = {"fields": [self.field_src[f] for f in FIELDS]}
        self.listed: list[str] = []
        self.helpers: set[str] = set()  # module-level functions of the release the executed code calls
        self.stmts: dict[str, list[ast.stmt]] = {}  # every statement executed, per file: where an error is cited
        self.g: dict[str, Any] = {"__builtins__": builtins, **_stubs()}
        if chooser is None:
            return
        crel, cfn = chooser
        self._check_chooser(crel, cfn)
        self._define(crel, cfn, funcs)
        site = self.site
        assert site is not None
        prelude = _prelude(site)
        body = [*prelude, site["block"], *site["after"], *([site["force"]] if site["force"] else [])]
        wrapper = ast.FunctionDef(
            name="_resolve",
            args=ast.arguments([], [ast.arg(a.arg) for a in site["fn"].args.args], None, [], [], None, []),
            body=_no_imports(body),
            decorator_list=[],
            returns=None,
            type_params=[],
        )
        ast.copy_location(wrapper, site["fn"])
        self._bind(_free([wrapper]) - {site["fn"].args.args[0].arg}, funcs, site["rel"])
        self._exec(wrapper, site["rel"])
        rel = site["rel"]
        self.sources |= {
            "chooser": f"{crel}:{cfn.lineno}-{cfn.end_lineno} {cfn.name}",
            "call": f"{rel}:{site['block'].lineno} {site['fn'].name}",
            "reads": [f"{rel}:{s.lineno}" for s in prelude],  # the locals it reads: the architecture, the view
            "helpers": sorted(self.helpers),
            "force": f"{rel}:{site['force'].lineno}" if site["force"] else None,
            "after": [f"{rel}:{s.lineno}" for s in site["after"]],
        }

    def _check_chooser(self, rel: str, fn: ast.FunctionDef) -> None:
        """The chooser decides by the architecture's membership in lists of names: then a name it does not list gets
        what ``OTHER`` gets. Its other tests (the algorithm, where the config file is) do not read the architecture."""
        archs = {a.arg for a in fn.args.args if "arch" in a.arg} | {
            t.id
            for s in ast.walk(fn)
            if isinstance(s, ast.Assign) and "architectures" in ast.unparse(s.value)
            for t in s.targets
            if isinstance(t, ast.Name)
        }
        for n in ast.walk(fn):
            if not isinstance(n, ast.If) or not {x.id for x in ast.walk(n.test) if isinstance(x, ast.Name)} & archs:
                continue
            t = n.test
            names = t.comparators[0] if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.In) else None
            if not (
                isinstance(t, ast.Compare)
                and isinstance(t.left, ast.Name)
                and t.left.id in archs
                and isinstance(names, (ast.List, ast.Tuple))
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in names.elts)
            ):
                raise TreeCodeMoved(f"{rel}:{n.lineno}: the chooser tests {ast.unparse(t)!r}")
            self.listed += [e.value for e in names.elts]  # type: ignore[union-attr]
        if not self.listed:
            raise TreeCodeMoved(f"{rel}:{fn.lineno}: the chooser reads no architecture list")

    def _define(self, rel: str, fn: ast.FunctionDef, funcs: dict[str, tuple[str, ast.FunctionDef]]) -> None:
        node = _bare(fn)
        node.body = _no_imports(node.body)
        self._bind(_free([node]), funcs, rel)
        self._exec(node, rel)
        self.g[fn.name] = self.g[node.name]
        if fn.name not in CHOOSERS:
            self.helpers.add(f"{rel}:{fn.lineno} {fn.name}")

    def _exec(self, node: ast.FunctionDef, rel: str) -> None:
        self.stmts.setdefault(rel, []).extend(n for n in ast.walk(node) if isinstance(n, ast.stmt))
        exec(compile(ast.fix_missing_locations(ast.Module([node], [])), rel, "exec"), self.g)

    def _statement(self, rel: str, line: int) -> int:
        """The first line of the innermost executed statement holding ``line`` (an assert spread over lines is cited
        where it starts)."""
        holding = [n for n in self.stmts.get(rel, []) if n.lineno <= line <= (n.end_lineno or n.lineno)]
        return max((n.lineno for n in holding), default=line)

    def _bind(self, names: set[str], funcs: dict[str, tuple[str, ast.FunctionDef]], where: str) -> None:
        for name in sorted(names - set(self.g)):
            if name in CHOOSERS and name in funcs or name in funcs and name not in STUBBED:
                self._define(funcs[name][0], funcs[name][1], funcs)
            else:
                raise TreeCodeMoved(f"sglang {self.version} {where}: {name} is neither stubbed nor defined in the files read")

    def run(self, arch: str, given: tuple) -> str:
        """The three fields after the release's code, for a launch setting ``given`` (None: not set), or the error it
        raises ("!Type: message"; where, in ``raised``)."""
        args = ServerArgs(**self.fields)
        args.model_path, args.speculative_algorithm = _target(arch), ALGORITHM
        for f, v in zip(FIELDS, given):
            if v is not None:
                setattr(args, f, v)
        if self.site is None:
            return _shape(tuple(getattr(args, f) for f in FIELDS))
        try:
            self.g["_resolve"](*([args] * len(self.site["fn"].args.args)))
        except (AssertionError, ValueError, TypeError, AttributeError, NameError, KeyError) as e:
            missing = getattr(e, "name", None) if isinstance(e, AttributeError) and getattr(e, "obj", None) is args else None
            if (
                isinstance(e, (NameError, KeyError))
                or isinstance(e, AttributeError)
                and (missing is None or missing in self.field_names)
            ):
                raise TreeCodeMoved(f"sglang {self.version}: {type(e).__name__}: {e} (a stub lacks it)") from None
            at = [f for f in traceback.extract_tb(e.__traceback__) if f.filename.startswith("sglang/")]
            text = f"!{type(e).__name__}" + (f": {str(e).strip()[:160]}" if str(e).strip() else "")
            self.raised.setdefault(text, f"{at[-1].filename}:{self._statement(at[-1].filename, at[-1].lineno)}" if at else "?")
            return text
        return _shape(tuple(getattr(args, f) for f in FIELDS))


# --------------------------------------------------------------------------- the table


def outcomes(rel: Release) -> dict[str, dict[str, str]]:
    """case -> {"*": result} where every architecture gets the same, else {OTHER: ..., arch: ... where it differs}."""
    archs = sorted({*ARCHS, *rel.listed}) + [OTHER]
    out: dict[str, dict[str, str]] = {}
    for given in GIVEN:
        got = {a: rel.run(a, given) for a in archs}
        other = got[OTHER]
        differ = {a: r for a, r in got.items() if r != other}
        out[case_key(given)] = {"*": other} if not differ else {OTHER: other, **dict(sorted(differ.items()))}
    return out


def rules(rel: Release, cases: dict[str, dict[str, str]]) -> dict[str, Any]:
    """What the doctor applies: the fields' defaults, the chooser's picks, the assert, the topk-1 adjustment."""
    auto = cases[case_key((None, None, None))]
    picks = {a: auto.get(a) or auto.get("*") or auto[OTHER] for a in ARCHS}  # the doctor's architectures, each named
    return {
        "defaults": [rel.fields[f] for f in FIELDS],
        "chooser": rel.site is not None,
        # the chooser's pick (after the topk-1 adjustment) for each of ARCHS, each name it lists where that differs from
        # "other" (any name it does not list)
        "auto": None
        if rel.site is None
        else {**picks, **{a: r for a, r in auto.items() if a not in ("*", OTHER)}, "other": auto.get("*") or auto[OTHER]},
        # steps unset beside a set topk or draft-token count: what the release raises (its assert), None where it runs
        "unset_error": next((r for r in cases[case_key((None, 1, None))].values() if r.startswith("!")), None)
        if rel.site is not None
        else None,
        "topk1_forces": rel.site is not None and rel.site["force"] is not None,
    }


def _check(rule: dict[str, Any], cases: dict[str, dict[str, str]], version: str) -> None:
    """The rules reproduce every executed case: the doctor applies nothing the release did not do."""
    sys.path.insert(0, str(HERE.parent))
    from eagle3_doctor.engines.sglang_tree import TreeRules, resolve_shape

    tr = TreeRules.of(rule, version, {})
    for key, per in cases.items():
        given = tuple(None if x == "-" else int(x) for x in key.split("|"))
        for arch, want in per.items():
            got = resolve_shape(tr, given, OTHER if arch == "*" else arch)
            if (got.error if got.error is not None else _shape(got.values)) != want:
                raise TreeCodeMoved(f"sglang {version} {key} {arch}: the release gives {want}, the rules {got}")


def build_table(src_dir: Any, releases: dict[str, list[str]]) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    release_rows: dict[str, dict[str, Any]] = {}
    for v in releases["sglang"]:
        rel = Release(src_dir("sglang", v), v)
        cases = outcomes(rel)
        rule = rules(rel, cases)
        _check(rule, cases, v)
        same = next((i for i, r in enumerate(rows) if r["cases"] == cases), None)
        if same is None:
            rows.append({"releases": [], **rule, "cases": cases})
            same = len(rows) - 1
        rows[same]["releases"].append(v)
        release_rows[v] = {"row": same, "sources": {**rel.sources, "raised": rel.raised}}
    return {
        "about": "SGLang's (steps, topk, draft tokens) for what a launch leaves unset, executed from each release's own "
        "code (conformance/spec_defaults_exec.py). Results 'steps,topk,draft tokens' ('-' unset) or "
        "'!<error> @ <file:line>'.",
        "algorithm": ALGORITHM,
        "other": OTHER,
        "cases": [case_key(g) for g in GIVEN],
        "rows": rows,
        "release_rows": release_rows,
    }


def main() -> int:
    import fetch
    from releases import RELEASES

    t0 = time.time()
    table = build_table(fetch.src_dir, RELEASES)
    (HERE.parent / PACKAGE_TABLE).write_text(json.dumps(table, indent=1) + "\n")
    print(f"conformance: SGLang tree-default table, {len(table['rows'])} rows in {time.time() - t0:.1f} s -> {PACKAGE_TABLE}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main())
