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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import torch

from ..core.graphs import slots
from ..core.taps import CapturePoint, final_norm
from .target import Batch, Target, split_last

# the share of the device's free memory the recording may take; past it the replay runs its own forward as before
SHARE = 0.25


@dataclass
class _Block:
    """One continuation batch's taps: ``taps[p]`` [B, L, H], row b's token t at slot ``pads[b] + t``."""

    pads: list[int]
    taps: dict[CapturePoint, torch.Tensor]


@dataclass
class Recording:
    """Taps on ``points`` (final_norm among them, the head's input) for every sequence of one continuation."""

    points: frozenset[CapturePoint]
    device: torch.device
    dtype: torch.dtype
    hidden: int
    blocks: list[_Block] = field(default_factory=list)
    where: dict[int, tuple[int, int]] = field(default_factory=dict)  # sequence -> (block, row)
    complete: bool = True  # False once a batch ran without the static decoder (generate records nothing)
    nbytes: int = 0  # what the recording holds once complete, which the decode's own batch must leave

    def open(self, index: Sequence[int], pads: Sequence[int], taps: dict[CapturePoint, torch.Tensor]) -> None:
        """A continuation batch's store: sequences ``index`` in its rows, ``taps`` [B, L, H] to fill."""
        self.blocks.append(_Block(list(pads), taps))
        for row, i in enumerate(index):
            self.where[i] = (len(self.blocks) - 1, row)

    def into(self, index: Sequence[int]) -> Recorder:
        """The hand a continuation batch of sequences ``index`` writes through."""
        return Recorder(self, list(index))

    def covers(self, points: Iterable[CapturePoint]) -> bool:
        return self.complete and set(points) <= self.points

    def capture(
        self, index: Sequence[int], batch: Batch, points: Iterable[CapturePoint], want_logits: bool
    ) -> tuple[dict[CapturePoint, torch.Tensor], torch.Tensor | None]:
        """What :func:`target.capture` returns for sequences ``index`` in ``batch``, read from the recording: each
        row moved from its left-padded slots to the right-padded batch, its padding zero."""
        asked = set(points)
        got: dict[CapturePoint, torch.Tensor] = {}
        for p in asked | ({final_norm()} if want_logits else set()):
            src = self.blocks[0].taps[p]
            out = torch.zeros(*batch.input_ids.shape, src.shape[-1], dtype=src.dtype, device=src.device)
            for r, (i, n) in enumerate(zip(index, batch.lengths)):
                b, row = self.where[i]
                at = self.blocks[b].pads[row]
                out[r, :n] = self.blocks[b].taps[p][row, at : at + n]
            got[p] = out
        return split_last(got, asked, want_logits)


@dataclass
class Recorder:
    """What :func:`static.greedy_static` records one batch through: called with the batch's pads and slots once its
    prefill has run, it returns the buffers [B, L, H] to fill, one per point."""

    recording: Recording
    index: list[int]

    def __post_init__(self) -> None:
        self.points = self.recording.points

    def __call__(self, pads: Sequence[int], length: int) -> dict[CapturePoint, torch.Tensor]:
        r = self.recording
        taps = {p: torch.empty(len(pads), length, r.hidden, dtype=r.dtype, device=r.device) for p in r.points}
        r.open(self.index, pads, taps)
        return taps


def recording_bytes(target: Target, points: Iterable[CapturePoint], n_seqs: int, length: int) -> int:
    """What recording ``points`` over ``n_seqs`` sequences of up to ``length`` slots holds."""
    elt = torch.empty((), dtype=target.dtype).element_size()
    return len(set(points) | {final_norm()}) * n_seqs * length * target.hidden_size * elt


def plan_recording(target: Target, points: Iterable[CapturePoint], n_seqs: int, length: int) -> Recording | None:
    """A recording of ``points`` (and final_norm) where it fits in :data:`SHARE` of the memory free now and the
    target runs whole on one device (a device map or a layer stream replays as before); else None."""
    from .static import free_memory
    from .stream import StreamedTarget

    if isinstance(target, StreamedTarget) or target.capture_device is not None:
        return None
    need = recording_bytes(target, points, n_seqs, slots(length))
    if need > SHARE * free_memory(torch.device(target.device)):
        return None
    pts = frozenset(set(points) | {final_norm()})
    return Recording(pts, torch.device(target.device), target.dtype, target.hidden_size, nbytes=need)
