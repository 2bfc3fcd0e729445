"""Which safetensors files beside a draft checkpoint each release loads, executed from the release's own loader.

Both engines pick a local checkpoint's weight files in the loader's ``_prepare_weights``: the first of its
``allow_patterns`` ("*.safetensors" before "*.bin") that globs any file wins, then, for safetensors, the
release's ``filter_duplicate_safetensors_files`` (model_loader/weight_utils.py) keeps only the files
``model.safetensors.index.json`` names, where there is an index. The selection loop is a checked source pattern
(file:line); the filter is lifted with ``ast`` and run on a directory holding ``model.safetensors``,
``extra.safetensors`` and, in one case, an index naming only the first: the files it keeps are the row.
"""

from __future__ import annotations

import ast
import builtins
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PACKAGE_TABLE = "eagle3_doctor/data/draft_weight_files.json"
FILES = {
    "sglang": ("sglang/srt/model_loader/weight_utils.py", ("sglang/srt/model_loader/loader.py",)),
    "vllm": (
        "vllm/model_executor/model_loader/weight_utils.py",
        ("vllm/model_executor/model_loader/default_loader.py", "vllm/model_executor/model_loader/loader.py"),
    ),
}
INDEX = "model.safetensors.index.json"


class WeightFilesMoved(Exception):
    """The loader no longer picks its files in a shape this harness runs."""


def _selection(loader: Path, rel: str) -> str:
    """file:line of the loop where the first allow pattern that globs a file wins, "*.safetensors" listed first."""
    tree = ast.parse(loader.read_text())
    for fn in ast.walk(tree):
        if not (isinstance(fn, ast.FunctionDef) and fn.name == "_prepare_weights"):
            continue
        text = ast.unparse(fn)
        for node in ast.walk(fn):
            if isinstance(node, ast.For) and ast.unparse(node.iter) == "allow_patterns":
                body = ast.unparse(node)
                if "glob.glob" in body and "break" in body and "'*.safetensors', '*.bin'" in text:
                    return f"{rel}:{node.lineno}"
    raise WeightFilesMoved(f"{loader}: no _prepare_weights loop taking the first allow pattern that globs a file")


def _filter(path: Path) -> Any:
    fn = next(
        (
            n
            for n in ast.parse(path.read_text()).body
            if isinstance(n, ast.FunctionDef) and n.name == "filter_duplicate_safetensors_files"
        ),
        None,
    )
    if fn is None:
        raise WeightFilesMoved(f"{path}: no filter_duplicate_safetensors_files")
    fn.decorator_list, fn.returns = [], None
    for a in (*fn.args.args, *fn.args.kwonlyargs):
        a.annotation = None
    g: dict[str, Any] = {"__builtins__": builtins, "os": os, "json": json}
    exec(compile(ast.fix_missing_locations(ast.Module([fn], [])), str(path), "exec"), g)
    return g["filter_duplicate_safetensors_files"], fn.lineno


def _kept(flt: Any, index: bool) -> list[str]:
    with tempfile.TemporaryDirectory() as d:
        files = [os.path.join(d, n) for n in ("model.safetensors", "extra.safetensors")]
        for f in files:
            Path(f).write_bytes(b"")
        if index:
            Path(d, INDEX).write_text(json.dumps({"weight_map": {"fc.weight": "model.safetensors"}}))
        return sorted(os.path.basename(f) for f in flt(files, d, INDEX))


def probe(engine: str, root: Path) -> dict[str, Any]:
    utils, loaders = FILES[engine]
    loader = next((f for f in loaders if (root / f).exists()), None)
    if loader is None or not (root / utils).exists():
        raise WeightFilesMoved(f"{engine} {root.name}: no {utils} or {' / '.join(loaders)}")
    flt, line = _filter(root / utils)
    return {
        "kept": {"with_index": _kept(flt, True), "no_index": _kept(flt, False)},
        "sources": {
            "selection": _selection(root / loader, loader),
            "filter": f"{utils}:{line} filter_duplicate_safetensors_files",
        },
    }


def build_table(src_dir: Any, releases: dict[str, list[str]]) -> dict[str, Any]:
    from draft_exec import DRAFT_FILES

    rows: list[dict[str, Any]] = []
    release_rows: dict[str, dict[str, Any]] = {}
    for engine in ("sglang", "vllm"):
        release_rows[engine] = {}
        for v in releases[engine]:
            root = src_dir(engine, v)
            if not (root / DRAFT_FILES[engine]).exists():
                continue
            got = probe(engine, root)
            same = next((i for i, r in enumerate(rows) if r["engine"] == engine and r["kept"] == got["kept"]), None)
            if same is None:
                rows.append({"engine": engine, "releases": [], "kept": got["kept"]})
                same = len(rows) - 1
            rows[same]["releases"].append(v)
            release_rows[engine][v] = {"row": same, "sources": got["sources"]}
    return {"index": INDEX, "rows": rows, "release_rows": release_rows}


def main() -> int:
    import fetch
    from releases import RELEASES

    t0 = time.time()
    table = build_table(fetch.src_dir, RELEASES)
    (HERE.parent / PACKAGE_TABLE).write_text(json.dumps(table, indent=1) + "\n")
    print(f"conformance: draft weight-file table, {len(table['rows'])} rows in {time.time() - t0:.1f} s -> {PACKAGE_TABLE}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main())
