"""The capture points recorded while the target generates its own greedy continuation.

Why: acceptance along the target's greedy continuation needs the taps of every position of prompt + continuation,
and the decode that generated the continuation already ran the target over exactly those tokens. Replaying them in a
second forward read every weight again and cost a bare forward's arithmetic over every token (bench/RESULTS.md). The
static decoder taps the points at its prefill and at each step instead; the replay then reads the rows from here.

The figures are the same forward's, position by position (a token's state depends only on the tokens before it), but
not the same arithmetic: a step multiplies one position at a time where the replay multiplied a batch, so they agree
to the dtype's rounding, not bit for bit (tests/model/test_recorded.py holds them within float32's rounding).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import torch

from ..core.graphs import slots
from ..core.taps import EVERYWHERE, CapturePoint, TapWindow, final_norm, merge_windows
from .target import Batch, Target, split_last

# the share of the device's free memory the recording may take; past it the replay runs its own forward as before.
# It costs the decode less than it saves: at 1,024 x 1,024 on an H200 the continuation's smaller batches took 6 s
# more and the acceptance phase, with no forward over the million tokens, 30 s less (bench/RESULTS.md, 2026-12-05).
SHARE = 0.5

Wanted = Mapping[CapturePoint, TapWindow] | Iterable[CapturePoint]


def as_windows(wanted: Wanted) -> dict[CapturePoint, TapWindow]:
    """Points with their windows; bare points are read everywhere."""
    return dict(wanted) if isinstance(wanted, Mapping) else dict.fromkeys(wanted, EVERYWHERE)


@dataclass
class _Kept:
    """One point's taps in one continuation batch: the batch's rows ``rows`` (None: every row), slots [0, W)."""

    taps: torch.Tensor  # [R, W, H]
    rows: list[int] | None = None
    picked: torch.Tensor | None = None  # ``rows`` on the device, to pick them out of a step's taps

    def at(self, row: int) -> int | None:
        """Row ``row`` of the batch in ``taps``, or None where it is not kept."""
        if self.rows is None:
            return row
        return self.rows.index(row) if row in self.rows else None


@dataclass
class _Block:
    """One continuation batch: row b's token t at slot ``pads[b] + t``, its prompt ending at slot ``prompt``."""

    pads: list[int]
    prompt: int
    kept: dict[CapturePoint, _Kept]


@dataclass
class Recording:
    """Taps for every sequence of one continuation, each point in its window (:class:`core.taps.TapWindow`)."""

    windows: dict[CapturePoint, TapWindow]
    device: torch.device
    dtype: torch.dtype
    hidden: int
    blocks: list[_Block] = field(default_factory=list)
    where: dict[int, tuple[int, int]] = field(default_factory=dict)  # sequence -> (block, row)
    complete: bool = True  # False once a batch ran without the static decoder (generate records nothing)
    nbytes: int = 0  # what the recording holds once complete, which the decode's own batch must leave

    @property
    def points(self) -> frozenset[CapturePoint]:
        return frozenset(self.windows)

    def open(self, index: Sequence[int], pads: Sequence[int], prompt: int, length: int) -> _Block:
        """A continuation batch's store: sequences ``index`` in its rows, ``length`` slots, prompts ending at slot
        ``prompt``; each point keeps its window's rows and slots alone."""
        kept = {}
        for p, w in self.windows.items():
            rows = None if w.sequences is None else [r for r, i in enumerate(index) if i in w.sequences]
            width = length if w.after is None else min(length, prompt + w.after)
            n = len(index) if rows is None else len(rows)
            taps = torch.zeros(n, width, self.hidden, dtype=self.dtype, device=self.device)
            picked = None if rows is None else torch.tensor(rows, dtype=torch.long, device=self.device)
            kept[p] = _Kept(taps, rows, picked)
        self.blocks.append(_Block(list(pads), prompt, kept))
        for row, i in enumerate(index):
            self.where[i] = (len(self.blocks) - 1, row)
        return self.blocks[-1]

    def into(self, index: Sequence[int]) -> Recorder:
        """The hand a continuation batch of sequences ``index`` writes through."""
        return Recorder(self, list(index))

    def covers(self, wanted: Wanted) -> bool:
        """Every point of ``wanted`` is recorded wherever it is read there."""
        have = self.windows
        return self.complete and all(p in have and have[p].includes(w) for p, w in as_windows(wanted).items())

    def capture(
        self, index: Sequence[int], batch: Batch, wanted: Wanted, logits: TapWindow | None = None
    ) -> tuple[dict[CapturePoint, torch.Tensor], torch.Tensor | None]:
        """What :func:`target.capture` returns for sequences ``index`` in ``batch`` (the taps ``wanted``, the final
        norm in window ``logits`` where logits are asked for), read from the recording: each row moved from its
        left-padded slots to the right-padded batch, its padding zero. A point read in a window comes back [B, W, H],
        W the batch's widest window (a reader past it fails on the shape, never reads zeros as taps); rows outside
        it read zero."""
        asked = as_windows(wanted)
        reads = merge_windows(asked, {final_norm(): logits} if logits is not None else {})
        T = batch.input_ids.shape[1]
        got: dict[CapturePoint, torch.Tensor] = {}
        for p, w in reads.items():
            spans, width = [], 0 if w.after is not None else T  # (batch row, block, its row there, positions to copy)
            for r, (i, n) in enumerate(zip(index, batch.lengths)):
                b, row = self.where[i]
                blk = self.blocks[b]
                if w.after is not None:  # the window's end, whether or not the row runs that far
                    end = blk.prompt - blk.pads[row] + w.after
                    n, width = min(n, end), max(width, min(T, end))
                spans.append((r, blk, row, n))
            out = torch.zeros(len(index), width, self.hidden, dtype=self.dtype, device=self.device)
            for r, blk, row, n in spans:
                k = blk.kept[p]
                at = k.at(row)
                if at is not None and n > 0:
                    out[r, :n] = k.taps[at, blk.pads[row] : blk.pads[row] + n]
            got[p] = out
        return split_last(got, asked, logits is not None)


@dataclass
class Recorder:
    """What :func:`static.greedy_static` records one batch through: opened before the prefill with the rows' pads,
    the cache's slots and the prompts' end, then handed each forward's taps at their first slot."""

    recording: Recording
    index: list[int]
    block: _Block | None = None

    def __post_init__(self) -> None:
        self.points = self.recording.points

    def open(self, pads: Sequence[int], length: int, prompt: int) -> None:
        self.block = self.recording.open(self.index, pads, prompt, length)

    def write(self, at: int, taps: Mapping[CapturePoint, torch.Tensor], rows: list[int] | None = None) -> None:
        """Taps [b, n, H] of slots [at, at + n) of the batch's rows ``rows`` (None: all of them), each point's kept
        rows, in its window (a :class:`static.Sink`)."""
        assert self.block is not None  # opened before the prefill
        for p, k in self.block.kept.items():
            x = taps[p]
            n = min(x.shape[1], k.taps.shape[1] - at)
            if n <= 0:
                continue
            if rows is None:
                k.taps[:, at : at + n] = x[:, :n] if k.picked is None else x[:, :n].index_select(0, k.picked)
                continue
            pairs = [(j, kept) for j, b in enumerate(rows) if (kept := k.at(b)) is not None]  # (in x, in k.taps)
            if pairs:
                src, dst = (torch.tensor(v, dtype=torch.long, device=x.device) for v in zip(*pairs))
                k.taps[dst, at : at + n] = x[:, :n].index_select(0, src)


def recording_bytes(target: Target, wanted: Wanted, n_seqs: int, length: int, prompt: int | None = None) -> int:
    """What recording ``wanted`` over ``n_seqs`` sequences of up to ``length`` slots, prompts of up to ``prompt``
    tokens (None: a windowed point held everywhere), holds."""
    elt = torch.empty((), dtype=target.dtype).element_size()
    total = 0
    for w in as_windows(wanted).values():
        rows = n_seqs if w.sequences is None else sum(1 for i in w.sequences if 0 <= i < n_seqs)
        width = length if w.after is None or prompt is None else min(length, prompt + w.after)
        total += rows * width
    return total * target.hidden_size * elt


def plan_recording(target: Target, wanted: Wanted, n_seqs: int, length: int, prompt: int | None = None) -> Recording | None:
    """A recording of ``wanted`` where it fits in :data:`SHARE` of the memory free now and the target runs whole on
    one device (a device map or a layer stream replays as before); else None."""
    from .static import free_memory
    from .stream import StreamedTarget

    if isinstance(target, StreamedTarget) or target.capture_device is not None:
        return None
    need = recording_bytes(target, wanted, n_seqs, slots(length), prompt)
    if need > SHARE * free_memory(torch.device(target.device)):
        return None
    return Recording(as_windows(wanted), torch.device(target.device), target.dtype, target.hidden_size, nbytes=need)
