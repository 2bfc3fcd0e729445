"""Execute SGLang's own capture functions from a release's source, against stub models.

Executed from the release (never re-typed here):
- the config reader: the `try:` block in model_executor/ that reads
  `eagle_config["eagle_aux_hidden_state_layer_ids"]` (and `use_aux_hidden_state`), run on a stub
  draft hf_config in each layout;
- the target's `set_eagle3_layers_to_capture` (followed through base classes and into the inner
  model's own setter, e.g. qwen2_moe.py's `Qwen2MoeModel`), run on a stub model with L layers.
The decoder loop itself needs CUDA kernels, so its *shape* is checked instead: the forward must
match one of the patterns below, or the harness fails loudly (the capture code moved and must be
read again). The loop is then simulated on the executed `layers_to_capture`.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import re
from pathlib import Path

from stubs import Obj, exec_function, exec_try_block, load_tree

MODELS = "sglang/srt/models"

# target family -> (model file, causal-LM class) as SGLang registers it
FAMILIES: dict[str, tuple[str, str]] = {
    "llama": ("llama.py", "LlamaForCausalLM"),
    "qwen3": ("qwen3.py", "Qwen3ForCausalLM"),
    "qwen3_moe": ("qwen3_moe.py", "Qwen3MoeForCausalLM"),
    "deepseek": ("deepseek_v2.py", "DeepseekV2ForCausalLM"),
    "gpt_oss": ("gpt_oss.py", "GptOssForCausalLM"),
    # families with their own setter, or one that delegates to an inner language model (issue 12)
    "glm4_moe": ("glm4_moe.py", "Glm4MoeForCausalLM"),
    "glm4_moe_lite": ("glm4_moe_lite.py", "Glm4MoeLiteForCausalLM"),
    "minimax_m2": ("minimax_m2.py", "MiniMaxM2ForCausalLM"),
    "kimi_linear": ("kimi_linear.py", "KimiLinearForCausalLM"),
    "kimi_k25": ("kimi_k25.py", "KimiK25ForConditionalGeneration"),
    "llama4": ("mllama4.py", "Llama4ForConditionalGeneration"),  # what HF Llama-4 checkpoints name
    "gemma3": ("gemma3_mm.py", "Gemma3ForConditionalGeneration"),  # Gemma-3 4B and larger
    "gemma3_text": ("gemma3_causal.py", "Gemma3ForCausalLM"),  # Gemma-3 1B / text-only
}


_CLASS = re.compile(r"^class\s+(\w+)\s*(?:\(([^)]*)\))?\s*:", re.M)
_ENTRY = re.compile(r"^EntryClass\s*=\s*(\[[^\]]*\]|\w+)", re.M)


@functools.lru_cache(maxsize=512)  # per release: the enumeration and the run both ask
def class_index(root: Path, models: str, method: str) -> tuple[dict[str, list[tuple[str, list[str], bool]]], dict[str, str]]:
    """Every class of the models package by name: (file, base names, whether its own body defines ``method``),
    and SGLang's registry (class -> file of each `EntryClass`). Read with regexes, not ``ast``: enumerating
    every release parses thousands of files, and only the candidates are then resolved and executed properly."""
    classes: dict[str, list[tuple[str, list[str], bool]]] = {}
    entries: dict[str, str] = {}
    for f in sorted((root / models).glob("*.py")):
        text = f.read_text(errors="replace")
        heads = list(_CLASS.finditer(text))
        defs = [m.start() for m in re.finditer(r"^\s+def\s+" + method + r"\s*\(", text, re.M)]
        for i, m in enumerate(heads):
            end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
            bases = [b.strip().split(".")[-1].split("[")[0] for b in (m.group(2) or "").split(",") if b.strip()]
            classes.setdefault(m.group(1), []).append((f.name, bases, any(m.start() < d < end for d in defs)))
        for m in _ENTRY.finditer(text):
            for name in re.findall(r"\w+", m.group(1)):
                entries.setdefault(name, f.name)
    return classes, entries


def has_method(classes: dict, name: str, file: str | None = None, depth: int = 0) -> bool:
    """Whether the class (the one in ``file`` first) defines or inherits the indexed method."""
    cands = classes.get(name, [])
    cands = sorted(cands, key=lambda c: c[0] != file)
    for f, bases, own in cands[:1] if file else cands:
        if own:
            return True
        if depth < 8 and any(has_method(classes, b, f, depth + 1) for b in bases if b not in ("Module", "nn")):
            return True
    return False


# registered classes that are drafts, not targets (llama_eagle3.py, *_nextn.py, *_mtp.py, dflash.py)
_DRAFT_CLASS = re.compile(r"(Eagle|NextN|MTP$|DFlash|Peagle)")
_DRAFT_FILE = re.compile(r"(eagle|nextn|mtp|dflash)")


def entry_classes(root: Path) -> dict[str, str]:
    """class -> model file, for every class a models/*.py registers through `EntryClass` (SGLang's registry)."""
    return class_index(root, MODELS, "set_eagle3_layers_to_capture")[1]


def served_targets(root: Path) -> dict[str, str]:
    """Every target class the release serves with an EAGLE-3 draft: registered, and defining or inheriting
    `set_eagle3_layers_to_capture` (the model runner calls it at start-up). class -> model file."""
    classes, entries = class_index(root, MODELS, "set_eagle3_layers_to_capture")
    return {
        c: f
        for c, f in sorted(entries.items())
        if not _DRAFT_CLASS.search(c) and not _DRAFT_FILE.search(f) and has_method(classes, c, f)
    }


class PatternMoved(Exception):
    """The capture loop no longer matches any pattern the harness knows: read it again."""


class _Classes:
    """Class definitions of the models package, parsed lazily: a file, then the files it imports from."""

    def __init__(self, root: Path, models: str = MODELS):
        self.root, self.models = root, models
        self.prefix = models.replace("/", ".") + "."
        self.files: dict[str, dict[str, ast.ClassDef] | None] = {}
        self.imports: dict[str, dict[str, str]] = {}

    def _load(self, fname: str) -> dict[str, ast.ClassDef] | None:
        if fname not in self.files:
            p = self.root / self.models / fname
            try:
                tree = load_tree(p)
            except (OSError, SyntaxError):
                self.files[fname] = None
                return None
            self.files[fname] = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
            imp: dict[str, str] = {}
            for n in ast.walk(tree):  # also imports inside __init__ (mllama4.py imports its language model there)
                if isinstance(n, ast.ImportFrom) and n.module and (n.module.startswith(self.prefix) or n.level == 1):
                    for a in n.names:  # absolute `from sglang.srt.models.x import` or relative `from .x import`
                        imp[a.asname or a.name] = n.module.rsplit(".", 1)[-1] + ".py"
            self.imports[fname] = imp
        return self.files[fname]

    def resolve(self, name: str, prefer: str) -> tuple[str, ast.ClassDef] | None:
        got = self._load(prefer)
        if got and name in got:
            return prefer, got[name]
        other = self.imports.get(prefer, {}).get(name)
        if other:
            got = self._load(other)
            if got and name in got:
                return other, got[name]
        return None


def _resolve(classes: _Classes, name: str, prefer: str) -> tuple[str, ast.ClassDef] | None:
    return classes.resolve(name, prefer)


def find_method(classes, file: str, cls: str, meth: str, depth: int = 0) -> tuple[str, str, ast.FunctionDef] | None:
    """(file, class, method) following bases by name through the models package."""
    hit = _resolve(classes, cls, file)
    if hit is None or depth > 8:
        return None
    f, c = hit
    for node in c.body:
        if isinstance(node, ast.FunctionDef) and node.name == meth:
            return f, c.name, node
    for b in c.bases:
        bname = b.id if isinstance(b, ast.Name) else (b.attr if isinstance(b, ast.Attribute) else None)
        if bname and bname not in ("nn", "Module"):
            r = find_method(classes, f, bname, meth, depth + 1)
            if r:
                return r
    return None


def inner_model_class(classes: _Classes, file: str, cls: str, attr: str = "model") -> tuple[str, str] | None:
    """The class behind `self.<attr> = X(...)`, `self.model_cls(...)` or `self._init_model(...)`."""
    init = find_method(classes, file, cls, "__init__")
    if not init:
        return None
    if not any(
        isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Attribute) and n.targets[0].attr == attr
        for n in ast.walk(init[2])
    ):
        # this __init__ only calls super().__init__: the assignment sits in a base class
        hit = classes.resolve(init[1], init[0])
        for b in hit[1].bases if hit else []:
            bname = getattr(b, "id", None)
            base = bname and find_method(classes, hit[0], bname, "__init__")
            if base:
                init = base
                break
    for node in ast.walk(init[2]):
        if not (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Attribute)
            and node.targets[0].attr == attr
            and isinstance(node.value, ast.Call)
        ):
            continue
        func = node.value.func
        name = getattr(func, "id", None) or getattr(func, "attr", None)
        if name == "model_cls":  # class attribute `model_cls = DeepseekV2Model`, through bases
            hit = classes.resolve(cls, file)
            while hit:
                vals = [
                    a.value for a in hit[1].body if isinstance(a, ast.Assign) and getattr(a.targets[0], "id", None) == "model_cls"
                ]
                if vals:
                    name = getattr(vals[0], "id", None)
                    break
                bases = [getattr(b, "id", None) for b in hit[1].bases]
                hit = next((classes.resolve(b, hit[0]) for b in bases if b and classes.resolve(b, hit[0])), None)
        elif name == "_init_model":
            im = find_method(classes, file, cls, "_init_model")
            rets = [n.value for n in ast.walk(im[2]) if isinstance(n, ast.Return) and isinstance(n.value, ast.Call)] if im else []
            name = getattr(rets[0].func, "id", None) if rets else None
            if name and im and classes.resolve(name, im[0]):
                return classes.resolve(name, im[0])[0], name
        if name and classes.resolve(name, init[0]):
            return classes.resolve(name, init[0])[0], name
    return None


def real_forward(classes: _Classes, file: str, cls: str) -> tuple[str, str, ast.FunctionDef] | None:
    """The inner model's forward, skipping overrides that only `return super().forward(...)`."""
    fwd = find_method(classes, file, cls, "forward")
    depth = 0
    while fwd and depth < 6 and "super().forward(" in ast.unparse(fwd[2]) and "aux_hidden" not in ast.unparse(fwd[2]):
        hit = classes.resolve(fwd[1], fwd[0])
        nxt = None
        for b in hit[1].bases if hit else []:
            bname = getattr(b, "id", None)
            nxt = bname and find_method(classes, hit[0], bname, "forward")
            if nxt:
                break
        fwd, depth = nxt, depth + 1
    return fwd


def find_reader(root: Path) -> tuple[str, int, ast.Try] | None:
    """The try-block that reads the draft's eagle_config ids (file, line, node)."""
    for f in sorted((root / "sglang/srt/model_executor").rglob("*.py")):
        text = f.read_text()
        if "eagle_aux_hidden_state_layer_ids" not in text:
            continue
        for node in ast.walk(load_tree(f)):
            if isinstance(node, ast.Try):
                body = ast.unparse(ast.Module(node.body, []))
                if re.search(r"\[\s*['\"]eagle_aux_hidden_state_layer_ids['\"]\s*\]", body) and "eagle_config" in body:
                    return str(f.relative_to(root)), node.lineno, node
    return None


# --------------------------------------------------------------------------- the capture loop


def loop_pattern(src: str) -> dict:
    """Classify the decoder loop of an inner model's forward. Raises PatternMoved."""
    pat: dict = {}
    if re.search(r"if\s+self\.start_layer\s+in\s+self\.layers_to_capture", src) and re.search(
        r"if\s+i\s*\+\s*1\s+in\s+self\.layers_to_capture", src
    ):
        pat["kind"] = "after"  # id k = state after layer k-1; k=start_layer is the embeddings
        pat["guard0"] = True
    elif re.search(
        r"if\s+i\s+in\s+self\.layers_to_capture\s*:\s*\n(\s*(if|else).*\n(.*\n){0,3}?)?\s*aux_hidden_states\.append\(", src
    ):
        pat["kind"] = "before"
        # the appended expression(s) inside the membership branch: guarded iff residual None is handled
        block = src[src.index("in self.layers_to_capture") :]
        block = block[: block.index("layer = self.layers[i]")] if "layer = self.layers[i]" in block else block[:600]
        pat["guard0"] = "residual is not None" in block or "residual is None" in block
        if re.search(r"aux_hidden_states\.append\(\s*hidden_states\s*\)", block):
            # gemma3: the bare hidden_states is appended, so layer 0 sees the embeddings (no residual add)
            pat["guard0"] = True
            if re.search(r"hidden_states\s*,\s*residual\s*=\s*layer\(", src):
                # ...but a layer that keeps the residual apart returns only its MLP branch: the capture is
                # that branch (post_feedforward_layernorm output), not the residual stream
                pat["branch"] = True
    elif re.search(
        r"(capture_output|captured_last_layer_outputs)\s*=\s*\(?\s*aux_hidden_states(\.capture)?\s*if\s+i\s+in\s+self\.layers_to_capture",
        src,
    ):
        pat["kind"] = "before"
        pat["guard0"] = True  # captured inside the layer's input boundary, which handles residual None
        pat["in_layer"] = True
    elif re.search(r"getattr\(layer,\s*['\"]_is_layer_to_capture['\"]", src):
        pat["kind"] = "before"
        pat["guard0"] = True
        pat["in_layer"] = True
    else:
        raise PatternMoved("no known capture pattern in the decoder loop")
    pat["end"] = bool(re.search(r"(self\.end_layer|num_layers)\s+in\s+self\.layers_to_capture", src))
    pat["packer"] = bool(re.search(r"AuxHiddenStatePacker\(\s*len\(self\.layers_to_capture\)", src))
    return pat


def simulate(pat: dict, ltc: list[int], L: int) -> list[str]:
    """The capture points the loop records for an executed layers_to_capture list."""
    out: list[str] = []
    if pat["kind"] == "after":
        if 0 in ltc:
            out.append("embed")
        for i in range(L):
            if i + 1 in ltc:
                out.append(f"layer_out[{i}]")
        return out
    for i in range(L):
        if i in ltc:
            if i == 0:
                if not pat["guard0"]:
                    raise RuntimeError(
                        "TypeError: unsupported operand type(s) for +: 'Tensor' and 'NoneType' (residual is None before layer 0)"
                    )
                out.append("embed")
            else:
                out.append(f"mlp_branch[{i - 1}]" if pat.get("branch") else f"layer_out[{i - 1}]")
    if pat["end"] and L in ltc:
        out.append(f"mlp_branch[{L - 1}]" if pat.get("branch") else f"layer_out[{L - 1}]")
    if pat["packer"] and len(out) != len(ltc):
        raise RuntimeError(f"AssertionError: captured {len(out)} of {len(ltc)} aux hidden states")
    return out


# --------------------------------------------------------------------------- one release


@functools.lru_cache(maxsize=1024)
def setter_arity(src: str) -> int:
    """How many positional parameters the setter takes (self, and the ids where it takes them)."""
    fn = ast.parse(src).body[0]
    assert isinstance(fn, ast.FunctionDef)
    return len(fn.args.args)


class Release:
    def __init__(self, root: Path, version: str):
        self.root, self.version = root, version
        self.classes = _Classes(root)
        self.reader = find_reader(root)

    def class_code(self, file: str, cls: str) -> dict:
        """The setter of a causal-LM class, its inner model's setter and forward capture pattern."""
        out: dict = {}
        setter = find_method(self.classes, file, cls, "set_eagle3_layers_to_capture")
        if setter is None:
            out["setter"] = None
            return out
        f, c, fn = setter
        out["setter"] = {"file": f"{MODELS}/{f}", "class": c, "line": fn.lineno, "src": ast.unparse(fn)}
        inner = inner_model_class(self.classes, file, cls)
        if inner:
            mset = find_method(self.classes, inner[0], inner[1], "set_eagle3_layers_to_capture")
            if mset:
                out["model_setter"] = {"file": f"{MODELS}/{mset[0]}", "line": mset[2].lineno, "src": ast.unparse(mset[2])}
            fwd = real_forward(self.classes, inner[0], inner[1])
            if fwd:
                src = ast.unparse(fwd[2])
                out["forward"] = {"file": f"{MODELS}/{fwd[0]}", "class": fwd[1], "line": fwd[2].lineno}
                try:
                    out["pattern"] = loop_pattern(src)
                except PatternMoved as e:
                    out["pattern"] = {"moved": str(e)}
                out["forward"]["capture_lines"] = [
                    ln
                    for ln in src.splitlines()
                    if "layers_to_capture" in ln
                    or "aux_hidden_states.append" in ln
                    or "_is_layer_to_capture" in ln
                    or "AuxHiddenStatePacker" in ln
                ]
        return out

    def family_code(self, family: str, target: tuple[str, str] | None = None) -> dict:
        """Everything that decides capture for this family, as source (hashed into the row key): a named family
        (FAMILIES), or ``target`` (file, class) of an enumerated one, as this release registers it."""
        file, cls = target or FAMILIES[family]
        info: dict = {"family": family, "file": f"{MODELS}/{file}", "class": cls}
        info["reader"] = None
        if self.reader:
            info["reader"] = {"file": self.reader[0], "line": self.reader[1], "src": ast.unparse(self.reader[2])}
        if self.classes.resolve(cls, file) is None:
            info["absent"] = True  # the release does not know the architecture at all
            info["setter"] = None
            return info
        info.update(self.class_code(file, cls))
        if info["setter"] and "self.language_model" in info["setter"]["src"]:
            # mllama4 / gemma3_mm / kimi_k25: the setter hands the ids to the wrapped language model
            lm = inner_model_class(self.classes, file, cls, attr="language_model")
            if lm is None:
                raise PatternMoved(f"{file}: {cls} delegates to self.language_model, whose class was not found")
            info["delegate"] = {"file": f"{MODELS}/{lm[0]}", "class": lm[1], **self.class_code(*lm)}
            for k in ("forward", "pattern"):
                if k in info["delegate"]:
                    info[k] = info["delegate"][k]
        return info

    @staticmethod
    def key(info: dict) -> str:
        if info.get("absent"):  # nothing of the release decides: the architecture is unknown to it
            return hashlib.sha256(b"absent").hexdigest()[:12]
        parts = [str(info.get("reader") and info["reader"]["src"])]
        for k in ("setter", "model_setter"):
            parts.append(str(info.get(k) and info[k]["src"]))
        d = info.get("delegate") or {}
        for k in ("setter", "model_setter"):
            parts.append(str(d.get(k) and d[k]["src"]))
        parts.append(str(info.get("absent", False)))
        parts.append(repr(info.get("pattern")))
        parts.append("\n".join(info.get("forward", {}).get("capture_lines", [])))
        return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:12]

    def read_ids(self, hf_config: dict) -> tuple[object, bool]:
        """Execute the release's config reader: (ids or None, use_aux_hidden_state)."""
        if self.reader is None:
            return None, True
        hf = Obj(**hf_config)
        self_ = Obj(eagle_use_aux_hidden_state=True, eagle_aux_hidden_state_layer_ids=None)
        config = Obj(eagle_use_aux_hidden_state=True, eagle_aux_hidden_state_layer_ids=None)
        ns = exec_try_block(self.reader[2], {"self": self_, "config": config, "draft_model_config": Obj(hf_config=hf)})
        ids = ns.get("eagle_aux_hidden_state_layer_ids", None)
        use = True
        for holder in (self_, config):
            if holder.__dict__.get("eagle_aux_hidden_state_layer_ids") is not None:
                ids = holder.eagle_aux_hidden_state_layer_ids
            if holder.__dict__.get("eagle_use_aux_hidden_state") is False:
                use = False
        return ids, use

    def run(self, info: dict, L: int, hf_config: dict) -> dict:
        """One case: the capture points (list of names) or the engine's error."""
        if info.get("absent"):
            cls = info["class"]
            return {
                "error": f"ValueError: Model architectures ['{cls}'] are not supported for now",
                "at": "sglang/srt/models/registry.py",
                "when": "start-up",
            }
        try:
            ids, use = self.read_ids(hf_config)
        except Exception as e:  # the reader itself raised outside its try
            return {"error": f"{type(e).__name__}: {e}", "at": info["reader"]["file"]}
        if not use:
            return {"points": [], "note": "use_aux_hidden_state false: capture off"}
        if info.get("setter") is None:
            cls = info["class"]
            return {
                "error": f"AttributeError: '{cls}' object has no attribute 'set_eagle3_layers_to_capture'",
                "at": (info["reader"] or {}).get("file", "model_runner.py"),
                "when": "start-up",
            }
        model = Obj(
            layers_to_capture=[],
            layers=[Obj() for _ in range(L)],
            start_layer=0,
            end_layer=L,
            config=Obj(num_hidden_layers=L),
            pp_group=Obj(is_last_rank=True, is_first_rank=True),
        )
        if info.get("model_setter"):
            model.bind("set_eagle3_layers_to_capture", info["model_setter"]["src"])
        target = Obj(
            config=Obj(num_hidden_layers=L),
            model=model,
            capture_aux_hidden_states=False,
            pp_group=Obj(is_last_rank=True, is_first_rank=True),
        )
        d = info.get("delegate")
        if d is not None:
            # the wrapper's own setter runs on the wrapper; the language model gets the real layers
            lm = Obj(
                config=Obj(num_hidden_layers=L),
                model=model,
                capture_aux_hidden_states=False,
                pp_group=Obj(is_last_rank=True, is_first_rank=True),
            )
            if d.get("setter"):
                lm.bind("set_eagle3_layers_to_capture", d["setter"]["src"])
            if d.get("model_setter"):
                model.bind("set_eagle3_layers_to_capture", d["model_setter"]["src"])
            target = Obj(
                config=Obj(text_config=Obj(num_hidden_layers=L)),
                model=Obj(),
                language_model=lm,
                capture_aux_hidden_states=False,
                pp_group=Obj(is_last_rank=True, is_first_rank=True),
            )
        nargs = setter_arity(info["setter"]["src"])
        try:
            if nargs >= 2:
                exec_function(info["setter"]["src"], target, ids)
            else:
                exec_function(info["setter"]["src"], target)  # this release's setter takes no ids
        except Exception as e:
            return {
                "error": f"{type(e).__name__}: {e}",
                "at": f"{info['setter']['file']}:{info['setter']['line']}",
                "when": "start-up",
            }
        ltc = list(model.layers_to_capture)
        pat = info.get("pattern") or {"moved": "no inner model forward found"}
        if "moved" in pat:
            raise PatternMoved(f"{info.get('forward', {}).get('file')}: {pat['moved']}")
        try:
            pts = simulate(pat, ltc, L)
        except RuntimeError as e:
            return {
                "error": str(e),
                "at": f"{info['forward']['file']}:{info['forward']['line']}",
                "when": "first forward",
                "internal": ltc,
            }
        res = {"points": pts, "internal": ltc}
        if nargs < 2 and ids is not None:
            res["note"] = "setter takes no ids: configured ids unused"
        return res
