"""A large batch's decode step in two halves, one half's attention beside the other half's matrix multiplies.

Why: at a batch of hundreds of rows a decode step is two kinds of work one after the other, the projections' and
MLP's matmuls (bound by the GPU's FLOP rate) and attention's reads of the KV cache (bound by its memory bandwidth):
16.5 ms a step at 512 rows of an 8B shape on an H200, where the matmuls alone take 12.4 and attention 5.8
(bench/RESULTS.md). Neither needs what the other is bound by, so the step splits its rows in two and staggers them
by half a layer: half A's attention of layer i runs on a second stream while the main stream finishes half B's
layer i - 1 and projects its layer i, and half B's attention while A's MLP runs. Each row's arithmetic is the
plain step's (the same modules on its rows; the cache's writes and the attention kernel's split of the slots are
the whole batch's, :func:`.spans.splits_for`); only a matmul's rounding can differ with the number of rows it runs
over, as it does between any two batch sizes.

The taps see one forward: each layer is called once its two halves are done, with its whole input and output
(:meth:`.decoder.DecoderLayer.forward`'s ``done``), so its hooks fire as in the plain step. The ``overlap``
family of :mod:`...draft.gpu.kernels` turns it on; ``tests/model/test_halves.py`` pins it to the plain step on
the CPU, where the two streams are one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ...draft.gpu import kernels
from .cache import StaticKV
from .spans import Spans, splits_for

# a decode step of at least this many rows runs in halves: below it the matmuls are bound by the weights' reads,
# which the two halves would each make (bench/RESULTS.md)
HALVES_ROWS = 256


def applies(h: torch.Tensor, cache: Any, mask: Any, *, force: bool = False) -> bool:
    """A forward runs in halves: one new position a row over the native static cache's shared count, at least
    :data:`HALVES_ROWS` rows, the ``overlap`` family chosen (``force``: on any device, for the tests)."""
    B, n = h.shape[:2]
    if n != 1 or B < (2 if force else HALVES_ROWS) or not isinstance(cache, StaticKV):
        return False
    first = cache.layers[0]
    if first.rows is not None or first.rotate is not None:
        return False
    if isinstance(mask, torch.Tensor) and mask.shape[0] not in (1, B):
        return False
    return force or kernels.wanted("overlap", h.device, h.dtype)


def step(
    layers: Sequence[Any], h: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], mask: Any, cache: StaticKV
) -> torch.Tensor:
    """The decoder ``layers``' output for ``h`` [B, 1, H], as ``for i, layer: h = layer(h, rope, mask, False,
    cache.layer(i))`` gives it, run in halves (see the module's docstring)."""
    B = h.shape[0]
    halves = ((0, B // 2), (B // 2, B))
    lanes = _Lanes(h.device)
    xs = [h[lo:hi] for lo, hi in halves]
    splits = _splits(mask, cache, B)
    keep: list[Any] = []  # what one stream hands the other, alive until both rejoin: no block reused under a reader

    def begin(i: int, j: int) -> tuple[Any, torch.Tensor]:
        """Half j's layer-i projections on the main stream, its attention launched on the side one."""
        lo, hi = halves[j]
        att = layers[i].self_attn
        x = layers[i].input_layernorm(xs[j])
        q, k, v = att.project(x, _rows(rope, lo, hi), cache.layer(i), lo=lo, advance=j == 1)
        m = _rows(mask, lo, hi)
        keep.extend((q, k, v))
        ev, out = lanes.beside(lambda: _attend(q, k, v, m, att.scaling, splits))
        keep.append(out)
        return ev, out

    def finish(i: int, j: int, started: tuple[Any, torch.Tensor]) -> None:
        lanes.wait(started[0])
        layer = layers[i]
        xs[j] = layer.after_attention(xs[j], layer.self_attn.output(started[1]))

    whole = h
    b_half: tuple[Any, torch.Tensor] | None = None
    for i in range(len(layers)):
        a_half = begin(i, 0)
        if b_half is not None:
            finish(i - 1, 1, b_half)
            whole = _called(layers[i - 1], whole, torch.cat(xs), rope, mask, cache.layer(i - 1))
        b_half = begin(i, 1)
        finish(i, 0, a_half)
    assert b_half is not None
    finish(len(layers) - 1, 1, b_half)
    whole = _called(layers[-1], whole, torch.cat(xs), rope, mask, cache.layer(len(layers) - 1))
    lanes.join()
    keep.clear()
    return whole


def _called(layer: Any, x: torch.Tensor, out: torch.Tensor, rope: Any, mask: Any, layer_cache: Any) -> torch.Tensor:
    """``out``, through the layer's call with its input ``x``: its hooks see the forward the halves ran."""
    return layer(x, rope, mask, False, layer_cache, done=out)


def _rows(x: Any, lo: int, hi: int) -> Any:
    """Rows lo..hi of a per-row tensor (or tuple of them), a Spans' bounds or a mask; a row-shared one as it is."""
    if isinstance(x, tuple):
        return tuple(_rows(t, lo, hi) for t in x)
    if isinstance(x, Spans):
        return Spans(_rows(x.start, lo, hi), _rows(x.first, lo, hi))
    if isinstance(x, torch.Tensor) and x.dim() > 0 and x.shape[0] > 1:
        return x[lo:hi]
    return x


def _splits(mask: Any, cache: StaticKV, B: int) -> int:
    """The attention kernel's split of the slots for the whole batch, so each half's rows sum as the plain step's."""
    if not isinstance(mask, Spans):
        return 0
    keys = cache.layers[0].keys
    return splits_for(B, keys.shape[1], keys.shape[2], keys.device)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Any, scale: float, splits: int) -> torch.Tensor:
    from .decoder import _attend as plain
    from .spans import attend

    if isinstance(mask, Spans):
        return attend(q, k, v, mask, scale, splits)
    return plain(q, k, v, mask, False, scale)


class _Lanes:
    """The main stream and a side one on a GPU (fork and join by events, which a CUDA graph capture records as its
    graph's edges); one stream in order elsewhere."""

    def __init__(self, device: torch.device):
        self.gpu = device.type == "cuda"
        if self.gpu:
            self.main = torch.cuda.current_stream(device)
            self.side = _side_stream(device)

    def beside(self, fn: Callable[[], torch.Tensor]) -> tuple[Any, torch.Tensor]:
        """fn() on the side stream after everything the main one has been given so far: (its done event, output)."""
        if not self.gpu:
            return None, fn()
        self.side.wait_stream(self.main)
        with torch.cuda.stream(self.side):
            out = fn()
        ev = torch.cuda.Event()
        ev.record(self.side)
        return ev, out

    def wait(self, ev: Any) -> None:
        if ev is not None:
            self.main.wait_event(ev)

    def join(self) -> None:
        if self.gpu:
            self.main.wait_stream(self.side)


@functools.cache
def _side_stream(device: torch.device) -> Any:
    return torch.cuda.Stream(device)
