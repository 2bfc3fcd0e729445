"""Symbolic stand-ins for executing an engine's MTP model file (conformance/mtp_exec.py).

An engine's MTP layer is plain Python over modules (norms, linears, one decoder layer, a logits processor)
and tensor operations (cat, where, +). The release's file is executed with its imports removed; every
module its classes build is a recording stub chosen by the class name the engine's ``__init__`` calls
(``*Norm*`` a norm, ``*DecoderLayer*`` the decoder layer, ``*Linear``/``*LMHead`` a linear, ...), classes of
the same file (and model classes of the release's other model files) are built the same way, and the
engine's own ``forward`` / ``compute_logits`` run on :class:`Sym` values: each result is the expression
tree that produced it, read back by mtp_exec.py. Nothing here re-types what a layer does.
"""

from __future__ import annotations

import ast
import builtins
import re
import types
import typing
from pathlib import Path
from typing import Any

H = 8


class MTPCodeMoved(Exception):
    """The release's MTP code no longer runs on these stubs: read the new source and teach the stubs."""


# --------------------------------------------------------------------------- symbolic tensors


class Sym:
    """A tensor stand-in: ``op`` (leaf, norm, add, linear, cat, where, cmp, mask, call, block, mlp, resid,
    logits), ``name`` and ``args`` (its operands, Sym or module stubs)."""

    def __init__(self, op: str, name: str = "", args: tuple | list = ()):
        self.op, self.name, self.args = op, name, tuple(args)

    shape = (1, H)
    dtype = device = None

    def __add__(self, other: Any) -> Sym:
        return Sym("add", "", (self, other))

    def __radd__(self, other: Any) -> Sym:
        return Sym("add", "", (other, self))

    def __eq__(self, other: Any) -> Sym:  # type: ignore[override]
        return Sym("cmp", f"=={other!r}", (self,))

    __hash__ = object.__hash__

    def __getitem__(self, idx: Any) -> Sym:
        return self

    def __setitem__(self, idx: Any, value: Any) -> None:  # x[positions == 0] = 0: the masking, in place
        old = Sym(self.op, self.name, self.args)
        self.op, self.name, self.args = "mask", f"={value!r}", (old, idx)

    def __iter__(self):
        if self.op == "block":  # a decoder layer's (hidden_states, residual) pair
            return iter((Sym("mlp", "", self.args), Sym("resid", "", self.args)))
        raise MTPCodeMoved(f"a tensor was unpacked: {self}")

    def _same(self, *a: Any, **k: Any) -> Sym:
        return self

    unsqueeze = view = reshape = contiguous = to = float = type = squeeze = _same

    def numel(self) -> int:
        return 1

    def stride(self, *a: Any) -> tuple[int, int]:
        return (H, 1)

    def is_contiguous(self) -> bool:
        return True

    def size(self, *a: Any) -> Any:
        return self.shape if not a else self.shape[a[0]]

    def new_zeros(self, *a: Any, **k: Any) -> Sym:
        return Sym("leaf", "zeros")

    def __repr__(self) -> str:
        return render(self)


def render(x: Any) -> str:
    if isinstance(x, Sym):
        a = [render(y) for y in x.args]
        if x.op == "leaf":
            return x.name
        if x.op == "add":
            return f"({a[0]} + {a[1]})"
        if x.op == "cmp":
            return f"({a[0]}{x.name})"
        if x.op == "mask":
            return f"mask[{a[1]}{x.name}]({a[0]})"
        if x.op in ("block", "mlp", "resid"):
            return f"layer.{x.op}({a[0]})"
        return f"{x.name or x.op}({', '.join(a)})"
    if isinstance(x, Base):
        return x._name
    if x is None or isinstance(x, (bool, int, float, str)):
        return repr(x)
    return f"<{type(x).__name__}>"  # a batch or metadata object: never an address


def walk(x: Any):
    yield x
    if isinstance(x, Sym):
        for a in x.args:
            yield from walk(a)


class TorchNS(types.SimpleNamespace):
    """The ``torch`` an MTP file sees: the functions its forward calls, on Sym values."""

    def cat(self, xs: Any, dim: int = -1) -> Sym:
        return Sym("cat", "cat", tuple(xs))

    def where(self, cond: Any, a: Any, b: Any) -> Sym:
        return Sym("where", "where", (cond, a, b))

    def matmul(self, a: Any, b: Any) -> Sym:
        return Sym("call", "matmul", (a,))

    def __getattr__(self, name: str) -> Any:  # torch.cuda.current_stream(), dtypes: nothing that decides a state
        if name.startswith("__"):
            raise AttributeError(name)
        return Rec(f"torch.{name}")


# --------------------------------------------------------------------------- module stubs


_ONE_RANK = types.SimpleNamespace(world_size=1, rank_in_group=0, is_first_rank=True, is_last_rank=True)


class Base:
    """What every built engine object derives from: unknown attributes read as the engine's defaults would
    on one rank, with no parallelism (a count 1, a start 0, an end 1, a flag None)."""

    _name = "?"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name == "pp_group":
            return _ONE_RANK
        if "start" in name:
            return 0
        if "end" in name or name.startswith("num_"):
            return 1
        return None

    def __call__(self, *a: Any, **k: Any) -> Any:
        return self.forward(*a, **k)


class Module(Base):
    """nn.Module: a plain container (``self.shared_head = nn.Module()``)."""

    def __init__(self, *a: Any, **k: Any) -> None:
        pass

    def register_buffer(self, *a: Any, **k: Any) -> None:
        pass


class Norm(Module):
    def forward(self, x: Any, residual: Any = None, *a: Any, **k: Any) -> Any:
        if residual is None:
            return Sym("norm", self._name, (x,))
        s = Sym("add", "", (x, residual))
        return Sym("norm", self._name, (s,)), s

    def forward_native(self, *a: Any, **k: Any) -> Any:
        return self.forward(*a, **k)

    @property
    def weight(self) -> Sym:
        return Sym("leaf", f"{self._name}.weight")

    variance_epsilon = 1e-6


class Linear(Module):
    def forward(self, x: Any, *a: Any, **k: Any) -> Any:
        out = Sym("linear", self._name, (x,))
        return (out, None) if type(self).__name__ == "ReplicatedLinear" else out


class Embed(Module):
    def forward(self, ids: Any, *a: Any, **k: Any) -> Sym:
        return Sym("leaf", "embed")


class Decoder(Module):
    """The engine's decoder layer: its output is the pair (mlp output, residual) of the state it was given;
    what the MTP code does with the pair (adds them, norms them) is read off the result."""

    def forward(self, *a: Any, **k: Any) -> Sym:
        h = k.get("hidden_states", a[1] if len(a) > 1 else None)
        if not isinstance(h, Sym):
            raise MTPCodeMoved(f"the decoder layer was called without a hidden state: {a} {k}")
        n = _unpacked_at_call_site()
        if n and n > 2:  # (hidden_states, residual, topk_indices) = self.decoder(...): the extras are not states
            return (Sym("mlp", "", (h,)), Sym("resid", "", (h,)), *([None] * (n - 2)))
        return Sym("block", "", (h,))


def _unpacked_at_call_site() -> int | None:
    """How many names the engine's statement calling the decoder layer unpacks its result into."""
    import sys

    fr = sys._getframe(3)  # _unpacked_at_call_site <- Decoder.forward <- Base.__call__ <- the engine's line
    from stubs import load_tree

    try:
        tree = load_tree(Path(fr.f_code.co_filename))
    except (OSError, SyntaxError):
        return None
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign) and n.lineno <= fr.f_lineno <= (n.end_lineno or n.lineno):
            t = n.targets[0]
            return len(t.elts) if isinstance(t, ast.Tuple) else 1
    return None


class Logits(Module):
    """LogitsProcessor: logits[head](the hidden state it was handed)."""

    def forward(self, *a: Any, **k: Any) -> Sym:
        head = next((x for x in a if isinstance(x, (Linear, Embed))), None)
        hidden = [x for x in a if isinstance(x, Sym) and not (x.op == "leaf" and x.name == "ids")]
        if head is None or len(hidden) != 1:
            raise MTPCodeMoved(f"the logits processor was called with {a}")
        return Sym("logits", f"logits[{head._name}]", (hidden[0],))


class Layers(Module):
    """ModuleList / ModuleDict / make_layers: one layer under every index."""

    def __init__(self, item: Any = None) -> None:
        self.item = item

    def __getitem__(self, key: Any) -> Any:
        return self.item

    def __iter__(self):
        return iter([self.item])

    def __len__(self) -> int:
        return 1

    def values(self) -> list:
        return [self.item]


class Rec:
    """An engine global that does not decide the state (loggers, envs, distributed helpers, the residual
    stream's helpers): truthy, every attribute another Rec; a call on a tensor is kept in the expression."""

    def __init__(self, name: str):
        self._n = name

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return Rec(f"{self._n}.{name}")

    def __call__(self, *a: Any, **k: Any) -> Any:
        if any(isinstance(x, Sym) for x in (*a, *k.values())):
            return Sym("call", self._n, (*a, *k.values()))
        if self._n.startswith("envs.") and self._n.endswith(".get"):  # an environment flag: unset
            return None
        return Rec(f"{self._n}()")

    def __bool__(self) -> bool:
        return True

    def __mro_entries__(self, bases: tuple) -> tuple:  # class X(enum.Enum): a mixin named like it
        return (type(self._n.rsplit(".", 1)[-1], (Base,), {}),)

    def __enter__(self) -> Rec:
        return self

    def __exit__(self, *a: Any) -> None:
        return None

    def __len__(self) -> int:
        return 0

    def __iter__(self):
        return iter(())


def kind_of(name: str) -> type | None:
    """The stub for a class the engine instantiates, by its name."""
    if "Missing" in name or "Identity" in name:
        return None
    if "DecoderLayer" in name:
        return Decoder
    if "Norm" in name:
        return Norm
    if name.endswith(("Linear", "LMHead")):
        return Linear
    if name.endswith("Embedding"):
        return Embed
    if name == "LogitsProcessor":
        return Logits
    if name in ("ModuleList", "ModuleDict", "make_layers", "make_pp_layers"):
        return Layers
    if name == "Module":
        return Module
    return None


# --------------------------------------------------------------------------- loading a release's file


_KEEP_DECORATORS = {"property", "classmethod", "staticmethod"}
_PLATFORM = re.compile(r"^_?(is|use|enable|should)_[a-z0-9_]+$")


def _clean(tree: ast.Module, decorators: bool = False) -> None:
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not decorators:
                n.decorator_list = [d for d in n.decorator_list if isinstance(d, ast.Name) and d.id in _KEEP_DECORATORS]
            n.returns = None
            for a in (*n.args.posonlyargs, *n.args.args, *n.args.kwonlyargs, n.args.vararg, n.args.kwarg):
                if a is not None:
                    a.annotation = None
        elif isinstance(n, ast.ClassDef):
            n.decorator_list = []
            n.body = [ast.Pass() if isinstance(s, ast.AnnAssign) else s for s in n.body] or [ast.Pass()]


def _stub_class(name: str) -> type:
    k = kind_of(name)
    return type(name, (k or Base,), {})  # an unknown base is a mixin over Base, so several of them still order


def load_module(path: Path, decorators: bool = False) -> dict[str, Any]:
    """Run the file's top-level statements (imports removed, annotations dropped, decorators too unless
    ``decorators``) over the stubs; its classes carry their AST (``_mtp_ast``) and file for the builder."""
    tree = ast.parse(path.read_text())
    _clean(tree, decorators)
    g: dict[str, Any] = {"__builtins__": builtins, "__name__": "engine_mtp"}
    imports: dict[str, tuple[int, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                imports[a.asname or a.name] = (node.level, node.module or "")
    loads = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    bases = {b.id for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for b in c.bases if isinstance(b, ast.Name)}
    for name in loads - set(dir(builtins)):
        if hasattr(typing, name):
            g[name] = getattr(typing, name)
        elif name in bases or kind_of(name):
            g[name] = _stub_class(name)
        else:
            g[name] = Rec(name)
    nn = types.SimpleNamespace(Module=Module, ModuleList=Layers, ModuleDict=Layers, Linear=_stub_class("Linear"))
    g["nn"] = nn
    g["torch"] = TorchNS(nn=nn, Tensor=object, no_grad=lambda: lambda f: f, long="long", float32="float32")
    g["copy"] = __import__("copy")
    g["print"] = lambda *a, **k: None  # a trace flag read as set (an env Rec) prints; the run stays quiet
    g["_mtp_imports"] = imports
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        mod = ast.fix_missing_locations(ast.Module([node], []))
        try:
            exec(compile(mod, str(path), "exec"), g)
        except Exception as e:
            if isinstance(node, ast.ClassDef):
                raise MTPCodeMoved(f"{path.name}: class {node.name} did not load on the stubs: {type(e).__name__}: {e}") from e
        if isinstance(node, ast.ClassDef) and isinstance(g.get(node.name), type):
            g[node.name]._mtp_ast = node
            g[node.name]._mtp_file = str(path)
    for name in list(g):
        # the reference path: no CUDA/NPU/HIP kernel branch, no data-parallel attention (each named in the row)
        if _PLATFORM.match(name) and isinstance(g[name], Rec):
            g[name] = (lambda *a, **k: False) if not name.startswith("_") else False
    return g


def compile_method(node: ast.FunctionDef, file: str) -> Any:
    """One method lifted alone (annotations and decorators dropped), its globals permissive stubs."""
    fn = copy_node(node)
    mod = ast.fix_missing_locations(ast.Module([fn], []))
    _clean(mod)
    g: dict[str, Any] = {"__builtins__": builtins}
    for n in ast.walk(mod):
        if isinstance(n, ast.Name) and not hasattr(builtins, n.id):
            g.setdefault(n.id, Rec(n.id))
    exec(compile(mod, file, "exec"), g)
    return g[node.name]


def copy_node(node: ast.AST) -> Any:
    import copy as _copy

    return _copy.deepcopy(node)
