"""SGLang's speculative tree shape (steps, topk, draft tokens) for what a launch leaves unset, executed per release
and per algorithm.

EAGLE family (EAGLE3, EAGLE, and NEXTN through the release's own alias; STANDALONE where the release has it): with
``--speculative-num-steps`` unset, SGLang picks all three from the target's architecture: the chooser is
``auto_choose_speculative_params`` (server_args.py, from 0.4.4.post4) or ``_auto_choose_speculative_params``
(arg_groups/speculative_hook.py, from 0.5.14); from 0.4.5.post3 topk 1 forces the draft tokens to steps + 1. Before the
chooser the three are plain ServerArgs field defaults. For every release the statements that decide them are lifted
with ``ast`` from the function that calls the chooser (``__post_init__``, ``_handle_speculative_decoding``,
``_handle_eagle_family``) and executed, in the release's order, on a stub ServerArgs holding the release's own literal
field defaults:
- the assignments of the names those statements read before they are bound (``model_arch = get_model_arch(self)``,
  ``model_arch = model_config_of(server_args).hf_config.architectures[0]``, ``cfg = resolving_view(server_args)``);
- the ``if ... speculative_num_steps is None`` block: its assert and the chooser's call;
- every statement after it, in the same block, that writes one of the three (``page_size > 1`` turns topk to 1
  up to 0.4.8.post1: not taken at the default page size 1);
- the ``topk == 1`` adjustment (``speculative_num_draft_tokens = speculative_num_steps + 1``);
- after it, the leading comparison of every check that opens by ordering one of the three
  (``speculative_eagle_topk > 1 and page_size > 1 ...``, from 0.5.2): on a topk left None it raises ``TypeError``
  before the check reads anything else. The rest of such a check (page size, attention backend) is not executed.
DFLASH (from 0.5.11): the release's own DFLASH handler (the ``speculative_algorithm == "DFLASH"`` block of
``_handle_speculative_decoding``, from 0.5.13 ``_handle_dflash``), its statements that write one of the three,
executed in order on the same stub with the draft the launch names; ``parse_dflash_draft_config`` (which reads the
draft's block size) is lifted from the release's ``speculative/dflash_utils.py`` and run on the draft's config.json.
Which handler runs for an algorithm is the release's own dispatch, executed: the ``if`` tests on the way to the
handler (``self.speculative_algorithm in ("EAGLE", "EAGLE3", "STANDALONE")``; from 0.5.13 the chain that calls
``_handle_eagle_family``/``_handle_dflash``, whose ``self.is_eagle()``-style tests are the release's own
``SpeculativeAlgorithm`` methods, lifted from ``speculative/spec_info.py``). Whether the release accepts the name at
all is its parser's ``add_argument("--speculative-algorithm", choices=...)``, executed on a fresh ``argparse`` parser
(up to 0.5.11); without choices (from 0.5.12) a member of ``SpeculativeAlgorithm``. NGRAM and the other draft-free or
newer algorithms are not executed: the doctor fills nothing for them.

The chooser and every module-level helper of the release they call (``get_model_arch``) are lifted and executed too.
Stubbed, as the engine's infrastructure: ``get_config`` (reads the stub target's or draft's config.json),
``get_hf_config``/``get_model_config``/``model_config_of`` (its ``hf_config``), ``resolving_view``/``resolved_view``
(the args themselves) and ``declare_resolution`` (sets the fields it names). A name outside these stops the run
("the tree-shape code moved"); so does an exception the executed code catches and logs (a stub that failed).

Grid: EAGLE3, EAGLE and STANDALONE x every architecture the chooser names in any release plus those the doctor serves
(``ARCHS``) plus ``OTHER``, a name no release lists x 12 launches (each of steps in {unset, 4}, topk in {unset, 1, 4},
draft tokens in {unset, 16}); DFLASH x the 12 launches x ``--speculative-dflash-block-size`` {unset, 8} x three drafts
(no block size, ``block_size`` 4, and ``dflash_config.block_size`` 6 beside ``block_size`` 4). Releases whose outcomes
agree share a row; each release keeps its own file:line. The chooser must decide by membership of the architecture in
lists of names (a checked pattern), so ``OTHER``'s result is every unlisted architecture's. The rules the doctor
applies (``eagle3_doctor/engines/sglang_tree.py``) are written beside the outcomes, and ``build_table`` checks that
they reproduce every executed case.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import copy
import functools
import json
import os
import re
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
DFLASH = "DFLASH"
ALGORITHMS = (ALGORITHM, "EAGLE", "STANDALONE", DFLASH)  # executed; NEXTN through the release's own alias
ALIAS = "NEXTN"
GIVEN = [(s, t, n) for s in (None, 4) for t in (None, 1, 4) for n in (None, 16)]
# the drafts a DFLASH launch names: no block size (SGLang falls back), a top-level block_size, and a dflash_config one
# beside it (which of the two the release reads first)
_DRAFT = {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "num_hidden_layers": 1, "num_target_layers": 8}
DFLASH_DRAFTS = {
    "none": {**_DRAFT, "dflash_config": {"target_layer_ids": [1, 3, 5], "mask_token_id": 1}},
    "top": {**_DRAFT, "block_size": 4, "dflash_config": {"target_layer_ids": [1, 3, 5], "mask_token_id": 1}},
    "nested": {**_DRAFT, "block_size": 4, "dflash_config": {"target_layer_ids": [1, 3, 5], "mask_token_id": 1, "block_size": 6}},
}
DFLASH_FLAG = (None, 8)  # --speculative-dflash-block-size
DFLASH_GIVEN = [(*g, b, d) for g in GIVEN for b in DFLASH_FLAG for d in DFLASH_DRAFTS]
_ORDERING = (ast.Gt, ast.Lt, ast.GtE, ast.LtE)
FORCE_TEST = "{o}.speculative_eagle_topk == 1 and {o}.speculative_num_draft_tokens != {o}.speculative_num_steps + 1"


class TreeCodeMoved(Exception):
    """The code that fills SGLang's tree shape no longer has a shape this harness runs."""


def case_key(given: tuple) -> str:
    return "|".join("-" if x is None else str(x) for x in given)


def dflash_key(given: tuple) -> str:
    """A DFLASH launch: steps|topk|draft tokens|--speculative-dflash-block-size, then @ the draft it names."""
    return f"{case_key(given[:4])}@{given[4]}"


def _shape(values: tuple) -> str:
    return ",".join("-" if x is None else str(x) for x in values)


# --------------------------------------------------------------------------- the release's code, located


def _modules(root: Path) -> dict[str, ast.Module]:
    """server_args.py, the arg_groups/ files that name a speculative field (the hooks) and every field file (from
    0.5.20 ServerArgs' fields, which the handlers read: DFLASH's ``json_model_override_args``), parsed."""
    files = [root / "sglang/srt/server_args.py", *sorted((root / "sglang/srt/arg_groups").rglob("*.py"))]
    texts = {p.relative_to(root).as_posix(): p.read_text() for p in files if p.exists()}
    return {rel: ast.parse(text) for rel, text in texts.items() if "speculative_" in text or "/arg_groups/fields/" in rel}


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


def _checks(site: dict[str, Any]) -> list[ast.stmt]:
    """After the topk-1 adjustment (or the block and its writers, where there is none), the checks that open by ordering one of the
    three (``speculative_eagle_topk > 1 and page_size > 1 ...``): their leading comparison, as a statement at its own
    line, the only part of them executed (on a field left None it raises before the check reads anything else)."""
    body = _parent_body(site["fn"], site["block"])
    done = [site["block"], *site["after"], *([site["force"]] if site["force"] is not None else [])]
    start = max(i for i, s in enumerate(body) if any(s is d for d in done))
    out: list[ast.stmt] = []
    for s in body[start + 1 :]:
        if _writes(s):
            raise TreeCodeMoved(f"{site['rel']}:{s.lineno}: writes a tree field after the topk-1 adjustment")
        if not isinstance(s, ast.If):
            continue
        lead = s.test.values[0] if isinstance(s.test, ast.BoolOp) and isinstance(s.test.op, ast.And) else s.test
        if (
            isinstance(lead, ast.Compare)
            and isinstance(lead.ops[0], _ORDERING)
            and isinstance(lead.left, ast.Attribute)
            and lead.left.attr in FIELDS
        ):
            out.append(ast.copy_location(ast.Expr(copy.deepcopy(lead)), lead))
    return out


def _if_path(root: ast.AST, node: ast.AST) -> list[tuple[ast.If, bool]] | None:
    """The ``if`` statements from ``root`` down to ``node``, each with whether ``node`` is in its body (True) or in
    its ``else``/``elif`` (False); None where ``root`` does not hold ``node``."""

    def walk(n: ast.AST, acc: list[tuple[ast.If, bool]]) -> list[tuple[ast.If, bool]] | None:
        if n is node:
            return acc
        for name in ("body", "orelse", "handlers", "finalbody"):
            for c in getattr(n, name, None) or []:
                step = acc + [(n, name == "body")] if isinstance(n, ast.If) and name in ("body", "orelse") else acc
                got = walk(c, step)
                if got is not None:
                    return got
        return None

    return walk(root, [])


def _dflash_handler(mods: dict[str, ast.Module]) -> dict[str, Any] | None:
    """DFLASH's own handler: the ``speculative_algorithm == "DFLASH"`` block that writes the tree fields
    (server_args.py, 0.5.11-0.5.12.x), or the function ``_handle_dflash`` (arg_groups, from 0.5.13)."""
    found = []
    for rel, tree in mods.items():
        for fn in _functions(tree):
            if fn.name == "_handle_dflash" and fn in tree.body:
                found.append({"rel": rel, "fn": fn, "node": fn, "body": fn.body})
            for n in ast.walk(fn):
                if (
                    isinstance(n, ast.If)
                    and re.fullmatch(r"\w+\.speculative_algorithm == 'DFLASH'", ast.unparse(n.test))
                    and _writes(n)
                ):
                    found.append({"rel": rel, "fn": fn, "node": n, "body": n.body})
    if len(found) > 1:
        raise TreeCodeMoved("DFLASH handled at " + ", ".join(f"{h['rel']}:{h['node'].lineno}" for h in found))
    if not found:
        return None
    h = found[0]
    h["writes"] = [s for s in h["body"] if _writes(s)]
    if not h["writes"]:
        raise TreeCodeMoved(f"{h['rel']}:{h['node'].lineno}: the DFLASH handler writes no tree field")
    return h


def _alias_site(mods: dict[str, ast.Module]) -> dict[str, Any]:
    """Where the release turns NEXTN into another name: ``if self.speculative_algorithm == "NEXTN": ... = "EAGLE"``
    (server_args.py), or the function ``_resolve_speculative_algorithm_alias`` (from 0.5.12)."""
    found = []
    for rel, tree in mods.items():
        for fn in _functions(tree):
            if fn.name == "_resolve_speculative_algorithm_alias" and fn in tree.body:
                found.append({"rel": rel, "fn": fn, "node": fn})
                continue
            for n in ast.walk(fn):
                if (
                    isinstance(n, ast.If)
                    and re.fullmatch(r"\w+\.speculative_algorithm == 'NEXTN'", ast.unparse(n.test))
                    and any(isinstance(x, ast.Attribute) and x.attr == "speculative_algorithm" and isinstance(x.ctx, ast.Store)
                            for x in ast.walk(n))
                ):  # fmt: skip
                    found.append({"rel": rel, "fn": fn, "node": n})
    if len(found) != 1:
        raise TreeCodeMoved(
            f"NEXTN is aliased at {len(found)} places: " + ", ".join(f"{f['rel']}:{f['node'].lineno}" for f in found)
        )
    return found[0]


def _parser_call(mods: dict[str, ast.Module]) -> tuple[str, ast.Call] | None:
    """The release's ``add_argument("--speculative-algorithm", ...)`` (None where the flag is a generated field)."""
    calls = [
        (rel, n)
        for rel, tree in mods.items()
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "add_argument"
        and n.args
        and isinstance(n.args[0], ast.Constant)
        and n.args[0].value == "--speculative-algorithm"
    ]
    if len(calls) > 1:
        raise TreeCodeMoved("--speculative-algorithm is added " + ", ".join(f"{r}:{c.lineno}" for r, c in calls))
    return calls[0] if calls else None


class _Member:
    """A member of the release's ``SpeculativeAlgorithm`` by name; its ``is_*`` methods are the release's own."""

    def __init__(self, name: str):
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Member) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


def _algorithm_type(root: Path) -> tuple[str, set[str], type] | None:
    """speculative/spec_info.py's ``SpeculativeAlgorithm``: its members' names and a class carrying its undecorated
    ``is_*`` methods, compiled from the release (the dispatch of 0.5.14+ tests ``self.is_dflash()``, ...)."""
    rel = "sglang/srt/speculative/spec_info.py"
    if not (root / rel).exists():
        return None
    tree = ast.parse((root / rel).read_text())
    cls = next((c for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "SpeculativeAlgorithm"), None)
    if cls is None:
        return None
    members = {
        t.id for st in cls.body if isinstance(st, ast.Assign) for t in st.targets if isinstance(t, ast.Name) and t.id.isupper()
    }
    member = type("SpeculativeAlgorithmMember", (_Member,), {})
    g: dict[str, Any] = {"__builtins__": builtins, "SpeculativeAlgorithm": SimpleNamespace(**{m: member(m) for m in members})}
    for fn in cls.body:
        if isinstance(fn, ast.FunctionDef) and fn.name.startswith("is_") and not fn.decorator_list:
            exec(compile(ast.fix_missing_locations(ast.Module([_bare(fn)], [])), rel, "exec"), g)
            setattr(member, fn.name, g[fn.name])
    return rel, members, member


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
    return _prelude_of(site["fn"], [site["block"], *site["after"], *([site["force"]] if site["force"] else [])])


def _prelude_of(fn: ast.FunctionDef, stmts: list[ast.stmt]) -> list[ast.stmt]:
    """The assignments of the locals ``stmts`` read before binding them (the architecture, a view), the last one
    before the first of them."""
    params = {a.arg for a in fn.args.args}
    stored = {n.id for s in stmts for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    read = {n.id for s in stmts for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    first = min(s.lineno for s in stmts)
    assigns = sorted((s for s in ast.walk(fn) if isinstance(s, ast.Assign) and s.lineno < first), key=lambda s: s.lineno)
    local_defs = {t.id: s for s in assigns for t in s.targets if isinstance(t, ast.Name)}
    return sorted((local_defs[n] for n in read - stored - params if n in local_defs), key=lambda s: s.lineno)


class _Log:
    """The release's logger: silent, except that an exception the executed code caught and logs means a stub failed
    (DFLASH's handler turns any error reading the draft config into a warning and a fallback)."""

    def __getattr__(self, name: str) -> Any:
        def log(*a: Any, **k: Any) -> None:
            if any(isinstance(x, BaseException) for x in (*a, *k.values())):
                raise TreeCodeMoved(f"the executed code logged an exception it caught: {a!r}")

        return log


@functools.cache
def _target(arch: str) -> str:
    """A target directory whose config.json names ``arch`` (the oldest choosers open it themselves)."""
    d = tempfile.mkdtemp(prefix="sgtree-")
    Path(d, "config.json").write_text(json.dumps({"architectures": [arch]}))
    return d


@functools.cache
def _draft(name: str) -> str:
    """A DFlash draft directory holding ``DFLASH_DRAFTS[name]`` as its config.json."""
    d = tempfile.mkdtemp(prefix="sgtree-draft-")
    Path(d, "config.json").write_text(json.dumps(DFLASH_DRAFTS[name]))
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
    bound |= {n.name for s in nodes for n in ast.walk(s) if isinstance(n, ast.ExceptHandler) and n.name}
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
        self.mods = mods
        self.algo_type = _algorithm_type(root)
        if self.algo_type is not None:  # the dispatch of 0.5.14+ lives there
            self.mods = {**mods, self.algo_type[0]: ast.parse((root / self.algo_type[0]).read_text())}
        self._parser(mods)
        self._alias(mods, funcs)
        if chooser is not None:
            self._eagle(chooser, funcs)
        self.dflash = _dflash_handler(mods) if self.accepts(DFLASH) is None else None
        if self.accepts(DFLASH) is None:
            if self.dflash is None:
                raise TreeCodeMoved(f"sglang {version} accepts DFLASH but no DFLASH handler was found")
            self._dflash(root, funcs)
        # which handler each accepted algorithm reaches, by the release's own tests
        self.routes: dict[str, str | None] = {}  # the handler each accepted algorithm reaches ("eagle", "dflash")
        for algo in ALGORITHMS:
            if self.accepts(algo) is not None:
                continue
            hit = {}
            for name, where in (("eagle", self.site), ("dflash", self.dflash)):
                if where is not None:
                    # the EAGLE block's own test is no dispatch (steps unset); the DFLASH block's is: start inside it
                    node = where["block"] if name == "eagle" else where["body"][0]
                    ok, cites = self._runs(where["rel"], where["fn"], node, algo)
                    if ok:
                        hit[name] = cites
            if len(hit) > 1:
                raise TreeCodeMoved(f"sglang {version}: {algo} reaches both the EAGLE call site and the DFLASH handler")
            if not hit and self.site is not None:
                raise TreeCodeMoved(f"sglang {version}: {algo} reaches no handler that writes the tree")
            self.routes[algo] = next(iter(hit), None)
            for name, cites in hit.items():  # the same tests on the way, whichever algorithm reaches the handler
                self.sources.setdefault("route", {})[name] = cites

    # ----------------------------------------------------------------------- which names the release takes

    def _parser(self, mods: dict[str, ast.Module]) -> None:
        """The parser's choices for ``--speculative-algorithm``, executed: ``add_argument`` lifted and called on a fresh
        argparse parser (its ``default=ServerArgs.speculative_algorithm`` read from the literal field defaults)."""
        found = _parser_call(mods)
        self.parser: argparse.ArgumentParser | None = None
        if found is None or not any(k.arg == "choices" for k in found[1].keywords):
            if self.algo_type is None:
                raise TreeCodeMoved(f"sglang {self.version}: neither parser choices nor SpeculativeAlgorithm")
            self.sources["parser"] = f"{self.algo_type[0]} SpeculativeAlgorithm"
            return
        rel, call = found
        free = _free([ast.Expr(call)]) - {"parser"}
        if free - {"ServerArgs"}:
            raise TreeCodeMoved(f"{rel}:{call.lineno}: --speculative-algorithm's add_argument reads {sorted(free)}")
        self.parser = argparse.ArgumentParser(prog="launch_server", exit_on_error=False, add_help=False)
        g = {"__builtins__": builtins, "parser": self.parser, "ServerArgs": SimpleNamespace(**self.fields)}
        exec(compile(ast.fix_missing_locations(ast.Module([ast.Expr(copy.deepcopy(call))], [])), rel, "exec"), g)
        self.sources["parser"] = f"{rel}:{call.lineno}"

    def accepts(self, algorithm: str) -> str | None:
        """None where the release takes ``--speculative-algorithm ALGORITHM``; else what it says refusing it."""
        if self.parser is not None:
            try:
                self.parser.parse_args(["--speculative-algorithm", algorithm])
            except argparse.ArgumentError as e:
                return f"!argparse: {e}"
            return None
        assert self.algo_type is not None
        if algorithm not in self.algo_type[1]:
            raise TreeCodeMoved(
                f"sglang {self.version}: {algorithm} is no SpeculativeAlgorithm member (its registry is not modelled)"
            )
        return None

    def _alias(self, mods: dict[str, ast.Module], funcs: dict[str, tuple[str, ast.FunctionDef]]) -> None:
        """What NEXTN becomes, executed: the release's alias statement on a stub holding NEXTN, or its
        ``_resolve_speculative_algorithm_alias("NEXTN", None)`` (no draft path: the Gemma-4 assistant check not taken)."""
        site = _alias_site(mods)
        rel, fn, node = site["rel"], site["fn"], site["node"]
        if node is fn:
            self._define(rel, fn, funcs)
            self.alias = self.g[fn.name](ALIAS, None)
            self.sources["alias"] = f"{rel}:{fn.lineno} {fn.name}"
            return
        wrapper = self._wrapper("_alias", fn, [node])
        self._exec(wrapper, rel)
        args = ServerArgs(**self.fields)
        args.speculative_algorithm = ALIAS
        self.g["_alias"](*([args] * len(fn.args.args)))
        self.alias = args.speculative_algorithm
        self.sources["alias"] = f"{rel}:{node.lineno}"

    def _runs(self, rel: str, fn: ast.FunctionDef, node: ast.AST, algorithm: str) -> tuple[bool, list[str]]:
        """Whether the release reaches ``node`` (in ``fn``) for ``algorithm``: every ``if`` on the way, evaluated; for
        a module-level handler, the ``if`` tests on the way to its one call too. With the file:line of each test."""
        steps = [(rel, fn, _if_path(fn, node))]
        if any(fn is n for n in self.mods[rel].body) and fn.name not in CHOOSERS:
            calls = [  # the simple statement holding each call
                (r, f, st)
                for r, tree in self.mods.items()
                for f in _functions(tree)
                for st in ast.walk(f)
                if isinstance(st, ast.stmt) and not hasattr(st, "body")
                for c in ast.walk(st)
                if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == fn.name
            ]
            if len(calls) != 1:
                raise TreeCodeMoved(f"sglang {self.version}: {fn.name} is called from {len(calls)} places")
            r, f, st = calls[0]
            steps.append((r, f, _if_path(f, st)))
        cites = []
        for r, f, path in steps:
            if path is None:
                raise TreeCodeMoved(f"sglang {self.version}: {r} {f.name}: the way to the handler was not found")
            for test_if, in_body in path:
                cites.append(f"{r}:{test_if.lineno}")
                if self._test(r, f, test_if.test, algorithm) != in_body:
                    return False, cites
        return True, cites

    def _test(self, rel: str, fn: ast.FunctionDef, test: ast.expr, algorithm: str) -> bool:
        """One dispatch test on the release's objects: ``self``/``server_args``/``cfg`` the args (``self`` the algorithm
        where the test is a method of ``SpeculativeAlgorithm``), its ``is_*`` methods the release's own."""
        args = ServerArgs(**self.fields)
        args.speculative_algorithm = algorithm
        params = [a.arg for a in fn.args.args]
        ns: dict[str, Any] = {"__builtins__": builtins}
        in_enum = self.algo_type is not None and rel == self.algo_type[0]
        for name in _free([ast.Expr(test)]):
            if name == "SpeculativeAlgorithm" and self.algo_type is not None:
                ns[name] = SimpleNamespace(**{m: self.algo_type[2](m) for m in self.algo_type[1]})
            elif in_enum and params and name == params[0]:
                ns[name] = self.algo_type[2](algorithm)  # type: ignore[index]
            elif name in params or name == "cfg":
                ns[name] = args
            else:
                raise TreeCodeMoved(f"{rel}:{test.lineno}: the dispatch tests {ast.unparse(test)!r}")
        return bool(eval(compile(ast.fix_missing_locations(ast.Expression(copy.deepcopy(test))), rel, "eval"), ns))

    # ----------------------------------------------------------------------- the handlers, compiled

    def _wrapper(self, name: str, fn: ast.FunctionDef, body: list[ast.stmt]) -> ast.FunctionDef:
        wrapper = ast.FunctionDef(
            name=name,
            args=ast.arguments([], [ast.arg(a.arg) for a in fn.args.args], None, [], [], None, []),
            body=_no_imports(body),
            decorator_list=[],
            returns=None,
            type_params=[],
        )
        return ast.copy_location(wrapper, fn)

    def _eagle(self, chooser: tuple[str, ast.FunctionDef], funcs: dict[str, tuple[str, ast.FunctionDef]]) -> None:
        crel, cfn = chooser
        self._check_chooser(crel, cfn)
        self._define(crel, cfn, funcs)
        site = self.site
        assert site is not None
        checks = _checks(site)
        prelude = _prelude_of(site["fn"], [site["block"], *site["after"], *([site["force"]] if site["force"] else []), *checks])
        body = [*prelude, site["block"], *site["after"], *([site["force"]] if site["force"] else []), *checks]
        wrapper = self._wrapper("_resolve", site["fn"], body)
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
            "checks": [f"{rel}:{s.lineno}" for s in checks],  # the leading comparison of each, executed
        }

    def _dflash(self, root: Path, funcs: dict[str, tuple[str, ast.FunctionDef]]) -> None:
        """DFLASH's handler: its statements that write the tree fields, in order, with the locals they read; the
        release's own ``parse_dflash_draft_config`` bound for the draft's block size."""
        import dflash_exec

        h = self.dflash
        assert h is not None
        if any("architectures" in ast.unparse(s) or "model_arch" in ast.unparse(s) for s in h["writes"]):
            raise TreeCodeMoved(f"{h['rel']}:{h['node'].lineno}: the DFLASH handler reads the target's architecture")
        ns, lines, _ = dflash_exec.lift_module(root / dflash_exec.SG_UTILS, ["parse_dflash_draft_config"])
        self.g["parse_dflash_draft_config"] = ns["parse_dflash_draft_config"]
        prelude = _prelude_of(h["fn"], h["writes"])
        wrapper = self._wrapper("_dflash", h["fn"], [*prelude, *h["writes"]])
        self._bind(_free([wrapper]) - {h["fn"].args.args[0].arg}, funcs, h["rel"])
        self._exec(wrapper, h["rel"])
        node = h["node"]
        self.sources["dflash"] = {
            "handler": f"{h['rel']}:{node.lineno}-{node.end_lineno} "
            + (node.name if isinstance(node, ast.FunctionDef) else f"{h['fn'].name} (speculative_algorithm == 'DFLASH')"),
            "reads": [f"{h['rel']}:{s.lineno}" for s in prelude],
            "writes": [f"{h['rel']}:{s.lineno}" for s in h["writes"]],
            "parse": f"{dflash_exec.SG_UTILS}:{lines['parse_dflash_draft_config']} parse_dflash_draft_config",
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
        if fn.name not in CHOOSERS and fn.name != "_resolve_speculative_algorithm_alias":
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

    # ----------------------------------------------------------------------- one launch

    def run(self, arch: str, given: tuple, algorithm: str = ALGORITHM, dflash: tuple = (None, "top")) -> str:
        """The three fields after the release's code, for a launch of ``algorithm`` setting ``given`` (None: not set)
        on a target of architecture ``arch``, or the error it raises ("!Type: message"; where, in ``raised``).
        ``dflash``: for DFLASH, the --speculative-dflash-block-size it sets (None: unset) and the draft it names."""
        if self.accepts(algorithm) is not None:
            raise TreeCodeMoved(f"sglang {self.version} refuses {algorithm}: nothing to run")
        args = ServerArgs(**self.fields)
        args.model_path, args.speculative_algorithm = _target(arch), algorithm
        for f, v in zip(FIELDS, given):
            if v is not None:
                setattr(args, f, v)
        if algorithm == DFLASH:
            flag, draft = dflash
            args.speculative_draft_model_path = _draft(draft)
            if flag is not None:
                args.speculative_dflash_block_size = flag
        handler = self.routes[algorithm]
        if handler is None:  # no code of the release writes the three for it: the fields' defaults stand
            return _shape(tuple(getattr(args, f) for f in FIELDS))
        where = self.site if handler == "eagle" else self.dflash
        assert where is not None
        try:
            self.g["_resolve" if handler == "eagle" else "_dflash"](*([args] * len(where["fn"].args.args)))
        except (AssertionError, ValueError, TypeError, AttributeError, NameError, KeyError) as e:
            missing = getattr(e, "name", None) if isinstance(e, AttributeError) and getattr(e, "obj", None) is args else None
            if (
                isinstance(e, (NameError, KeyError))
                or isinstance(e, AttributeError)
                and (missing is None or missing in self.field_names)
            ):
                raise TreeCodeMoved(f"sglang {self.version}: {type(e).__name__}: {e} (a stub lacks it)") from None
            at = [f for f in traceback.extract_tb(e.__traceback__) if f.filename.startswith("sglang/")]
            said = _launch_free(str(e).strip(), (*given, *(dflash[:1] if algorithm == DFLASH else ())))[:160]
            text = f"!{type(e).__name__}" + (f": {said}" if said else "")
            self.raised.setdefault(text, f"{at[-1].filename}:{self._statement(at[-1].filename, at[-1].lineno)}" if at else "?")
            return text
        return _shape(tuple(getattr(args, f) for f in FIELDS))


def _launch_free(message: str, values: tuple) -> str:
    """An error's message up to its first sentence that quotes one of the launch's own numbers: what the release says
    to any launch of that shape (DFLASH's block-size mismatch ends with the two values it was given)."""
    nums = {str(v) for v in values if v is not None}
    out = []
    for sentence in re.split(r"(?<=[.!?])\s+", message):
        if any(re.search(rf"(?<![\w.]){re.escape(n)}(?![\w.])", sentence) for n in nums):
            break
        out.append(sentence)
    return " ".join(out)


# --------------------------------------------------------------------------- the table


def outcomes(rel: Release, algorithm: str = ALGORITHM) -> dict[str, dict[str, str]]:
    """case -> {"*": result} where every architecture gets the same, else {OTHER: ..., arch: ... where it differs}.
    DFLASH's handler reads no architecture (checked): its cases are keyed by ``dflash_key`` and run on ``OTHER``."""
    if algorithm == DFLASH:
        return {dflash_key(g): {"*": rel.run(OTHER, g[:3], DFLASH, g[3:])} for g in DFLASH_GIVEN}
    archs = sorted({*ARCHS, *rel.listed}) + [OTHER]
    out: dict[str, dict[str, str]] = {}
    for given in GIVEN:
        got = {a: rel.run(a, given, algorithm) for a in archs}
        other = got[OTHER]
        differ = {a: r for a, r in got.items() if r != other}
        out[case_key(given)] = {"*": other} if not differ else {OTHER: other, **dict(sorted(differ.items()))}
    return out


def rules(rel: Release, cases: dict[str, dict[str, str]]) -> dict[str, Any]:
    """What the doctor applies: the fields' defaults, the chooser's picks, the assert, the topk-1 adjustment, the
    checks that fail on a topk left unset."""
    auto = cases[case_key((None, None, None))]
    picks = {a: auto.get(a) or auto.get("*") or auto[OTHER] for a in ARCHS}  # the doctor's architectures, each named
    return {
        "handler": "eagle",
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
        # steps set and topk left unset (None): what the checks after the adjustment raise, None where it runs
        "topk_unset_error": next((r for r in cases[case_key((4, None, None))].values() if r.startswith("!")), None),
    }


def dflash_rules(cases: dict[str, dict[str, str]]) -> dict[str, Any]:
    """DFLASH's rules read off its cases: what steps and topk become unset and set (a number: forced to it), the
    draft tokens' fallback where neither the launch nor the draft sets them, what a block size differing from a set
    draft-token count raises. The order (block-size flag, the launch's count, the draft's block size, the fallback)
    is the doctor's reading, held to every case by ``_check``."""

    def shape(key: str) -> list[str]:
        return cases[key]["*"].split(",")

    unset, given = shape("-|-|-|-@top"), shape("4|4|-|-@top")
    mismatch = cases["-|-|16|8@top"]["*"]
    return {
        "handler": "dflash",
        "num_steps": {"unset": int(unset[0]), "given": "kept" if given[0] == "4" else int(given[0])},
        "topk": {"unset": int(unset[1]), "given": "kept" if given[1] == "4" else int(given[1])},
        "fallback": int(shape("-|-|-|-@none")[2]),
        "mismatch_error": mismatch if mismatch.startswith("!") else None,
    }


def _check(rule: dict[str, Any], cases: dict[str, dict[str, str]], version: str) -> None:
    """The rules reproduce every executed case: the doctor applies nothing the release did not do."""
    sys.path.insert(0, str(HERE.parent))
    from eagle3_doctor.engines.sglang_tree import DflashRules, TreeRules, dflash_block, resolve_dflash, resolve_shape

    if rule["handler"] == "dflash":
        dr = DflashRules.of(rule, version, {})
        for key, per in cases.items():
            head, draft = key.split("@")
            s, t, n, b = (None if x == "-" else int(x) for x in head.split("|"))
            got = resolve_dflash(dr, (s, t, n), b, dflash_block(DFLASH_DRAFTS[draft]))
            if (got.error if got.error is not None else _shape(got.values)) != per["*"]:
                raise TreeCodeMoved(f"sglang {version} DFLASH {key}: the release gives {per['*']}, the rules {got}")
        return
    tr = TreeRules.of(rule, version, {})
    for key, per in cases.items():
        given = tuple(None if x == "-" else int(x) for x in key.split("|"))
        for arch, want in per.items():
            got = resolve_shape(tr, given, OTHER if arch == "*" else arch)
            if (got.error if got.error is not None else _shape(got.values)) != want:
                raise TreeCodeMoved(f"sglang {version} {key} {arch}: the release gives {want}, the rules {got}")


def release_entry(rel: Release, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One release: per algorithm its row (added to ``rows`` or shared with an equal one) or what the release says
    refusing the name; NEXTN as the algorithm the release's alias makes it; every file:line."""
    algos: dict[str, Any] = {}
    for algo in ALGORITHMS:
        refused = rel.accepts(algo)
        if refused is not None:
            algos[algo] = {"refused": refused}
            continue
        cases = outcomes(rel, algo)
        rule = dflash_rules(cases) if rel.routes[algo] == "dflash" else rules(rel, cases)
        _check(rule, cases, rel.version)
        same = next((i for i, r in enumerate(rows) if r["handler"] == rule["handler"] and r["cases"] == cases), None)
        if same is None:
            rows.append({"releases": {}, **rule, "cases": cases})
            same = len(rows) - 1
        rows[same]["releases"].setdefault(algo, []).append(rel.version)
        algos[algo] = {"row": same}
    algos[ALIAS] = {"as": rel.alias}
    return {"algorithms": algos, "sources": {**rel.sources, "raised": rel.raised}}


def build_table(src_dir: Any, releases: dict[str, list[str]]) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    release_rows: dict[str, dict[str, Any]] = {}
    for v in releases["sglang"]:
        release_rows[v] = release_entry(Release(src_dir("sglang", v), v), rows)
    return {
        "about": "SGLang's (steps, topk, draft tokens) for what a launch leaves unset, per algorithm, executed from each "
        "release's own code (conformance/spec_defaults_exec.py). Results 'steps,topk,draft tokens' ('-' unset) or "
        "'!<error>' (where: the release's sources.raised).",
        "algorithms": list(ALGORITHMS),
        "alias": ALIAS,
        "other": OTHER,
        "cases": [case_key(g) for g in GIVEN],
        "dflash_cases": [dflash_key(g) for g in DFLASH_GIVEN],
        "dflash_drafts": DFLASH_DRAFTS,
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
