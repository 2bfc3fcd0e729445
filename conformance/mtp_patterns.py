"""The links of an MTP head's serving path that conformance/mtp_exec.py checks as source patterns, not executed
(each row says so, with file:line): the statement that ends the target forward (step 1's hidden), the method
name vLLM's config gives the family, the target model types vLLM turns into an MTP draft, and SGLang's
readers of a speculators config."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from stubs import load_tree

MODELS = {"vllm": "vllm/model_executor/models", "sglang": "sglang/srt/models"}


def vllm_method(root: Path, stem: str) -> tuple[str, str]:
    """The speculative method the release's config turns the family's draft model type into (pattern, not
    executed: the first ``if`` whose test names the model type, or the MTP model-type list, and whose body
    sets ``self.method``)."""
    for rel in ("vllm/config/speculative.py", "vllm/config/__init__.py", "vllm/config.py"):
        p = root / rel
        if not p.exists():
            continue
        tree = load_tree(p)
        lists = {
            t.id: ast.unparse(n.value)
            for n in tree.body
            if isinstance(n, (ast.Assign, ast.AnnAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Name) and t.id in ("MTP_MODEL_TYPES", "MTPModelTypes")
        }
        listed = [name for name, src in lists.items() if f"'{stem}'" in src]
        for n in ast.walk(tree):
            if not isinstance(n, ast.If):
                continue
            test = ast.unparse(n.test)
            for s in n.body:
                if isinstance(s, ast.Assign) and ast.unparse(s.targets[0]) == "self.method" and isinstance(s.value, ast.Constant):
                    if f"'{stem}'" in test or any(name in test for name in listed):
                        return str(s.value.value), f"{rel}:{s.lineno} (pattern, not executed)"
    return stem, "the draft's model type (no renaming found)"


TARGETS = {
    "vllm": {"deepseek_v3": ["deepseek_v2"], "glm4_moe": ["glm4_moe"], "qwen3_next": ["qwen3_next"], "qwen3_5": ["qwen3_5", "qwen3_next"]},
    "sglang": {"deepseek_v3": ["deepseek_v2"], "glm4_moe": ["glm4_moe"], "qwen3_next": ["qwen3_next"], "qwen3_5": ["qwen3_5"]},
}  # fmt: skip


def step1(root: Path, engine: str, fam: str) -> dict[str, Any]:
    """Step 1's hidden: the state the target forward returns (pattern, not executed: its inner model's forward
    ends in the final norm), and (vLLM) the runner line that hands it to the proposer."""
    out: dict[str, Any] = {"hidden": None, "at": "not found", "how": "pattern, not executed"}
    for stem in TARGETS[engine][fam]:
        p = root / MODELS[engine] / f"{stem}.py"
        if not p.exists():
            continue
        for c in load_tree(p).body:
            if not (isinstance(c, ast.ClassDef) and c.name.endswith("Model")):
                continue
            f = next((f for f in c.body if isinstance(f, ast.FunctionDef) and f.name == "forward"), None)
            hits = (
                [s for s in ast.walk(f) if isinstance(s, (ast.Assign, ast.Return)) and "self.norm" in ast.unparse(s)] if f else []
            )
            if hits:
                s = max(hits, key=lambda s: s.lineno)
                out.update(hidden="final_norm", at=f"{MODELS[engine]}/{stem}.py:{s.lineno} {c.name}.forward: {ast.unparse(s)}")
                break
        if out["hidden"]:
            break
    if engine == "vllm":
        r = root / "vllm/v1/worker/gpu_model_runner.py"
        lines = (
            [i + 1 for i, s in enumerate(r.read_text().splitlines()) if "target_hidden_states = hidden_states[" in s]
            if r.exists()
            else []
        )
        out["runner"] = f"vllm/v1/worker/gpu_model_runner.py:{lines[0]}" if lines else "not found"
    return out


def vllm_targets(root: Path) -> dict[str, Any]:
    """The target model types the release turns into an MTP draft (pattern, not executed: the string constants
    ``hf_config_override`` compares ``hf_config.model_type`` with): the layout vLLM does load, the head inside
    the target, is served for these only."""
    for rel in ("vllm/config/speculative.py", "vllm/config/__init__.py", "vllm/config.py"):
        p = root / rel
        f = (
            next((f for f in ast.walk(load_tree(p)) if isinstance(f, ast.FunctionDef) and f.name == "hf_config_override"), None)
            if p.exists()
            else None
        )
        if f is None:
            continue
        types_: set[str] = set()
        for c in ast.walk(f):
            if isinstance(c, ast.Compare) and ast.unparse(c.left).endswith("hf_config.model_type"):
                types_ |= {
                    n.value
                    for n in ast.walk(c)
                    if isinstance(n, ast.Constant) and isinstance(n.value, str) and not n.value.endswith("mtp")
                }
        return {"model_types": sorted(types_), "at": f"{rel}:{f.lineno} hf_config_override (pattern, not executed)"}
    return {"model_types": [], "at": "hf_config_override not found"}


def sglang_speculators(root: Path) -> dict[str, Any]:
    """SGLang and a speculators MTP head (pattern, not executed): no config reader of the release (srt/configs/,
    hf_transformers_utils.py, server_args.py, srt/speculative/, srt/model_executor/) reads speculators_model_type,
    and no model class is registered under MTPDraftModel."""
    srt = root / "sglang/srt"
    files = [*srt.glob("configs/**/*.py"), *srt.glob("**/hf_transformers_utils.py"), srt / "server_args.py",
             *srt.glob("speculative/**/*.py"), *srt.glob("model_executor/**/*.py")]  # fmt: skip
    hits = sorted(str(p.relative_to(root)) for p in files if p.exists() and "speculators_model_type" in p.read_text())
    arch = [str(p.relative_to(root)) for p in sorted((root / MODELS["sglang"]).glob("*.py")) if "MTPDraftModel" in p.read_text()]
    reg = root / MODELS["sglang"] / "registry.py"
    fallback = (
        [i + 1 for i, s in enumerate(reg.read_text().splitlines()) if "TransformersForCausalLM" in s] if reg.exists() else []
    )
    return {
        "reader": hits or None,
        "MTPDraftModel": arch or None,
        "outcome": "!no speculators reader and no MTPDraftModel class in this release"
        + (f"; the registry falls back to TransformersForCausalLM ({MODELS['sglang']}/registry.py:{fallback[0]}), a plain model, not an MTP head" if fallback else "")
        + " (pattern, not executed)",
    }  # fmt: skip
