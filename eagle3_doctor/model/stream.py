"""A target larger than the device, replayed one decoder layer at a time.

The model is built from its config with every parameter on the meta device (buffers such as RoPE's
inverse frequencies are computed for real, as the model's own ``__init__`` computes them). The
embeddings, the final norm and the head are read once and stay resident; each decoder layer gets a
forward pre-hook that reads its tensors from the safetensors files onto the device and a forward hook
that drops them again. The model's own forward then runs over a whole group of sequences at once:
every sequence of the group goes through layer i before layer i+1 is read, so each weight byte is read
once per group and one layer is resident at a time. Nothing here knows a family: names come from the
model's own modules and the checkpoint's own weight map.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..core.errors import BadInput
from ..core.taps import DecoderParts
from .target import Target, read_hf_config, resolve_device, resolve_dtype
from .tokenizer import load_tokenizer


class WeightFiles:
    """The checkpoint's tensors by name, read through ``safe_open``; every read is counted."""

    def __init__(self, directory: str):
        self.dir = Path(directory)
        self.where = _weight_map(self.dir)
        self.reads: Counter[str] = Counter()
        self.bytes_read = 0
        self._open: dict[str, Any] = {}  # each file opened once (its header parsed once), kept for the replay
        import threading

        self._lock = threading.Lock()  # the background read and the hook never read at once

    def __contains__(self, name: str) -> bool:
        return name in self.where

    def read(self, name: str) -> torch.Tensor:
        from safetensors import safe_open

        fname = self.where[name]
        with self._lock:
            f = self._open.get(fname)
            if f is None:
                f = self._open[fname] = safe_open(str(self.dir / fname), framework="pt", device="cpu")
            return self._count(name, f.get_tensor(name))

    def _count(self, name: str, t: torch.Tensor) -> torch.Tensor:
        self.reads[name] += 1
        self.bytes_read += t.numel() * t.element_size()
        return t

    def total_bytes(self) -> int:
        """Bytes of every stored tensor, from the files' headers (no tensor is read)."""
        return sum(_header_bytes(self.dir / f) for f in sorted(set(self.where.values())))


def _weight_map(d: Path) -> dict[str, str]:
    idx = d / "model.safetensors.index.json"
    if idx.is_file():
        from ..io.safeio import read_json_object

        wm = read_json_object(idx, "restore model.safetensors.index.json from the checkpoint").get("weight_map")
        if not isinstance(wm, dict) or not wm:
            raise BadInput(f"{idx} has no weight_map", "restore the index file from the checkpoint")
        return {str(k): str(v) for k, v in wm.items()}
    files = sorted(p.name for p in d.glob("*.safetensors"))
    if not files:
        raise BadInput(
            f"a layer-streamed replay reads safetensors files, and {d} holds none",
            "convert the checkpoint to safetensors, or load it whole (--no-stream-layers)",
        )
    return {name: f for f in files for name in _header(d / f)}


def _header(path: Path) -> dict[str, Any]:
    """A safetensors file's JSON header: {name: {dtype, shape, data_offsets}} (no tensor read)."""
    with open(path, "rb") as fh:
        n = int.from_bytes(fh.read(8), "little")
        if n <= 0 or n > 100_000_000:
            raise BadInput(f"{path} is not a safetensors file (header length {n})", "re-download the checkpoint")
        head = json.loads(fh.read(n))
    head.pop("__metadata__", None)
    return head


def _header_bytes(path: Path) -> int:
    return sum(int(v["data_offsets"][1]) - int(v["data_offsets"][0]) for v in _header(path).values())


@dataclass
class LayerStreamer:
    """The hooks that bring a decoder layer in for its own forward and drop it after; with the counts
    the tests and the notes read (reads per tensor, layers resident at once, passes over the weights)."""

    files: WeightFiles
    device: torch.device
    names: dict[int, dict[str, str]]  # layer index -> {parameter name inside the layer: checkpoint name}
    resident: set[int] = field(default_factory=set)
    max_resident: int = 0
    passes: int = 0  # forwards that went through layer 0: each read every layer once
    layer_bytes: int = 0  # the largest layer, as read
    _handles: list[Any] = field(default_factory=list)
    _pending: dict[int, Any] = field(default_factory=dict)  # layer -> the background read of its tensors
    _pool: Any = None

    def install(self, layers: torch.nn.ModuleList) -> None:
        for i, layer in enumerate(layers):
            self._handles.append(layer.register_forward_pre_hook(lambda m, _a, i=i: self._bring_in(i, m)))
            self._handles.append(layer.register_forward_hook(lambda m, _a, _o, i=i: self._drop(i, m)))

    def _bring_in(self, i: int, layer: torch.nn.Module) -> None:
        if i == 0:
            self.passes += 1
        pending = self._pending.pop(i, None)
        host = pending.result() if pending is not None else self._read(i)
        if i + 1 < len(self.names):  # the next layer comes off the disk while this one computes
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="eagle3-doctor-stream")
            self._pending[i + 1] = self._pool.submit(self._read, i + 1)
        n = 0
        for pname, t in host.items():
            meta = layer.get_parameter(pname)
            if t.shape != meta.shape:
                raise BadInput(
                    f"checkpoint tensor {self.names[i][pname]} has shape {tuple(t.shape)}, the model built from "
                    f"config.json expects {tuple(meta.shape)}",
                    "the config.json and the weights belong to different models",
                )
            t = t.to(self.device, meta.dtype, non_blocking=True)
            if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                raise BadInput(f"target weight {self.names[i][pname]} holds NaN or Inf", "re-download the checkpoint")
            _set_param(layer, pname, t)
            n += t.numel() * t.element_size()
        self.layer_bytes = max(self.layer_bytes, n)
        self.resident.add(i)
        self.max_resident = max(self.max_resident, len(self.resident))

    def _read(self, i: int) -> dict[str, torch.Tensor]:
        """Layer ``i``'s tensors as stored, in host memory (the one read of these bytes in this pass)."""
        return {pname: self.files.read(cname) for pname, cname in self.names[i].items()}

    def _drop(self, i: int, layer: torch.nn.Module) -> None:
        for pname in self.names[i]:
            p = layer.get_parameter(pname)
            _set_param(layer, pname, torch.empty(p.shape, dtype=p.dtype, device="meta"))
        self.resident.discard(i)


def _set_param(root: torch.nn.Module, dotted: str, value: torch.Tensor) -> None:
    owner, _, leaf = dotted.rpartition(".")
    mod = root.get_submodule(owner) if owner else root
    mod._parameters[leaf] = torch.nn.Parameter(value, requires_grad=False)


@dataclass
class StreamedTarget(Target):
    """A target whose decoder layers live on disk and come in one at a time, for the forward that needs them."""

    streamer: LayerStreamer | None = None
    auto_groups: bool = False  # --batch-size auto: each replay sizes its groups from its own sequences (group_size)

    def reads_note(self) -> str:
        s = self.streamer
        assert s is not None  # set by load_streamed_target
        return (
            f"layer-streamed replay: the target's weights were read from disk {s.passes} time(s), once per group of "
            f"sequences ({s.files.bytes_read / 2**30:.2f} GiB read; at most {s.max_resident} decoder layer(s) "
            f"resident, {s.layer_bytes / 2**30:.2f} GiB each)"
        )


@contextmanager
def _params_on_meta() -> Iterator[None]:
    """Parameters created meanwhile go to the meta device; buffers stay real (what accelerate's
    ``init_empty_weights(include_buffers=False)`` does, without needing accelerate)."""
    orig = torch.nn.Module.register_parameter

    def register(self: torch.nn.Module, name: str, param: torch.nn.Parameter | None) -> None:
        orig(self, name, param)
        if param is not None:
            p = self._parameters[name]
            assert p is not None  # just registered
            self._parameters[name] = torch.nn.Parameter(p.to("meta"), requires_grad=p.requires_grad)

    torch.nn.Module.register_parameter = register  # type: ignore[method-assign]  # undone in finally
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = orig  # type: ignore[method-assign]


def load_streamed_target(
    path: str, *, dtype: str = "auto", device: str = "auto", trust_remote_code: bool = False
) -> StreamedTarget:
    """The target at local directory ``path`` with only its embeddings, final norm and head resident;
    its decoder layers are read for each forward by the hooks of :class:`LayerStreamer`."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    from ..io.hub import read_local_config

    hf_logging.set_verbosity_error()
    cfg_dict = read_local_config(path)
    if cfg_dict is None:
        raise BadInput(f"a layer-streamed target is read from a local directory; {path} has no config.json", "pass --target DIR")
    refuse_quantized(cfg_dict, path)
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, cfg_dict, dev)
    files = WeightFiles(path)  # refuses a directory without safetensors before anything is built
    hf_cfg = read_hf_config(path, trust_remote_code)
    with _params_on_meta():
        model = AutoModelForCausalLM.from_config(hf_cfg, dtype=dt, trust_remote_code=trust_remote_code)
    model.eval().requires_grad_(False)
    parts = DecoderParts(model)
    names = _layer_names(model, parts, files)
    _load_resident(model, parts, files, dev)
    streamer = LayerStreamer(files, dev, names)
    streamer.install(parts.layers)
    tok = load_tokenizer(path, trust_remote_code)
    return StreamedTarget(
        model=model,
        tokenizer=tok,
        config=cfg_dict,
        name=str(path),
        device=dev,
        dtype=dt,
        trust_remote_code=trust_remote_code,
        streamer=streamer,
    )


def refuse_quantized(cfg: dict[str, Any], path: str) -> None:
    q = cfg.get("quantization_config")
    if isinstance(q, dict) and q:
        raise BadInput(
            f"the target {path} is quantized ({q.get('quant_method', 'unnamed')}); the layer-streamed replay reads 16-bit weights",
            "drop --stream-layers (quantized targets load whole), or stream the 16-bit checkpoint",
        )


def _checkpoint_name(name: str, files: WeightFiles, prefix: str) -> str | None:
    """The checkpoint's name for model parameter ``name``: the same, or with the base model's prefix
    added or removed (a checkpoint saved from the base model, as from_pretrained accepts)."""
    cands = [name, name[len(prefix) + 1 :] if prefix and name.startswith(prefix + ".") else f"{prefix}.{name}"]
    return next((c for c in cands if c in files), None)


def _layer_names(model: torch.nn.Module, parts: DecoderParts, files: WeightFiles) -> dict[int, dict[str, str]]:
    qual = {id(m): n for n, m in model.named_modules()}
    prefix = getattr(model, "base_model_prefix", "") or ""
    out: dict[int, dict[str, str]] = {}
    for i, layer in enumerate(parts.layers):
        lname = qual[id(layer)]
        out[i] = {}
        for pname, _ in layer.named_parameters():
            c = _checkpoint_name(f"{lname}.{pname}", files, prefix)
            if c is None:
                raise BadInput(
                    f"the layer-streamed replay found no tensor {lname}.{pname} in {files.dir}'s safetensors",
                    "load the target whole (--no-stream-layers): this checkpoint's names are converted on loading",
                )
            out[i][pname] = c
    return out


def _load_resident(model: Any, parts: DecoderParts, files: WeightFiles, dev: torch.device) -> None:
    """Everything outside the decoder layers (embeddings, final norm, head, their buffers) onto ``dev``."""
    in_layers = {id(p) for p in parts.layers.parameters()}
    prefix = getattr(model, "base_model_prefix", "") or ""
    for name, p in list(model.named_parameters()):
        if id(p) in in_layers:
            continue
        c = _checkpoint_name(name, files, prefix)
        if c is not None:
            _set_param(model, name, files.read(c).to(dev, p.dtype))
    for mod in model.modules():
        for bname, b in mod._buffers.items():
            if b is not None and b.device.type != "meta":
                mod._buffers[bname] = b.to(dev)
    missing = [n for n, p in model.named_parameters() if p.device.type == "meta" and id(p) not in in_layers]
    if missing:
        model.tie_weights()  # a tied head is stored once, as the embeddings
        missing = [n for n, p in model.named_parameters() if p.device.type == "meta" and id(p) not in in_layers]
    if missing:
        raise BadInput(
            f"the layer-streamed replay found no tensor {missing[0]} in {files.dir}'s safetensors",
            "load the target whole (--no-stream-layers)",
        )


# --------------------------------------------------------------------------- when to stream, and how many sequences per pass


def device_budget(device: torch.device) -> int:
    """Bytes this process may still allocate on a CUDA ``device``: the free memory, and under a
    ``torch.cuda.set_per_process_memory_fraction`` cap what the cap leaves (the allocator refuses beyond it)."""
    # an index, not "cuda": get_per_process_memory_fraction refuses a device without one
    idx = device.index if device.index is not None else torch.cuda.current_device()
    free, total = torch.cuda.mem_get_info(idx)
    allocated, reserved = torch.cuda.memory_allocated(idx), torch.cuda.memory_reserved(idx)
    budget = free + (reserved - allocated)  # cached blocks this process can reuse
    get_frac = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    if get_frac is not None:
        budget = min(budget, int(get_frac(idx) * total) - allocated)
    return max(0, budget)


def weight_bytes(directory: str, dtype: torch.dtype) -> int:
    """The checkpoint's weights as they would sit on the device in ``dtype`` (from the headers, nothing read)."""
    d = Path(directory)
    size = torch.finfo(dtype).bits // 8 if dtype.is_floating_point else 2
    total = 0
    for f in sorted(set(_weight_map(d).values())):
        for v in _header(d / f).values():
            n = 1
            for s in v["shape"]:
                n *= int(s)
            total += n * (size if str(v["dtype"]).startswith(("F", "BF")) else 1)
    return total


def group_size(target: Target, seq_len: int, n_points: int | None = None) -> int:
    """Sequences per pass over the weights: all of them unless activation memory forces fewer.

    On a GPU the budget is what this process may allocate less one more layer (what is read next);
    per sequence and token a pass keeps the residual stream and one layer's attention/MLP activations
    (~ 4H + 2I values) and the captured states (``n_points`` of H, all L+2 when not said). On the CPU
    no cap: a host that holds the replay's activations is the common case, and a pass is a full read.
    """
    if target.device.type != "cuda":
        return 1 << 20
    cfg = target.config
    H = int(cfg.get("hidden_size", target.hidden_size))
    inter = int(cfg.get("intermediate_size", 4 * H) or 4 * H)
    pts = n_points if n_points is not None else target.num_layers + 2
    elt = torch.finfo(target.dtype).bits // 8
    per_seq = (4 * H + 2 * inter + (pts + 2) * H) * elt * max(seq_len, 1)
    layer = max(sum(p.numel() * p.element_size() for p in lay.parameters()) for lay in target.parts.layers)
    room = device_budget(target.device) - 2 * layer
    return max(1, int(room * 0.8) // per_seq)


def should_stream(directory: str, dtype: str, device: str) -> tuple[bool, str | None]:
    """Whether a whole load of the target at ``directory`` would not fit the device (then stream, with the note why)."""
    dev = resolve_device(device)
    if dev.type != "cuda":
        return False, None
    from ..io.hub import read_local_config

    cfg = read_local_config(directory)
    q = (cfg or {}).get("quantization_config")
    if cfg is None or (isinstance(q, dict) and q) or not any(Path(directory).glob("*.safetensors")):
        return False, None
    need = weight_bytes(directory, resolve_dtype(dtype, cfg, dev))
    have = device_budget(dev)
    if need <= 0.9 * have:
        return False, None
    return True, (
        f"the target's weights ({need / 2**30:.1f} GiB) exceed 90% of what {dev} has free ({have / 2**30:.1f} GiB): "
        "replayed one decoder layer at a time (--stream-layers; --no-stream-layers to load it whole)"
    )


def replay_batch_size(target: Target, seqs: Sequence[Sequence[int]], n_points: int, batch_size: int) -> int:
    """Sequences per forward: ``batch_size`` as asked, or for a streamed target on auto as many as the
    replay's own longest sequence lets activation memory hold (each forward reads every weight)."""
    if isinstance(target, StreamedTarget) and target.auto_groups and seqs:
        return min(len(seqs), group_size(target, max(len(s) for s in seqs), n_points))
    return batch_size


def begin_replay(target: Target) -> None:
    """Counts start from zero for the replay that follows (a library user may replay one target twice)."""
    if isinstance(target, StreamedTarget) and target.streamer is not None:
        s = target.streamer
        s.passes, s.max_resident, s.files.bytes_read = 0, 0, 0
        s.files.reads.clear()


def replay_note(target: Target) -> str | None:
    """What a replay cost in reads, for a streamed target (None otherwise)."""
    return target.reads_note() if isinstance(target, StreamedTarget) and target.streamer is not None else None


def refuse_generation(target: Target, what: str) -> None:
    """A streamed target replays given sequences; generating token by token would read every layer per token."""
    if isinstance(target, StreamedTarget):
        raise BadInput(
            f"{what} runs the target token by token, and a layer-streamed target would read every layer for each token",
            "measure on given text: --continuation text (the responses in --prompts), or --train-dump",
        )
