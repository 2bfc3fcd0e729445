"""Quantized targets as served: fine-grained block FP8 (DeepSeek-V3's format) and compressed-tensors.

What transformers does with a block-FP8 checkpoint (``quantization_config`` ``quant_method: fp8``,
``weight_block_size``; read in transformers 5.17 and 5.24, ``quantizers/quantizer_finegrained_fp8.py`` and
``integrations/finegrained_fp8.py``): loading needs accelerate; on a GPU of compute capability >= 8.9 the
linear layers become ``FP8Linear`` and their matmuls run through DeepGEMM or the ``kernels`` package's
``kernels-community/finegrained-fp8`` (fetched from the Hub on first use), quantizing activations per token
and 128-channel group on the fly; anywhere else it dequantizes the weights at load and runs 16-bit
matmuls, silently dropping the activation quantization a server runs.

So: where transformers' own FP8 kernels load, they run (``native``). Elsewhere (the CPU, an older GPU, a
machine without the kernels or without the Hub) the weights are dequantized by transformers and every
layer the checkpoint quantized gets its input quantized as the kernels do it, per token and 128-channel
group to e4m3 and back (``emulated``): the weight and the activation rounding of W8A8 block FP8 both
measured, the matmul itself in the run's dtype. Which one ran is said in the notes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..core.errors import BadInput, ResourceError

E4M3_MAX = 448.0


@dataclass
class QuantLoad:
    """How a quantized target is loaded and run, and the note that says so."""

    method: str  # "fp8" or "compressed-tensors"
    mode: str  # "native": transformers' own kernels; "emulated": dequantized weights + activation quantization
    block: tuple[int, int] | None
    note: str

    def kwargs(self, cfg: dict[str, Any]) -> dict[str, Any]:
        """from_pretrained keywords: for an emulated block-FP8 load, transformers' own dequantization."""
        if self.method != "fp8" or self.mode != "emulated":
            return {}
        from transformers import FineGrainedFP8Config

        q = cfg.get("quantization_config") or {}
        return {
            "quantization_config": FineGrainedFP8Config(
                activation_scheme=q.get("activation_scheme", "dynamic"),
                weight_block_size=self.block,  # type: ignore[arg-type]  # a block plan always has its (n, k) block
                modules_to_not_convert=q.get("modules_to_not_convert"),
                dequantize=True,
            )
        }


def plan_quantized(cfg: dict[str, Any], name: str, dev: torch.device) -> QuantLoad | None:
    """What a quantized target needs, refused in one line before anything heavy when it cannot run here."""
    q = cfg.get("quantization_config")
    if not isinstance(q, dict) or not q:
        return None
    method = str(q.get("quant_method", "")).lower()
    if method == "compressed-tensors":
        return _compressed(q, name)
    if method != "fp8":
        return None  # other schemes load (or fail) in transformers' own words
    _need("accelerate", f"the target {name} is FP8; transformers loads FP8 checkpoints through accelerate", "accelerate")
    block = q.get("weight_block_size")
    if q.get("activation_scheme", "dynamic") != "dynamic":
        raise BadInput(
            f"the target {name} is FP8 with static activation scales; the doctor runs dynamic (per-token) activation FP8 only",
            "measure a dynamic-activation export of the same checkpoint",
        )
    if not (isinstance(block, list) and len(block) == 2):
        raise BadInput(
            f"the target {name} is per-tensor FP8 (no weight_block_size); the doctor runs fine-grained block FP8",
            "measure a block-FP8 export (weight_block_size [128, 128], as DeepSeek-V3 ships)",
        )
    blk = (int(block[0]), int(block[1]))
    kernel = _native_kernel(dev)
    if kernel is not None:
        return QuantLoad("fp8", "native", blk, f"FP8 target: block {list(blk)} weights, matmuls through {kernel}")
    where = "on the CPU" if dev.type != "cuda" else "on this GPU (no DeepGEMM or kernels package, or compute capability < 8.9)"
    return QuantLoad(
        "fp8",
        "emulated",
        blk,
        f"FP8 target {where}: weights dequantized from their {list(blk)} blocks, each quantized layer's input "
        f"quantized per token and {blk[1]}-channel group to e4m3 and back (the W8A8 rounding a server runs), matmuls in 16/32-bit",
    )


def _need(module: str, what: str, pip: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise ResourceError(f"{what}, which is not installed", f"pip install '{pip}'")


def _compressed(q: dict[str, Any], name: str) -> QuantLoad:
    _need(
        "compressed_tensors",
        f"the target {name} is compressed-tensors; transformers loads it through the compressed-tensors package",
        "compressed-tensors>=0.15.0",
    )
    return QuantLoad(
        "compressed-tensors", "native", None, "compressed-tensors target: loaded and run by transformers' own quantizer"
    )


def _native_kernel(dev: torch.device) -> str | None:
    """Which of transformers' FP8 matmul back-ends would run here, None when none would."""
    import importlib.util

    if dev.type != "cuda" or torch.cuda.get_device_capability(dev) < (8, 9):
        return None
    if importlib.util.find_spec("deep_gemm") is not None:
        return "DeepGEMM (transformers' FP8Linear)"
    if importlib.util.find_spec("kernels") is not None:
        return "the kernels package's finegrained-fp8 (transformers' FP8Linear)"
    return None


def fake_quant_e4m3(x: torch.Tensor, group: int) -> torch.Tensor:
    """``x`` [..., K] quantized per row and ``group`` channels to e4m3 with a dynamic scale, and back
    (DeepSeek-V3's ``act_quant``: scale = amax / 448 per group), in ``x``'s dtype."""
    K = x.shape[-1]
    pad = (-K) % group
    xf = x.float()
    if pad:
        xf = torch.nn.functional.pad(xf, (0, pad))
    g = xf.unflatten(-1, (-1, group))
    scale = g.abs().amax(dim=-1, keepdim=True).clamp(min=1e-12) / E4M3_MAX
    q = (g / scale).to(torch.float8_e4m3fn).float() * scale
    return q.flatten(-2)[..., :K].to(x.dtype)


def quantize_block_e4m3(w: torch.Tensor, block: int = 128, scale_mult: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """A weight [N, K] as DeepSeek-V3 stores it, on its own device: float8_e4m3fn values and one
    ``weight_scale_inv`` per ``block`` x ``block`` tile (amax / 448; the tail tiles zero-padded), the inverse of
    what a block-FP8 load dequantizes. ``scale_mult`` > 1 plants a badly calibrated scale."""
    N, K = w.shape
    nb, kb = -(-N // block), -(-K // block)
    wp = torch.zeros(nb * block, kb * block, device=w.device, dtype=torch.float32)
    wp[:N, :K] = w.float()
    tiles = wp.view(nb, block, kb, block)
    scale = tiles.abs().amax(dim=(1, 3)).clamp(min=1e-12) / E4M3_MAX * scale_mult
    q = (tiles / scale[:, None, :, None]).view(nb * block, kb * block)[:N, :K]
    return q.to(torch.float8_e4m3fn), scale.contiguous()


def block_fp8_config(block: int = 128) -> dict[str, Any]:
    """The ``quantization_config`` a block-FP8 checkpoint (DeepSeek-V3's) carries in its config.json."""
    return {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [block, block]}


def finish(model: torch.nn.Module, plan: QuantLoad, quantized: set[str]) -> bool:
    """After loading: an emulated load's quantized layers get their input quantized (a forward pre-hook);
    a native load is probed once on one layer. False: the native kernel cannot run here (load emulated)."""
    if plan.method != "fp8":
        return True
    block = plan.block
    assert block is not None  # an fp8 plan has its block
    mods = dict(model.named_modules())
    if plan.mode == "emulated":
        found = [n for n in quantized if isinstance(mods.get(n), torch.nn.Linear)]
        if not found:
            raise BadInput(
                "the FP8 target's checkpoint stores no weight_scale_inv for any linear layer", "re-export the checkpoint"
            )
        for n in found:
            mods[n].register_forward_pre_hook(lambda _m, args, g=block[1]: (fake_quant_e4m3(args[0], g), *args[1:]))
        return True
    probe = next((m for n, m in mods.items() if n in quantized), None)
    if probe is None:
        return True
    w = probe.weight
    try:
        with torch.inference_mode():
            probe(torch.zeros(1, w.shape[1], device=w.device, dtype=torch.bfloat16))
    except Exception as e:  # noqa: BLE001  # any failure of the probe (a missing kernel, no Hub to fetch it): emulate instead
        plan.note += f" -- failed here ({str(e).splitlines()[0][:120]})"
        return False
    return True


def emulated(plan: QuantLoad) -> QuantLoad:
    """The same scheme run by the emulation, after the native kernel failed its probe."""
    assert plan.block is not None
    return QuantLoad(
        "fp8",
        "emulated",
        plan.block,
        f"FP8 target: {plan.note}; run instead with weights dequantized from their {list(plan.block)} blocks and each "
        f"quantized layer's input quantized per token and {plan.block[1]}-channel group to e4m3 and back",
    )


def quantized_linears(weight_names: set[str]) -> set[str]:
    """Module names whose checkpoint stores a block scale beside the weight (``<name>.weight_scale_inv``)."""
    return {n[: -len(".weight_scale_inv")] for n in weight_names if n.endswith(".weight_scale_inv")}


def load_quantized(plan: QuantLoad, name: str, cfg: dict[str, Any], load: Any) -> Any:
    """The model through transformers' loader (``load(extra_kwargs)``), finished for the plan's mode; a native
    kernel that fails its probe is replaced by the emulation (one reload), and the plan's note says so."""
    from pathlib import Path

    quantized: set[str] = set()
    if plan.method == "fp8":
        if not Path(name).is_dir():
            raise BadInput(
                f"an FP8 target is read from a local directory; {name} is not one", "download it and pass --target DIR"
            )
        quantized = quantized_linears(_checkpoint_names(Path(name)))
    model = load(plan.kwargs(cfg))
    if finish(model, plan, quantized):
        return model
    del model
    fallback = emulated(plan)
    model = load(fallback.kwargs(cfg))
    finish(model, fallback, quantized)
    plan.mode, plan.note = fallback.mode, fallback.note
    return model


def _checkpoint_names(d: Any) -> set[str]:
    """Every tensor name a local safetensors checkpoint stores (its index, else its files' headers)."""
    import json

    idx = d / "model.safetensors.index.json"
    if idx.is_file():
        return set(json.loads(idx.read_text()).get("weight_map", {}))
    from safetensors import safe_open

    names: set[str] = set()
    for f in sorted(d.glob("*.safetensors")):
        with safe_open(str(f), framework="pt", device="cpu") as g:
            names.update(g.keys())
    return names
