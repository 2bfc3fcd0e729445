"""TensorRT-LLM, release by release: execute the capture-deciding functions and write the capture table.

TensorRT-LLM has no wheel on PyPI, so the sources are excerpts read from the search index of public GitHub
files and kept in the git-ignored cache (conformance/.cache/src/trtllm/<key>/), each named with its provenance
and sha256 in trtllm_sources.json. Two things are executed, on stubs, with `ast`-compiled functions:

- each family's decoder-layer ``forward`` (layer 0 of a target, one rank and two ranks with the fusions on), with a
  recording ``spec_metadata``: whether the layer calls ``maybe_capture_hidden_states`` at all, and whether what it
  hands over (``hidden_states + residual``) is the residual stream the layer returns;
- ``Eagle3SpecMetadata`` (two-model) and ``Eagle3OneModelSpecMetadata`` (one-model): ``__post_init__`` on the
  configured ids (None: the default), then ``maybe_capture_hidden_states`` called by each of the L layers in order
  (and, for id -1, by the model after its final norm, as TensorRT-LLM's model does: a pattern, not executed),
  into a buffer whose slots start uninitialized (``torch.empty``).

An outcome is the list of slot contents (``layer_out[k]``, ``final_norm``, ``<uninitialized>``) or the error
``__post_init__`` raises. Without the cache (a fresh clone) the committed table is kept and this says so.
Run: ``python conformance/trtllm_exec.py [OUTCOMES.json [ROWS.json]]`` (make conformance runs it).
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import json
import sys
import types
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache" / "src" / "trtllm"
MANIFEST = HERE / "trtllm_sources.json"
PACKAGE_TABLE = HERE.parent / "eagle3_doctor" / "data" / "trtllm_capture.json"  # the rows the doctor reads
OUTCOMES = HERE / "trtllm_table.json"  # every executed case, which tests/engines/test_trtllm_releases.py checks
LS = (4, 6, 8, 32, 61)
MODES = ("one-model", "two-model")


class CodeMoved(Exception):
    """An excerpt no longer runs on these stubs: read the new source and teach the stubs here."""


# --------------------------------------------------------------------------- symbolic values


class Sym:
    def __init__(self, text: str):
        self.text = text

    shape = (7, 16)

    def __add__(self, other: Any) -> Sym:
        return Sym(f"({self.text} + {other.text})")

    def to(self, *a: Any, **k: Any) -> Sym:
        return self

    def __len__(self) -> int:
        raise CodeMoved("a layer output was unpacked as a tuple (the un-finalized MoE path)")

    def __repr__(self) -> str:
        return self.text


class Norm:
    """A (fused add-)RMSNorm: norm(x) or, with a residual, (norm(x + r), x + r)."""

    def __init__(self, name: str):
        self.name, self.weight, self.variance_epsilon = name, object(), 1e-6
        self.sums: list[Sym] = []

    def __call__(self, x: Sym, residual: Sym | None = None) -> Any:
        if residual is None:
            return Sym(f"{self.name}({x.text})")
        s = x + residual
        self.sums.append(s)
        return Sym(f"{self.name}({s.text})"), s


class Call:
    def __init__(self, name: str):
        self.name = name
        self.experts = types.SimpleNamespace(has_nvfp4=False)

    def __call__(self, *a: Any, **k: Any) -> Sym:
        h = k.get("hidden_states", a[0] if a else None)
        return Sym(f"{self.name}({h.text})")


class AllReduce:
    """The fused allreduce: RESIDUAL_RMS_NORM returns (norm(x + r), x + r) with the norm it was handed."""

    def __init__(self, *norms: Norm):
        self.norms = {id(n.weight): n for n in norms}

    def __call__(self, x: Sym, all_reduce_params: Any = None) -> Any:
        p = all_reduce_params
        if p is None or getattr(p, "fusion_op", None) != "RESIDUAL_RMS_NORM":
            return x
        norm = self.norms[id(p.norm_weight)]
        s = x + p.residual
        norm.sums.append(s)  # the norm fused into the allreduce sums like the norm itself
        return Sym(f"{norm.name}({s.text})"), s


def _params(**k: Any) -> types.SimpleNamespace:
    return types.SimpleNamespace(**k)


class _Anything:
    def __call__(self, *a: Any, **k: Any) -> _Anything:
        return self

    def __getattr__(self, name: str) -> _Anything:
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __getitem__(self, key: Any) -> _Anything:
        return self


class Buffer:
    """The capture buffer: ``n`` slots of ``hidden`` columns, uninitialized (torch.empty) until written."""

    def __init__(self, n: int, hidden: int):
        self.slots: list[str] = ["<uninitialized>"] * n
        self.hidden = hidden
        self.dtype = None

    def __getitem__(self, key: Any) -> Any:
        cols = key[-1] if isinstance(key, tuple) else key
        slot = cols.start // self.hidden
        buf = self

        class View:
            def index_copy_(self, dim: int, index: Any, value: Sym) -> None:
                buf.slots[slot] = value.text

            def copy_(self, value: Sym, non_blocking: bool = False) -> None:
                buf.slots[slot] = value.text

        return View()


class TorchStub(types.SimpleNamespace):
    def __init__(self, hidden: int):
        super().__init__(long=None, int=None, bfloat16=None, Tensor=object)
        self.hidden = hidden

    def empty(self, shape: Any, **k: Any) -> Any:
        if isinstance(shape, tuple) and len(shape) == 2:
            return Buffer(shape[1] // self.hidden, self.hidden)
        return _Anything()

    def zeros(self, *a: Any, **k: Any) -> Any:
        return _Anything()


# --------------------------------------------------------------------------- loading


def _strip(fn: ast.FunctionDef) -> ast.FunctionDef:
    fn.decorator_list = []
    fn.returns = None
    for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs, fn.args.vararg, fn.args.kwarg):
        if a is not None:
            a.annotation = None
    return fn


def load_methods(key: str, source: dict) -> dict[str, dict[str, tuple[ast.FunctionDef, int]]]:
    """{class: {method: (ast, line)}} of one excerpt, after its sha256 is checked against the manifest."""
    path = CACHE / key / source["file"]
    text = path.read_text()
    digest = hashlib.sha256(text.encode()).hexdigest()
    if digest != source["excerpt_sha256"]:
        raise CodeMoved(f"{path}: sha256 {digest} is not the manifest's {source['excerpt_sha256']}")
    out: dict[str, dict[str, tuple[ast.FunctionDef, int]]] = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.ClassDef):
            out[node.name] = {f.name: (f, f.lineno) for f in node.body if isinstance(f, ast.FunctionDef)}
    return out


def compile_method(fn: ast.FunctionDef, given: dict) -> types.FunctionType:
    mod = ast.Module(body=[_strip(fn)], type_ignores=[])
    g: dict = {"__builtins__": builtins, **given}
    exec(compile(ast.fix_missing_locations(mod), "<trtllm>", "exec"), g)
    return g[fn.name]


# --------------------------------------------------------------------------- the decoder layer


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[int, str]] = []

    def is_layer_capture(self, layer_id: int) -> bool:
        return True

    def maybe_capture_hidden_states(self, layer_id: int, hidden_states: Sym, residual: Sym | None = None) -> None:
        self.calls.append((layer_id, (hidden_states + residual).text if residual is not None else hidden_states.text))


def run_layer(fn: ast.FunctionDef, tp: int) -> dict:
    """Layer 0 of a target, ``tp`` ranks (2: the allreduce fusions on), a spec_metadata capturing every layer."""
    inp, post, nxt = Norm("input_layernorm"), Norm("post_attention_layernorm"), Norm("next_layer_layernorm")
    fused = tp > 1
    layer = types.SimpleNamespace(
        layer_idx=0,
        input_layernorm=inp,
        post_attention_layernorm=post,
        next_layer_layernorm=nxt,
        self_attn=Call("attn"),
        mlp=Call("mlp"),
        allreduce=AllReduce(post, nxt),
        moe_allreduce=types.SimpleNamespace(max_token=1 << 30),
        fusion_config=types.SimpleNamespace(PRE_MOE_FUSION=fused, POST_MOE_FUSION=fused),
        mapping=types.SimpleNamespace(tp_size=tp),
        disable_attn_allreduce=fused or tp == 1,
        model_config=types.SimpleNamespace(moe_backend="CUTLASS"),
        is_p2p_supported=True,
    )
    given = {
        "AllReduceParams": _params,
        "MoEAllReduceParams": _params,
        "AllReduceFusionOp": types.SimpleNamespace(RESIDUAL_RMS_NORM="RESIDUAL_RMS_NORM"),
        "torch": _Anything(),
        "len": len,
        "range": range,
    }
    rec = Recorder()
    out = compile_method(fn, given)(
        layer, position_ids=None, hidden_states=Sym("x"), attn_metadata=None, residual=None, spec_metadata=rec
    )
    h, r = out
    # the residual stream after the layer: what the next layer's norm sums, else what the layer hands on
    stream = (nxt.sums[-1] if nxt.sums else h + r).text
    if not rec.calls:
        return {"capture": "none", "stream": stream}
    got = rec.calls[0][1]
    return {"capture": "stream" if got == stream else "other", "stream": stream, "captured": got}


# --------------------------------------------------------------------------- the metadata


def run_metadata(methods: dict, mode: str, L: int, ids: list[int] | None, capturing: bool) -> list[str] | str:
    """The slots the draft reads: each written capture point, or <uninitialized>; or the error text."""
    cls = methods["Eagle3OneModelSpecMetadata" if mode == "one-model" else "Eagle3SpecMetadata"]
    hidden = 16
    torch = TorchStub(hidden)
    given = {"torch": torch, "len": len, "sorted": sorted, "list": list, "enumerate": enumerate, "ValueError": ValueError}
    post = compile_method(cls["__post_init__"][0], given)
    capture = compile_method(cls["maybe_capture_hidden_states"][0], given)
    md = types.SimpleNamespace(
        num_layers=L,
        layers_to_capture=set(ids) if ids is not None else None,  # eagle3_layers_to_capture is a Set[int]
        is_draft_model=False,
        is_mtp_eagle=False,
        max_num_tokens=7,
        max_num_requests=1,
        hidden_size=hidden,
        dtype=None,
        eagle_choices=None,
        num_tokens=7,
    )
    try:
        post(md)
    except ValueError as e:
        return f"!start-up: ValueError: {e}"
    n = len(md.layers_to_capture)
    if mode == "two-model":
        buf = Buffer(n, hidden)
        md.eagle3_resource_manager = types.SimpleNamespace(hidden_states=buf)
    else:
        buf = md.hidden_states
    if capturing:
        for k in range(L):  # each decoder layer, in order, with the stream after it
            capture(md, k, Sym(f"layer_out[{k}]"), None)
        # the model captures id -1 after its final norm (modeling_speculative.py; a pattern, not executed here)
        capture(md, -1, Sym("final_norm"), None)
    return list(buf.slots)


def id_grid(L: int) -> list[list[int] | None]:
    h = L // 2
    return [None, [1, h - 1, L - 4], [h, 1, L - 4], [-1, 1, h], [2, 2, h], [1, h, L], [0, 1, L - 1], [h]]


# --------------------------------------------------------------------------- the table


def execute(manifest: dict) -> dict:
    srcs = manifest["sources"]
    loaded = {k: load_methods(k, s) for k, s in srcs.items()}
    meta_key = next(k for k in srcs if k.startswith("eagle3-"))
    meta = loaded[meta_key]
    layers: dict[str, dict] = {}
    for key, s in srcs.items():
        if key == meta_key:
            continue
        name, cls = next(iter(loaded[key].items()))
        layers[key] = {tp: run_layer(cls["forward"][0], tp) for tp in (1, 2)}
        at = f"@{s['commit'][:8]}" if s["commit"] else f" index file {s['index_id']}"
        layers[key]["src"] = f"{s['path']} {name}.forward ({key}: {at.strip()})"
    families: dict[str, list[dict]] = {}
    for fam, spec in manifest["families"].items():
        rows = []
        for first, key in spec["rows"]:
            if key is None:
                rows.append(
                    {"first": first, "capture": "none", "src": spec.get("evidence_none", ""), "executed": False, "note": ""}
                )
                continue
            r1, r2 = layers[key][1], layers[key][2]
            rows.append(
                {
                    "first": first,
                    "capture": r1["capture"],
                    "tp2": r2["capture"],
                    "src": layers[key]["src"],
                    "executed": True,
                    "note": spec.get("notes", {}).get(first, ""),
                }
            )
        families[fam] = {"class": spec["class"], "layer": spec["layer"], "rows": rows}
    outcomes: dict[str, Any] = {}
    for fam, entry in families.items():
        for row in entry["rows"]:
            for mode in MODES:
                for L in LS:
                    for ids in id_grid(L):
                        case = f"{fam}|{row['first']}|{mode}|{L}|{'default' if ids is None else ','.join(map(str, ids))}"
                        outcomes[case] = run_metadata(meta, mode, L, ids, row["capture"] == "stream")
    metadata_src = f"{srcs[meta_key]['path']}@{srcs[meta_key]['commit'][:8]}"
    return {"metadata_src": metadata_src, "families": families, "outcomes": outcomes}


def main(argv: list[str]) -> int:
    manifest = json.loads(MANIFEST.read_text())
    missing = [k for k, s in manifest["sources"].items() if not (CACHE / k / s["file"]).exists()]
    if missing:
        print(
            f"trtllm: no cached excerpt for {', '.join(missing)} under {CACHE}; "
            f"{OUTCOMES.name} and {PACKAGE_TABLE.name} are kept as committed (see conformance/README.md)"
        )
        return 0
    table = execute(manifest)
    out = Path(argv[1]) if len(argv) > 1 else OUTCOMES
    out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    rows = {k: v for k, v in table.items() if k != "outcomes"}
    pkg = Path(argv[2]) if len(argv) > 2 else PACKAGE_TABLE
    pkg.write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
    print(f"trtllm: {len(table['outcomes'])} cases from {len(manifest['sources'])} excerpts -> {out}, rows -> {pkg}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
