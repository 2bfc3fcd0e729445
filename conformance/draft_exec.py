"""Execute each release's EAGLE-3 draft model, on stubs: what it applies for each forward flag, from which key.

The capture harness answers "which target states reach the draft"; this one answers "what does the
engine's draft do with them". From each release's own `llama_eagle3.py` (SGLang `srt/models/`, vLLM
`model_executor/models/`), with the imports removed and every engine class it builds on replaced by
a recording stub, the harness:
- **constructs** the draft model (`LlamaForCausalLMEagle3` / `Eagle3LlamaForCausalLM`) from a
  recording config, once per probe: each forward flag absent, set at the top level, set in
  `eagle_config`, and both ways round, plus `num_hidden_layers = 2`. What the constructor built
  (`input_norm`, `fc_norm`, `norm_output`, the number of decoder layers, or the error it raised)
  says whether the flag is applied, from which key, with which default, and whether a two-layer
  draft is served;
- **runs the decoder layers' forward symbolically**: the stubs' norms, attention and MLP return
  expressions instead of tensors, so the returned residual says whether `norm_before_residual` is in
  effect, and a later layer's first call names the norm it applies before attention (SGLang's later
  layers use `hidden_norm`, where speculators checkpoints train `input_layernorm`);
- for vLLM, **runs `update_eagle3`** (`transformers_utils/configs/speculators/algos.py`, where the
  release has it): the translation of a speculators config, i.e. which flags reach the model from a
  speculators checkpoint and with which default.
- **builds the draft on the release's own base layer** (llama.py's `LlamaDecoderLayer` and `LlamaAttention`
  lifted in place of the stub, `probe_window`) from a config declaring a sliding-window layer, and from server
  args setting SGLang's draft window, and reads the window the attention backend was built with.
Nothing here re-types an engine's logic; a release whose file no longer matches the stubs fails
loudly ("the draft code moved: read it again").
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import copy
import inspect
import types
import typing
from pathlib import Path
from typing import Any

DRAFT_FILES = {"sglang": "sglang/srt/models/llama_eagle3.py", "vllm": "vllm/model_executor/models/llama_eagle3.py"}
ALGOS = "vllm/transformers_utils/configs/speculators/algos.py"
FLAGS = ("norm_before_fc", "fc_norm", "norm_output", "norm_before_residual")
PACKAGE_TABLE = "eagle3_doctor/data/draft_serving.json"  # what the package reads (engines/draft_table.py)
H = 8  # the stub config's hidden size; only its ratios matter (fc width = 3H)


class DraftCodeMoved(Exception):
    """The release's draft model no longer runs on these stubs: read the new source."""


# --------------------------------------------------------------------------- symbolic values


class Sym:
    """A tensor stand-in whose value is the expression that produced it."""

    def __init__(self, expr: str, width: int = H):
        self.expr, self.width = expr, width

    @property
    def shape(self) -> tuple[int, int]:
        return (1, self.width)

    def chunk(self, n: int, dim: int = -1) -> list[Sym]:
        return [Sym(f"{self.expr}[{i}/{n}]", self.width // n) for i in range(n)]

    def __add__(self, other: Any) -> Sym:
        return Sym(f"({self.expr} + {_e(other)})", self.width)

    __radd__ = __add__

    def __getitem__(self, idx: Any) -> Sym:
        return self

    def type(self, *a: Any) -> Sym:  # tensor.type(torch.LongTensor) in buffers the constructor makes
        return self

    def __setitem__(self, idx: Any, value: Any) -> None:
        pass

    def __repr__(self) -> str:
        return self.expr


def _e(x: Any) -> str:
    return x.expr if isinstance(x, Sym) else repr(x)


class _Torch(types.SimpleNamespace):
    """The `torch` the draft file sees: the tensor functions its forward calls, on Sym values."""

    def cat(self, xs: list[Any], dim: int = -1) -> Sym:
        return Sym("cat(" + ", ".join(_e(x) for x in xs) + ")", sum(getattr(x, "width", H) for x in xs))

    def _assert(self, *a: Any, **k: Any) -> None:
        pass

    def arange(self, *a: Any, **k: Any) -> Sym:
        return Sym("arange")

    def zeros(self, *a: Any, **k: Any) -> Sym:
        return Sym("zeros")


# --------------------------------------------------------------------------- stub modules


class StubModule:
    """nn.Module as the draft file uses it: attributes, children named by the attribute they sit in,
    and `__call__` -> `forward`. Calls are appended to the shared trace."""

    trace: list[str] = []

    def __init__(self, *a: Any, **k: Any) -> None:
        object.__setattr__(self, "_name", "?")

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, StubModule) and getattr(value, "_name", "?") == "?":
            object.__setattr__(value, "_name", name)
        object.__setattr__(self, name, value)

    def __call__(self, *a: Any, **k: Any) -> Any:
        return self.forward(*a, **k)

    def forward(self, *a: Any, **k: Any) -> Any:
        StubModule.trace.append(self._name)
        x = a[0] if a else next(iter(k.values()), None)
        return Sym(f"{self._name}({_e(x)})")

    def register_buffer(self, *a: Any, **k: Any) -> None:
        pass

    def named_parameters(self) -> list:
        return []

    def modules(self) -> list:
        return []


class ModuleList(StubModule, list):
    def __init__(self, items: Any = ()) -> None:
        StubModule.__init__(self)
        list.__init__(self, items)


class Norm(StubModule):
    """RMSNorm: norm(x) -> expr; norm(x, residual) -> (norm(x + residual), x + residual), the fused add."""

    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__()

    def forward(self, x: Any, residual: Any = None) -> Any:
        StubModule.trace.append(self._name)
        if residual is None:
            return Sym(f"{self._name}({_e(x)})", getattr(x, "width", H))
        s = Sym(f"({_e(x)} + {_e(residual)})", getattr(x, "width", H))
        return Sym(f"{self._name}({s.expr})", s.width), s


class Linear(StubModule):
    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__()
        # the input width it was built for: fc's says how many aux states the release concatenates
        object.__setattr__(self, "in_width", a[0] if a else k.get("input_size", k.get("in_features")))

    def forward(self, x: Any, *a: Any, **k: Any) -> Any:
        StubModule.trace.append(self._name)
        return Sym(f"{self._name}({_e(x)})", H)


class Attn(StubModule):
    def __init__(self) -> None:
        super().__init__()
        self.head_dim, self.total_num_heads, self.total_num_kv_heads = 2, 4, 2
        self.attn = types.SimpleNamespace(sliding_window_size=None)

    def forward(self, positions: Any = None, hidden_states: Any = None, *a: Any, **k: Any) -> Sym:
        StubModule.trace.append("self_attn")
        return Sym(f"attn({_e(hidden_states)})")


def _config_of(a: tuple, k: dict) -> Any:
    if "config" in k and k["config"] is not None:
        return k["config"]
    for x in (*a, *k.values()):
        if isinstance(x, RecConfig):
            return x
        inner = getattr(getattr(getattr(x, "speculative_config", None), "draft_model_config", None), "hf_config", None)
        if isinstance(inner, RecConfig):
            return inner
    raise DraftCodeMoved("the decoder layer base was built without a config the harness can find")


class BaseDecoderLayer(StubModule):
    """The engine's Llama decoder layer that the draft's layer subclasses: its norms, attention and MLP."""

    def __init__(self, *a: Any, **k: Any) -> None:
        super().__init__()
        cfg = _config_of(a, k)
        self.hidden_size = cfg.hidden_size
        self.self_attn = Attn()
        self.input_layernorm = Norm()
        self.post_attention_layernorm = Norm()
        self.mlp = StubModule()
        self.config = cfg


class Loose:
    """Server args, parallel groups, current configs: every attribute None, every call a Loose."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return None

    def __call__(self, *a: Any, **k: Any) -> Loose:
        return Loose()

    def __enter__(self) -> Loose:
        return self

    def __exit__(self, *a: Any) -> None:
        return None


# --------------------------------------------------------------------------- the recording config


class RecDict(dict):
    def __init__(self, data: dict, log: list[str], prefix: str):
        super().__init__(data)
        self._log, self._prefix = log, prefix

    def get(self, key: Any, default: Any = None) -> Any:
        self._log.append(f"{self._prefix}.{key}")
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self._log.append(f"{self._prefix}.{key}")
        return super().__getitem__(key)

    def __contains__(self, key: Any) -> bool:
        self._log.append(f"{self._prefix}.{key}")
        return super().__contains__(key)


class RecConfig:
    """A draft config (PretrainedConfig-like: attributes, not a dict) that logs every key read."""

    def __init__(self, values: dict, log: list[str] | None = None):
        object.__setattr__(self, "_log", [] if log is None else log)
        vals = {k: (RecDict(v, self._log, k) if isinstance(v, dict) else v) for k, v in values.items()}
        object.__setattr__(self, "_values", vals)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        self._log.append(name)
        if name in self._values:
            return self._values[name]
        raise AttributeError(name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._values[name] = value

    def __deepcopy__(self, memo: dict) -> RecConfig:
        return RecConfig({k: copy.deepcopy(dict(v) if isinstance(v, dict) else v) for k, v in self._values.items()}, self._log)

    def to_dict(self) -> dict:
        return dict(self._values)


def base_config(layers: int = 1, **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = dict(
        hidden_size=H,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=3 * H,
        vocab_size=32,
        draft_vocab_size=16,
        target_hidden_size=H,
        rms_norm_eps=1e-6,
        hidden_act="silu",
        max_position_embeddings=64,
        model_type="llama",
        tie_word_embeddings=False,
        eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 2, 3]},
    )
    for k, v in extra.items():
        if k == "eagle_config":
            cfg["eagle_config"] = {**cfg["eagle_config"], **v}
        else:
            cfg[k] = v
    return cfg


# --------------------------------------------------------------------------- loading a release's file


_ONE_RANK = types.SimpleNamespace(world_size=1, rank_in_group=0, is_first_rank=True, is_last_rank=True)

_BOUND = {
    "nn": types.SimpleNamespace(
        Module=StubModule, ModuleList=ModuleList, Linear=Linear, Embedding=StubModule, Parameter=lambda *a, **k: Sym("param")
    ),
    "RMSNorm": Norm,
    "QKVParallelLinear": Linear,
    "ReplicatedLinear": Linear,
    "MergedColumnParallelLinear": Linear,
    "RowParallelLinear": Linear,
    "ParallelLMHead": Linear,
    "VocabParallelEmbedding": StubModule,
    "LogitsProcessor": StubModule,
    "LlamaMLP": StubModule,
    "LlamaDecoderLayer": BaseDecoderLayer,
    "BaseLlamaDecoderLayer": BaseDecoderLayer,
    "LlamaForCausalLM": StubModule,
    "LlamaAttention": Attn,
    "copy": copy,
    "layer_stack": Loose(),
    "get_global_server_args": Loose(),
    "get_spec": Loose(),
    "get_parallel": lambda: types.SimpleNamespace(pp_group=_ONE_RANK),
    "get_pp_group": lambda: _ONE_RANK,
    "get_current_vllm_config": Loose(),
    "get_draft_quant_config": lambda *a, **k: None,
    "maybe_prefix": lambda prefix, name: f"{prefix}.{name}" if prefix else name,
    "add_prefix": lambda name, prefix: f"{prefix}.{name}" if prefix else name,
    "init_logger": lambda *a, **k: Loose(),
    "logger": Loose(),
    "TYPE_CHECKING": False,
}


def load_module(path: Path) -> dict[str, Any]:
    """The file's top-level statements without imports or decorators, run over the stubs: its classes."""
    tree = ast.parse(path.read_text())
    body = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            node.decorator_list = []
        body.append(node)
    mod = ast.fix_missing_locations(ast.Module(body, []))
    g: dict[str, Any] = {"__builtins__": builtins, "__name__": "engine_draft"}
    loads = {n.id for n in ast.walk(mod) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    for name in loads:
        if not hasattr(builtins, name):
            g[name] = getattr(typing, name, Loose())
    g.update(_BOUND)
    g["torch"] = _Torch(nn=_BOUND["nn"], Tensor=object, LongTensor="LongTensor", long="long", bool="bool", float32="float32")
    exec(compile(mod, str(path), "exec"), g)
    return g


# --------------------------------------------------------------------------- construction and forward


class VllmConfigStub:
    def __init__(self, hf: RecConfig):
        self.speculative_config = Loose()
        object.__setattr__(self.speculative_config, "draft_model_config", types.SimpleNamespace(hf_config=hf))
        self.model_config = types.SimpleNamespace(
            get_total_num_hidden_layers=lambda: 32,
            get_num_layers=lambda *a: 32,
            get_vocab_size=lambda: 32,
            dtype="bfloat16",
            hf_config=hf,
        )
        self.quant_config = None
        self.parallel_config = None


def construct(engine: str, g: dict[str, Any], values: dict) -> tuple[Any, list[str]]:
    """Build the release's draft model from a config; (its inner model, the keys it read)."""
    cfg = RecConfig(values)
    top = _construct_top(engine, g, cfg)
    return top.model, list(dict.fromkeys(cfg._log))


def _construct_top(engine: str, g: dict[str, Any], cfg: RecConfig) -> Any:
    if engine == "sglang":
        top = g["LlamaForCausalLMEagle3"](cfg)
    else:
        cls = g["Eagle3LlamaForCausalLM"]
        stub = VllmConfigStub(cfg)
        if "vllm_config" in inspect.signature(cls.__init__).parameters:
            top = cls(vllm_config=stub, prefix="")
        else:  # the first releases hand the draft its own model config
            top = cls(model_config=stub.model_config)
    return top


def _layers(model: Any) -> list[Any]:
    if hasattr(model, "layers"):
        return list(model.layers)
    return [model.midlayer]


def _call_layer(layer: Any, hidden: Sym, residual: Sym | None) -> tuple[Any, Any]:
    params = inspect.signature(layer.forward).parameters
    kw: dict[str, Any] = {}
    for name in params:
        kw[name] = {
            "positions": Sym("pos"),
            "embeds": Sym("e"),
            "hidden_states": hidden,
            "residual": residual,
        }.get(name, Loose())
    out = layer.forward(**kw)
    if not (isinstance(out, tuple) and len(out) == 2):
        raise DraftCodeMoved(f"the decoder layer's forward returned {out!r}, not (hidden_states, residual)")
    return out


def layer_forward(model: Any) -> dict[str, Any]:
    """Run the first decoder layer, then (when built) the second, on symbols; what each applied."""
    layers = _layers(model)
    StubModule.trace = []
    hs, res = _call_layer(layers[0], Sym("h"), None)
    first = {"residual": _e(res), "calls": list(StubModule.trace)}
    out: dict[str, Any] = {"first": first}
    if len(layers) > 1:
        StubModule.trace = []
        _call_layer(layers[1], hs, res)
        calls = list(StubModule.trace)
        if "self_attn" not in calls:
            raise DraftCodeMoved("a later decoder layer's forward never called its attention")
        before = calls[: calls.index("self_attn")]
        out["later"] = {"calls": calls, "norm_before_attention": before[-1] if before else None}
    return out


def _flag_value(model: Any, flag: str) -> bool | None:
    """What the constructed model applies for a flag (None: nothing in the model stands for it)."""
    if flag == "norm_before_fc":
        return getattr(model, "input_norm", None) is not None if hasattr(model, "input_norm") else None
    if flag == "fc_norm":
        return getattr(model, "fc_norm", None) is not None if hasattr(model, "fc_norm") else None
    if flag == "norm_output":
        return bool(model.norm_output) if hasattr(model, "norm_output") else None
    # the layer returns (mlp input, attention + the residual it started from): that residual is the
    # state itself, or its hidden_norm when norm_before_residual is in effect
    res = layer_forward(model)["first"]["residual"]
    if res.endswith(" + hidden_norm(h))"):
        return True
    if res.endswith(" + h)"):
        return False
    raise DraftCodeMoved(f"the first decoder layer's residual is {res}: neither the state nor its hidden_norm")


def probe_flag(engine: str, g: dict[str, Any], flag: str) -> dict[str, Any]:
    """Applied value per placement: absent, top level, eagle_config, and the two disagreeing."""
    cases = {
        "absent": base_config(),
        "top": base_config(**{flag: True}),
        "nested": base_config(eagle_config={flag: True}),
        "top_true_nested_false": base_config(**{flag: True}, eagle_config={flag: False}),
        "top_false_nested_true": base_config(**{flag: False}, eagle_config={flag: True}),
    }
    got = {name: _flag_value(construct(engine, g, values)[0], flag) for name, values in cases.items()}
    if all(v is None for v in got.values()):
        return {"applied": None, "keys": [], "default": None}
    keys = []
    if got["top"] != got["absent"]:
        keys.append(flag)
    if got["nested"] != got["absent"]:
        keys.append(f"eagle_config.{flag}")
    if len(keys) == 2 and got["top_false_nested_true"]:  # both present, disagreeing: the nested one wins
        keys.reverse()
    return {"applied": True, "keys": keys, "default": bool(got["absent"])}


def probe_layers(engine: str, g: dict[str, Any]) -> dict[str, Any]:
    try:
        model, _ = construct(engine, g, base_config(layers=2))
    except Exception as e:  # the engine refusing a 2-layer draft at start-up is the finding
        return {"two_layers": f"{type(e).__name__}: {e}"}
    built = len(_layers(model))
    fwd = layer_forward(model)
    return {"two_layers": "built" if built == 2 else f"built {built}", **({"later": fwd["later"]} if "later" in fwd else {})}


def probe_algos(path: Path) -> dict[str, Any] | None:
    """vLLM's speculators translation: which flags reach the model config, with which default."""
    if not path.exists():
        return None
    g = load_module(path)
    fn = g.get("SUPPORTED_SPECULATORS_TYPES", {}).get("eagle3") or g.get("update_eagle3")
    if fn is None:
        return None
    out: dict[str, Any] = {}
    for flag in FLAGS:
        absent: dict[str, Any] = {"model_type": "llama"}
        fn({"draft_vocab_size": 16}, absent)
        given: dict[str, Any] = {"model_type": "llama"}
        fn({"draft_vocab_size": 16, flag: not absent.get(flag, False)}, given)
        out[flag] = {"passed": flag in given, "default": absent.get(flag)}
    # the keys stating the aux count that reach the model config from a speculators config's top level
    passed = []
    for key, value in (("num_aux_hidden_states", 4), ("eagle_aux_hidden_state_layer_ids", [1, 2, 3, 4]), ("eagle_config", {})):
        given = {"model_type": "llama"}
        fn({"draft_vocab_size": 16, key: value}, given)
        passed += [key] if key in given else []
    out["aux_passed"] = passed
    out["steps"] = probe_steps(path.parent / "base.py")
    return out


def probe_steps(path: Path) -> str | None:
    """The speculative config vLLM builds when a speculators checkpoint is served on its own: the key its
    proposal's ``speculative_tokens`` (the depth the draft was trained for) lands in, or None where the release has
    no such builder. Executed: the builder lifted from the class with ``ast``."""
    if not path.exists():
        return None
    from stubs import compile_function

    names = ("build_vllm_speculative_config", "convert_speculators_to_vllm")
    found = [
        n
        for c in ast.parse(path.read_text()).body
        if isinstance(c, ast.ClassDef)
        for n in c.body
        if isinstance(n, ast.FunctionDef) and n.name in names
    ]
    if not found:
        return None
    fn = compile_function(ast.unparse(found[0]))
    config = {
        "speculators_model_type": "eagle3",
        "speculators_config": {"proposal_methods": [{"speculative_tokens": 3}], "verifier": {"name_or_path": "t"}},
        "transformer_layer_config": {},
    }
    got = fn(None, config)
    keys = [k for k, v in got.items() if v == 3]
    if len(keys) != 1:
        raise DraftCodeMoved(f"{path}: {found[0].name} put speculative_tokens under {keys or 'no key'}")
    return keys[0]


# --------------------------------------------------------------------------- the number of aux states

IDS = "eagle_aux_hidden_state_layer_ids"
AUX_KEYS = ("num_aux_hidden_states", f"eagle_config.{IDS}", IDS)  # every place a draft config states the count


def _aux_config(setting: dict[str, int]) -> dict[str, Any]:
    """A config stating the aux count only where ``setting`` says ({key: count}), no id list anywhere else."""
    cfg = base_config()
    cfg["eagle_config"] = {}
    for key, n in setting.items():
        if key == "num_aux_hidden_states":
            cfg[key] = n
        elif key.startswith("eagle_config."):
            cfg["eagle_config"][IDS] = list(range(1, n + 1))
        else:
            cfg[IDS] = list(range(1, n + 1))
    return cfg


def _aux_built(engine: str, g: dict[str, Any], setting: dict[str, int]) -> int | str:
    """How many aux states the release's draft concatenates into fc when built from that config (fc's input width
    over the target hidden size), or the error its constructor raised."""
    try:
        model, _ = construct(engine, g, _aux_config(setting))
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    fc = getattr(model, "fc", None)
    width = getattr(fc, "in_width", None)
    if not isinstance(width, int) or width % H:
        raise DraftCodeMoved(f"the draft's fc was built with input width {width!r}, not a multiple of the hidden size")
    return width // H


def probe_aux(engine: str, g: dict[str, Any]) -> dict[str, Any]:
    """The number of aux hidden states the release's draft takes: its count with no key, the keys that change it
    (each stating 4), in precedence order (two keys stating 4 and 5: the one whose count is built wins)."""
    default = _aux_built(engine, g, {})
    if not isinstance(default, int):
        raise DraftCodeMoved(f"the draft did not build with no aux count stated: {default}")
    keys = [k for k in AUX_KEYS if _aux_built(engine, g, {k: 4}) == 4]
    wins = {k: sum(_aux_built(engine, g, {k: 5, o: 4}) == 5 for o in keys if o != k) for k in keys}
    return {"default": default, "keys": sorted(keys, key=lambda k: -wins[k])}


# --------------------------------------------------------------------------- the attention window

LLAMA_FILES = {"sglang": "sglang/srt/models/llama.py", "vllm": "vllm/model_executor/models/llama.py"}
VLLM_UTILS = "vllm/model_executor/models/utils.py"  # extract_layer_index: the layer id vLLM's attention reads
BASE_CLASSES = ("LlamaMLP", "LlamaAttention", "LlamaDecoderLayer")
W = 5  # the probe's window: any value the recording attention can tell from none


class WindowAttn:
    """The engine's attention backend (vLLM `Attention`, SGLang `RadixAttention`): records what it was built with."""

    made: list[dict[str, Any]] = []

    def __init__(self, *a: Any, **k: Any) -> None:
        self.kw = k
        self.sliding_window_size = k.get("sliding_window_size")
        WindowAttn.made.append(k)

    def __call__(self, *a: Any, **k: Any) -> Sym:
        return Sym("attn")


class _ServerArgs(Loose):
    """Server args with the draft's attention window set (SGLang --speculative-draft-window-size)."""

    speculative_draft_window_size = W


def _lift_classes(path: Path, names: tuple[str, ...], bound: dict[str, Any]) -> dict[str, Any]:
    """The named classes of an engine file, lifted with ``ast`` onto nn.Module stubs (the rest of the file, e.g.
    its model classes with engine metaclasses, is not run), over the harness's stubs."""
    import __future__

    tree = ast.parse(path.read_text())
    body = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in names:
            node.decorator_list, node.keywords = [], []
            node.bases = [ast.Attribute(ast.Name("nn", ast.Load()), "Module", ast.Load())]
            body.append(node)
    mod = ast.fix_missing_locations(ast.Module(body, []))
    g: dict[str, Any] = {"__builtins__": builtins, "__name__": "engine_base"}
    for name in {n.id for n in ast.walk(mod) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}:
        if not hasattr(builtins, name):
            g[name] = getattr(typing, name, Loose())
    g.update({k: v for k, v in bound.items() if k not in names})
    g["torch"] = _Torch(nn=_BOUND["nn"], Tensor=object)
    exec(compile(mod, str(path), "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True), g)
    return g


def _lift_function(path: Path, name: str) -> Any:
    from stubs import compile_function

    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return compile_function(ast.unparse(node))
    return None


def _own_base(engine: str, root: Path, extra: dict[str, Any]) -> dict[str, Any]:
    """The harness's bindings with the release's own base decoder layer (llama.py's LlamaDecoderLayer, LlamaAttention,
    LlamaMLP lifted over the stubs and ``extra``) under the names the draft file imports them as."""
    llama = root / LLAMA_FILES[engine]
    if not llama.exists():
        raise DraftCodeMoved(f"{engine} {root.name}: {LLAMA_FILES[engine]} is missing: the draft's base layer cannot be built")
    bound = (
        dict(_BOUND)
        | {
            "Attention": WindowAttn,
            "RadixAttention": WindowAttn,
            "EncoderOnlyAttention": WindowAttn,
            "get_tensor_model_parallel_world_size": lambda *a, **k: 1,
            "get_tensor_model_parallel_rank": lambda *a, **k: 0,
            "get_attention_tp_size": lambda *a, **k: 1,
            "get_attention_tp_rank": lambda *a, **k: 0,
            "get_parallel": lambda: types.SimpleNamespace(pp_group=_ONE_RANK, tp_size=1, tp_rank=0, enable_dp_lm_head=False),
        }
        | extra
    )
    if engine == "vllm" and (root / VLLM_UTILS).exists():
        bound["extract_layer_index"] = _lift_function(root / VLLM_UTILS, "extract_layer_index")
    base = _lift_classes(llama, BASE_CLASSES, bound)
    draft = root / DRAFT_FILES[engine]
    for node in ast.walk(ast.parse(draft.read_text())):  # the names (and aliases) the draft imports them under
        if isinstance(node, ast.ImportFrom) and node.module and node.module.endswith("models.llama"):
            for a in node.names:
                if a.name in BASE_CLASSES:
                    bound[a.asname or a.name] = base[a.name]
    return bound


@contextlib.contextmanager
def own_base_bindings(engine: str, root: Path, extra: dict[str, Any], server: Any = None) -> Any:
    """While open, a draft file loaded with load_module builds on the release's own base layer (:func:`_own_base`),
    with ``server`` as the server args it reads."""
    bound = _own_base(engine, root, extra)
    saved = dict(_BOUND)
    _BOUND.update(bound)
    server = Loose() if server is None else server
    _BOUND.update({name: (lambda s=server: s) for name in ("get_spec", "get_global_server_args", "get_server_args")})
    try:
        yield
    finally:
        _BOUND.clear()
        _BOUND.update(saved)


def probe_window(engine: str, root: Path) -> dict[str, Any]:
    """Build the release's draft on the release's own base decoder layer (llama.py's LlamaDecoderLayer, LlamaAttention
    and LlamaMLP, in place of the recording stub) from a config whose one layer is declared sliding
    (`layer_types: ["sliding_attention"]`, `sliding_window`), and read the window its attention was built with; for
    SGLang also with the server's draft window set. {"config": the config's window reaches the attention,
    "server": a server argument sets it, "keys": the window keys the release read}."""
    draft = root / DRAFT_FILES[engine]
    out: dict[str, Any] = {}
    # the server probe first: it declares no window, so a draft that does not build there is the harness's problem;
    # one that builds there and fails on the declared window is the release's own start-up failure
    for probe, extra, server in (
        ("server", {}, _ServerArgs()),
        ("config", {"sliding_window": W, "layer_types": ["sliding_attention"]}, Loose()),
    ):
        cfg = RecConfig(base_config(**extra))
        try:
            with own_base_bindings(engine, root, {}, server):
                g = load_module(draft)
                WindowAttn.made = []
                top = _construct_top(engine, g, cfg)
        except Exception as e:
            if probe == "config":
                out["config"] = f"{type(e).__name__}: {e}"
                out["keys"] = sorted({k for k in cfg._log if "slid" in k or k == "layer_types"})
                continue
            raise DraftCodeMoved(
                f"{engine} {root.name}: the draft on its own base layer did not build: {type(e).__name__}: {e}"
            ) from e
        if not WindowAttn.made:
            raise DraftCodeMoved(f"{engine} {root.name}: the draft built no attention on its own base layer")
        attns = [getattr(layer.self_attn, "attn", None) for layer in _layers(top.model)]
        got = {m.get("per_layer_sliding_window") for m in WindowAttn.made}
        got |= {a.sliding_window_size for a in attns if isinstance(a, WindowAttn)}
        method = getattr(top, "get_attention_sliding_window_size", None)
        if callable(method):
            got.add(method())
        out[probe] = W in got
        if probe == "config":
            out["keys"] = sorted({k for k in cfg._log if "slid" in k or k == "layer_types"})
    return out


def execute_release(engine: str, root: Path) -> dict[str, Any]:
    """Everything the harness reads back from one release's source tree."""
    import rope_exec  # beside this file; it builds on this module's stubs

    f = root / DRAFT_FILES[engine]
    if not f.exists():
        return {"absent": DRAFT_FILES[engine]}
    g = load_module(f)
    try:
        model, keys = construct(engine, g, base_config())
        row: dict[str, Any] = {
            "keys_read": sorted(k for k in keys if k not in base_config()),
            "flags": {flag: probe_flag(engine, g, flag) for flag in FLAGS},
            "first_layer": layer_forward(model)["first"],
            "layers": probe_layers(engine, g),
            "window": probe_window(engine, root),
            "aux": probe_aux(engine, g),
            "rope": rope_exec.probe_rope(engine, root),
        }
    except DraftCodeMoved:
        raise
    except Exception as e:
        raise DraftCodeMoved(
            f"{engine} {root.name}: {DRAFT_FILES[engine]} did not run on the stubs: {type(e).__name__}: {e}"
        ) from e
    if engine == "vllm":
        row["speculators"] = probe_algos(root / ALGOS)
    return row


# --------------------------------------------------------------------------- the table


def build_table(src_dir: Any, releases: dict[str, list[str]]) -> dict[str, Any]:
    """Releases whose executed behaviour is identical share a row; ``src_dir(engine, version)``: the
    release's extracted source tree."""
    rows: list[dict[str, Any]] = []
    release_rows: dict[str, dict[str, int]] = {}
    required: dict[str, dict[str, str | None]] = {}
    for engine in ("sglang", "vllm"):
        for v in releases[engine]:
            got = execute_release(engine, Path(src_dir(engine, v)))
            # the transformers requirement changes with nearly every pin: kept per release, beside the shared rows
            required.setdefault(engine, {})[v] = got.get("rope", {}).pop("transformers", None)
            same = next((r for r in rows if r["engine"] == engine and r["behaviour"] == got), None)
            if same is None:
                same = {"engine": engine, "executed_from": v, "releases": [], "behaviour": got}
                rows.append(same)
            same["releases"].append(v)
            release_rows.setdefault(engine, {})[v] = rows.index(same)
    return {
        "about": "The EAGLE-3 draft model of every covered sglang/vllm release, constructed on stubs and its decoder "
        "layers run symbolically (conformance/draft_exec.py, written by `make conformance`): per forward flag the "
        "config keys that set it in precedence order and its default (keys [] = never read, the default always "
        "applies; applied null = the release's model has nothing for it), what a two-layer draft gets, and (vLLM) "
        "which flags update_eagle3 passes on from a speculators config; rope: the rotary embedding the draft is built with "
        "per transformers presentation and rope type (conformance/rope_exec.py), transformers: each release's requirement.",
        "files": DRAFT_FILES | {"vllm_speculators": ALGOS},
        "release_rows": release_rows,
        "rows": rows,
        "transformers": required,
    }


if __name__ == "__main__":  # python conformance/draft_exec.py SRC_ROOT OUT.json: SRC_ROOT/<engine>/<version>/
    import json
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from releases import RELEASES

    root = Path(sys.argv[1])
    table = build_table(lambda e, v: root / e / v, RELEASES)
    Path(sys.argv[2]).write_text(json.dumps(table, indent=1) + "\n")
    print(f"draft table: {sum(len(r['releases']) for r in table['rows'])} releases, {len(table['rows'])} rows -> {sys.argv[2]}")
