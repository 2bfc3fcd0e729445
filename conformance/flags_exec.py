"""Which server flags each SGLang and vLLM release's parser accepts: names and aliases, release by release.

For every release in releases.py, the files that define its flags (FLAG_FILE_PATTERNS) are fetched from its
wheel (fetch.py, under .cache/flags/) and read with the extraction that writes the package's argument table
(tools/gen_serve_flags.py: literal ``add_argument`` calls, SGLang's ``A[type, Arg(...)]`` fields, vLLM's
``FrontendArgs`` fields), plus the literal calls of vLLM's ``entrypoints/cli/serve.py`` (the ``vllm serve``
subcommand's own arguments in the releases that had them there). Each flag is written as the ranges of
releases that have it (``first..last`` over the release list, oldest first) into
eagle3_doctor/data/serve_flag_releases.json, which engines/flag_releases.py reads.

A call whose flag names are not literal (``add_argument(*names)``, an f-string) is modelled only where the
extraction reads what it registers (SGLang's ``add_cli_args_from_dataclass``, vLLM's frontend loop over its
dataclass fields); any other is listed under ``unresolved`` with file:line, so a gap is recorded, not hidden.

Usage: python conformance/flags_exec.py [OUT.json]   (fetches what the cache lacks; about a minute)
"""

from __future__ import annotations

import ast
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))

import fetch  # noqa: E402
import gen_serve_flags  # noqa: E402
from releases import FLAG_FILE_PATTERNS, RELEASES  # noqa: E402

# the table's key for the method, as the package's fixes and CMD006/CMD007 name it
from eagle3_doctor.engines.flag_releases import runs  # noqa: E402
from eagle3_doctor.engines.launch_config import VLLM_METHOD  # noqa: E402

OUT = ROOT / "eagle3_doctor" / "data" / "serve_flag_releases.json"
ENGINES = ("sglang", "vllm")
# non-literal add_argument calls whose flags the extraction reads from their source (fields of a dataclass)
MODELLED_DYNAMIC = ("sglang/srt/arg_groups/arg_utils.py", "vllm/entrypoints/openai/cli_args.py",
                    "vllm/entrypoints/launchers/cli_args.py", "vllm/entrypoints/common/cli_args.py")  # fmt: skip


class Tree:
    """A release's extracted files, read through the two calls gen_serve_flags makes of a wheel's ZipFile."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def namelist(self) -> list[str]:
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*.py"))

    def read(self, name: str) -> bytes:
        return (self.root / name).read_bytes()


def release_flags(engine: str, root: Path) -> tuple[set[str], list[str]]:
    """(every flag name and alias the release's parser registers, the non-literal calls not modelled)."""
    tree = Tree(root)
    flags, _ = (gen_serve_flags.sglang_flags if engine == "sglang" else gen_serve_flags.vllm_flags)(tree)
    names = set(flags)
    serve = "vllm/entrypoints/cli/serve.py"
    if engine == "vllm" and serve in tree.namelist():
        for _call, found, _kw in gen_serve_flags._add_argument_calls(ast.parse(tree.read(serve).decode())):
            names.update(found)
    unresolved = []
    for name in tree.namelist():
        if name in MODELLED_DYNAMIC:
            continue
        module = ast.parse(tree.read(name).decode())
        looped = _loop_flags(module)
        names.update(n for found in looped.values() for n in found)
        for call in [n for n in ast.walk(module) if isinstance(n, ast.Call) and id(n) not in looped]:
            if getattr(call.func, "attr", None) == "add_argument" and call.args:
                first = call.args[0]
                if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                    unresolved.append(f"{name}:{call.lineno}")
    return names, unresolved


STR_TYPES = ("str", "Optional[str]", "str | None", "str|None")


def _str_list(node: ast.AST | None) -> list[str] | None:
    """A literal list or tuple of strings, else None."""
    if isinstance(node, (ast.List, ast.Tuple)) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
    ):
        return [e.value for e in node.elts]  # type: ignore[attr-defined]
    return None


def release_choices(root: Path) -> dict[str, tuple[list[str], str]]:
    """{flag: (the names its parser takes, file:line)} for an SGLang release's flags whose ``choices`` are a literal list
    of strings matched against the value as typed: ``add_argument(..., choices=[...])`` with no ``type`` or ``type=str``
    and no ``nargs``, and ``A[str, Arg(choices=[...])]`` fields (flag ``--`` + the field's name, or its ``cli_name``,
    and its ``aliases``). argparse checks ``value in choices`` after the type: exactly, case and all. Choices named by a
    variable (a list other code may extend), derived from a ``Literal``, or met through another type or a
    ``type_parser`` (which may convert the value before the check) are left out."""
    out: dict[str, tuple[list[str], str]] = {}
    for name in Tree(root).namelist():
        module = ast.parse((root / name).read_bytes().decode())
        for call, names, kw in gen_serve_flags._add_argument_calls(module):
            typ = kw.get("type")
            plain = typ is None or (isinstance(typ, ast.Name) and typ.id == "str")
            found = _str_list(kw.get("choices"))
            if found is not None and plain and "nargs" not in kw and "action" not in kw:
                out.update({n: (found, f"{name}:{call.lineno}") for n in names})
        for cls in [n for n in ast.walk(module) if isinstance(n, ast.ClassDef)]:
            for st in cls.body:
                ann = st.annotation if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) else None
                if not (isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name) and ann.value.id == "A"):
                    continue
                elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
                meta = elts[1] if len(elts) > 1 else None
                if not (isinstance(meta, ast.Call) and ast.unparse(elts[0]) in STR_TYPES):
                    continue
                kws = {k.arg: k.value for k in meta.keywords}
                found = _str_list(kws.get("choices"))
                if found is None or {"action", "type_parser", "nargs", "no_cli"} & set(kws):  # a parser may convert first
                    continue
                cli = gen_serve_flags._literal(kws["cli_name"]) if "cli_name" in kws else None
                flags = [cli or "--" + st.target.id.replace("_", "-")] + list(gen_serve_flags._literal(kws.get("aliases")) or [])  # type: ignore[union-attr]
                out.update({f: (found, f"{name}:{st.lineno}") for f in flags})
    return out


VLLM_CONFIG_FILES = ("vllm/config/speculative.py", "vllm/config/__init__.py", "vllm/config.py")


def speculative_config(root: Path) -> tuple[str, str, ast.Module, ast.ClassDef] | None:
    """The config module that defines a vLLM release's SpeculativeConfig (vllm/config.py to 0.10.0, then
    config/__init__.py, then config/speculative.py): (file, source, module, the class); None where none does."""
    for name in VLLM_CONFIG_FILES:
        if not (root / name).exists():
            continue
        source = (root / name).read_bytes().decode()
        module = ast.parse(source)
        cls = next((n for n in module.body if isinstance(n, ast.ClassDef) and n.name == "SpeculativeConfig"), None)
        if cls is not None:
            return name, source, module, cls
    return None


def _literal_names(node: ast.AST, aliases: dict[str, ast.AST]) -> list[str] | None:
    """The strings a ``Literal[...]`` annotation admits, following module-level aliases (``X = Literal[...]``) and
    ``Optional[...]`` / ``... | None``; None where any part is not a literal string (the field is then not checked)."""
    if isinstance(node, ast.Name) and node.id in aliases:
        return _literal_names(aliases[node.id], aliases)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        parts = [_literal_names(x, aliases) for x in (node.left, node.right) if not _is_none(x)]
        return None if any(p is None for p in parts) else [n for p in parts for n in p or []]
    if not isinstance(node, ast.Subscript) or not isinstance(node.value, ast.Name):
        return None
    elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    if node.value.id == "Optional":
        return _literal_names(elts[0], aliases)
    if node.value.id != "Literal":
        return None
    out: list[str] = []
    for e in elts:
        got = [e.value] if isinstance(e, ast.Constant) and isinstance(e.value, str) else _literal_names(e, aliases)
        if got is None:
            return None
        out += got
    return out


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _applies_pydantic(module: ast.Module, name: str) -> bool:
    """Whether the decorator ``name`` of ``module`` makes a pydantic dataclass: it is pydantic's ``dataclass`` imported
    under that name, or a function of the module whose body calls that import."""
    pyd = {a.asname or a.name for n in module.body if isinstance(n, ast.ImportFrom) and n.module == "pydantic.dataclasses"
           for a in n.names if a.name == "dataclass"}  # fmt: skip
    if name in pyd:
        return True
    return any(
        isinstance(f, ast.FunctionDef) and f.name == name
        and any(isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in pyd for c in ast.walk(f))
        for f in module.body
    )  # fmt: skip


def vllm_method_choices(root: Path) -> dict[str, tuple[list[str], str, bool]]:
    """{VLLM_METHOD: (the names SpeculativeConfig.method's ``Literal`` admits, file:line, validated)} for a vLLM release:
    validated where the class is a pydantic dataclass (its own ``dataclass`` import or vllm.config.utils' ``config``
    decorator applying it), so a name outside the Literal fails at construction, case and all. Unvalidated releases
    compare ``method`` with ``==`` and fall through to detecting one from the draft: their names are the annotation's
    (where it is a Literal) and every string the class compares ``self.method`` with. Empty where neither gives any."""
    found = speculative_config(root)
    if found is None:
        return {}
    name, _source, module, cls = found
    aliases = {t.id: n.value for n in module.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    field = next((st for st in cls.body if isinstance(st, ast.AnnAssign) and getattr(st.target, "id", "") == "method"), None)
    if field is None:
        return {}
    names = _literal_names(field.annotation, aliases)
    utils = root / "vllm/config/utils.py"
    where = {n.module for n in module.body if isinstance(n, ast.ImportFrom)}
    validated = False
    for d in cls.decorator_list:
        dn = d.func.id if isinstance(d, ast.Call) and isinstance(d.func, ast.Name) else getattr(d, "id", "")
        own = _applies_pydantic(module, dn)
        via_utils = dn == "config" and "vllm.config.utils" in where and utils.exists() and _applies_pydantic(
            ast.parse(utils.read_bytes().decode()), "config")  # fmt: skip
        validated |= own or via_utils
    if not validated:  # what the release acts on is what its code compares ``self.method`` with, exactly
        names = list(dict.fromkeys([*(names or []), *_compared_with(cls, "method")]))
    if not names:
        return {}
    return {VLLM_METHOD: (names, f"{name}:{field.lineno}", validated)}


def _compared_with(cls: ast.ClassDef, attr: str) -> list[str]:
    """The strings ``self.<attr>`` is compared with (``==``, ``in``) in the class's methods, in source order."""
    out: list[str] = []
    for c in [n for n in ast.walk(cls) if isinstance(n, ast.Compare)]:
        left = c.left
        if not (isinstance(left, ast.Attribute) and left.attr == attr and getattr(left.value, "id", "") == "self"):
            continue
        for op, right in zip(c.ops, c.comparators):
            if isinstance(op, ast.Eq) and isinstance(right, ast.Constant) and isinstance(right.value, str):
                out.append(right.value)
            elif isinstance(op, ast.In) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
                out += [e.value for e in right.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return out


def _config_modules(root: Path) -> list[tuple[str, ast.Module]]:
    """vLLM's config modules as fetched: ``vllm/config.py`` (to 0.10.0) or ``vllm/config/*.py``."""
    names = ["vllm/config.py"] if (root / "vllm/config.py").exists() else []
    names += sorted(str(p.relative_to(root)) for p in (root / "vllm/config").glob("*.py"))
    return [(n, ast.parse((root / n).read_bytes().decode())) for n in names]


def _union_parts(node: ast.AST) -> list[ast.AST]:
    """The members of ``A | B``, ``Union[A, B]`` and ``Optional[A]`` (None dropped), else the node alone."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union_parts(node.left) + _union_parts(node.right)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in ("Union", "Optional"):
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return [p for e in elts for p in _union_parts(e)]
    return [] if _is_none(node) else [node]


def vllm_literal_choices(root: Path) -> dict[str, tuple[list[str], str]]:
    """{flag: (names, file:line)} for a vLLM release's flags whose parser ``choices`` come from a config field's
    ``Literal``: ``add_argument("--x", **kw["field"])`` with ``kw = get_kwargs(Config)`` and nothing after it that
    sets ``type``, ``choices``, ``action`` or ``nargs``, where the field's annotation is one ``Literal`` of strings
    (aliases followed across the config modules), beside None or non-builtin types alone: ``get_kwargs`` then gives
    ``choices`` (with ``str`` in the annotation it gives a ``metavar`` instead, and with ``bool`` a boolean action:
    both left out). Plus the literal ``choices=[...]`` lists of the flag files (release_choices), which older releases
    wrote by hand."""
    out = dict(release_choices(root))
    au = "vllm/engine/arg_utils.py"
    if not (root / au).exists():
        return out
    module = ast.parse((root / au).read_bytes().decode())
    classes: dict[str, tuple[ast.ClassDef, str]] = {}
    aliases: dict[str, ast.AST] = {}
    for name, m in _config_modules(root):
        for n in m.body:
            if isinstance(n, ast.ClassDef):
                classes.setdefault(n.name, (n, name))
            elif isinstance(n, ast.Assign):
                aliases.update({t.id: n.value for t in n.targets if isinstance(t, ast.Name) and t.id not in aliases})
    made = {t.id: n.value.args[0].id for n in ast.walk(module) if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Call) and getattr(n.value.func, "id", "") == "get_kwargs" and n.value.args
            and isinstance(n.value.args[0], ast.Name) for t in n.targets if isinstance(t, ast.Name)}  # fmt: skip
    for _call, names, kw in gen_serve_flags._add_argument_calls(module):
        star = kw.get(None)
        if {"type", "choices", "action", "nargs"} & {k for k in kw if k} or not isinstance(star, ast.Subscript):
            continue
        src, key = star.value, star.slice
        if not (isinstance(src, ast.Name) and src.id in made and isinstance(key, ast.Constant)):
            continue
        cls = classes.get(made[src.id])
        field = next((st for st in cls[0].body if isinstance(st, ast.AnnAssign) and getattr(st.target, "id", "") == key.value),
                     None) if cls else None  # fmt: skip
        if cls is None or field is None:
            continue
        parts = _union_parts(field.annotation)
        plain = [p for p in parts if isinstance(p, ast.Name) and p.id in ("str", "bool", "int", "float", "dict", "list")]
        lits = [n for p in parts if (n := _literal_names(p, aliases)) is not None]
        if plain or len(lits) != 1 or not lits[0]:
            continue
        out.update({n: (lits[0], f"{cls[1]}:{field.lineno}") for n in names})
    return out


def choices_table(engine: str, releases: list[str]) -> dict[str, list[dict[str, Any]]]:
    """{flag: [{"choices", "releases" (ranges), "source" (the newest release's file:line)}, ...]} over the releases
    extracted: each distinct list of names with the runs of releases that take exactly it. vLLM: its flags' choices
    (vllm_literal_choices) and its speculative method's names (vllm_method_choices, each entry with ``validated``)."""
    done = [v for v in releases if (fetch.src_dir(engine, v, "flags") / ".complete").exists()]

    def read(root: Path) -> dict[str, tuple[Any, ...]]:
        return release_choices(root) if engine == "sglang" else {**vllm_literal_choices(root), **vllm_method_choices(root)}

    per = {v: read(fetch.src_dir(engine, v, "flags")) for v in done}

    def key(v: str, flag: str) -> tuple[Any, ...] | None:  # what a release takes: its names, and whether validated
        if flag not in per[v]:
            return None
        names, _src, *rest = per[v][flag]
        return (tuple(names), *rest)

    out: dict[str, list[dict[str, Any]]] = {}
    for flag in sorted(set().union(*per.values()) if per else []):
        kinds = {k: per[v][flag][1] for v in done if (k := key(v, flag)) is not None}  # the newest release's source
        out[flag] = [
            {"choices": list(k[0]), **({"validated": k[1]} if len(k) > 1 else {}),
             "releases": ranges([key(v, flag) == k for v in done], done), "source": src}
            for k, src in kinds.items()
        ]  # fmt: skip
    return out


def _loop_flags(module: ast.AST) -> dict[int, list[str]]:
    """``for arg, type in [("--x", str), ...]: group.add_argument(arg, ...)`` (vLLM 0.11's deprecated guided
    decoding flags): {id of the call: the flag names the literal list gives it}."""
    out: dict[int, list[str]] = {}
    for loop in [n for n in ast.walk(module) if isinstance(n, ast.For) and isinstance(n.iter, (ast.List, ast.Tuple))]:
        tgt = loop.target
        var = tgt.id if isinstance(tgt, ast.Name) else getattr(tgt.elts[0], "id", None) if isinstance(tgt, ast.Tuple) else None
        heads = [e.elts[0] if isinstance(e, ast.Tuple) and isinstance(tgt, ast.Tuple) else e for e in loop.iter.elts]
        found = [h.value for h in heads if isinstance(h, ast.Constant) and isinstance(h.value, str) and h.value.startswith("-")]
        if var is None or len(found) != len(heads):
            continue
        for call in [n for n in ast.walk(loop) if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "add_argument"]:
            if call.args and isinstance(call.args[0], ast.Name) and call.args[0].id == var:
                out[id(call)] = found
    return out


def ranges(present: list[bool], releases: list[str]) -> list[str]:
    """Runs of releases holding a flag, as 'first..last' (one release: its name alone), written as the package reads
    them back (engines/flag_releases.runs)."""
    return runs(releases, {i for i, has in enumerate(present) if has})


def build(engine: str, releases: list[str]) -> dict:
    sets: dict[str, set[str]] = {}
    wheels: dict[str, str] = {}
    unresolved: dict[str, list[str]] = {}
    missing: dict[str, str] = {}
    for v in releases:
        root = fetch.src_dir(engine, v, "flags")
        done = root / ".complete"
        if not done.exists():
            missing[v] = "not fetched"
            continue
        try:
            sets[v], gaps = release_flags(engine, root)
        except (StopIteration, KeyError, FileNotFoundError) as e:  # a file the extraction reads is not in the wheel
            missing[v] = f"its flag files are not where the extraction reads them ({type(e).__name__}: {e})"
            continue
        wheels[v] = " ".join(w for w in done.read_text().split() if w.endswith(".whl") or w.startswith("sha256="))
        if gaps:
            unresolved[v] = gaps
    done_releases = [v for v in releases if v in sets]
    names = sorted(set().union(*sets.values())) if sets else []
    return {
        "releases": releases,
        "wheels": wheels,
        "files": FLAG_FILE_PATTERNS[engine],
        "not_extracted": missing,
        "unresolved": unresolved,
        "flags": {n: ranges([n in sets[v] for v in done_releases], done_releases) for n in names},
        "choices": choices_table(engine, releases),
    }


def main(out: str = str(OUT)) -> None:
    todo = [(e, v) for e in ENGINES for v in RELEASES[e]]
    with ThreadPoolExecutor(max_workers=int(os.environ.get("CONFORMANCE_JOBS", "8"))) as ex:
        for e, v, msg in ex.map(lambda ev: fetch.fetch(*ev, patterns=FLAG_FILE_PATTERNS, kind="flags"), todo):
            print(f"fetch {e} {v}: {msg}", flush=True)
    data = {"generated_by": "conformance/flags_exec.py", **{e: build(e, RELEASES[e]) for e in ENGINES}}
    Path(out).write_text(json.dumps(data, indent=1) + "\n")
    for e in ENGINES:
        d = data[e]
        print(f"{out}: {e}: {len(d['wheels'])} releases, {len(d['flags'])} flag names, "
              f"not extracted: {sorted(d['not_extracted']) or 'none'}, unresolved calls in {len(d['unresolved'])} releases")  # fmt: skip


if __name__ == "__main__":
    main(*sys.argv[1:])
