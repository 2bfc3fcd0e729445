"""The draft's rotary position embedding: its frequencies as transformers computes them for every rope
type, and the rotation in NeoX or GPT-J layout."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .config import DraftConfig

if TYPE_CHECKING:  # torch is imported where a table is built: inspect reads a default-rope draft without it
    import numpy as np
    import torch


def rope_parameters(cfg: DraftConfig) -> dict[str, Any]:
    """The draft's RoPE in transformers-5 form (``rope_parameters``), whichever layout it came in:
    ``rope_scaling`` (+ top-level ``rope_theta``, transformers 4) or ``rope_parameters``."""
    prf = cfg.extra.get("partial_rotary_factor") if isinstance(cfg.extra, dict) else None
    return normalised_rope(cfg.rope_scaling, cfg.rope_theta, prf)


def normalised_rope(scaling: dict | None, theta: float, partial_rotary_factor: float | None = None) -> dict[str, Any]:
    """A config's RoPE dict (4.x's ``rope_scaling`` or 5.x's ``rope_parameters``) in transformers-5 form: the
    type under ``rope_type`` (``type`` renamed), ``default`` where none is named, the top-level theta where
    the dict has none."""
    rp = dict(scaling or {})
    if "type" in rp and "rope_type" not in rp:
        rp["rope_type"] = rp.pop("type")
    rp.setdefault("rope_type", "default")
    rp.setdefault("rope_theta", theta)
    if partial_rotary_factor is not None:
        rp.setdefault("partial_rotary_factor", partial_rotary_factor)
    return rp


def config_rope(c: dict[str, Any], partial_default: float | None = None) -> dict[str, Any]:
    """:func:`normalised_rope` of a config.json dict: ``rope_parameters`` where it is a dict, else
    ``rope_scaling``; the top-level ``rope_theta`` and ``partial_rotary_factor`` (``partial_default`` where
    absent; None leaves the key out)."""
    rp = c.get("rope_parameters")
    scaling = rp if isinstance(rp, dict) else c.get("rope_scaling")
    return normalised_rope(scaling, c.get("rope_theta", 10000.0), c.get("partial_rotary_factor", partial_default))


def rope_tables(cfg: DraftConfig) -> tuple[torch.Tensor, float]:
    """(inv_freq [rotary_dim/2], attention scaling) as transformers' own RoPE initialisation computes
    them (``modeling_rope_utils.ROPE_INIT_FUNCTIONS``: every rope_type transformers knows, yarn's
    attention factor, partial_rotary_factor): by transformers itself, except the default type,
    written out here and pinned to it bit for bit."""
    import torch

    rp = rope_parameters(cfg)
    if rp["rope_type"] == "default":
        # transformers' compute_default_rope_parameters, op for op (tests/draft/test_draft_oracles.py checks
        # it bit for bit against rope_tables_transformers): importing transformers costs inspect
        # seconds of CPU for the one rope type most drafts use
        dim = int(int(cfg.head_dim) * float(rp.get("partial_rotary_factor", 1.0)))
        exps = torch.arange(0, dim, 2, dtype=torch.int64, device="cpu").to(dtype=torch.float) / dim
        return (1.0 / (float(rp["rope_theta"]) ** exps)).float(), 1.0
    return rope_tables_transformers(cfg)


def rope_tables_transformers(cfg: DraftConfig) -> tuple[torch.Tensor, float]:
    """:func:`rope_tables` computed by transformers for every rope type."""
    import torch

    rp = rope_parameters(cfg)
    kind = rp["rope_type"]
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    hf = LlamaConfig(
        hidden_size=cfg.hidden_size,
        num_attention_heads=cfg.num_attention_heads,
        head_dim=cfg.head_dim,
        max_position_embeddings=cfg.max_position_embeddings,
        **_rope_keywords(LlamaConfig, rp),
    )
    if kind in ROPE_INIT_FUNCTIONS:
        fn = ROPE_INIT_FUNCTIONS[kind]
    elif kind == "default":
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

        fn = LlamaRotaryEmbedding.compute_default_rope_parameters
    else:
        raise NotImplementedError(
            f"rope_type {kind!r} is not one transformers {_tf_version()} knows ({', '.join(sorted(ROPE_INIT_FUNCTIONS))})"
        )
    # read_draft builds the module under torch.device("meta"); the device context (not a device=
    # argument, deprecated for the default rope in transformers 5.17 and dropped from its signature
    # later) puts the frequencies on the CPU
    with torch.device("cpu"):
        inv, scale = fn(config=hf)
        prf = float(rp.get("partial_rotary_factor", 1.0))
        if prf < 1 and 2 * inv.numel() == int(cfg.head_dim):
            # Llama's init functions ignore the factor; the same function over the rotary dims is
            # what models that honour it compute (rotary_dim = head_dim * factor)
            hf.head_dim = int(int(cfg.head_dim) * prf)
            inv, scale = fn(config=hf)
    return inv.float(), float(scale)


def _rope_keywords(config_cls: type, rp: dict[str, Any]) -> dict[str, Any]:
    """The RoPE keywords of the installed transformers' config: ``rope_parameters`` (transformers 5) or,
    in transformers 4, rope_theta at the top level and the rest in rope_scaling. Any: the keywords of
    one major version are not in the other's signature."""
    if hasattr(config_cls(), "rope_parameters"):  # transformers 5
        return {"rope_parameters": rp}
    scaling = {k: v for k, v in rp.items() if k not in ("rope_theta", "partial_rotary_factor")}
    return {
        "rope_theta": rp["rope_theta"],
        "rope_scaling": None if rp["rope_type"] == "default" else scaling,
        "partial_rotary_factor": rp.get("partial_rotary_factor", 1.0),
    }


def _tf_version() -> str:
    import transformers

    return transformers.__version__


def rope_frequencies(cfg: DraftConfig) -> tuple[np.ndarray, float]:
    """:func:`rope_tables` as numpy, for comparing two configs' rotations: the default type computed
    here in float64 (without torch), every other one by transformers."""
    import numpy as np

    rp = rope_parameters(cfg)
    if rp["rope_type"] == "default":
        dim = int(int(cfg.head_dim) * float(rp.get("partial_rotary_factor", 1.0)))
        return 1.0 / float(rp["rope_theta"]) ** (np.arange(0, dim, 2, dtype=np.float64) / dim), 1.0
    inv, scale = rope_tables(cfg)
    return inv.double().numpy(), scale


def rope_inv_freq(cfg: DraftConfig) -> torch.Tensor:
    return rope_tables(cfg)[0]


def neox_order(x: torch.Tensor, rot: int) -> torch.Tensor:
    """Reorder the first ``rot`` dims of the last axis from GPT-J pairs (2i, 2i+1) to NeoX
    halves (i, i + rot/2); later (non-rotary) dims stay where they are."""
    import torch

    return torch.cat([x[..., 0:rot:2], x[..., 1:rot:2], x[..., rot:]], dim=-1)


def rope_cos_sin(
    pos: torch.Tensor, inv_freq: torch.Tensor, scale: float, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [B, 1, T, 2 * len(inv_freq)] for positions pos [B, T], as transformers' rotary embedding
    computes them: float32 angles, ``scale`` (the rope init function's attention factor: yarn, longrope)
    applied to both, then cast to ``dtype``. Computed once per forward, shared by q and k of every layer."""
    import torch

    freqs = pos[:, None, :, None].float() * inv_freq.to(device=pos.device, dtype=torch.float)[None, None, None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return (emb.cos() * scale).to(dtype), (emb.sin() * scale).to(dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: [B, heads, T, d] rotated NeoX rotate-half over its first cos.shape[-1] dims (all of them unless
    partial_rotary_factor < 1), as transformers' Llama; later dims pass through."""
    import torch

    rot = cos.shape[-1]
    xr, xp = x[..., :rot], x[..., rot:]
    x1, x2 = xr.chunk(2, dim=-1)
    out = xr * cos + torch.cat([-x2, x1], dim=-1) * sin
    return out if xp.shape[-1] == 0 else torch.cat([out, xp], dim=-1)


def apply_rope(x: torch.Tensor, pos: torch.Tensor, inv_freq: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """x: [B, heads, T, d]; pos: [B, T] (int): :func:`rotate` by :func:`rope_cos_sin`."""
    return rotate(x, *rope_cos_sin(pos, inv_freq.to(x.device), scale, x.dtype))
