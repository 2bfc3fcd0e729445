"""The trainers' side: which capture each SpecForge and speculators release trains an EAGLE-3 draft on.

For every release on the package index, the release itself is downloaded (a wheel by `pip download --no-deps`;
SpecForge 0.1.0 has only an sdist, read from the index's JSON API and checked against its sha256), its pinned
requirements are read from its own metadata (`METADATA` / `requires.txt`), and the code that picks the target
layers is lifted with `ast` and **executed** on stub configs for L in LS:
- SpecForge 0.1.0: the aux-layer statements of `OnlineEagle3Model._prepare_data` (core/eagle3.py), run on an
  `output_hidden_states` tuple of L+1 symbols: which `hidden_states[i]` it concatenates (embedding offset 1);
- SpecForge 0.2.0: `resolve_eagle_capture_layers` (algorithms/model_providers.py), no ids given anywhere; the
  ids go to SGLang's `set_eagle3_layers_to_capture` (offline_capture/sglang_backend/capture.py, a pattern);
- speculators 0.3.0-0.4.x: the default of `VllmHiddenStatesGenerator.__init__` and the worker's own patched
  decoder loop `_patched_forward` (data_generation/custom_worker.py) run on symbolic layers, and the training
  split that feeds all but the last captured state to the draft (train/data.py, a pattern);
- speculators 0.5.0+: `resolve_target_layer_ids` (models/utils.py) with the verifier's config stubbed; the states
  come from a vLLM server (data_generation/vllm_client.py, a pattern), i.e. vLLM's own capture.
Releases with no hidden-states generation (speculators 0.0.1-0.2.0) are recorded as not training EAGLE-3.
Written: conformance/trainers_table.json (every executed case) and eagle3_doctor/data/trainer_capture.json
(one row per release: engine, pin, default ids, convention, provenance), read by engines/trainers.py.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import urllib.request
import zipfile
from itertools import islice
from pathlib import Path
from types import SimpleNamespace
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CACHE = Path(os.environ.get("CONFORMANCE_CACHE", HERE / ".cache")) / "trainers"
LS = (8, 32, 61)
SPECFORGE = ("0.1.0", "0.2.0")
SPECULATORS = (
    "0.0.1", "0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.4.0.1", "0.5.0", "0.6.0", "0.6.0.1", "0.6.0.2",
    "0.7.0", "0.7.0.1", "0.7.0.2", "0.8.0", "0.8.1", "0.9.0",
)  # fmt: skip
ENGINE_PKGS = ("sglang", "vllm", "transformers")


class Moved(RuntimeError):
    """The trainer's selection code is not where or what this harness reads: teach it the new release."""


def fetch(project: str, version: str) -> Path:
    """The release's files, extracted under CACHE/<project>-<version> (downloaded once)."""
    out = CACHE / f"{project}-{version}"
    if (out / ".done").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    dl = CACHE / "dl"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary",
            ":all:",
            f"{project}=={version}",
            "-d",
            str(dl),
        ],
        capture_output=True,
        text=True,
    )
    wheels = sorted(dl.glob(f"{project}-{version}-*.whl"))
    if r.returncode == 0 and wheels:
        with zipfile.ZipFile(wheels[0]) as z:
            z.extractall(out)
        (out / ".done").write_text(hashlib.sha256(wheels[0].read_bytes()).hexdigest())
        return out
    _fetch_sdist(project, version, out)
    return out


def _fetch_sdist(project: str, version: str, out: Path) -> None:
    """No wheel on the index (SpecForge 0.1.0): the sdist from the index's JSON API, checked by its sha256."""
    req = urllib.request.Request(f"https://pypi.org/simple/{project}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        files = json.loads(r.read())["files"]
    f = next((f for f in files if f["filename"] == f"{project}-{version}.tar.gz"), None)
    if f is None:
        raise Moved(f"{project} {version}: neither a wheel nor an sdist on the index")
    with urllib.request.urlopen(f["url"], timeout=120) as r:
        data = r.read()
    sha = hashlib.sha256(data).hexdigest()
    if sha != f["hashes"]["sha256"]:
        raise Moved(f"{project} {version}: the sdist's sha256 is not the index's")
    path = out / f["filename"]
    path.write_bytes(data)
    with tarfile.open(path) as t:
        t.extractall(out, filter="data")
    (out / ".done").write_text(sha)


def requirements(root: Path) -> list[str]:
    """The release's own requirements, as its metadata states them (extras included, markers kept)."""
    meta = sorted(root.glob("*.dist-info/METADATA"))
    if meta:
        lines = meta[0].read_text().splitlines()
        return [line.split(":", 1)[1].strip() for line in lines if line.startswith("Requires-Dist:")]
    req = sorted(root.glob("*/*.egg-info/requires.txt"))
    if req:
        return [x.strip() for x in req[0].read_text().splitlines() if x.strip() and not x.startswith("[")]
    raise Moved(f"{root.name}: no METADATA or requires.txt")


def engine_pins(reqs: list[str]) -> dict[str, str]:
    """The requirement on each engine package (sglang, vllm, transformers), as written."""
    pins = {}
    for r in reqs:
        m = re.match(r"^([A-Za-z0-9_.-]+)\s*(.*)$", r)
        if m and m.group(1).lower() in ENGINE_PKGS:
            pins[m.group(1).lower()] = m.group(2).strip()
    return pins


def pkg_dir(root: Path, name: str) -> Path:
    hits = sorted(p for p in root.rglob(name) if p.is_dir() and (p / "__init__.py").exists())
    if not hits:
        raise Moved(f"{root.name}: no package {name}")
    return hits[0]


def _module(path: Path) -> tuple[ast.Module, str]:
    src = path.read_text()
    return ast.parse(src), src


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise Moved(f"no function {name}")


def _compile_fn(fn: ast.FunctionDef, path: Path, ns: dict[str, Any]) -> Any:
    """``fn`` compiled on its own (annotations dropped: they name types the stubs do not provide)."""
    fn = _strip_annotations(fn)
    mod = ast.Module(body=[fn], type_ignores=[])
    exec(compile(ast.fix_missing_locations(mod), str(path), "exec"), ns)
    return ns[fn.name]


def _strip_annotations(fn: ast.FunctionDef) -> ast.FunctionDef:
    fn = ast.parse(ast.unparse(fn)).body[0]  # a copy, line numbers aside
    assert isinstance(fn, ast.FunctionDef)
    fn.returns = None
    for a in [*fn.args.args, *fn.args.kwonlyargs, *fn.args.posonlyargs]:
        a.annotation = None
    return fn


def _line(src: str, pattern: str, rel: str) -> str:
    """``rel:line`` of the first line matching ``pattern`` (a checked source pattern, not executed)."""
    for i, line in enumerate(src.splitlines(), 1):
        if re.search(pattern, line):
            return f"{rel}:{i}"
    raise Moved(f"{rel}: no line matches {pattern!r}")


def specforge_010(root: Path) -> dict[str, Any]:
    """The aux-layer statements of the online model, on an output_hidden_states tuple of L+1 symbols."""
    path = pkg_dir(root, "specforge") / "core" / "eagle3.py"
    tree, src = _module(path)
    owner = next((f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and "low_aux_layer" in ast.unparse(f)), None)
    if owner is None:
        raise Moved("specforge 0.1.0 core/eagle3.py: no aux-layer selection")
    body = owner.body
    start = next(i for i, s in enumerate(body) if "num_hidden_states" in ast.unparse(s))
    stop = next(i for i, s in enumerate(body) if ast.unparse(s).startswith("hidden_states2"))
    code = compile(ast.fix_missing_locations(ast.Module(body=body[start : stop + 1], type_ignores=[])), str(path), "exec")
    cases = {}
    for L in LS:
        ns: dict[str, Any] = {"outputs": SimpleNamespace(hidden_states=tuple(("hs", i) for i in range(L + 1)))}
        exec(code, ns)
        cases[str(L)] = [ns[f"hidden_states{k}"][1] for k in range(3)]
    rel = "specforge/core/eagle3.py"
    return {
        "cases": cases,
        "kind": "hf-hidden-states",
        "source": f"{rel}:{body[start].lineno}-{body[stop].lineno} (executed)",
        "capture_source": _line(src, r"output_hidden_states=True", rel) + " (the target's HF forward, pattern)",
    }


def specforge_020(root: Path) -> dict[str, Any]:
    """resolve_eagle_capture_layers with no ids in the run or the draft config; the ids go to SGLang's setter."""
    pkg = pkg_dir(root, "specforge")
    path = pkg / "algorithms" / "model_providers.py"
    tree, _ = _module(path)
    fn = _function(tree, "resolve_eagle_capture_layers")
    resolve = _compile_fn(fn, path, {})
    cases = {}
    for L in LS:
        cfg = SimpleNamespace(model=SimpleNamespace(aux_hidden_state_layer_ids=None))
        cases[str(L)] = resolve(cfg, {}, SimpleNamespace(num_hidden_layers=L))
    cap = (pkg / "offline_capture" / "sglang_backend" / "capture.py").read_text()
    schema = (pkg / "config" / "schema.py").read_text()
    return {
        "cases": cases,
        "kind": "ids",
        "source": f"specforge/algorithms/model_providers.py:{fn.lineno} resolve_eagle_capture_layers (executed)",
        "capture_source": _line(
            cap, r"set_eagle3_layers_to_capture\(layer_ids\)", "specforge/offline_capture/sglang_backend/capture.py"
        )
        + ", "
        + _line(schema, r'target_backend: Literal\["sglang"\]', "specforge/config/schema.py")
        + " (patterns: the only target backend is SGLang, whose setter takes the ids)",
    }


class _Sym:
    """A layer's output symbol: ``h + r`` of layer k is the residual stream after layer k."""

    def __init__(self, name: str, k: int) -> None:
        self.name, self.k = name, k

    def __add__(self, other: _Sym) -> _Sym:
        assert (self.name, other.name, self.k) == ("h", "r", other.k), "not the layer's residual stream"
        return _Sym("layer_out", self.k)

    def clone(self) -> _Sym:
        return self


def _patched_loop(path: Path, ids: list[int], L: int) -> list[int]:
    """The worker's own decoder loop on L symbolic layers: which layer's residual stream each capture is."""
    tree, _ = _module(path)
    rank = SimpleNamespace(is_first_rank=True, is_last_rank=True, rank_in_group=0)
    ns: dict[str, Any] = {"get_pp_group": lambda: rank, "get_tp_group": lambda: rank, "islice": islice,
                          "IntermediateTensors": dict}  # fmt: skip
    fwd = _compile_fn(_function(tree, "_patched_forward"), path, ns)
    stored: list[Any] = []

    def layer(k: int) -> Any:
        return lambda hidden_states, positions, residual: (_Sym("h", k), _Sym("r", k))

    base = SimpleNamespace(
        layers=[layer(k) for k in range(L)], start_layer=0, end_layer=L,
        embed_input_ids=lambda ids: _Sym("embed", -1), get_input_embeddings=lambda ids: _Sym("embed", -1), norm=lambda h, r: (_Sym("final_norm", L), None),
        _extension=SimpleNamespace(_layer_ids=frozenset(ids), _store_captured_states=stored.extend),
    )  # fmt: skip
    fwd(base, input_ids=None, positions=None)
    if any(s.name != "layer_out" for s in stored):
        raise Moved(f"{path}: the patched loop stores something other than a layer's residual stream")
    return [s.k for s in stored]


def speculators_worker(root: Path) -> dict[str, Any]:
    """0.3.0-0.4.x: the generator's default ids and the worker's own capture loop, both executed."""
    pkg = pkg_dir(root, "speculators")
    gen = pkg / "data_generation" / "vllm_hidden_states_generator.py"
    tree, src = _module(gen)
    branch = next((n for n in ast.walk(tree) if isinstance(n, ast.If) and ast.unparse(n.test) == "layer_ids is None"), None)
    if branch is None:
        raise Moved(f"{gen}: no default for layer_ids")
    code = compile(ast.fix_missing_locations(ast.Module(body=branch.body, type_ignores=[])), str(gen), "exec")
    cases, loop = {}, {}
    for L in LS:
        ns: dict[str, Any] = {"self": SimpleNamespace(), "num_layers": L, "log": SimpleNamespace(info=lambda *a: None)}
        exec(code, ns)
        ids = ns["self"].layer_ids
        cases[str(L)] = ids
        loop[str(L)] = _patched_loop(pkg / "data_generation" / "custom_worker.py", ids, L)
    data = (pkg / "train" / "data.py").read_text()
    rel = "speculators/data_generation/"
    return {
        "cases": cases,
        "captured_layer_out": loop,
        "kind": "ids",
        "source": f"{rel}vllm_hidden_states_generator.py:{branch.lineno} (default, executed); "
        f"{rel}custom_worker.py:{_function(_module(pkg / 'data_generation' / 'custom_worker.py')[0], '_patched_forward').lineno} "
        "_patched_forward (executed on symbolic layers)",
        "capture_source": _line(data, r'torch\.cat\(data\["hidden_states"\]\[:-1\]', "speculators/train/data.py")
        + " (pattern: the draft takes every captured state but the last, the verifier's)",
    }


def speculators_vllm(root: Path) -> dict[str, Any]:
    """0.5.0+: resolve_target_layer_ids with no ids given; the states come from a vLLM server."""
    pkg = pkg_dir(root, "speculators")
    path = pkg / "models" / "utils.py"
    tree, src = _module(path)
    fn = _function(tree, "resolve_target_layer_ids")
    cases = {}
    for L in LS:
        ns: dict[str, Any] = {
            "get_verifier_config": lambda *a, _L=L, **k: SimpleNamespace(num_hidden_layers=_L),
            "warnings": SimpleNamespace(warn=lambda *a, **k: None),
            "DEFAULT_TARGET_LAYER_IDS_WARNING": "{target_layer_ids}",
        }
        cases[str(L)] = _compile_fn(fn, path, ns)(None, "verifier")
    client = pkg / "data_generation" / "vllm_client.py"
    if not client.exists() or (pkg / "data_generation" / "custom_worker.py").exists():
        raise Moved(f"{root.name}: data generation is not the vLLM client alone")
    return {
        "cases": cases,
        "kind": "ids",
        "source": f"speculators/models/utils.py:{fn.lineno} resolve_target_layer_ids (executed)",
        "capture_source": "speculators/data_generation/vllm_client.py (pattern: hidden states requested from a vLLM "
        "server; its own capture decides, no speculators capture code in the wheel)",
    }


def classify(project: str, version: str, root: Path) -> dict[str, Any]:
    """One release: its requirements, and its selection code executed (or why it trains no EAGLE-3)."""
    pins = engine_pins(requirements(root))
    if project == "specforge":
        got = specforge_010(root) if version == "0.1.0" else specforge_020(root)
        engine = "transformers" if got["kind"] == "hf-hidden-states" else "sglang"
    else:
        pkg = pkg_dir(root, "speculators")
        if not (pkg / "data_generation").is_dir():
            return {"pins": pins, "trains": False, "why": "no data_generation package: no hidden states captured"}
        worker = (pkg / "data_generation" / "custom_worker.py").exists()
        got = speculators_worker(root) if worker else speculators_vllm(root)
        engine = "speculators-worker" if worker else "vllm"
    return {"pins": pins, "trains": True, "engine": engine, **got}


def main() -> int:
    table: dict[str, dict[str, Any]] = {}
    for project, versions in (("specforge", SPECFORGE), ("speculators", SPECULATORS)):
        for v in versions:
            table[f"{project}=={v}"] = classify(project, v, fetch(project, v))
    (HERE / "trainers_table.json").write_text(json.dumps({"LS": list(LS), "releases": table}, indent=1) + "\n")
    import trainers_rows

    rows = trainers_rows.rows(table, LS)
    out = ROOT / "eagle3_doctor" / "data" / "trainer_capture.json"
    out.write_text(json.dumps(rows, indent=1) + "\n")
    print(f"trainers: {len(table)} releases, {sum(r['trains'] for r in table.values())} train EAGLE-3 -> {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
