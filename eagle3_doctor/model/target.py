"""Load the target model and run it with taps.

Batches are right-padded on purpose: with a causal mask a real token never attends to a pad
that comes after it, so a padded row's real positions see exactly what an unpadded run sees,
and position ids stay 0..n-1 without any bookkeeping (tests/model/test_batching.py pins this).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from ..core.errors import BadInput, ResourceError
from ..core.taps import CapturePoint, DecoderParts, TapRecorder, final_norm
from ..io.hub import first_line as _first_line
from ..io.hub import hub_fix as _hub_fix
from ..io.hub import read_local_config
from .tokenizer import load_tokenizer, remote_code_refused

DTYPES = {
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "float32": torch.float32,
    "fp32": torch.float32,
}


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ResourceError(f"--device {device} was asked for but no CUDA GPU is visible", "use --device cpu or auto")
        dev = torch.device(device)
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ResourceError(f"--device {device}: only {torch.cuda.device_count()} GPU(s) visible", "pick an index below that")
        return dev
    if device == "mps" and not torch.backends.mps.is_available():
        raise ResourceError("--device mps was asked for but this torch sees no Apple GPU (MPS)", "use --device cpu or auto")
    if device in ("cpu", "mps"):
        return torch.device(device)
    raise BadInput(f"unknown --device {device!r}", "use auto, cpu, cuda or cuda:N")


def resolve_dtype(dtype: str, config: dict[str, Any] | None, device: torch.device) -> torch.dtype:
    if dtype == "auto":
        name = (config or {}).get("torch_dtype") or (config or {}).get("dtype") or "float32"
        dt = DTYPES.get(str(name).replace("torch.", ""), torch.float32)
        if device.type == "cpu" and dt == torch.float16:
            dt = torch.float32  # fp16 matmuls on CPU are slow and lossy; bf16 is kept as asked
        return dt
    if dtype not in DTYPES:
        raise BadInput(f"unknown --dtype {dtype!r}", "use auto, bfloat16, float16 or float32")
    return DTYPES[dtype]


@dataclass
class Target:
    model: Any
    tokenizer: Any
    config: dict[str, Any]
    name: str
    device: torch.device
    dtype: torch.dtype
    trust_remote_code: bool = False
    capture_device: torch.device | None = None  # set when the target is sharded: captures gather here
    quant_note: str | None = None  # how a quantized target runs (model.quantized), said in every run's notes
    forward: str = "transformers"  # whose decoder runs: "native" (model.native) or transformers' own

    def __post_init__(self) -> None:
        from .runtime import plan_free_attention

        plan_free_attention(torch.device(self.device))

    @property
    def parts(self) -> DecoderParts:
        return DecoderParts(self.model)

    @property
    def num_layers(self) -> int:
        return self.parts.num_layers

    @property
    def vocab_size(self) -> int:
        return int(self.model.get_output_embeddings().weight.shape[0])

    @property
    def hidden_size(self) -> int:
        # from the embedding's shape, which stays known on the meta device when accelerate offloads it
        return int(self.model.get_input_embeddings().weight.shape[1])

    @property
    def max_positions(self) -> int | None:
        return self.config.get("max_position_embeddings")

    def embed_weight(self) -> torch.Tensor:
        emb = self.model.get_input_embeddings()
        if emb.weight.device.type != "meta":
            return emb.weight
        # offloaded by accelerate: the weights come in only for a forward, so take them through one
        with torch.no_grad():
            return emb(torch.arange(emb.weight.shape[0], device=_exec_device(emb)))


def load_target(
    name_or_path: str,
    *,
    dtype: str = "auto",
    device: str = "auto",
    device_map: str | dict | None = None,
    max_memory: dict | None = None,
    trust_remote_code: bool = False,
    forward: str = "auto",
) -> Target:
    """Load a causal LM from a directory or a hub id, weights straight into the asked dtype and device.

    ``forward``: "auto" runs the native decoder (:mod:`model.native`) where its plan holds, else
    transformers' model; "transformers" always the latter.

    ``dtype=`` + ``device_map=`` make transformers materialise each tensor on the device in the
    final dtype: a bf16 checkpoint never passes through a float32 copy on the CPU.
    """
    local_cfg = read_local_config(name_or_path)
    from ..io.checks import looks_local

    if local_cfg is None and looks_local(name_or_path):  # a mistyped local path never goes to the hub
        raise BadInput(f"target directory {name_or_path} does not exist", "pass --target DIR or a hub id like org/name")
    dev = resolve_device(device)
    from .native.plan import native_plan

    plan = native_plan(str(name_or_path), local_cfg, trust_remote_code=trust_remote_code, device_map=device_map, forward=forward)
    if plan.reason is None and local_cfg is not None:
        return _native_target(plan, str(name_or_path), local_cfg, resolve_dtype(dtype, local_cfg, dev), dev)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # our own output is the report; keep loader chatter out of it
    hf_logging.disable_progress_bar()
    hf_cfg = read_hf_config(name_or_path, trust_remote_code)
    cfg_dict = local_cfg if local_cfg is not None else hf_cfg.to_dict()
    dt = resolve_dtype(dtype, cfg_dict, dev)
    kwargs = _load_kwargs(dev, device_map, max_memory, trust_remote_code)
    model, plan = _load_model(name_or_path, dt, dev, kwargs, cfg_dict)
    model.eval().requires_grad_(False)  # nothing trains: no pass may record a graph
    tok = load_tokenizer(name_or_path, trust_remote_code)
    parts = DecoderParts(model)  # fail now, clearly, if the decoder layers cannot be found
    cap_dev = None
    if device_map is not None:
        # every capture is moved to where the final norm runs (the draft runs there too), so slots
        # taken from layers on different devices can be concatenated and compared
        cap_dev = _exec_device(parts.norm)
        dev = cap_dev
    return Target(
        model=model,
        tokenizer=tok,
        config=cfg_dict,
        name=str(name_or_path),
        device=dev,
        dtype=dt,
        trust_remote_code=trust_remote_code,
        capture_device=cap_dev,
        quant_note=plan.note if plan is not None else None,
    )


def does_not_fit(name: str, dev: torch.device) -> ResourceError:
    """The one line for a target whose weights do not fit on the device, whichever loader read them."""
    return ResourceError(
        f"the target {name} does not fit on {dev}",
        "use --stream-layers (one decoder layer resident; compare-hidden, acceptance on given text) or --device-map auto",
    )


def _native_target(plan: Any, name: str, cfg: dict[str, Any], dt: torch.dtype, dev: torch.device) -> Target:
    """The target on the native decoder (model.native), its tokenizer by the class its config names.

    Beside the weights' threaded copy to the device runs the other start-up work, on a second thread: where a helper
    process has the tokenizer (``tokenizer.start``), the fused kernels' compile and check (Triton's import and first
    launch, 0.9-1.2 s; bench/RESULTS.md, 2026-12-04); else the tokenizer itself (mostly transformers' import, 1.6-2.6
    s on an H200 host), the kernels after the copy. Both threads are mostly Python, so the load is bounded by the
    interpreter: the threaded copy took 0.8-1.0 s alone and 2.0 s beside the tokenizer. Each of the copy's returns
    to the interpreter waits up to the switch interval for the other thread, so the interval is shortened while the
    threads overlap."""
    import sys
    from concurrent.futures import ThreadPoolExecutor

    from ..draft.gpu import fused
    from . import tokenizer
    from .native import decoder  # noqa: F401 - imported before the second thread starts: no import runs on both
    from .native.plan import load_native

    ahead = tokenizer.started(name)

    def beside_the_copy() -> Any:
        if not ahead:
            return load_tokenizer(name, False, by_class=True)
        with torch.cuda.device(dev) if dev.type == "cuda" else nullcontext():
            fused.prepare(dev, dt)
        return None

    interval = sys.getswitchinterval()
    sys.setswitchinterval(min(interval, 2e-4))
    try:
        with ThreadPoolExecutor(1, thread_name_prefix="beside-the-load") as pool:
            side = pool.submit(beside_the_copy)
            try:
                model = load_native(plan, dt, dev)
            except torch.cuda.OutOfMemoryError:
                raise does_not_fit(name, dev) from None
            except RuntimeError as e:  # a tensor whose shape the config contradicts
                raise BadInput(
                    f"cannot load the target {name!r}: {_first_line(e)}", "check the checkpoint files against config.json"
                ) from None
            if not ahead:
                fused.prepare(dev, dt)
            tok = side.result()  # the tokenizer's own refusal (BadInput) raised here, on the main thread
    finally:
        sys.setswitchinterval(interval)
    if ahead:
        tok = tokenizer.taken(name) or load_tokenizer(name, False, by_class=True)
    DecoderParts(model)
    return Target(model=model, tokenizer=tok, config=cfg, name=name, device=dev, dtype=dt, forward="native")


def _load_model(name: str, dt: torch.dtype, dev: torch.device, kwargs: dict[str, Any], cfg: dict[str, Any]) -> tuple[Any, Any]:
    """The model, and for a quantized checkpoint how it runs (model.quantized: refused before any weight is read)."""
    from .quantized import load_quantized, plan_quantized

    plan = plan_quantized(cfg, str(name), dev)
    if plan is None:
        return _from_pretrained(name, dt, dev, kwargs), None
    return load_quantized(plan, str(name), cfg, lambda kw: _from_pretrained(name, dt, dev, {**kwargs, **kw})), plan


def read_hf_config(name_or_path: str, trust_remote_code: bool) -> Any:
    """The target's transformers config, every refusal one error line (the unloaded remote code named)."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(name_or_path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, KeyError) as e:
        raise remote_code_refused(e, "target", name_or_path, trust_remote_code) or BadInput(
            f"cannot read the target config {name_or_path!r}: {_first_line(e)}", _hub_fix(name_or_path)
        ) from None


def _load_kwargs(
    dev: torch.device, device_map: str | dict | None, max_memory: dict | None, trust_remote_code: bool
) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    kwargs["device_map"] = device_map if device_map is not None else str(dev)
    if device_map is not None:
        # Sharding is accelerate's job (transformers' loader drives it): layers on several GPUs,
        # or offloaded to CPU/disk, each moved in for its own forward.
        try:
            import accelerate  # noqa: F401
        except ImportError:
            raise BadInput("--device-map needs accelerate", "pip install 'accelerate>=0.30' (the multi-gpu extra)") from None
        if max_memory:
            kwargs["max_memory"] = max_memory
        kwargs["offload_folder"] = offload_folder()
    return kwargs


_OFFLOADS: list[str] = []


def offload_folder() -> str:
    """A new folder for accelerate's disk offload, removed when the process ends (the console's own end runs the
    exit handlers too): every --device-map run left one in the temp directory, as large as what it offloaded."""
    import atexit
    import tempfile

    if not _OFFLOADS:
        atexit.register(remove_offload_folders)
    _OFFLOADS.append(tempfile.mkdtemp(prefix="eagle3-doctor-offload-"))
    return _OFFLOADS[-1]


def remove_offload_folders() -> None:
    """Every folder :func:`offload_folder` made (the offloaded model is gone with the process that held it)."""
    import shutil

    while _OFFLOADS:
        shutil.rmtree(_OFFLOADS.pop(), ignore_errors=True)


def _from_pretrained(name_or_path: str, dt: torch.dtype, dev: torch.device, kwargs: dict[str, Any]) -> Any:
    """The model's weights, every loader failure (the older-transformers retry included) mapped to one error line."""
    from transformers import AutoModelForCausalLM

    kwargs = {**kwargs, "output_loading_info": True}
    model: Any
    info: dict[str, Any]
    try:
        try:
            model, info = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=dt, **kwargs)  # type: ignore[misc]
        except TypeError:  # transformers < 4.56 spells it torch_dtype
            model, info = AutoModelForCausalLM.from_pretrained(name_or_path, torch_dtype=dt, **kwargs)  # type: ignore[misc]
    except TypeError as e:  # both spellings refused: the model class rejects this checkpoint's config
        raise BadInput(
            f"cannot load the target {name_or_path!r}: {_first_line(e)}",
            "check the target's config.json against its architecture, or upgrade transformers",
        ) from None
    except torch.cuda.OutOfMemoryError:
        raise does_not_fit(name_or_path, dev) from None
    except (OSError, ValueError) as e:
        raise BadInput(
            f"cannot load the target {name_or_path!r}: {_first_line(e)}", "check the checkpoint files (re-download if truncated)"
        ) from None
    except RuntimeError as e:
        if "ignore_mismatched_sizes" not in str(e):
            raise
        raise BadInput(  # transformers' words for tensors whose shapes the config contradicts
            f"cannot load the target {name_or_path!r}: its tensors' shapes disagree with its config.json",
            "pass the target model the draft was trained for (not a draft), or restore its config.json",
        ) from None
    except pickle.UnpicklingError as e:  # transformers loads .bin with weights_only=True; a hostile one is refused
        raise BadInput(
            f"the target's pickled weights in {name_or_path!r} were refused by the safe loader "
            f"(weights_only=True): {_first_line(e)[:120]}",
            "convert the checkpoint to safetensors; pickles that run code are never loaded",
        ) from None
    # transformers fills a tensor the checkpoint lacks with fresh random values and only logs it: the run would
    # measure another model than the one named, so a missing (or reshaped) tensor is a refusal, as on the native path
    lost = sorted(
        set(info.get("missing_keys") or ())
        | {str(k[0]) if isinstance(k, tuple) else str(k) for k in info.get("mismatched_keys") or ()}
    )
    if lost:
        from .native.plan import missing_tensors

        raise missing_tensors(str(name_or_path), lost)
    return model


def _exec_device(module: torch.nn.Module) -> torch.device:
    """Where a module computes: its weights' device, or accelerate's execution device when offloaded."""
    w = next(module.parameters(), None)
    if w is not None and w.device.type != "meta":
        return w.device
    dev = getattr(getattr(module, "_hf_hook", None), "execution_device", None)
    if dev is None:
        return torch.device("cpu")
    return torch.device(f"cuda:{dev}") if isinstance(dev, int) else torch.device(dev)


# --------------------------------------------------------------------------- batching


@dataclass
class Batch:
    input_ids: torch.Tensor  # [B, T] right-padded
    attention_mask: torch.Tensor  # [B, T] 1 = real token
    lengths: list[int]


def make_batch(seqs: Sequence[Sequence[int]], pad_id: int, device: torch.device) -> Batch:
    T = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), T), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), T), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.as_tensor(list(s), dtype=torch.long)
        mask[i, : len(s)] = 1
    return Batch(ids.to(device), mask.to(device), [len(s) for s in seqs])


def batches(items: Sequence[Any], size: int) -> Iterable[tuple[int, Sequence[Any]]]:
    for i in range(0, len(items), size):
        yield i, items[i : i + size]


@torch.inference_mode()
def capture(
    target: Target,
    batch: Batch,
    points: Iterable[CapturePoint],
    *,
    want_logits: bool = False,
    out_device: torch.device | None = None,
) -> tuple[dict[CapturePoint, torch.Tensor], torch.Tensor | None]:
    """One forward of the decoder with taps. Returns ({point: [B, T, H]}, last hidden [B,T,H] or None).

    Runs the base decoder (no ``lm_head``): compare-hidden never needs logits, and acceptance
    takes argmax/probabilities from the last hidden state in chunks (see :func:`head_chunks`),
    so the [B, T, V] logits tensor of a 128k vocabulary is never materialised whole.
    """
    parts = target.parts
    asked = set(points)
    pts = asked | ({final_norm()} if want_logits else set())
    try:
        with TapRecorder(target.model, pts, to_device=out_device or target.capture_device) as rec:
            parts.base(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False)
            got = rec.take()
    except torch.cuda.OutOfMemoryError:
        raise ResourceError(
            f"CUDA out of memory on a batch of {batch.input_ids.shape[0]} x {batch.input_ids.shape[1]} tokens",
            f"retry with --batch-size {max(1, batch.input_ids.shape[0] // 2)} or a smaller --max-tokens",
        ) from None
    return split_last(got, asked, want_logits)


def split_last(
    got: dict[CapturePoint, torch.Tensor], points: Iterable[CapturePoint], want_logits: bool
) -> tuple[dict[CapturePoint, torch.Tensor], torch.Tensor | None]:
    """(the taps on ``points``, the final norm or None): what a capture returns from taps that hold the final norm
    wherever logits were asked for."""
    last = got.get(final_norm()) if want_logits else None
    if want_logits and final_norm() not in set(points):
        got.pop(final_norm())
    return got, last


def head_chunks(target: Target, last_hidden: torch.Tensor, chunk: int = 1024) -> Iterable[tuple[slice, torch.Tensor]]:
    """Yield (slice over flattened positions, logits float32 [n, V]) in chunks of positions.

    1024 positions x a 128k vocabulary is 0.5 GiB of float32: small beside a bare forward's own
    [B, T, V] logits, which is what keeps acceptance's peak memory near the bare forward's (bench/).
    """
    head = target.model.get_output_embeddings()
    flat = last_hidden.reshape(-1, last_hidden.shape[-1])
    for s in range(0, flat.shape[0], chunk):
        sl = slice(s, min(s + chunk, flat.shape[0]))
        yield sl, head(flat[sl].to(head.weight.dtype)).float()


@torch.inference_mode()
def target_argmax(target: Target, last_hidden: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    """Greedy next token at every position, from logits in the model's own dtype (as a bare
    forward + argmax would pick them), a chunk of positions at a time."""
    head = target.model.get_output_embeddings()
    flat = last_hidden.reshape(-1, last_hidden.shape[-1]).to(head.weight.dtype)
    out = torch.empty(flat.shape[0], dtype=torch.long, device=last_hidden.device)
    for s in range(0, flat.shape[0], chunk):
        out[s : s + chunk] = head(flat[s : s + chunk]).argmax(-1)
    return out.view(last_hidden.shape[:-1])
