"""Execute each release's own DFlash tap code (which target hidden states a DFlash draft is fed, and how
many its fc takes) on stub configs.

Executed from the release (never re-typed here):
- SGLang (from 0.5.11): ``srt/speculative/dflash_utils.py`` ``parse_dflash_draft_config`` and the
  ``DFlashDraftConfig`` it builds (``require_num_layers``, ``resolve_target_layer_ids``, the fallback guess
  ``build_target_layer_ids``), lifted with every module-level helper they use; the target's
  ``set_dflash_layers_to_capture`` (Qwen3ForCausalLM); the capture loop is the EAGLE-3 harness's pattern
  (sglang_exec.simulate); the draft's fc width: the statements of ``srt/models/dflash.py`` that end in
  ``num_context_features = len(target_layer_ids)``. The call site between them (model_runner.py, later
  model_runner_components/spec_aux_hidden_state.py: parse, ``require_num_layers``, resolve with the target's
  ``num_hidden_layers``) is three plain calls, made here in the same order.
- vLLM (from 0.20.0, where ``DFlashDraftModel`` is registered): the V1 runner's
  ``_get_eagle3_aux_layers_from_config`` and, where the V2 runner serves DFlash, eagle3_utils.py
  ``get_eagle3_aux_layers_from_config``, through vllm_exec (the Qwen3 target's default aux layers where
  they return nothing, and its capture loop); the fc width: ``qwen3_dflash.py``
  ``_get_dflash_fc_input_size`` (from 0.27.0), before that the ``DFlashQwen3Model.__init__`` statements
  that compute ``fc_input_size``.
"""

from __future__ import annotations

import ast
import builtins
import copy
import hashlib
import sys
import traceback
import types
from pathlib import Path
from typing import Any

import sglang_exec
import vllm_exec
from stubs import Anything, Obj, load_tree

SG_UTILS = "sglang/srt/speculative/dflash_utils.py"
SG_DRAFT = "sglang/srt/models/dflash.py"
SG_TARGET = ("qwen3.py", "Qwen3ForCausalLM")
V_UTILS = "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"
V_DRAFT = "vllm/model_executor/models/qwen3_dflash.py"
V_SPEC = "vllm/v1/worker/gpu/spec_decode/__init__.py"
H = 8  # the stub draft's hidden size: fc width / H = the number of taps the fc takes
PACKAGE_TABLE = "eagle3_doctor/draft/dflash/serving.json"
_SAFE_IMPORTS = ("typing", "dataclasses", "numbers", "enum", "collections", "functools", "math")


class DflashCodeMoved(Exception):
    """The release's DFlash tap code no longer has the shape the harness lifts: read it again."""


def _toplevel(tree: ast.Module) -> dict[str, ast.stmt]:
    out: dict[str, ast.stmt] = {}
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            out[n.name] = n
        elif isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = n
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            out[n.target.id] = n
    return out


def lift_module(path: Path, entries: list[str], given: dict | None = None) -> tuple[dict, dict[str, int], str]:
    """The module-level definitions ``entries`` need (transitively), executed alone in one namespace, as
    compiled at their own line numbers; returns (namespace, name -> line, their source for the row hash)."""
    tree = load_tree(path)
    defs = _toplevel(tree)
    todo, keep = list(entries), set()
    while todo:
        name = todo.pop()
        if name in keep or name not in defs:
            continue
        keep.add(name)
        todo += [n.id for n in ast.walk(defs[name]) if isinstance(n, ast.Name)]
    missing = [e for e in entries if e not in keep]
    if missing:
        raise DflashCodeMoved(f"{path.name}: {', '.join(missing)} not found")
    nodes = {id(defs[n]): defs[n] for n in keep}
    body = [n for n in tree.body if id(n) in nodes]
    imports = [n for n in tree.body if isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] in _SAFE_IMPORTS]
    mod = ast.Module([*imports, *body], [])
    g: dict[str, Any] = {"__builtins__": builtins, "__name__": "dflash_lifted"}
    for n in ast.walk(mod):
        if isinstance(n, ast.Name) and not hasattr(builtins, n.id):
            g.setdefault(n.id, Anything())  # loggers, torch, envs: nothing that decides taps
    g.update(given or {})
    sys.modules.setdefault("dflash_lifted", type(sys)("dflash_lifted"))  # dataclasses looks its module up
    exec(compile(mod, str(path), "exec"), g)
    return g, {n: defs[n].lineno for n in keep}, "\n".join(ast.unparse(n) for n in body)


def exec_statements(stmts: list[ast.stmt], names: dict, file: str) -> dict:
    """Run statements lifted from a method body with the given locals; return the locals after them."""
    fn = ast.FunctionDef(
        name="_block",
        args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        body=[*stmts, ast.Return(ast.Call(ast.Name("locals", ast.Load()), [], []))],
        decorator_list=[],
        returns=None,
        type_params=[],
    )
    end = max(s.end_lineno or s.lineno for s in stmts)
    for n in ast.walk(fn):  # the lifted statements keep their own lines; the wrapper spans them
        if not hasattr(n, "lineno") or n.lineno is None or getattr(n, "end_lineno", None) is None:
            n.lineno, n.col_offset, n.end_lineno, n.end_col_offset = stmts[0].lineno, 0, end, 0
    fn.lineno, fn.end_lineno = stmts[0].lineno, end
    mod = ast.fix_missing_locations(ast.Module([fn], []))
    g: dict[str, Any] = {"__builtins__": builtins}
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and not hasattr(builtins, n.id):
            g.setdefault(n.id, Anything())
    g.update(names)
    exec(compile(mod, file, "exec"), g)
    return g["_block"]()


def _err(e: Exception, when: str, files: tuple[str, ...]) -> str:
    """The engine's error as the table writes it: `!<when>: <Type>: <message> @ <file:line>` (innermost
    frame of the release's own code)."""
    at = "?"
    for fr in traceback.extract_tb(e.__traceback__):
        for f in files:
            if fr.filename.endswith(f):
                at = f"{f}:{fr.lineno}"
    return f"!{when}: {type(e).__name__}: {e} @ {at}"


def _stmts_ending_in(fn: ast.FunctionDef, target: str, names: set[str]) -> list[ast.stmt] | None:
    """The contiguous statements of ``fn`` that end in the assignment to ``target`` and only touch ``names``
    before it (the lines that compute the draft's fc width)."""
    body = fn.body
    for i, s in enumerate(body):
        if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == target for t in s.targets):
            j = i
            while j > 0 and {n.id for n in ast.walk(body[j - 1]) if isinstance(n, ast.Name)} & names:
                j -= 1
            return body[j : i + 1]
    return None


def _find_init(tree: ast.Module, marker: str) -> ast.FunctionDef | None:
    for c in tree.body:
        if isinstance(c, ast.ClassDef):
            for f in c.body:
                if isinstance(f, ast.FunctionDef) and f.name == "__init__" and marker in ast.unparse(f):
                    return f
    return None


class SglangRelease:
    """One sglang release's DFlash tap code, lifted; ``run`` executes it on one stub draft config."""

    def __init__(self, root: Path, version: str):
        self.root, self.version = root, version
        self.present = (root / SG_UTILS).exists()
        if not self.present:
            return
        self.ns, self.lines, self.utils_src = lift_module(
            root / SG_UTILS, ["parse_dflash_draft_config", "build_target_layer_ids"]
        )
        classes = sglang_exec._Classes(root)
        found = sglang_exec.find_method(classes, *SG_TARGET, "set_dflash_layers_to_capture")
        if found is None:
            raise DflashCodeMoved(f"sglang {version}: {SG_TARGET[1]} has no set_dflash_layers_to_capture")
        self.setter = {"file": f"{sglang_exec.MODELS}/{found[0]}", "line": found[2].lineno, "src": ast.unparse(found[2])}
        # class_code reads only the models package (not the EAGLE-3 reader's model_executor/ scan)
        code = sglang_exec.Release.class_code(types.SimpleNamespace(classes=classes), *SG_TARGET)  # type: ignore[arg-type]
        self.pattern, self.forward = code.get("pattern"), code.get("forward", {})
        init = _find_init(load_tree(root / SG_DRAFT), "num_context_features")
        names = {"draft_config", "target_num_layers", "target_layer_ids", "num_context_features"}
        self.fc = _stmts_ending_in(init, "num_context_features", names) if init else None
        if not self.fc:
            raise DflashCodeMoved(f"sglang {version}: {SG_DRAFT} no longer computes num_context_features")

    def key(self) -> str:
        if not self.present:
            return "absent"
        parts = [self.utils_src, self.setter["src"], repr(self.pattern), *(ast.unparse(s) for s in self.fc or [])]
        parts.append("\n".join(self.forward.get("capture_lines", [])))
        return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:12]

    def sources(self) -> dict[str, str]:
        if not self.present:
            return {}
        out = {
            k: f"{SG_UTILS}:{self.lines[k]}" for k in ("parse_dflash_draft_config", "DFlashDraftConfig", "build_target_layer_ids")
        }
        out["set_dflash_layers_to_capture"] = f"{self.setter['file']}:{self.setter['line']}"
        out["fc"] = f"{SG_DRAFT}:{self.fc[0].lineno}-{self.fc[-1].end_lineno}" if self.fc else "-"
        if self.forward:
            out["forward"] = f"{self.forward['file']}:{self.forward['line']}"
        return out

    def taps(self, cfg: dict, L: int) -> tuple[str, Any]:
        files = (SG_UTILS, self.setter["file"])
        try:
            dc = self.ns["parse_dflash_draft_config"](draft_hf_config=Obj(**copy.deepcopy(cfg)))
        except Exception as e:  # the engine's own refusal, recorded as it words it
            return _err(e, "start-up", files), None
        try:
            ids = dc.resolve_target_layer_ids(target_num_layers=L, draft_num_layers=dc.require_num_layers())
        except Exception as e:
            return _err(e, "start-up", files), dc
        target = Obj(model=Obj(layers_to_capture=[]), capture_aux_hidden_states=False, pp_group=Obj(is_last_rank=True))
        try:
            sglang_exec.exec_function(self.setter["src"], target, ids)
        except Exception as e:
            return _err(e, "start-up", files) + f" ({self.setter['file']}:{self.setter['line']})", dc
        pat = self.pattern or {"moved": "no inner model forward found"}
        if "moved" in pat:
            raise DflashCodeMoved(f"sglang {self.version} {SG_TARGET[0]}: {pat['moved']}")
        try:
            return ",".join(sglang_exec.simulate(pat, list(target.model.layers_to_capture), L)), dc
        except RuntimeError as e:
            return f"!first forward: {e} @ {self.forward['file']}:{self.forward['line']}", dc

    def fc_taps(self, cfg: dict, dc: Any) -> str:
        hf = Obj(**copy.deepcopy(cfg))
        names = {"config": hf, "num_layers": cfg.get("num_hidden_layers"), "hidden_size": H, "draft_config": dc}
        names["parse_dflash_draft_config"] = self.ns["parse_dflash_draft_config"]
        try:
            out = exec_statements(self.fc, names, SG_DRAFT)
        except Exception as e:
            return _err(e, "load", (SG_UTILS, SG_DRAFT))
        return str(int(out["num_context_features"]))

    def run(self, cfg: dict, L: int) -> dict[str, str]:
        if not self.present:
            return {"taps": f"!start-up: no DFlash in sglang {self.version} ({SG_UTILS} absent)", "fc": "-"}
        taps, dc = self.taps(cfg, L)
        return {"taps": taps, "fc": self.fc_taps(cfg, dc) if dc is not None else "-"}


class VllmRelease:
    """One vllm release's DFlash tap code: the runners' id readers (through vllm_exec, Qwen3 target) and
    the draft's fc width."""

    def __init__(self, root: Path, version: str):
        self.root, self.version = root, version
        reg = root / "vllm/model_executor/models/registry.py"
        self.present = reg.exists() and '"DFlashDraftModel"' in reg.read_text() and (root / V_DRAFT).exists()
        if not self.present:
            return
        self.rel = vllm_exec.Release(root, version)
        spec = root / V_SPEC
        v2 = self.rel.v2_reader and spec.exists() and '"dflash"' in spec.read_text()
        self.runners = ["v1", "v2"] if v2 else ["v1"]
        self.info = {r: {**self.rel.family_code("qwen3", r), "check": None} for r in self.runners}
        self._lift_fc(root, version)

    @classmethod
    def fc_only(cls, root: Path, version: str) -> VllmRelease:
        """Only the draft's fc code (qwen3_dflash.py, eagle3_utils.py): what CI re-executes from testdata/."""
        rel = cls.__new__(cls)
        rel.root, rel.version, rel.present = root, version, True
        rel._lift_fc(root, version)
        return rel

    def _lift_fc(self, root: Path, version: str) -> None:
        tree = load_tree(root / V_DRAFT)
        self.fc_fn = "_get_dflash_fc_input_size" in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        if self.fc_fn:
            utils, _, usrc = lift_module(root / V_UTILS, ["get_eagle3_aux_layers_from_config"])
            given = {"get_eagle3_aux_layers_from_config": utils["get_eagle3_aux_layers_from_config"]}
            self.fc_ns, lines, src = lift_module(root / V_DRAFT, ["_get_dflash_fc_input_size"], given)
            self.fc_src, self.fc_at = src + usrc, f"{V_DRAFT}:{lines['_get_dflash_fc_input_size']}"
        else:
            init = _find_init(tree, "fc_input_size")
            body = init.body if init else []
            keep = [s for s in body if {"drafter_config", "use_aux_hidden_state"} & _attr_names(s)]
            if not keep or "fc_input_size" not in ast.unparse(keep[-1]):
                raise DflashCodeMoved(f"vllm {version}: {V_DRAFT} no longer computes fc_input_size")
            last = keep[-1]
            assert isinstance(last, ast.If)  # `if self.use_aux_hidden_state:` ... `self.fc = ReplicatedLinear(...)`
            cut = next(i for i, s in enumerate(last.body) if "ReplicatedLinear" in ast.unparse(s))
            self.fc_stmts = [
                *keep[:-1],
                ast.If(
                    last.test,
                    last.body[:cut],
                    [],
                    lineno=last.lineno,
                    end_lineno=last.body[cut - 1].end_lineno,
                    col_offset=0,
                    end_col_offset=0,
                ),
            ]
            self.fc_src = "\n".join(ast.unparse(s) for s in self.fc_stmts)
            self.fc_at = f"{V_DRAFT}:{keep[0].lineno}-{last.body[cut - 1].end_lineno}"

    def key(self) -> str:
        if not self.present:
            return "absent"
        parts = [self.fc_src, *(vllm_exec.Release.key(self.info[r]) for r in self.runners)]
        return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:12]

    def sources(self) -> dict[str, str]:
        if not self.present:
            return {}
        out = {"fc": self.fc_at}
        for r in self.runners:
            for k in ("reader", "default", "forward"):
                v = self.info[r].get(k)
                if v:
                    out[f"{r}_{k}"] = f"{v['file']}:{v['line']}"
        return out

    def fc_taps(self, cfg: dict) -> str:
        hf = Obj(**copy.deepcopy(cfg))
        vcfg = Obj(speculative_config=Obj(draft_model_config=Obj(hf_config=hf)), model_config=Obj(dtype=None))
        try:
            if self.fc_fn:
                width = self.fc_ns["_get_dflash_fc_input_size"](vcfg)
            else:
                out = exec_statements(self.fc_stmts, {"self": Obj(config=hf), "vllm_config": vcfg}, V_DRAFT)
                width = out.get("fc_input_size")
                if width is None:
                    return "0 (use_aux_hidden_state false: no fc)"
        except Exception as e:
            return _err(e, "load", (V_DRAFT, V_UTILS))
        return str(width // H) if isinstance(width, int) else f"!load: fc width {width!r}"

    def run(self, cfg: dict, L: int, runner: str) -> dict[str, str]:
        if not self.present:
            return {"taps": f"!start-up: no DFlash in vllm {self.version} (DFlashDraftModel not registered)", "fc": "-"}
        try:
            res = self.rel.run(self.info[runner], L, copy.deepcopy(cfg))
        except Exception as e:  # the reader raised on this config
            return {"taps": _err(e, "start-up", (V_UTILS, "vllm/v1/worker/gpu_model_runner.py")), "fc": self.fc_taps(cfg)}
        taps = (
            ",".join(res["points"])
            if "points" in res
            else f"!{res.get('when', 'start-up')}: {res['error']} @ {res.get('at', '?')}"
        )
        return {"taps": taps, "fc": self.fc_taps(cfg)}


def _attr_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
    }


LS = (8, 32, 61)


def grid(L: int) -> dict[str, dict[str, Any]]:
    """The stub draft configs for an L-layer target: the DFlash layouts a checkpoint ships (ids in
    dflash_config or at the top level, copied into the EAGLE-3 keys, DSpark's key, vLLM's layer_ids), no
    ids with 1/3/5 draft layers or none, and ids the engines must refuse."""
    h = L // 2
    a, b = [1, h - 1, L - 4], [2, h, L - 3]
    base = {"architectures": ["DFlashDraftModel"], "hidden_size": H, "num_hidden_layers": 3, "num_target_layers": L}

    def nested(ids: list[int], **kw: Any) -> dict[str, Any]:
        return {**base, "dflash_config": {"target_layer_ids": ids}, **kw}

    no_ntl = {k: v for k, v in nested(a).items() if k != "num_target_layers"}
    no_n = {k: v for k, v in base.items() if k != "num_hidden_layers"}
    return {
        "dflash_config.target_layer_ids": nested(a),
        "dflash_config.target_layer_ids, no num_target_layers": no_ntl,
        "target_layer_ids": {**base, "dflash_config": {}, "target_layer_ids": a},
        "both, disagreeing": nested(a, target_layer_ids=b),
        "+ eagle_aux_hidden_state_layer_ids copied": nested(a, eagle_aux_hidden_state_layer_ids=a),
        "+ eagle_config ids copied": nested(a, eagle_config={"eagle_aux_hidden_state_layer_ids": a}),
        "dspark_target_layer_ids": {**base, "dflash_config": {}, "dspark_target_layer_ids": a},
        "dflash_config.layer_ids": {**base, "dflash_config": {"layer_ids": a}},
        **{f"no ids, num_hidden_layers {n}": {**base, "dflash_config": {}, "num_hidden_layers": n} for n in (1, 3, 5)},
        "no ids, no num_hidden_layers": {**no_n, "dflash_config": {}},
        "ids up to L": nested([1, h, L]),
        "ids with -1": nested([-1, h, L - 4]),
        "the deep end": nested([L - 3, L - 2, L - 1]),
        "empty ids": nested([]),
    }


def cases():
    for L in LS:
        for name, cfg in grid(L).items():
            yield f"{L}|{name}", L, cfg


def execute(rel: SglangRelease | VllmRelease, runner: str) -> dict[str, dict[str, str]]:
    if isinstance(rel, SglangRelease):
        return {k: rel.run(cfg, L) for k, L, cfg in cases()}
    return {k: rel.run(cfg, L, runner) for k, L, cfg in cases()}


def build_table(src_dir: Any, releases: dict[str, list[str]]) -> dict[str, Any]:
    """Execute every release (one per distinct code hash) and return the table run.py writes."""
    rows: list[dict[str, Any]] = []
    outcomes: dict[str, dict] = {}
    release_rows: dict[str, dict[str, dict[str, str]]] = {"sglang": {}, "vllm": {}}
    for engine, cls in (("sglang", SglangRelease), ("vllm", VllmRelease)):
        for v in releases[engine]:
            rel = cls(src_dir(engine, v), v)
            runners = ["default"] if engine == "sglang" else (rel.runners if rel.present else ["v1"])
            for runner in runners:
                rid = f"{engine}/{runner}/{rel.key()}"
                row = next((r for r in rows if r["id"] == rid), None)
                if row is None:
                    table = execute(rel, runner)
                    oid = hashlib.sha256(repr(sorted(table.items())).encode()).hexdigest()[:10]
                    outcomes.setdefault(oid, table)
                    row = {"id": rid, "engine": engine, "runner": runner, "present": rel.present, "executed_from": v,
                           "releases": [], "sources": rel.sources(), "outcome": oid}  # fmt: skip
                    rows.append(row)
                row["releases"].append(v)
                release_rows[engine].setdefault(v, {})[runner] = rid
    return {
        "about": "Executed DFlash tap behaviour of every covered sglang/vllm release (Qwen3 target); written by "
        "`make conformance` (conformance/dflash_exec.py). Per case: 'taps' = capture points the target feeds, "
        "or '!<when>: <engine error> @ <file:line>'; 'fc' = how many taps the draft's fc takes.",
        "grid": {"L": list(LS), "configs": list(grid(8))},
        "releases": {e: list(releases[e]) for e in ("sglang", "vllm")},
        "release_rows": release_rows,
        "rows": rows,
        "outcomes": outcomes,
    }
