"""Execute vLLM's own capture functions from a release's source, against stub configs and models.

Executed from the release:
- the EAGLE-3 target check in the speculative config (`eagle3_target_supported` /
  `aux_hidden_states_supported` and the `raise ValueError` it guards), on a stub target config;
- the runner's config reader (`GPUModelRunner._get_eagle3_aux_layers_from_config`, and Model Runner
  V2's `get_eagle3_aux_layers_from_config` where the release has it), on stub draft configs;
- the default getter the runner calls, on a stub model with L layers.
Checked as source patterns (fail loudly when they move): whether the runner uses the config reader at
all and falls back to the default, whether the target class implements SupportsEagle3 (else the
runner raises at load), and the decoder loop's capture (before layer idx, or after layer idx under
idx+1; the embeddings / residual-None guard; the end-of-stack capture).
"""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path

from sglang_exec import (
    _DRAFT_CLASS,
    PatternMoved,
    _Classes,
    class_index,
    find_method,
    has_method,
    inner_model_class,
    real_forward,
)
from stubs import Obj, exec_function, load_tree

MODELS = "vllm/model_executor/models"

# target family -> (model file, class, hf model_type the config check sees)
FAMILIES: dict[str, tuple[str, str, str]] = {
    "llama": ("llama.py", "LlamaForCausalLM", "llama"),
    "mistral": ("mistral.py", "MistralForCausalLM", "mistral"),
    "qwen3": ("qwen3.py", "Qwen3ForCausalLM", "qwen3"),
    "qwen3_moe": ("qwen3_moe.py", "Qwen3MoeForCausalLM", "qwen3_moe"),
    "deepseek": ("deepseek_v2.py", "DeepseekV3ForCausalLM", "deepseek_v3"),
    "gpt_oss": ("gpt_oss.py", "GptOssForCausalLM", "gpt_oss"),
    # the families SGLang gives their own setter (issue 12); model_type as the check sees hf_text_config
    "glm4_moe": ("glm4_moe.py", "Glm4MoeForCausalLM", "glm4_moe"),
    "glm4_moe_lite": ("glm4_moe_lite.py", "Glm4MoeLiteForCausalLM", "glm4_moe_lite"),
    "minimax_m2": ("minimax_m2.py", "MiniMaxM2ForCausalLM", "minimax_m2"),
    "kimi_linear": ("kimi_linear.py", "KimiLinearForCausalLM", "kimi_linear"),
    "kimi_k25": ("kimi_k25.py", "KimiK25ForConditionalGeneration", "kimi_k25"),
    "llama4": ("mllama4.py", "Llama4ForConditionalGeneration", "llama4_text"),
    "gemma3": ("gemma3_mm.py", "Gemma3ForConditionalGeneration", "gemma3_text"),
    "gemma3_text": ("gemma3.py", "Gemma3ForCausalLM", "gemma3_text"),
}


def _supports_eagle3(classes: _Classes, file: str, cls: str, depth: int = 0) -> bool:
    hit = classes.resolve(cls, file)
    if hit is None or depth > 8:
        return False
    f, c = hit
    for b in c.bases:
        name = b.id if isinstance(b, ast.Name) else getattr(b, "attr", None)
        if name in ("SupportsEagle3", "EagleModelMixin", "SupportsEagle"):
            return True
        if name and _supports_eagle3(classes, f, name, depth + 1):
            return True
    return False


def _find_def(root: Path, rel_glob: str, name: str, method_of: str | None = None):
    for f in sorted(root.glob(rel_glob)):
        tree = load_tree(f)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and method_of and node.name == method_of:
                for m in node.body:
                    if isinstance(m, ast.FunctionDef) and m.name == name:
                        return str(f.relative_to(root)), m
            if not method_of and isinstance(node, ast.FunctionDef) and node.name == name and node in tree.body:
                return str(f.relative_to(root)), node
    return None


def _registry(root: Path) -> dict[str, tuple[str, str]]:
    """architecture name -> (model file, class) from the release's models/registry.py."""
    f = root / MODELS / "registry.py"
    out: dict[str, tuple[str, str]] = {}
    if f.exists():
        for m in re.finditer(r'"(\w+)":\s*\(\s*"(\w+)",\s*"(\w+)"\s*,?\s*\)', f.read_text()):
            out[m.group(1)] = (m.group(2) + ".py", m.group(3))
    return out


def _registry_module(root: Path, cls: str) -> str | None:
    f = root / MODELS / "registry.py"
    m = f.exists() and re.search(r'"' + re.escape(cls) + r'":\s*\(\s*"([\w.]+)"', f.read_text())
    return m.group(1) if m else None


def language_model_class(classes: _Classes, root: Path, file: str, cls: str) -> tuple[str, str] | None:
    """The class a multimodal wrapper builds as self.language_model: `model_class=X`, or the first of
    `architectures=[...]` through the model registry (vLLM's initialize_model / init_vllm_registered_model)."""
    init = find_method(classes, file, cls, "__init__")
    if init is None:
        return None
    for node in ast.walk(init[2]):
        if not (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Attribute)
            and node.targets[0].attr == "language_model"
            and isinstance(node.value, ast.Call)
        ):
            continue
        for kw in node.value.keywords:
            if kw.arg == "model_class" and isinstance(kw.value, ast.Name) and classes.resolve(kw.value.id, init[0]):
                return classes.resolve(kw.value.id, init[0])[0], kw.value.id
            if kw.arg == "architectures" and isinstance(kw.value, ast.List) and kw.value.elts:
                arch = getattr(kw.value.elts[0], "value", None)
                hit = _registry(root).get(arch or "")
                if hit and classes.resolve(hit[1], hit[0]):
                    return hit
    return inner_model_class(classes, file, cls, attr="language_model")


# registry names that are a target a user launches: generative heads (pooling and embedding models are not
# served with a draft)
_TARGET_ARCH = re.compile(r"(ForCausalLM|ForConditionalGeneration)$")


def _has_base(classes: dict, name: str, wanted: tuple[str, ...], depth: int = 0) -> bool:
    for _, bases, _own in classes.get(name, [])[:1]:
        if any(b in wanted for b in bases) or (depth < 8 and any(_has_base(classes, b, wanted, depth + 1) for b in bases)):
            return True
    return False


def served_targets(root: Path) -> dict[str, tuple[str, str]]:
    """Every architecture the release's model registry maps to a class it serves with an EAGLE-3 draft:
    `SupportsEagle3` on the class (or, before that interface, the default-id getter the runner calls).
    architecture -> (model file, class). Indexed with regexes (class_index); the families found are then
    resolved and executed with ``ast`` like the named ones."""
    classes, _ = class_index(root, MODELS, "get_eagle3_aux_hidden_state_layers")
    out: dict[str, tuple[str, str]] = {}
    for arch, (f, c) in sorted(_registry(root).items()):
        if _DRAFT_CLASS.search(arch) or "Eagle" in arch or not _TARGET_ARCH.search(arch) or c not in classes:
            continue
        if _has_base(classes, c, ("SupportsEagle3", "EagleModelMixin", "SupportsEagle")) or has_method(classes, c, f):
            out[arch] = (f, c)
    return out


def _support_check(root: Path):
    """(file, line, source of a function running the check) from the speculative config."""
    for rel in ("vllm/config/speculative.py", "vllm/config/__init__.py", "vllm/config.py"):
        f = root / rel
        if not f.exists():
            continue
        tree = load_tree(f)
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            for i, st in enumerate(fn.body):
                if (
                    isinstance(st, ast.If)
                    and "hf_text_config.model_type" in ast.unparse(st.test)
                    and ("eagle3" in ast.unparse(st.test))
                ):
                    pre = [
                        s
                        for s in fn.body[max(0, i - 1) : i]
                        if isinstance(s, ast.Assign)
                        and isinstance(s.value, ast.List)
                        and all(isinstance(e, ast.Constant) for e in s.value.elts)
                    ]
                    body = pre + [st]
                    src = "def _check(self):\n" + "\n".join("    " + ln for s in body for ln in ast.unparse(s).splitlines())
                    return rel, st.lineno, src
    return None


def loop_pattern(src: str) -> dict:
    pat: dict = {}
    if re.search(r"_maybe_add_hidden_state\([^)]*,\s*(idx|i|layer_idx)\s*\+\s*1\s*,", src):
        pat["kind"] = "after"
        pat["guard0"] = True  # interfaces.py _maybe_add_hidden_state: residual None -> hidden_states
        pat["embed"] = bool(
            re.search(r"_maybe_add_hidden_state\(\s*(\[\]|aux_hidden_states)\s*,\s*(0|self\.start_layer)\s*,", src)
        )
    elif re.search(r"if\s+(idx|i|layer_idx)\s+in\s+self\.aux_hidden_state_layers\s*:", src):
        pat["kind"] = "before"
        block = src[src.index("in self.aux_hidden_state_layers") :][:700]
        pat["guard0"] = "residual is not None" in block or "residual is None" in block
        pat["end"] = bool(re.search(r"if\s+self\.end_layer\s+in\s+self\.aux_hidden_state_layers", src))
    else:
        raise PatternMoved("no known capture pattern in the decoder loop")
    return pat


def simulate(pat: dict, layers: tuple, L: int) -> list[str]:
    out: list[str] = []
    if pat["kind"] == "after":
        if pat.get("embed") and 0 in layers:
            out.append("embed")
        for idx in range(L):
            if idx + 1 in layers:
                out.append(f"layer_out[{idx}]")
        return out
    for idx in range(L):
        if idx in layers:
            if idx == 0:
                if not pat["guard0"]:
                    raise RuntimeError(
                        "TypeError: unsupported operand type(s) for +: 'Tensor' and 'NoneType' (residual is None before layer 0)"
                    )
                out.append("embed")
            else:
                out.append(f"layer_out[{idx - 1}]")
    if pat.get("end") and L in layers:
        out.append(f"layer_out[{L - 1}]")
    return out


class Release:
    def __init__(self, root: Path, version: str):
        self.root, self.version = root, version
        self.classes = _Classes(root, MODELS)
        self.check = _support_check(root)
        self.v1_reader = _find_def(
            root, "vllm/v1/worker/gpu_model_runner.py", "_get_eagle3_aux_layers_from_config", "GPUModelRunner"
        )
        self.v2_reader = _find_def(root, "vllm/v1/worker/gpu/**/*.py", "get_eagle3_aux_layers_from_config")
        runner = root / "vllm/v1/worker/gpu_model_runner.py"
        rsrc = runner.read_text() if runner.exists() else ""
        m = re.search(r"self\.model\.(get_eagle3_\w*aux_hidden_state_layers)\(\)", rsrc)
        self.default_name = m.group(1) if m else None
        # releases before the SupportsEagle3 interface call the model's methods directly
        self.iface_checked = "supports_eagle3(" in rsrc
        # the runner must fall back to the default when the reader finds nothing
        self.v1_uses_reader = bool(
            self.v1_reader
            and re.search(r"aux_layers\s*=\s*self\._get_eagle3_aux_layers_from_config\(\)\s*\n\s*if aux_layers:", rsrc)
        )
        if self.v1_reader and not self.v1_uses_reader:
            raise PatternMoved(f"{version}: gpu_model_runner.py no longer calls the reader as `if aux_layers:`")

    def runners(self) -> list[str]:
        return ["v1", "v2"] if self.v2_reader else ["v1"]

    def family_code(self, family: str, runner: str, target: tuple[str, str, str] | None = None) -> dict:
        """What decides capture for a family: a named one (FAMILIES), or ``target`` (file, class, model_type) of an
        enumerated one, whose file and class come from this release's registry."""
        file, cls, mt = target or FAMILIES[family]
        if family == "mistral" and self.classes.resolve(cls, file) is None:
            file, cls = "llama.py", "LlamaForCausalLM"  # older releases register Mistral on llama.py
        info: dict = {"family": family, "runner": runner, "model_type": mt, "file": f"{MODELS}/{file}", "class": cls}
        info["check"] = self.check and {"file": self.check[0], "line": self.check[1], "src": self.check[2]}
        if self.classes.resolve(cls, file) is None:
            mod = _registry_module(self.root, cls)
            if mod and mod.startswith("vllm."):
                # registered from a package outside model_executor/models (0.27+: vllm.models.kimi_k3), whose
                # platform-dispatched classes the harness does not execute yet: recorded, not guessed
                info["elsewhere"] = mod
                return info
            info["absent"] = True  # the release's model registry does not know the architecture
            return info
        reader = self.v2_reader if runner == "v2" else self.v1_reader
        info["reader"] = reader and {"file": reader[0], "line": reader[1].lineno, "src": ast.unparse(reader[1])}
        info["supports_eagle3"] = _supports_eagle3(self.classes, file, cls)
        info["iface_checked"] = self.iface_checked
        dflt = find_method(self.classes, file, cls, self.default_name or "get_eagle3_aux_hidden_state_layers")
        if dflt is None and self.default_name:
            hit = _find_def(self.root, f"{MODELS}/interfaces.py", self.default_name, "SupportsEagle3")
            dflt = hit and (hit[0].rsplit("/", 1)[1], "SupportsEagle3", hit[1])
        info["default"] = dflt and {"file": f"{MODELS}/{dflt[0]}", "line": dflt[2].lineno, "src": ast.unparse(dflt[2])}
        inner = inner_model_class(self.classes, file, cls)
        if inner is None:
            # a multimodal wrapper: the decoder loop sits in its language model's inner model
            lm = language_model_class(self.classes, self.root, file, cls)
            if lm is not None:
                info["language_model"] = {"file": f"{MODELS}/{lm[0]}", "class": lm[1]}
                inner = inner_model_class(self.classes, lm[0], lm[1])
                # the wrapper's default getter asks the language model for its own
                name = self.default_name or "get_eagle3_aux_hidden_state_layers"
                ld = find_method(self.classes, lm[0], lm[1], name)
                if ld is None and self.default_name:
                    hit = _find_def(self.root, f"{MODELS}/interfaces.py", self.default_name, "SupportsEagle3")
                    ld = hit and (hit[0].rsplit("/", 1)[1], "SupportsEagle3", hit[1])
                if ld:
                    info["language_model"]["default"] = {
                        "name": name,
                        "file": f"{MODELS}/{ld[0]}",
                        "line": ld[2].lineno,
                        "src": ast.unparse(ld[2]),
                    }
        fwd = inner and real_forward(self.classes, inner[0], inner[1])
        if fwd:
            src = ast.unparse(fwd[2])
            info["forward"] = {
                "file": f"{MODELS}/{fwd[0]}",
                "class": fwd[1],
                "line": fwd[2].lineno,
                "capture_lines": [ln for ln in src.splitlines() if "aux_hidden_state" in ln],
            }
            try:
                info["pattern"] = loop_pattern(src)
            except PatternMoved as e:
                info["pattern"] = {"moved": str(e)}
        return info

    @staticmethod
    def key(info: dict) -> str:
        if info.get("absent"):
            return hashlib.sha256(b"absent").hexdigest()[:12]
        if info.get("elsewhere"):
            return hashlib.sha256(info["elsewhere"].encode()).hexdigest()[:12]
        parts = [info["runner"], str(info["model_type"]), str(info["supports_eagle3"]), str(info.get("iface_checked"))]
        for k in ("check", "reader", "default"):
            parts.append(str(info.get(k) and info[k]["src"]))
        parts.append(repr(info.get("pattern")))
        parts.append("\n".join(info.get("forward", {}).get("capture_lines", [])))
        lm_default = ((info.get("language_model") or {}).get("default") or {}).get("src")
        if lm_default:  # only wrappers have one: the other families keep their row keys
            parts.append(lm_default)
        return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:12]

    def run(self, info: dict, L: int, hf_config: dict) -> dict:
        if info.get("absent"):
            return {
                "error": f"ValueError: Model architectures ['{info['class']}'] are not supported for now",
                "at": "vllm/model_executor/models/registry.py",
                "when": "start-up",
            }
        if info.get("elsewhere"):
            return {
                "error": f"{info['class']} is registered from {info['elsewhere']}: capture not executed by the harness",
                "at": "vllm/model_executor/models/registry.py",
                "when": "not modelled",
            }
        if info.get("check") and info["model_type"] is None:
            return {
                "error": "capture not executed: the text config's model_type, which the target check reads, is the checkpoint's",
                "at": f"{info['check']['file']}:{info['check']['line']}",
                "when": "not modelled",
            }
        if info.get("check"):
            target = Obj(method="eagle3", target_model_config=Obj(hf_text_config=Obj(model_type=info["model_type"])))
            try:
                exec_function(info["check"]["src"], target)
            except ValueError as e:
                return {"error": f"ValueError: {e}", "at": f"{info['check']['file']}:{info['check']['line']}", "when": "start-up"}
        if not info["supports_eagle3"] and (self.iface_checked or not info.get("default")):
            return {
                "error": "RuntimeError: Model does not support EAGLE3 interface but aux_hidden_state_outputs was requested",
                "at": "vllm/v1/worker/gpu_model_runner.py",
                "when": "start-up",
            }
        ids = None
        if info.get("reader"):
            hf = Obj(**hf_config)
            spec = Obj(draft_model_config=Obj(hf_config=hf))
            arg = Obj(speculative_config=spec) if info["runner"] == "v1" else spec
            ids = exec_function(info["reader"]["src"], arg)
        holder = Obj(layers=[Obj() for _ in range(L)], config=Obj(num_hidden_layers=L), start_layer=0, end_layer=L)
        model = Obj(model=holder, config=Obj(num_hidden_layers=L))
        if info.get("language_model"):  # the interfaces.py default unwraps self.language_model
            lm = Obj(model=holder, config=Obj(num_hidden_layers=L))
            ld = info["language_model"].get("default")
            if ld:
                lm.bind(ld["name"], ld["src"])
            model = Obj(language_model=lm, config=Obj(num_hidden_layers=L, text_config=Obj(num_hidden_layers=L)))
        if not ids:
            if not info.get("default"):
                raise PatternMoved(f"{info['file']}: no default-id getter found")
            ids = exec_function(info["default"]["src"], model)
        pat = info.get("pattern") or {"moved": "no inner model forward found"}
        if "moved" in pat:
            raise PatternMoved(f"{info.get('forward', {}).get('file')}: {pat['moved']}")
        layers = tuple(ids)
        try:
            pts = simulate(pat, layers, L)
        except RuntimeError as e:
            return {
                "error": str(e),
                "at": f"{info['forward']['file']}:{info['forward']['line']}",
                "when": "first forward",
                "internal": list(layers),
            }
        return {"points": pts, "internal": list(layers)}
