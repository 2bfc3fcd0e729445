"""Forwards captured once per shape as CUDA graphs and replayed: what engines serve decode steps with.

A decode step's work on the GPU is a few milliseconds; its eager launch (tens of Python calls and
kernel launches per layer) costs as much or more on the host, and a shared host's pace drifts. A graph
replays the kernels with no host work, so what the doctor times is the device's pace, as an engine's is.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import torch


class Graphs:
    """``run(key, fn, *inputs)``: fn(*inputs) eager off CUDA; on CUDA captured at its first call per key,
    then replayed with the inputs copied into the captured ones.

    fn may advance state on the device (a cache's write slot); ``get_length``/``set_length`` let the
    warm-up runs before a capture be undone, since a capture itself runs nothing. A graph's outputs
    are its own buffers, overwritten by its next replay: a caller copies what must outlive that."""

    def __init__(self, device: torch.device, get_length: Callable[[], int], set_length: Callable[[int], None]):
        self.on = device.type == "cuda"
        self.device = device
        self._get, self._set = get_length, set_length
        self._graphs: dict[Hashable, tuple[Any, tuple[torch.Tensor, ...], Any]] = {}

    def run(self, key: Hashable, fn: Callable[..., Any], *inputs: torch.Tensor) -> Any:
        if not self.on:
            return fn(*inputs)
        if key not in self._graphs:
            self._graphs[key] = self._capture(fn, inputs)
        graph, static, out = self._graphs[key]
        for s, x in zip(static, inputs):
            s.copy_(x)
        graph.replay()
        return out

    def clear(self) -> None:
        """Drop every graph and its memory pool (and the inputs and outputs it holds) now."""
        self._graphs.clear()

    def _capture(self, fn: Callable[..., Any], inputs: tuple[torch.Tensor, ...]) -> tuple[Any, tuple[torch.Tensor, ...], Any]:
        """Warm up on a side stream (cuBLAS and allocator state), set the state back, capture one call."""
        static = tuple(x.clone() for x in inputs)
        start = self._get()
        cur = torch.cuda.current_stream(self.device)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(cur)
        with torch.cuda.stream(side):
            for _ in range(2):
                fn(*static)
                self._set(start)
        cur.wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = fn(*static)
        return graph, static, out


def slots(n: int) -> int:
    """A cache length of at least n, rounded up to 64: a mask row whose length is a multiple of 8 keeps
    PyTorch's memory-efficient attention kernel (an unaligned one may fall back to the math kernel)."""
    return -(-n // 64) * 64
