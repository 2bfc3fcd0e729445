"""Building an engine's MTP model for conformance/mtp_exec.py without running its ``__init__``: each
``self.X = Cls(...)`` the class's own ``__init__`` makes becomes the stub mtp_stubs.py names for ``Cls``."""

from __future__ import annotations

import ast
import types
from typing import Any

from mtp_stubs import Decoder, Embed, Layers, Linear, Logits, Module, Norm, kind_of


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _self_targets(t: ast.expr) -> list[tuple[list[str], int | None]]:
    """``self.a`` / ``self.a.b`` / a tuple of them -> [(path, position in the tuple)]."""
    if isinstance(t, ast.Tuple):
        return [(p, i) for i, e in enumerate(t.elts) for p, _ in _self_targets(e)]
    path: list[str] = []
    while isinstance(t, ast.Attribute):
        path.insert(0, t.attr)
        t = t.value
    return [(path, None)] if isinstance(t, ast.Name) and t.id == "self" and path else []


_RANK = {Decoder: 0, Norm: 1, Layers: 2, Linear: 3, Embed: 4, Logits: 5, Module: 6}


class Builder:
    """Builds engine objects without running their ``__init__``: each ``self.X = Cls(...)`` of the class's
    own ``__init__`` (and its file bases') becomes the stub ``Cls`` names, a class of the file built the
    same way, or a model class of another model file of the release (``resolve``); constants are kept."""

    def __init__(self, resolve: Any):
        self.resolve = resolve  # (namespace, name) -> class from another file of the release, or None

    def candidate(self, g: dict, call: ast.Call, path: str, depth: int) -> tuple[int, Any] | None:
        name = _call_name(call)
        cls = g.get(name)
        if isinstance(cls, type) and "_mtp_ast" in cls.__dict__:
            return -1, lambda: self.build(cls, path, depth + 1)
        k = kind_of(name)
        if k is Layers:
            inner = [c for c in ast.walk(call) if isinstance(c, ast.Call) and c is not call]
            items = [self.candidate(g, c, path + "[*]", depth) for c in inner]
            best = min((c for c in items if c), key=lambda c: c[0], default=None)
            return _RANK[Layers], lambda: Layers(best[1]() if best else _named(Decoder(), path + "[*]"))
        if k is not None:
            cls_ = g.get(name) if isinstance(g.get(name), type) else k
            return _RANK[k] + (0.5 if name != "Linear" and k is Linear else 0), lambda: _named(cls_(), path)
        other = self.resolve(g, name) if depth < 3 else None
        if other is not None:
            return -1, lambda: self.build(other, path, depth + 1)
        return None

    def build(self, cls: type, path: str = "model", depth: int = 0) -> Any:
        obj = cls.__new__(cls)
        object.__setattr__(obj, "_name", path)
        g = _module_of(cls)
        chosen: dict[tuple[str, ...], tuple[float, Any]] = {}
        for klass in reversed(cls.__mro__):
            node = klass.__dict__.get("_mtp_ast")
            init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None) if node else None
            for a in ast.walk(init) if init else ():
                if not isinstance(a, ast.Assign):
                    continue
                for tgt in a.targets:
                    for p, pos in _self_targets(tgt):
                        key = tuple(p)
                        if isinstance(a.value, ast.Constant) and pos is None:
                            chosen.setdefault(key, (9, lambda v=a.value.value: v))
                        elif isinstance(a.value, ast.Call) and pos in (None, 0):
                            c = self.candidate(g, a.value, f"{path}.{'.'.join(p)}", depth)
                            if c and (key not in chosen or c[0] < chosen[key][0]):
                                chosen[key] = c
                        elif pos:  # self.layers, self.start_layer, self.end_layer = make_pp_layers(...)
                            chosen.setdefault(key, (9, lambda v=pos - 1: v))
        # built by a helper method (self.embed_tokens = self._build_embed_tokens(config)): read by its name
        for attr, k in (("embed_tokens", Embed), ("lm_head", Linear)):
            if (attr,) not in chosen and attr in _assigned(cls):
                chosen[(attr,)] = (8, lambda k=k, attr=attr: _named(k(), f"{path}.{attr}"))
        for key, (_, make) in sorted(chosen.items(), key=lambda kv: len(kv[0])):
            parent = obj
            for part in key[:-1]:
                parent = parent.__dict__.get(part) or _set(parent, part, _named(Module(), f"{path}.{part}"))
            _set(parent, key[-1], make())
        return obj


def _assigned(cls: type) -> set[str]:
    """Attributes the class's ``__init__`` assigns from something the builder could not classify."""
    out: set[str] = set()
    for k in cls.__mro__:
        node = k.__dict__.get("_mtp_ast")
        for a in ast.walk(node) if node else ():
            if isinstance(a, ast.Assign):
                out |= {p[0] for t in a.targets for p, _ in _self_targets(t) if len(p) == 1}
    return out


def _named(obj: Any, path: str) -> Any:
    object.__setattr__(obj, "_name", path)
    return obj


def _set(obj: Any, name: str, value: Any) -> Any:
    object.__setattr__(obj, name, value)
    return value


def _module_of(cls: type) -> dict:
    for k in cls.__mro__:
        f = k.__dict__.get("forward") or k.__dict__.get("__init__")
        if isinstance(f, types.FunctionType):
            return f.__globals__
    return {}
