"""Execute each release's own MTP code on symbols: what the head is fed, what it recycles, what its logits read.

For every sglang and vllm release and each MTP family it has (DeepSeek-V3, GLM-4-MoE, Qwen3-Next, Qwen3.5),
the family's MTP model file (vLLM ``model_executor/models/<family>_mtp.py``, the class the registry maps the
MTP architecture to; SGLang ``srt/models/<family>_nextn.py`` / ``_mtp.py``, its ``EntryClass``) is loaded on
the stubs of mtp_stubs.py, its model is built from its ``__init__``'s own assignments, and its ``forward``
and (vLLM) ``compute_logits`` are **executed** on symbols. Read off the results:
- ``recycle``: what the model hands the next step (vLLM: the second element where the model returns a pair
  and the release's proposer splits it, executed: ``model_returns_tuple`` or the ``if`` test before the
  split; SGLang: the hidden state its logits processor stores, executed from ``_get_hidden_states_to_store``
  where the release has it) - the layer output before a norm (``pre_norm``) or a norm of it, and which;
- ``logits_norms``: the norms between the layer output and the head (``shared_head.norm``, the model's
  ``norm``), one expected;
- ``inputs``: the concat order, the norm on each side (enorm / hnorm, pre_fc_norm_*), whether the embedding
  is zeroed at position 0.
Also executed: vLLM's speculators config reader (``transformers_utils/configs/speculators/base.py``
``extract_vllm_speculative_config`` and ``extract_transformers_pre_trained_config`` over ``algos.py``'s
registry) on the fixture's speculators MTP config. Checked source patterns (not executed, file:line in the
row): the target forward's last statement (step 1's hidden), the spot in ``transformers_utils/config.py``
that sends a speculators checkpoint to that reader, and SGLang's absence of any speculators reader.
Branches taken: the reference path (``_is_cuda``-style platform flags False: SGLang's CUDA branch calls the
fused kernel ``fused_eh_norm`` of the same enorm/hnorm), one rank, no data-parallel attention.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import json
import re
import traceback
from pathlib import Path
from typing import Any

import mtp_stubs as S
from mtp_build import Builder
from mtp_patterns import MODELS, sglang_speculators, step1, vllm_method, vllm_targets
from speculators_reader import SPEC_DIR, load_reader
from stubs import Obj, load_tree

FAMILIES = {
    "vllm": {"deepseek_v3": "deepseek_mtp", "glm4_moe": "glm4_moe_mtp", "qwen3_next": "qwen3_next_mtp", "qwen3_5": "qwen3_5_mtp"},
    "sglang": {"deepseek_v3": "deepseek_nextn", "glm4_moe": "glm4_moe_nextn", "qwen3_next": "qwen3_next_mtp", "qwen3_5": "qwen3_5_mtp"},
}  # fmt: skip
PROPOSERS = ("vllm/v1/spec_decode/llm_base_proposer.py", "vllm/v1/spec_decode/eagle.py")
HF_CONFIG = "vllm/transformers_utils/config.py"
SG_LOGITS = "sglang/srt/layers/logits_processor.py"
PACKAGE_TABLE = "eagle3_doctor/draft/mtp/serving.json"
FIXTURE = "fixtures/mtp-speculators/config.json"


class Release:
    """One release's tree: modules loaded once, model classes of other model files resolved on demand."""

    def __init__(self, engine: str, root: Path, version: str):
        self.engine, self.root, self.version = engine, root, version
        self._mods: dict[Path, dict] = {}
        self.builder = Builder(self.resolve)

    def module(self, path: Path) -> dict:
        if path not in self._mods:
            self._mods[path] = S.load_module(path)
        return self._mods[path]

    def resolve(self, g: dict, name: str) -> type | None:
        """A model class (``*Model``, ``*ForCausalLM``) the file imports from another model file of the release."""
        level, mod = g.get("_mtp_imports", {}).get(name, (0, ""))
        if not name.endswith(("Model", "ForCausalLM")):
            return None
        here = MODELS[self.engine]
        rel = f"{here}/{mod}.py" if level == 1 else mod.replace(".", "/") + ".py"
        p = self.root / rel
        if not (rel.startswith(here) and p.exists()):
            return None
        cls = self.module(p).get(name)
        return cls if isinstance(cls, type) and "_mtp_ast" in cls.__dict__ else None

    def rel(self, path: str) -> str:
        return str(Path(path).resolve().relative_to(self.root.resolve()))


def _line(cls: type, meth: str) -> str:
    node = cls.__dict__.get("_mtp_ast")
    for k in cls.__mro__:
        node = k.__dict__.get("_mtp_ast")
        f = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == meth), None) if node else None
        if f is not None:
            return f"{k.__name__}.{meth}@{f.lineno}"
    raise S.MTPCodeMoved(f"{cls.__name__} has no {meth}")


def _kwargs(fn: Any, values: dict) -> dict:
    import inspect

    out = {}
    for name, p in inspect.signature(fn).parameters.items():
        if name == "self" or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        if name in values:
            out[name] = values[name]
        elif "hidden_states" in name and p.default is inspect.Parameter.empty:
            out[name] = S.Sym("leaf", "h")
        elif p.default is inspect.Parameter.empty:
            out[name] = None
    return out


_IN = {"input_ids": S.Sym("leaf", "ids"), "positions": S.Sym("leaf", "pos"), "spec_step_idx": 0}


def _short(path: str) -> str:
    parts = path.replace("[*]", "").split(".")
    return ".".join(parts[-2:]) if len(parts) > 1 and parts[-2] == "shared_head" else parts[-1]


def norms_after_layer(x: Any) -> list[str] | None:
    """The norms between the decoder layer's output and ``x``, outermost first (None: x is not the layer's output)."""
    out: list[str] = []
    while isinstance(x, S.Sym):
        if x.op in ("block", "mlp", "resid") or (x.op == "add" and all(getattr(a, "op", "") in ("mlp", "resid") for a in x.args)):
            return out
        if x.op == "norm":
            out.append(_short(x.name))
        elif x.op == "call":
            norms = [a for a in x.args if isinstance(a, S.Norm)]
            out += [f"{_short(n._name)} (through {x.name})" for n in norms]
        elif x.op not in ("linear", "logits"):
            return None
        x = next((a for a in x.args if isinstance(a, S.Sym)), None)
    return None


def inputs(x: Any) -> dict[str, Any]:
    """What goes into the head's input projection: the concat order, the norms on each side, the masking."""
    cat = next((n for n in S.walk(x) if isinstance(n, S.Sym) and n.op == "cat"), None)
    if cat is None or len(cat.args) != 2:
        raise S.MTPCodeMoved(f"no two-way concat before the input projection: {S.render(x)}")
    sides = []
    for part in cat.args:
        leaves = {n.name for n in S.walk(part) if isinstance(n, S.Sym) and n.op == "leaf"}
        what = "embed" if "embed" in leaves else "hidden" if "h" in leaves else S.render(part)
        norms = [_short(n.name) for n in S.walk(part) if isinstance(n, S.Sym) and n.op == "norm"]
        zeroed = any(n.op == "cmp" and "pos" in S.render(n) for n in S.walk(part) if isinstance(n, S.Sym))
        sides.append({"input": what, "norms": norms, "zeroed_at_position_0": zeroed})
    return {"concat": [s["input"] for s in sides], "sides": sides}


def _err(e: BaseException, files: tuple[str, ...]) -> str:
    at = "?"
    for fr in traceback.extract_tb(e.__traceback__):
        if any(fr.filename.endswith(f) for f in files):
            at = f"{Path(fr.filename).name}:{fr.lineno}"
    msg = re.sub(r" at 0x[0-9a-f]+", "", str(e))  # a registry of functions prints their addresses
    return f"!{type(e).__name__}: {msg} @ {at}"


def _read_off(recycled: Any, logits_in: Any) -> dict[str, Any]:
    rec = norms_after_layer(recycled)
    lg = norms_after_layer(logits_in)
    if rec is None or lg is None:
        raise S.MTPCodeMoved(f"the recycled or logits state is not the layer's output: {recycled!r} / {logits_in!r}")
    return {
        "recycle": "post_norm" if rec else "pre_norm",
        "recycle_norms": rec,
        "logits_norms": lg,
        **inputs(recycled),
        "recycled_expr": S.render(recycled),
        "logits_expr": S.render(logits_in),
    }


# --------------------------------------------------------------------------- vLLM


def vllm_arch(root: Path, stem: str) -> tuple[str, str, int] | None:
    """(architecture, class, line) the release's registry maps to the family's MTP file."""
    reg = root / MODELS["vllm"] / "registry.py"
    if not reg.exists():
        return None
    for n in ast.walk(load_tree(reg)):
        if isinstance(n, ast.Dict):
            for k, v in zip(n.keys, n.values, strict=False):
                if isinstance(k, ast.Constant) and isinstance(v, ast.Tuple) and len(v.elts) == 2:
                    mod, cls = (e.value if isinstance(e, ast.Constant) else None for e in v.elts)
                    if mod == stem:
                        return str(k.value), str(cls), k.lineno
    return None


def vllm_split(root: Path, stem: str, arch: str) -> dict[str, Any]:
    """How the release's proposer reads the MTP model's return: one tensor for both logits and recycling, or
    (logits hidden, recycled hidden). Executed: ``model_returns_tuple`` or the test of the ``if`` whose body
    takes the return whole, on a proposer whose method is the release's MTP method name."""
    method, method_at = vllm_method(root, stem)
    for rel in PROPOSERS:
        p = root / rel
        if not p.exists():
            continue
        tree = load_tree(p)
        me = Obj(method=method, draft_model_config=Obj(hf_config=Obj(architectures=[arch])))
        for f in ast.walk(tree):
            if isinstance(f, ast.FunctionDef) and f.name == "model_returns_tuple":
                fn = S.compile_method(f, str(p))
                got = bool(fn(me))
                return {
                    "method": method,
                    "method_from": method_at,
                    "tuple": got,
                    "at": f"{rel}:{f.lineno}",
                    "src": ast.unparse(f),
                }
        for n in ast.walk(tree):
            if isinstance(n, ast.If) and any(
                isinstance(s, ast.Assign) and ast.unparse(s) == "last_hidden_states = ret_hidden_states" for s in n.body
            ):
                test = eval(compile(ast.Expression(n.test), str(p), "eval"), {"self": me})  # the release's own test
                at = f"{rel}:{n.lineno}"
                return {"method": method, "method_from": method_at, "tuple": not test, "at": at, "src": ast.unparse(n.test)}
    return {"method": method, "method_from": method_at, "tuple": None, "at": "no MTP branch in v1/spec_decode"}


def run_vllm(rel: Release, fam: str) -> dict[str, Any]:
    stem = FAMILIES["vllm"][fam]
    f = rel.root / MODELS["vllm"] / f"{stem}.py"
    found = vllm_arch(rel.root, stem)
    if not f.exists() or found is None:
        return {"absent": f"{MODELS['vllm']}/{stem}.py" + ("" if f.exists() else " absent")}
    arch, cname, reg_line = found
    split = vllm_split(rel.root, stem, arch)
    row, top = vllm_model(rel, stem, cname, split["tuple"])
    row = {"architecture": arch, **row, "split": split}
    row["executed"].append(f"registry.py:{reg_line}")
    row["_code"] = [*_class_sources(top), json.dumps({k: v for k, v in split.items() if k != "at"}), split.get("src", "")]
    return row


def vllm_model(rel: Release, stem: str, cname: str, pair: bool | None) -> tuple[dict[str, Any], Any]:
    """The MTP model's forward and compute_logits, executed; ``pair``: the proposer splits a returned pair
    into (logits hidden, recycled hidden), as the release's proposer decides (vllm_split)."""
    cls = rel.module(rel.root / MODELS["vllm"] / f"{stem}.py").get(cname)
    if not isinstance(cls, type):
        raise S.MTPCodeMoved(f"{stem}.py has no class {cname}")
    top = rel.builder.build(cls)
    out = type(top).forward(top, **_kwargs(type(top).forward, {**_IN, "inputs_embeds": None, "intermediate_tensors": None}))
    if isinstance(out, tuple) != bool(pair) and pair is not None:
        raise S.MTPCodeMoved(f"{cname} returns {'a pair' if isinstance(out, tuple) else 'one tensor'}; the proposer disagrees")
    logits_in, recycled = out if isinstance(out, tuple) else (out, out)
    cl = type(top).compute_logits
    given = {"hidden_states": logits_in, "spec_step_idx": 0, "sampling_metadata": S.Rec("sampling_metadata")}
    logits = cl(top, **_kwargs(cl, given))
    if not (isinstance(logits, S.Sym) and logits.op == "logits"):
        raise S.MTPCodeMoved(f"{cname}.compute_logits did not reach the logits processor: {logits!r}")
    src = rel.rel(cls._mtp_file)
    row = {"class": cname, "returns": "pair" if isinstance(out, tuple) else "one", **_read_off(recycled, logits.args[0])}
    row["executed"] = [f"{src}:{_line(cls, 'forward')}", f"{src}:{_line(cls, 'compute_logits')}"]
    return row, top


_RUN = ("__init__", "forward", "compute_logits", "embed_input_ids")


def _class_sources(top: Any) -> list[str]:
    """The methods the run built from or executed, of every engine class it instantiated."""
    out = []
    for k in _built_classes(top) | {type(top)}:
        out += [ast.unparse(f) for f in k._mtp_ast.body if isinstance(f, ast.FunctionDef) and f.name in _RUN]
    return sorted(out)


def speculators(root: Path, cfg: dict) -> dict[str, Any]:
    """vLLM's own speculators reader on the config (executed), and where the release calls it (pattern)."""
    loaded = load_reader(root)
    if loaded is None:
        return {"reader": None, "outcome": f"!no speculators reader ({SPEC_DIR} absent): nothing reads an MTPDraftModel config"}
    cls, types_ = loaded
    out: dict[str, Any] = {"registered": sorted(types_), "reader": f"{SPEC_DIR}/base.py"}
    if not hasattr(cls, "extract_vllm_speculative_config"):  # 0.10.x: the check sits in from_pretrained itself
        given = type("SpeculatorsConfig", (cls,), {"get_config_dict": classmethod(lambda c, p, **k: (copy.deepcopy(cfg), {}))})
        try:
            given.from_pretrained("mtp-speculators")
            out["from_pretrained"] = "read"
        except Exception as e:  # the engine's refusal, as it words it
            out["from_pretrained"] = _err(e, ("base.py", "algos.py"))
    for meth in ("extract_vllm_speculative_config", "extract_transformers_pre_trained_config"):
        if not hasattr(cls, meth):
            out[meth] = "absent"
            continue
        try:
            got = getattr(cls, meth)(copy.deepcopy(cfg))
            out[meth] = {k: got[k] for k in ("method", "num_speculative_tokens", "architectures") if k in got}
        except Exception as e:  # the engine's refusal, as it words it
            out[meth] = _err(e, ("base.py", "algos.py"))
    out["mtp_targets"] = vllm_targets(root)
    hf = root / HF_CONFIG
    lines = [i + 1 for i, s in enumerate(hf.read_text().splitlines()) if "speculators_config" in s] if hf.exists() else []
    out["called_from"] = f"{HF_CONFIG}:{','.join(map(str, lines[:3]))} (pattern, not executed)" if lines else "not found"
    return out


# --------------------------------------------------------------------------- SGLang


class ForwardBatch:
    """SGLang's batch as the NextN forward reads it: the target's hidden state in spec_info, an extend/decode
    batch that is not idle and has no multimodal input."""

    def __init__(self) -> None:
        self.spec_info = S.Module()  # every other field None: no DSA top-k carry, no multimodal input
        object.__setattr__(self.spec_info, "hidden_states", S.Sym("leaf", "h"))
        self.forward_mode = S.Rec("forward_mode")
        for m in ("is_idle", "is_extend", "is_draft_extend_v2", "is_target_verify", "is_decode"):
            setattr(self.forward_mode, m, lambda *a, **k: False)
        self.mm_input_embeds = None
        self.residual_stream = None

    def contains_mm_inputs(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return S.Rec(f"forward_batch.{name}")


def sglang_stored(root: Path, hidden: Any) -> tuple[Any, str, str]:
    """The hidden state SGLang's logits processor hands on to the next draft step (spec_info.hidden_states),
    for the MTP output it was given. Executed: ``_get_hidden_states_to_store`` (capture mode last, no aux, no
    before-norm state); older releases: the forward's ``hidden_states_to_store = hidden_states`` (pattern)."""
    p = root / SG_LOGITS
    if not p.exists():
        return hidden, f"{SG_LOGITS} absent from the cache: the stored state taken as the one given (assumed)", ""
    tree = load_tree(p)
    f = next((f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == "_get_hidden_states_to_store"), None)
    if f is not None:
        fn = S.compile_method(f, str(p))
        mode = Obj(need_capture=lambda: True, is_full=lambda: False, is_last=lambda: True)
        meta = Obj(capture_hidden_mode=mode)
        got = fn(Obj(), hidden, None, None, hidden, None, None, None, meta)
        return got, f"{SG_LOGITS}:{f.lineno} (executed)", ast.unparse(f)
    lines = [i + 1 for i, s in enumerate(p.read_text().splitlines()) if s.strip() == "hidden_states_to_store = hidden_states"]
    if not lines:
        raise S.MTPCodeMoved(f"{SG_LOGITS}: no hidden_states_to_store = hidden_states")
    return hidden, f"{SG_LOGITS}:{lines[0]} (pattern, not executed)", "hidden_states_to_store = hidden_states"


def run_sglang(rel: Release, fam: str) -> dict[str, Any]:
    stem = FAMILIES["sglang"][fam]
    f = rel.root / MODELS["sglang"] / f"{stem}.py"
    if not f.exists():
        return {"absent": f"{MODELS['sglang']}/{stem}.py absent"}
    g = rel.module(f)
    entry = g.get("EntryClass")
    cls = entry[0] if isinstance(entry, list) else entry
    if not isinstance(cls, type):
        raise S.MTPCodeMoved(f"{stem}.py has no EntryClass")
    top = rel.builder.build(cls)
    out = type(top).forward(top, **_kwargs(type(top).forward, {**_IN, "forward_batch": ForwardBatch(), "input_embeds": None}))
    if not (isinstance(out, S.Sym) and out.op == "logits"):
        raise S.MTPCodeMoved(f"{cls.__name__}.forward did not end in the logits processor: {out!r}")
    stored, stored_at, stored_src = sglang_stored(rel.root, out.args[0])
    src = rel.rel(cls._mtp_file)
    row: dict[str, Any] = {"class": cls.__name__, "returns": "logits", "stored": stored_at}
    row |= _read_off(stored, out.args[0])
    row["executed"] = [f"{src}:{_line(cls, 'forward')}"] + sorted(
        {f"{rel.rel(k._mtp_file)}:{_line(k, 'forward')}" for k in _built_classes(top) if k is not type(top)}
    )
    row["_code"] = [*_class_sources(top), stored_src]
    return row


def _built_classes(obj: Any, seen: set | None = None) -> set[type]:
    """The engine classes (with their own forward) the builder instantiated under ``obj``."""
    seen = set() if seen is None else seen
    out: set[type] = set()
    if id(obj) in seen:
        return out
    seen.add(id(obj))
    if "_mtp_ast" in type(obj).__dict__ and any("forward" in k.__dict__ for k in type(obj).__mro__ if "_mtp_ast" in k.__dict__):
        out.add(type(obj))
    for v in list(getattr(obj, "__dict__", {}).values()):
        if isinstance(v, S.Base):
            out |= _built_classes(v, seen)
    return out


# --------------------------------------------------------------------------- checked patterns, and the table


def _key(row: dict[str, Any]) -> str:
    """The code the row executed: the source of every class it built, the proposer split or logits-processor
    function it ran, and the step-1 statement it matched."""
    parts = [*row.pop("_code"), row["step1"]["at"].split(" ", 1)[-1]]
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:12]


def build_table(src_dir: Any, releases: dict[str, list[str]], fixture: dict | None = None) -> dict[str, Any]:
    """Every release executed; releases whose executed code hashes the same share a row (their behaviour is
    checked equal). ``src_dir(engine, version)``: the release's extracted tree."""
    fixture = fixture or json.loads((Path(__file__).resolve().parent.parent / FIXTURE).read_text())
    rows: list[dict[str, Any]] = []
    release_rows: dict[str, dict[str, dict[str, str]]] = {"sglang": {}, "vllm": {}}
    spec_rows: dict[str, dict[str, Any]] = {"sglang": {}, "vllm": {}}
    for engine in ("sglang", "vllm"):
        for v in releases[engine]:
            rel = Release(engine, Path(src_dir(engine, v)), v)
            for fam in FAMILIES[engine]:
                try:
                    got = (run_vllm if engine == "vllm" else run_sglang)(rel, fam)
                except Exception as e:
                    raise S.MTPCodeMoved(f"{engine} {v} {fam}: the MTP code moved: {type(e).__name__}: {e}") from e
                if "absent" not in got:
                    got["step1"] = step1(rel.root, engine, fam)
                key = "absent" if "absent" in got else _key(got)
                rid = f"{engine}/{fam}/{key}"
                row = next((r for r in rows if r["id"] == rid), None)
                if row is None:
                    row = {"id": rid, "engine": engine, "family": fam, "executed_from": v, "releases": [], "behaviour": got}
                    rows.append(row)
                elif _behaviour(row["behaviour"]) != _behaviour(got):
                    raise S.MTPCodeMoved(f"{engine} {v} {fam}: same code as {row['executed_from']}, other behaviour")
                row["releases"].append(v)
                release_rows[engine].setdefault(v, {})[fam] = rid
            spec_rows[engine][v] = speculators(rel.root, fixture) if engine == "vllm" else sglang_speculators(rel.root)
    return {
        "about": "The MTP code of every covered sglang/vllm release, executed on symbols (conformance/mtp_exec.py, "
        "written by `make conformance`): per family, what the head's step 1 is fed (pattern), what it recycles to "
        "the next step and which norms its logits read (executed), its inputs; per release, the engine's own "
        "reading of a speculators-format MTP head (fixtures/mtp-speculators/config.json).",
        "families": FAMILIES,
        "releases": {e: list(releases[e]) for e in ("sglang", "vllm")},
        "release_rows": release_rows,
        "rows": rows,
        "speculators": spec_rows,
    }


def _behaviour(b: dict[str, Any]) -> dict[str, Any]:
    """What two releases of one code hash must agree on (line numbers aside)."""
    keep = ("recycle", "recycle_norms", "logits_norms", "concat", "sides", "returns", "recycled_expr", "logits_expr")
    return {k: b.get(k) for k in keep}


if __name__ == "__main__":  # python conformance/mtp_exec.py SRC_ROOT OUT.json: SRC_ROOT/<engine>/<version>/
    import sys
    import time

    from releases import RELEASES

    t0 = time.time()
    table = build_table(lambda e, v: Path(sys.argv[1]) / e / v, RELEASES)
    Path(sys.argv[2]).write_text(json.dumps(table, indent=1) + "\n")
    print(f"MTP table: {len(table['rows'])} rows in {time.time() - t0:.1f} s -> {sys.argv[2]}")
