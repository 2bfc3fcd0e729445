"""YaRNScalingRotaryEmbedding + YaRN helper functions."""

from __future__ import annotations

import math
from typing import Callable, Optional, Tuple

import torch

from sglang.srt.environ import envs
from sglang.srt.layers.rotary_embedding.base import RotaryEmbedding


# Inverse dim formula to find dim based on number of rotations
def yarn_find_correction_dim(
    num_rotations: int,
    dim: int,
    base: float = 10000,
    max_position_embeddings: int = 2048,
) -> float:
    return (dim * math.log(max_position_embeddings / (num_rotations * 2 * math.pi))) / (
        2 * math.log(base)
    )


# Find dim range bounds based on rotations
def yarn_find_correction_range(
    low_rot: int,
    high_rot: int,
    dim: int,
    base: float = 10000,
    max_position_embeddings: int = 2048,
    truncate: bool = True,
) -> Tuple[int, int]:
    low = yarn_find_correction_dim(low_rot, dim, base, max_position_embeddings)
    high = yarn_find_correction_dim(high_rot, dim, base, max_position_embeddings)
    if truncate:
        low = math.floor(low)
        high = math.ceil(high)
    return max(low, 0), min(high, dim - 1)  # Clamp values just in case


def yarn_linear_ramp_mask(
    low: float, high: float, dim: int, dtype: torch.dtype, device: torch.device = None
) -> torch.Tensor:
    if low == high:
        high += 0.001  # Prevent singularity

    linear_func = (torch.arange(dim, dtype=dtype, device=device) - low) / (high - low)
    ramp_func = torch.clamp(linear_func, 0, 1)
    return ramp_func


def yarn_get_mscale_simple(scale: float = 1) -> float:
    if scale <= 1:
        return 1.0
    return 0.1 * math.log(scale) + 1.0


def yarn_get_mscale(scale: float = 1, mscale: float = 1) -> float:
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def _extend_yarn_cache(
    cache: torch.Tensor,
    compute_inv_freq: Callable[[], torch.Tensor],
    mscale: float,
    needed_max_pos: int,
) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """Return the extended cache and uncast rows for auxiliary tables.

    A no-op returns the original cache and None without computing frequencies.
    The caller supplies YaRN frequencies using its scaling factor and unchanged
    correction-range bound, rather than the base extension's theta argument.
    """
    if needed_max_pos < cache.shape[0]:
        return cache, None
    align = envs.SGLANG_ROPE_CACHE_ALIGN.get()
    new_len = ((needed_max_pos + align) // align) * align
    inv_freq = compute_inv_freq().to(cache.device)
    positions = torch.arange(
        cache.shape[0], new_len, dtype=inv_freq.dtype, device=cache.device
    )
    freqs = torch.einsum("i,j->ij", positions, inv_freq)
    rows = torch.cat((freqs.cos() * mscale, freqs.sin() * mscale), dim=-1)
    return torch.cat((cache, rows.to(cache.dtype)), dim=0), rows


class YaRNScalingRotaryEmbedding(RotaryEmbedding):
    """RotaryEmbedding extended with YaRN method.

    Credits to Peng et al. github.com/jquesnelle/yarn
    """

    def __init__(
        self,
        head_size: int,
        rotary_dim: int,
        max_position_embeddings: int,
        base: int,
        is_neox_style: bool,
        scaling_factor: float,
        dtype: torch.dtype,
        *,
        extrapolation_factor: float = 1,
        attn_factor: float = 1,
        beta_fast: int = 32,
        beta_slow: int = 1,
        truncate: bool = True,
        mscale: float = None,
        mscale_all_dim: float = None,
    ) -> None:
        self.scaling_factor = scaling_factor
        self.extrapolation_factor = extrapolation_factor
        self.attn_factor = attn_factor
        self.beta_fast = beta_fast
        self.beta_slow = beta_slow
        self.truncate = truncate

        if mscale is not None and mscale_all_dim is not None:
            # Match Hugging Face's YaRN RoPE scaling (supports mscale/mscale_all_dim)
            self.mscale = float(
                yarn_get_mscale(self.scaling_factor, mscale)
                / yarn_get_mscale(self.scaling_factor, mscale_all_dim)
            )
        else:
            # Get n-d magnitude scaling corrected for interpolation
            self.mscale = float(yarn_get_mscale_simple(self.scaling_factor))
        self.mscale *= attn_factor

        super().__init__(
            head_size, rotary_dim, max_position_embeddings, base, is_neox_style, dtype
        )

    def _compute_inv_freq(self, scaling_factor: float) -> torch.Tensor:
        pos_freqs = self.base ** (
            torch.arange(0, self.rotary_dim, 2, dtype=torch.float) / self.rotary_dim
        )
        inv_freq_extrapolation = 1.0 / pos_freqs
        inv_freq_interpolation = 1.0 / (scaling_factor * pos_freqs)

        low, high = yarn_find_correction_range(
            self.beta_fast,
            self.beta_slow,
            self.rotary_dim,
            self.base,
            self.max_position_embeddings,
            self.truncate,
        )
        # Get n-d rotational scaling corrected for extrapolation
        inv_freq_mask = (
            1
            - yarn_linear_ramp_mask(low, high, self.rotary_dim // 2, dtype=torch.float)
        ) * self.extrapolation_factor
        inv_freq = (
            inv_freq_interpolation * (1 - inv_freq_mask)
            + inv_freq_extrapolation * inv_freq_mask
        )
        return inv_freq

    def _ensure_cos_sin_cache_length(self, needed_max_pos: int):
        self.cos_sin_cache, _ = _extend_yarn_cache(
            cache=self.cos_sin_cache,
            compute_inv_freq=lambda: self._compute_inv_freq(self.scaling_factor),
            mscale=self.mscale,
            needed_max_pos=needed_max_pos,
        )

    def _compute_cos_sin_cache(self) -> torch.Tensor:
        inv_freq = self._compute_inv_freq(self.scaling_factor)
        t = torch.arange(
            self.max_position_embeddings * self.scaling_factor, dtype=torch.float32
        )
        freqs = torch.einsum("i,j -> ij", t, inv_freq)
        cos = freqs.cos() * self.mscale
        sin = freqs.sin() * self.mscale
        cache = torch.cat((cos, sin), dim=-1)
        return cache
