"""Regenerate eagle3_doctor/data/serve_flags.json from the engines' own argument definitions.

Usage (network to PyPI only):
    pip download --no-deps sglang==0.5.23 vllm==0.33.0 -d /tmp/wheels
    python tools/gen_serve_flags.py /tmp/wheels/sglang-0.5.23-*.whl /tmp/wheels/vllm-0.33.0-*.whl

Static extraction, not a hand-written list: SGLang 0.5.23 builds its CLI from msgspec fields in
``sglang/srt/arg_groups/fields/*.py`` (``arg_utils.add_cli_args_from_dataclass``: ``--`` + field name
with ``_`` -> ``-``, ``Arg(aliases=...)``, ``no_cli`` skipped, ``bool`` -> store_true, ``list`` -> nargs +)
plus the hand-added arguments of ``server_args.py``. vLLM 0.33.0 registers every flag literally with
``add_argument("--name", "-alias", ...)`` in ``engine/arg_utils.py`` and builds the frontend flags
from the ``FrontendArgs`` dataclass fields in ``entrypoints/common/cli_args.py``; a ``bool``
annotation there means ``BooleanOptionalAction`` (``--x`` / ``--no-x``, no value).
Importing either engine needs its GPU stack, which is why the table is extracted and committed.
"""

from __future__ import annotations

import ast
import json
import sys
import zipfile
from pathlib import Path


def _ann_text(node: ast.AST) -> str:
    return ast.unparse(node)


def _add_argument_calls(tree: ast.AST):
    """Every literal ``add_argument("--x", "-y", ...)`` call: (the call, its flag names, its keywords)."""
    for call in [n for n in ast.walk(tree) if isinstance(n, ast.Call)]:
        if getattr(call.func, "attr", None) != "add_argument":
            continue
        names = [
            a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")
        ]
        if names:
            yield call, names, {k.arg: k.value for k in call.keywords}


def _value_kind(type_text: str) -> str:
    t = type_text.replace(" ", "")
    if t in ("bool", "Optional[bool]", "bool|None"):
        return "none"
    if t.startswith("list[") or t.startswith("List[") or t.startswith("Optional[List[") or t.startswith("Optional[list["):
        return "many"
    return "one"


def _literal(node: ast.AST | None):
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except Exception:
        return ast.unparse(node)


def _annotated_fields(tree: ast.AST, name: str, flags: dict, classes: tuple[str, ...] | None = None) -> None:
    """The ``A[type, Arg(...)]`` fields of ``classes`` (all classes where None) as flags, the way
    ``arg_groups/arg_utils.add_cli_args_from_dataclass`` registers them."""
    for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and (classes is None or n.name in classes)]:
        for st in cls.body:
            if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)):
                continue
            ann = st.annotation
            if not (isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name) and ann.value.id == "A"):
                continue
            elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            typ, meta = elts[0], elts[1] if len(elts) > 1 else None
            cli, aliases, no_cli, action = None, [], False, None
            if isinstance(meta, ast.Call):
                for kw in meta.keywords:
                    if kw.arg == "cli_name":
                        cli = _literal(kw.value)
                    elif kw.arg == "aliases":
                        aliases = list(_literal(kw.value) or [])
                    elif kw.arg == "no_cli":
                        no_cli = bool(_literal(kw.value))
                    elif kw.arg == "action":
                        action = ast.unparse(kw.value)
            if no_cli:
                continue
            field = st.target.id
            cli = cli or "--" + field.replace("_", "-")
            kind = _value_kind(_ann_text(typ))
            if action and "store_true" in action:
                kind = "none"
            entry = {"dest": field, "value": kind, "default": _literal(st.value), "source": f"{name}:{st.lineno}"}
            for n in [cli] + aliases:
                flags[n] = entry


def sglang_flags(z: zipfile.ZipFile) -> tuple[dict, list[str]]:
    """0.5.20+: the fields of ``arg_groups/fields/*.py``; 0.5.14-0.5.19: the fields of ``ServerArgs`` in
    ``server_args.py`` itself; every release: the literal ``add_argument`` calls of ``server_args.py``."""
    flags: dict = {}
    files = sorted(n for n in z.namelist() if n.startswith("sglang/srt/arg_groups/fields/") and n.endswith(".py"))
    for name in files:
        _annotated_fields(ast.parse(z.read(name).decode()), name, flags)
    sa = "sglang/srt/server_args.py"
    tree = ast.parse(z.read(sa).decode())
    _annotated_fields(tree, sa, flags, ("ServerArgs",))
    # hand-added arguments in server_args.py
    for call, names, kw in _add_argument_calls(tree):
        act = ast.unparse(kw["action"]) if "action" in kw else ""
        kind = "none" if ("store_true" in act or "store_false" in act) else ("many" if "nargs" in kw else "one")
        entry = {
            "dest": names[0].lstrip("-").replace("-", "_"),
            "value": kind,
            "default": _literal(kw.get("default")),
            "source": f"{sa}:{call.lineno}",
        }
        for n in names:
            flags.setdefault(n, entry)
    return flags, files + [sa]


def vllm_flags(z: zipfile.ZipFile) -> tuple[dict, list[str]]:
    flags: dict = {}
    au = "vllm/engine/arg_utils.py"
    tree = ast.parse(z.read(au).decode())
    ann: dict[str, str] = {}
    for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name in ("EngineArgs", "AsyncEngineArgs")]:
        for st in cls.body:
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                ann[st.target.id] = _ann_text(st.annotation)
    for call, names, kw in _add_argument_calls(tree):
        dest = names[0].lstrip("-").replace("-", "_")
        act = ast.unparse(kw["action"]) if "action" in kw else ""
        kind = _value_kind(ann.get(dest, "str"))
        if "store_true" in act or "store_false" in act or "BooleanOptional" in act:
            kind = "none"
        if "nargs" in kw:
            kind = "many"
        entry = {"dest": dest, "value": kind, "default": None, "source": f"{au}:{call.lineno}"}
        # argparse gives --no-x only to BooleanOptionalAction (get_kwargs' choice for a bool field), not store_true
        negated = kind == "none" and "store_true" not in act and "store_false" not in act
        for n in names:
            flags.setdefault(n, entry)
            if negated and n.startswith("--"):
                flags.setdefault("--no-" + n[2:], entry)
    # the frontend's parser moved: openai/ (to 0.28), launchers/ (0.29-0.32), common/ (0.33)
    fe = next(
        f"vllm/entrypoints/{d}/cli_args.py"
        for d in ("common", "launchers", "openai")
        if f"vllm/entrypoints/{d}/cli_args.py" in z.namelist()
    )
    tree = ast.parse(z.read(fe).decode())
    for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name.endswith("FrontendArgs")]:
        for st in cls.body:
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and not st.target.id.startswith("_"):
                kind = _value_kind(_ann_text(st.annotation))
                n = "--" + st.target.id.replace("_", "-")
                entry = {"dest": st.target.id, "value": kind, "default": _literal(st.value), "source": f"{fe}:{st.lineno}"}
                flags.setdefault(n, entry)
                if kind == "none":
                    flags.setdefault("--no-" + n[2:], entry)
    for call, names, kw in _add_argument_calls(tree):
        act = ast.unparse(kw["action"]) if "action" in kw else ""
        kind = "none" if ("store_true" in act or "store_false" in act) else "one"
        entry = {"dest": names[0].lstrip("-").replace("-", "_"), "value": kind, "default": None, "source": f"{fe}:{call.lineno}"}
        for n in names:
            flags.setdefault(n, entry)
    return flags, [au, fe]


def main(sglang_whl: str, vllm_whl: str, out: str = "eagle3_doctor/data/serve_flags.json") -> None:
    data = {}
    for engine, whl, fn in (("sglang", sglang_whl, sglang_flags), ("vllm", vllm_whl, vllm_flags)):
        version = Path(whl).name.split("-")[1]
        flags, files = fn(zipfile.ZipFile(whl))
        data[engine] = {"version": version, "wheel": Path(whl).name, "files": files, "flags": dict(sorted(flags.items()))}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(data, indent=1, sort_keys=False, default=str) + "\n")
    print(f"{out}: " + ", ".join(f"{e} {d['version']}: {len(d['flags'])} flags" for e, d in data.items()))


if __name__ == "__main__":
    main(*sys.argv[1:])
