"""The target as a decode loop runs it: a KV cache, a few new tokens per forward, taps on them.

One object serves both the speculative decode loop (``analyses/spec_loop.py``) and the cost probe
(``analyses/speedup.py``), so what the probe times is the very forward the loop runs: prefill once,
then forwards of n new tokens against the cache (n = 1 for plain decoding, 1 + draft tokens for a
verify pass), each returning the draft's features of the new positions and the target's argmax
there; :meth:`CachedTarget.crop` drops the rejected tail, as an engine frees its KV slots.

Given the longest sequence it will hold (``max_len``), it runs over a static cache, each forward
shape a CUDA graph on a GPU (:mod:`static`), as engines serve; else over transformers' dynamic cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..core.graphs import slots
from ..core.taps import CapturePoint, TapRecorder, final_norm
from .static import StaticDecoder, cache_keyword, static_cache
from .target import Target


class CachedTarget:
    """A target forward over new tokens against a KV cache; batch B sequences advance together."""

    def __init__(self, target: Target, spec: Sequence[CapturePoint], *, batch: int = 1, max_len: int | None = None):
        self.target = target
        self.spec = tuple(spec)
        self.points = set(self.spec) | {final_norm()}
        self.cache: Any = None
        self._length = 0  # positions held by the dynamic cache (the same for every row)
        self.head = target.model.get_output_embeddings()
        self._cache_kw = cache_keyword(target.parts.base)
        L = slots(max_len) if max_len else 0
        cache = static_cache(target, batch, L) if L else None
        self.static = StaticDecoder(target, cache, batch, L, self.spec) if cache is not None else None

    @property
    def mode(self) -> str:
        """How its forwards run: "cuda graphs" (static cache, graphed), "static cache" or "eager"."""
        if self.static is None:
            return "eager"
        return "cuda graphs" if self.static.graphed else "static cache"

    @property
    def length(self) -> int:
        return self.static.length if self.static is not None else self._length

    @torch.inference_mode()
    def forward(self, tokens: torch.Tensor, *, last_only: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """tokens [B, n] at positions length..length+n-1 -> (aux [B, n, n_aux*H], argmax [B, n]).

        The first call is the prefill (no cache yet); every call appends its n positions to the cache.
        ``last_only``: the argmax of the last position alone ([B, 1]); a prefill needs no more, and the
        head over a long prompt's every position would cost more than the prefill's layers.
        """
        if self.static is not None:
            return self._static_forward(tokens, last_only)
        B, n = tokens.shape
        pos = torch.arange(self.length, self.length + n, device=tokens.device).expand(B, n)
        parts = self.target.parts
        with TapRecorder(self.target.model, self.points) as rec:
            kw = {self._cache_kw: self.cache}
            out = parts.base(input_ids=tokens, position_ids=pos, use_cache=True, **kw)
            got = rec.take()
        self.cache = out.cache if hasattr(out, "cache") else out.past_key_values
        self._length += n
        aux = torch.cat([got[p] for p in self.spec], dim=-1)
        last = got[final_norm()][:, -1:] if last_only else got[final_norm()]
        amax = self.head(last.to(self.head.weight.dtype)).argmax(-1)
        return aux, amax

    def _static_forward(self, tokens: torch.Tensor, last_only: bool) -> tuple[torch.Tensor, torch.Tensor]:
        st = self.static
        assert st is not None
        if st.length == 0:
            zero = torch.zeros(tokens.shape[0], dtype=torch.long, device=tokens.device)
            amax, taps = st.prefill(tokens, zero, last_only=last_only)
        else:
            amax, taps = st.forward(tokens)
        # a graph's outputs are its own buffers, overwritten by its next replay: cat and clone copy them
        return torch.cat([taps[p] for p in self.spec], dim=-1), amax.clone()

    def crop(self, length: int) -> None:
        """Keep the first ``length`` positions of the cache (the verified prefix)."""
        if self.static is not None:
            self.static.crop(min(length, self.static.length))
            return
        if length < self.length:
            # a negative count removes that many positions in every transformers 4.4x-5.x (newer ones
            # refuse the positive, absolute form)
            self.cache.crop(length - self.length)
            self._length = length

    def reset(self) -> None:
        if self.static is not None:
            self.static.crop(0)
        self.cache, self._length = None, 0
