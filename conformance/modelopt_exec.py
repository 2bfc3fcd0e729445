"""Execute NVIDIA ModelOpt's own EAGLE-3 capture code (the HF plugin) from a release, on stub models.

ModelOpt captures the target's aux hidden states with forward hooks. Executed from the release (never
re-typed here):
- `_set_default_aux_hidden_state_layers` of the HF EAGLE plugin class (and the module-level
  `default_eagle_aux_layer_ids` it calls from 0.45), on a stub base model with L layers;
- the statements of `modify` that set the default and register the hooks
  (`for layer_idx, layer in enumerate(self._base_model.layers): if layer_idx in ids:
  layer.register_forward_hook(...)`), on stub layers that record the registration;
- the hook itself (`_collect_aux_hidden_states_forward_hook`), called in layer order as a forward would;
- the pop/gather method that hands the captured states to the draft (`pop_aux_hidden_states`, later
  `pop_and_gather_aux_hiddens`).
Checked as a source pattern (fails loudly when it moves): the draft's `fc` takes
`len(eagle_aux_hidden_state_layer_ids) * hidden_size` inputs, so a capture count other than the id count
is a shape error on the first forward.
"""

from __future__ import annotations

import ast
import hashlib
import re
import types
from pathlib import Path

from stubs import Obj, _compile, load_tree

SPEC = "modelopt/torch/speculative"
PLUGIN_FILES = ("plugins/hf_eagle.py", "plugins/transformers.py")
HOOKED = ("_collect_aux_hidden_states_forward_hook",)
POPPERS = ("pop_and_gather_aux_hiddens", "pop_aux_hidden_states")


class PatternMoved(Exception):
    """ModelOpt's capture code no longer has the shape the harness executes: read it again."""


class Tensor:
    """Stands in for one captured hidden state: remembers the layer whose hook produced it."""

    def __init__(self, layer: int):
        self.layer = layer

    def clone(self):
        return self

    def detach(self):
        return self

    def to(self, *a, **k):
        return self


def _cat(xs, dim=-1):
    out = []
    for x in xs:
        out.extend(x if isinstance(x, list) else [x])
    if not out:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    return out


TORCH = Obj(Tensor=Tensor, cat=_cat)


class Release:
    def __init__(self, root: Path, version: str):
        self.root, self.version = root, version

    def _plugin(self) -> tuple[str, ast.Module, ast.ClassDef] | None:
        for rel in PLUGIN_FILES:
            p = self.root / SPEC / rel
            if not p.exists():
                continue
            tree = load_tree(p)
            for node in tree.body:
                if isinstance(node, ast.ClassDef) and any(
                    isinstance(m, ast.FunctionDef) and m.name == HOOKED[0] for m in node.body
                ):
                    return f"{SPEC}/{rel}", tree, node
        return None

    def code(self) -> dict:
        """Everything that decides ModelOpt's capture, as source (hashed into the row key)."""
        hit = self._plugin()
        if hit is None:
            return {"absent": True}
        file, tree, cls = hit
        meths = {m.name: m for m in cls.body if isinstance(m, ast.FunctionDef)}
        info: dict = {"file": file, "class": cls.name}
        for name in ("_set_default_aux_hidden_state_layers", HOOKED[0]):
            if name not in meths:
                raise PatternMoved(f"{file}: {cls.name}.{name} is gone")
            info[name] = {"line": meths[name].lineno, "src": ast.unparse(meths[name])}
        pop = next((p for p in POPPERS if p in meths), None)
        if pop is None:
            raise PatternMoved(f"{file}: no {' / '.join(POPPERS)} in {cls.name}")
        info["pop"] = {"name": pop, "line": meths[pop].lineno, "src": ast.unparse(meths[pop])}
        mod = meths.get("modify")
        if mod is None:
            raise PatternMoved(f"{file}: {cls.name}.modify is gone")
        # the statements of modify that set the default ids and register the hooks
        stmts = [
            s
            for s in mod.body
            if "register_forward_hook" in ast.unparse(s)
            or ("_set_default_aux_hidden_state_layers" in ast.unparse(s) and isinstance(s, ast.If))
        ]
        if not any("register_forward_hook" in ast.unparse(s) for s in stmts):
            raise PatternMoved(f"{file}: modify registers no forward hook")
        # modify's own parameters (eagle_offline in 0.39-0.44) stay names of the lifted function, all None
        params = [a.arg for a in mod.args.args[1:] + mod.args.kwonlyargs]
        info["modify"] = {"line": mod.lineno, "src": [ast.unparse(s) for s in stmts], "params": params}
        # module-level helpers the default setter calls (default_eagle_aux_layer_ids from 0.45)
        helpers = {n.name: ast.unparse(n) for n in tree.body if isinstance(n, ast.FunctionDef)}
        used = {n.id for n in ast.walk(meths["_set_default_aux_hidden_state_layers"]) if isinstance(n, ast.Name)}
        info["helpers"] = {k: v for k, v in helpers.items() if k in used}
        # the draft's fc width: len(ids) * hidden_size (pattern, not executed: it builds an nn.Linear)
        fc = None
        for f in sorted((self.root / SPEC).rglob("*.py")):
            m = re.search(r"len\(\s*config\.eagle_aux_hidden_state_layer_ids\s*\)\s*\*\s*config\.hidden_size", f.read_text())
            if m:
                fc = f"{f.relative_to(self.root)}:{f.read_text()[: m.start()].count(chr(10)) + 1}"
                break
        if fc is None:
            raise PatternMoved("the draft fc width is no longer len(eagle_aux_hidden_state_layer_ids) * hidden_size")
        info["fc"] = fc
        return info

    @staticmethod
    def key(info: dict) -> str:
        if info.get("absent"):
            return hashlib.sha256(b"absent").hexdigest()[:12]
        parts = [info[k]["src"] for k in ("_set_default_aux_hidden_state_layers", HOOKED[0], "pop")]
        parts += info["modify"]["src"] + sorted(info["helpers"].values())
        return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:12]

    def run(self, info: dict, L: int, ids: list[int] | None) -> dict:
        """One case: ModelOpt's capture for ``ids`` (None: not configured, i.e. the empty default list)."""
        if info.get("absent"):
            return {"error": "no HF EAGLE plugin with forward-hook capture in this release", "at": SPEC}
        given = {"torch": TORCH}
        for name, src in info["helpers"].items():
            given[name] = _compile(src, dict(given))
        eagle_config = Obj(eagle_aux_hidden_state_layer_ids=list(ids or []), use_aux_hidden_state=True)
        registered: list[int] = []
        hooks: dict[int, list] = {}

        class Layer:
            def __init__(self, i: int):
                self.i = i

            def register_forward_hook(self, fn):
                registered.append(self.i)
                hooks.setdefault(self.i, []).append(fn)

        layers = [Layer(i) for i in range(L)]
        me = Obj(
            eagle_config=eagle_config,
            eagle_offline=False,
            training=False,
            _base_llm_config=Obj(num_hidden_layers=L),
            config=Obj(num_hidden_layers=L, num_orig_hidden_layers=L),
            _base_model=Obj(layers=layers),
            model=Obj(layers=layers),  # 0.35-0.44 reach the decoder layers as self.model.layers
            eagle_module=Obj(fc=Obj(weight=Obj(device="cpu"))),
        )
        for name in ("_set_default_aux_hidden_state_layers", HOOKED[0]):
            setattr(me, name, types.MethodType(_compile(info[name]["src"], dict(given)), me))
        me.pop = types.MethodType(_compile(info["pop"]["src"], dict(given)), me)
        body = "\n".join(info["modify"]["src"])
        sig = "".join(f", {p}=None" for p in info["modify"]["params"])
        fn = _compile(
            f"def _modify(self{sig}):\n" + "\n".join("    " + ln for ln in body.splitlines()) + "\n    return None", dict(given)
        )
        fn(me)
        used_ids = list(me.eagle_config.eagle_aux_hidden_state_layer_ids)
        # a forward: every layer runs in order and calls its hooks with its output (a tuple, as HF layers return)
        for layer in layers:
            for h in hooks.get(layer.i, []):
                h(layer, (), (Tensor(layer.i),))
        at = f"{info['file']}:{info['pop']['line']}"
        try:
            got = me.pop()
            got = _cat(got) if isinstance(got, list) else got  # 0.35-0.40 return the list, the caller concatenates
        except RuntimeError as e:
            return {"error": f"RuntimeError: {e}", "at": at, "when": "first forward", "internal": used_ids}
        if len(got) != len(used_ids):
            return {
                "error": f"RuntimeError: mat1 and mat2 shapes cannot be multiplied (the fc takes {len(used_ids)} x hidden "
                f"inputs, {len(got)} states were captured)",
                "at": info["fc"],
                "when": "first forward",
                "internal": used_ids,
            }
        return {"points": [f"layer_out[{t.layer}]" for t in got], "internal": used_ids}
