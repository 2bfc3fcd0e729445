"""The target over one static cache whose rows advance apart: the verify side of a batched speculative loop.

In a batch of speculative decoding every row accepts its own number of draft tokens per pass, so after the
first pass no two rows need the same next slot. :class:`StaticDecoder` writes every row at one shared slot;
here row b writes at its own ``at[b]`` (the native cache's per-row mode, ``StaticKV.write_rows_at``), numbers
its positions from its first real token, and sees only its own slots up to each query. A rejected tail is not
erased: the row's next pass starts where the accepted part ended and overwrites it, and no query reaches past
its own slot, so a stale key is never read. ``at`` lives on the device and a graph reads it at each replay:
a pass needs no host value but the window, an upper bound the caller keeps.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import torch

from ..core.taps import CapturePoint
from .static import Sink, StaticDecoder

if TYPE_CHECKING:
    from .target import Target


class RaggedDecoder(StaticDecoder):
    """B left-padded rows over one static cache, each at its own length after the prefill."""

    def __init__(self, target: Target, cache: Any, batch: int, max_len: int, points: Iterable[CapturePoint] = ()):
        super().__init__(target, cache, batch, max_len, points)
        self.at = torch.zeros(batch, dtype=torch.long, device=self.dev)  # row b's next slot
        self.bound = 0  # the host's upper bound on max(at): what the attention window is sized from

    @staticmethod
    def supported(cache: Any) -> bool:
        """Only a cache that writes each row at its own slot can hold rows that advance apart."""
        return hasattr(cache, "write_rows_at")

    @torch.inference_mode()
    def prefill(
        self, ids: torch.Tensor, pad: torch.Tensor, *, last_only: bool = True, sink: Sink | None = None
    ) -> tuple[torch.Tensor, dict[CapturePoint, torch.Tensor]]:
        """As :meth:`StaticDecoder.prefill` (every row at slot 0, so the two ways of counting agree); then each
        row writes at its own slot, all at the prompt's end."""
        self.cache.write_rows_at(None)
        self.at.zero_()
        out = super().prefill(ids, pad, last_only=last_only, sink=sink)
        self.at.fill_(ids.shape[1])
        self.bound = ids.shape[1]
        self.cache.write_rows_at(self.at)
        return out

    def _positions(self, n: int) -> torch.Tensor:
        return self.at[:, None] + torch.arange(n, device=self.dev)[None, :] - self.pad[:, None]

    def _first(self) -> torch.Tensor:
        return self.at

    def _mask(self, n: int, window: int) -> torch.Tensor:
        """[B, 1, n, W] additive: row b's query i (slot at[b] + i) sees its slots pad[b]..at[b] + i."""
        j = torch.arange(window, device=self.dev)[None, None, :]
        q = (self.at[:, None] + torch.arange(n, device=self.dev)[None, :])[:, :, None]
        ok = (j <= q) & (j >= self.pad[:, None, None])
        zero = torch.zeros((), dtype=self._dtype, device=self.dev)
        return torch.where(ok[:, None], zero, torch.finfo(self._dtype).min)

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, dict[CapturePoint, torch.Tensor]]:
        """ids [B, n] at each row's next n slots (``at`` is not advanced: :meth:`advance` does, by what each row
        keeps) -> (argmax [B, n], taps); the outputs are a graph's buffers on CUDA."""
        n = ids.shape[1]
        if self.bound + n > self.max_len:
            raise ValueError(f"the static cache holds {self.max_len} slots; {self.bound + n} asked")
        window = None if self._spans(n) else self._window(self.bound + n)
        return self._graphs.run(("rows", n, window), lambda x: self._run(x, window), ids)

    def advance(self, by: torch.Tensor, most: int, cap: int) -> None:
        """Row b keeps ``by[b]`` of the slots just written; ``most``: the host's bound on any row's step, ``cap``
        on any row's slot."""
        self.at.add_(by)
        self.bound = min(self.bound + most, cap)

    def close(self) -> None:
        if self.cache is not None:
            self.cache.write_rows_at(None)
        super().close()
