"""The package's shape, checked: no long functions, no import cycles, each layer importing only those below;
and the tests laid out by the same layers.

A function is counted from its ``def`` line to the last line of its body (a typer command's
option list included). The functions named in LONG still wait to be split, in code other work is
changing right now; the list may only shrink: a function that now fits must be taken off it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import dotted

PKG = Path(__file__).resolve().parent.parent / "eagle3_doctor"
MAX_LINES = 60

# qualified name -> who splits it (code other work is changing now); empty: every function fits
LONG: dict[str, str] = {}


def _functions(root: Path = PKG) -> list[tuple[str, int]]:
    out = []
    for f in sorted(root.rglob("*.py")):
        mod = f.relative_to(root).with_suffix("").as_posix()
        tree = ast.parse(f.read_text(encoding="utf-8"))
        stack: list[tuple[ast.AST, str]] = [(tree, mod)]
        while stack:
            node, prefix = stack.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    name = f"{prefix}.{child.name}"
                    out.append((name, child.end_lineno - child.lineno + 1))
                    stack.append((child, name))
                elif isinstance(child, ast.ClassDef):
                    stack.append((child, f"{prefix}.{child.name}"))
                else:
                    stack.append((child, prefix))
    return out


def test_no_function_over_60_lines():
    funcs = _functions()
    assert len(funcs) > 100, f"only {len(funcs)} functions found under {PKG}: the walk is broken"
    too_long = {n: ln for n, ln in funcs if ln > MAX_LINES}
    new = {n: ln for n, ln in too_long.items() if n not in LONG}
    fits = sorted(n for n in LONG if n not in too_long)
    assert not new, "functions over 60 lines (def line to last line): " + ", ".join(
        f"{n} ({ln})" for n, ln in sorted(new.items())
    )
    assert not fits, f"now at most 60 lines, take them off LONG: {', '.join(fits)}"


MAX_MODULE_LINES = 500


def test_no_module_over_500_lines():
    """A module past 500 lines holds several jobs: split it by job (a package of one job a module)."""
    sizes = {f.relative_to(PKG).as_posix(): len(f.read_text(encoding="utf-8").splitlines()) for f in PKG.rglob("*.py")}
    assert len(sizes) > 50, f"only {len(sizes)} modules found under {PKG}"
    big = {m: n for m, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not big, "modules over 500 lines: " + ", ".join(f"{m} ({n})" for m, n in sorted(big.items()))


def test_the_walk_measures_def_to_last_line(tmp_path):
    """The counter itself: def line to last line, nested functions and methods qualified by module and class."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "m.py").write_text(
        "def f(a,\n      b):\n    return a\n\n\nclass C:\n    @staticmethod\n    def m():\n"
        "        def inner():\n            pass\n        return inner\n"
    )
    assert sorted(_functions(tmp_path)) == [("sub/m.C.m", 4), ("sub/m.C.m.inner", 2), ("sub/m.f", 3)]


# ----------------------------------------------------------------------------- import graph


def _import_graph(root: Path = PKG, package: str = "eagle3_doctor") -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module-level edges, all edges) between the package's modules, by dotted name ('' is the package).

    Read with ``ast`` from ``from .x import y``, ``from ..x import y``, ``from . import x``,
    ``import eagle3_doctor.x`` and ``from eagle3_doctor.x import y``; ``from m import name`` adds an
    edge to ``m.name`` too when that is a module. An import inside a function (or lambda) body is lazy:
    it goes into the second map only. An import under ``if TYPE_CHECKING:`` counts as module-level.
    """
    files = {}
    for f in sorted(root.rglob("*.py")):
        files[dotted(f, root)] = f
    top: dict[str, set[str]] = {m: set() for m in files}
    every: dict[str, set[str]] = {m: set() for m in files}

    def targets(node: ast.Import | ast.ImportFrom, mod: str, is_pkg: bool) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        if node.level:
            here = mod.split(".") if mod else []
            here = here if is_pkg else here[:-1]
            base = [package] + here[: len(here) - (node.level - 1)]
        else:
            base = []
        m = ".".join(base + ([node.module] if node.module else []))
        return [m] + [f"{m}.{a.name}" for a in node.names]

    for mod, f in files.items():
        is_pkg = f.name == "__init__.py"
        stack: list[tuple[ast.AST, bool]] = [(ast.parse(f.read_text(encoding="utf-8")), False)]
        while stack:
            node, lazy = stack.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    for t in targets(child, mod, is_pkg):
                        name = "" if t == package else t[len(package) + 1 :] if t.startswith(package + ".") else None
                        if name is not None and name in files and name != mod:
                            every[mod].add(name)
                            if not lazy:
                                top[mod].add(name)
                stack.append((child, lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))))
    return top, every


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        path.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return path[path.index(w) :] + [w]
            if w not in state and (found := visit(w)):
                return found
        path.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state and (found := visit(v)):
            return found
    return None


def test_no_import_cycles():
    """No cycle among module-level imports, and none when lazy (function-level) imports count too.

    A module-level cycle can fail at import time (a partly initialised module); a lazy import cannot,
    since it runs after every module has loaded. Lazy imports count here all the same: they exist to
    keep torch off the fast paths, not to let a low-level module reach up into the preflight or the
    CLI, and the package's layering (cli -> library -> report) holds for them as well.
    """
    top, every = _import_graph()
    assert len(every) > 20 and sum(map(len, every.values())) > 50, "the import walk found too little: it is broken"
    assert (c := _cycle(top)) is None, "module-level import cycle: " + " -> ".join(c)
    assert (c := _cycle(every)) is None, "import cycle (function-level imports included): " + " -> ".join(c)


# The layers, bottom first: a module may import its own layer and those below it, never one above
# (lazy imports included). docs/architecture.md says what each holds.
LAYERS = ("core", "io", "engines", "draft", "model", "analyses", "report", "drafters", "doctor", "cli", "__main__")
# Known imports that still reach up, with the module they must move out of; the list may only shrink.
UPWARD: dict[tuple[str, str], str] = {}


def _layer(mod: str) -> str:
    return mod.split(".")[0] if mod else ""


def test_layering():
    """Each subpackage imports only its own layer and the ones below; nothing imports the CLI;
    only the CLI imports the preflight (validate); config checks stay low-level."""
    _, every = _import_graph()
    assert set(map(_layer, every)) - {""} == set(LAYERS), "a subpackage is missing from LAYERS (or LAYERS names one gone)"
    rank = {name: i for i, name in enumerate(LAYERS)}
    upward = {(m, t) for m, targets in every.items() for t in targets if m and t and rank[_layer(t)] > rank[_layer(m)]}
    assert not upward - set(UPWARD), "imports that reach up a layer: " + ", ".join(
        f"{m} -> {t}" for m, t in sorted(upward - set(UPWARD))
    )
    assert not set(UPWARD) - upward, f"no longer reaching up, take them off UPWARD: {sorted(set(UPWARD) - upward)}"
    assert not [m for m, t in every.items() if any(_layer(x) == "cli" for x in t) and _layer(m) not in ("cli", "__main__")], (
        "the CLI is the top: no module below it may import it"
    )
    preflight_users = {m for m, t in every.items() if {"cli.validate", "cli.validate_files"} & t}
    assert preflight_users and all(_layer(m) == "cli" for m in preflight_users), "validate is the CLI's preflight"
    assert not preflight_users & {"cli.gate", "cli.gate_policy", "cli.gate_report"}, (
        "the gate is checked by the preflight, not the reverse"
    )
    assert not every["io.checks"] - {"core.errors", "io.safeio"}, "checks is low-level: errors and safeio only"
    assert not [m for m in every if m.startswith("core.") and any(not t.startswith("core") for t in every[m])], (
        "core imports nothing else of the package"
    )


def test_the_listing_tells_the_layers():
    """The package's top level is its layers, the library facade and the entry points: no flat modules."""
    top = {p.name for p in PKG.iterdir() if p.name != "__pycache__"}
    assert top == {"__init__.py", "__main__.py", "doctor.py", "data"} | set(LAYERS) - {"doctor", "__main__"}, sorted(top)


def test_the_import_walk_sees_every_form(tmp_path):
    """The graph reader itself: relative, absolute and lazy imports, submodules named in from-imports."""
    pkg = tmp_path / "p"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import x\nimport p.c\n\ndef f():\n    from . import d\n")
    (pkg / "b.py").write_text("from p.sub import e\nx = 1\n")
    (pkg / "c.py").write_text("")
    (pkg / "d.py").write_text("from .a import f\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "e.py").write_text("from ..c import y\n")
    top, every = _import_graph(pkg, "p")
    assert top["a"] == {"b", "c"} and every["a"] == {"b", "c", "d", ""}
    assert top["b"] == {"sub", "sub.e"} and top["sub.e"] == {"c"}
    assert _cycle(top) is None
    assert _cycle(every) == ["a", "d", "a"]


def test_the_architecture_doc_names_paths_that_exist():
    """docs/architecture.md's paths (the layers, the data flow, where new things go) all exist."""
    root = PKG.parent
    text = (root / "docs" / "architecture.md").read_text()
    paths = set(re.findall(r"`((?:eagle3_doctor|conformance|tests|tools|docs)/[\w/.-]*)`", text))
    assert len(paths) > 15, paths
    assert not [p for p in sorted(paths) if not (root / p).exists()], "docs/architecture.md names paths that do not exist"
    # every layer folder is in the layer table
    assert all(f"`eagle3_doctor/{layer}/`" in text for layer in LAYERS if (PKG / layer).is_dir())


def test_the_tests_mirror_the_layers():
    """tests/ has one folder per layer folder plus hostile/; a test file's name is unique across folders
    (pytest imports each by its name); the top holds only what spans the package."""
    tests = PKG.parent / "tests"
    folders = {p.name for p in tests.iterdir() if p.is_dir() and p.name not in ("__pycache__", "golden")}
    assert folders == {layer for layer in LAYERS if (PKG / layer).is_dir()} | {"hostile"}, sorted(folders)
    names = [p.name for p in tests.rglob("test_*.py")]
    assert len(names) == len(set(names)), sorted(n for n in set(names) if names.count(n) > 1)
    top = {p.name for p in tests.glob("test_*.py")}
    assert top == {
        "test_structure.py",
        "test_golden.py",
        "test_calibration.py",
        "test_finding_cases.py",
        "test_readme_newcomer.py",
        "test_fixture_build.py",
    }, sorted(top)
    assert not list(tests.rglob("__init__.py")), "no packages under tests/: conftest and oracles are imported by name"


_KIND_WORD = re.compile(r"(^|_)(eagle3|mtp|dflash|peagle)(_|$)", re.I)


def test_no_cli_module_names_a_drafter_kind():
    """The CLI dispatches through the registry (cli/drive.py) and never chooses a kind itself: no CLI module's code
    (its strings aside) names one, and none imports a kind's own modules."""
    import ast

    named = []
    for f in sorted((PKG / "cli").rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            words: list[str] = []
            if isinstance(node, ast.Name):
                words = [node.id]
            elif isinstance(node, ast.Attribute):
                words = [node.attr]
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                words = [node.name]
            elif isinstance(node, ast.ImportFrom):
                words = (node.module or "").split(".") + [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                words = [p for a in node.names for p in a.name.split(".")]
            named += [f"{f.relative_to(PKG)}:{node.lineno}: {w}" for w in words if _KIND_WORD.search(w)]  # type: ignore[attr-defined]
    assert not named, "CLI modules that name a drafter kind: " + ", ".join(named)
