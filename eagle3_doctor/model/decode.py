"""The target as a decode loop runs it: a KV cache, a few new tokens per forward, taps on them.

One object serves both the speculative decode loop (``analyses/spec_loop.py``) and the cost probe
(``analyses/speedup.py``), so what the probe times is the very forward the loop runs: prefill once,
then forwards of n new tokens against the cache (n = 1 for plain decoding, 1 + draft tokens for a
verify pass), each returning the draft's features of the new positions and the target's argmax
there; :meth:`CachedTarget.crop` drops the rejected tail, as an engine frees its KV slots.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..core.taps import CapturePoint, TapRecorder, final_norm
from .target import Target


class CachedTarget:
    """A target forward over new tokens against a KV cache; batch B sequences advance together."""

    def __init__(self, target: Target, spec: Sequence[CapturePoint]):
        self.target = target
        self.spec = tuple(spec)
        self.points = set(self.spec) | {final_norm()}
        self.cache: Any = None
        self.length = 0  # positions held by the cache (the same for every row)
        self.head = target.model.get_output_embeddings()
        import inspect

        # transformers renamed the forward's past_key_values to cache (5.2x); 5.17 knows only the old name
        params = inspect.signature(target.parts.base.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"

    @torch.inference_mode()
    def forward(self, tokens: torch.Tensor, *, last_only: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """tokens [B, n] at positions length..length+n-1 -> (aux [B, n, n_aux*H], argmax [B, n]).

        The first call is the prefill (no cache yet); every call appends its n positions to the cache.
        ``last_only``: the argmax of the last position alone ([B, 1]); a prefill needs no more, and the
        head over a long prompt's every position would cost more than the prefill's layers.
        """
        B, n = tokens.shape
        pos = torch.arange(self.length, self.length + n, device=tokens.device).expand(B, n)
        parts = self.target.parts
        with TapRecorder(self.target.model, self.points) as rec:
            kw = {self._cache_kw: self.cache}
            out = parts.base(input_ids=tokens, position_ids=pos, use_cache=True, **kw)
            got = rec.take()
        self.cache = out.cache if hasattr(out, "cache") else out.past_key_values
        self.length += n
        aux = torch.cat([got[p] for p in self.spec], dim=-1)
        last = got[final_norm()][:, -1:] if last_only else got[final_norm()]
        amax = self.head(last.to(self.head.weight.dtype)).argmax(-1)
        return aux, amax

    def crop(self, length: int) -> None:
        """Keep the first ``length`` positions of the cache (the verified prefix)."""
        if length < self.length:
            # a negative count removes that many positions in every transformers 4.4x-5.x (newer ones
            # refuse the positive, absolute form)
            self.cache.crop(length - self.length)
            self.length = length

    def reset(self) -> None:
        self.cache, self.length = None, 0
