"""Key/value caches of the native decoder, under the contracts the doctor drives transformers' by.

``StaticKV``: fixed buffers that count their own length on the device (``cumulative_length``, as
transformers 5's static layers do), so a CUDA graph replays a step with no host value in it; the
static decoder sets that count to crop and reset. Attention reads the first ``window`` slots only (the
static decoder keeps it at or past the written length): a decode step over a cache sized for the
longest row read every slot, written or not, which at large batches cost more than the weights
(bench/RESULTS.md); on a GPU the decoders' kernel reads each row's own slots instead (:mod:`.spans`).
``DynamicKV``: grows by concatenation and crops by a negative count, as transformers' dynamic cache does for
the eager decode loop.
"""

from __future__ import annotations

import torch


class StaticLayer:
    is_sliding = False
    is_initialized = True

    def __init__(self, batch: int, kv_heads: int, max_len: int, head_dim: int, dtype: torch.dtype, device: torch.device):
        self.keys = torch.zeros(batch, kv_heads, max_len, head_dim, dtype=dtype, device=device)
        self.values = torch.zeros_like(self.keys)
        self.cumulative_length = torch.zeros((), dtype=torch.long, device=device)
        self.window = max_len
        self.rows: torch.Tensor | None = None  # [B]: each row's own write slot (StaticKV.write_rows_at)
        self.rotate: torch.Tensor | None = None  # [B]: a right-padded prefill's pads (StaticKV.prefill_rotated)
        self.rotate_rows: torch.Tensor | None = None  # the rows it writes (None: all), at
        self.rotate_width = 0  # the left-padded layout's width (0: the prefill's own)

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.rotate is not None:
            # row b's key t goes to slot (rotate[b] + t) mod width: its prompt ends at slot width - 1 as left
            # padding puts it, its padding lands on its pad slots; attention reads the new keys as they came
            n = k.shape[2]
            at = (self.rotate[:, None] + torch.arange(n, device=k.device)) % (self.rotate_width or n)
            rows = self.rotate_rows if self.rotate_rows is not None else torch.arange(k.shape[0], device=k.device)
            b = rows[:, None]
            self.keys[b, :, at] = k.transpose(1, 2)
            self.values[b, :, at] = v.transpose(1, 2)
            self.cumulative_length.add_(n)
            return k, v
        if self.rows is not None:
            # row b's n new keys go to its own slots rows[b]..rows[b]+n-1; the keys' [B, n] index puts the
            # indexed dimensions first, hence the [B, n, heads, dim] view of the new keys
            at = self.rows[:, None] + torch.arange(k.shape[2], device=k.device)
            b = torch.arange(k.shape[0], device=k.device)[:, None]
            self.keys[b, :, at] = k.transpose(1, 2)
            self.values[b, :, at] = v.transpose(1, 2)
            return self.keys[:, :, : self.window], self.values[:, :, : self.window]
        at = torch.arange(k.shape[2], device=k.device) + self.cumulative_length
        self.cumulative_length.add_(k.shape[2])
        self.keys.index_copy_(2, at, k)
        self.values.index_copy_(2, at, v)
        return self.keys[:, :, : self.window], self.values[:, :, : self.window]


class StaticKV:
    def __init__(
        self, layers: int, batch: int, kv_heads: int, max_len: int, head_dim: int, dtype: torch.dtype, device: torch.device
    ):
        self.layers = [StaticLayer(batch, kv_heads, max_len, head_dim, dtype, device) for _ in range(layers)]

    def set_window(self, slots: int) -> None:
        """Attention reads the first ``slots`` slots from the next forward on (a graph holds the value it saw)."""
        for layer in self.layers:
            layer.window = slots

    def write_rows_at(self, rows: torch.Tensor | None) -> None:
        """From the next forward on, row b writes at its own slot ``rows[b]`` (read on the device at each run, so
        a graph follows its changes), not at the shared count: rows that accepted different numbers of draft
        tokens then advance apart, as an engine's do. None goes back to the shared count."""
        for layer in self.layers:
            layer.rows = rows

    def prefill_rotated(self, pads: torch.Tensor | None, rows: torch.Tensor | None = None, width: int = 0) -> None:
        """The next forward is a prefill of right-padded rows (row b's pads after its tokens) into an empty cache:
        each row is stored rotated into the left-padded layout the decode steps read, ``pads[b]`` slots ahead of its
        first token. ``rows``: the cache rows the forward's rows are (None: all, in order), in a layout ``width``
        slots wide (0: the forward's own length), for a prefill run as several groups of rows.

        Why: a left-padded prefill needs a padding mask, and the masked attention kernel reads that mask per head
        and cannot skip the causal half; right-padded rows need no mask at all. At 4 prompts of 32k tokens the
        masked prefill took seconds more than the bare forward of the same tokens (bench/RESULTS.md). None ends it."""
        for layer in self.layers:
            layer.rotate, layer.rotate_rows, layer.rotate_width = pads, rows, width

    def layer(self, i: int) -> StaticLayer:
        return self.layers[i]


class _DynamicLayer:
    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.keys is None or self.values is None:
            self.keys, self.values = k, v
        else:
            self.keys, self.values = torch.cat([self.keys, k], dim=2), torch.cat([self.values, v], dim=2)
        return self.keys, self.values


class DynamicKV:
    def __init__(self, layers: int):
        self.layers = [_DynamicLayer() for _ in range(layers)]

    def layer(self, i: int) -> _DynamicLayer:
        return self.layers[i]

    def seen(self) -> int:
        k = self.layers[0].keys
        return 0 if k is None else int(k.shape[2])

    def crop(self, count: int) -> None:
        """A negative count removes that many positions; a positive one keeps that many (transformers 4.x's form)."""
        keep = self.seen() + count if count < 0 else count
        for layer in self.layers:
            if layer.keys is not None and layer.values is not None:
                layer.keys, layer.values = layer.keys[:, :, :keep], layer.values[:, :, :keep]
