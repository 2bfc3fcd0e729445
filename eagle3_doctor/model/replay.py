"""The one loop that feeds sequences through the target and yields what the taps captured.

compare-hidden and acceptance both replay prompts (or a training dump's sequences) this way:
longest first so similar lengths share a batch, one base-decoder forward per batch with taps
on the capture points asked for, and, for acceptance, the last hidden state the head turns
into logits chunk by chunk (:func:`target.head_chunks`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from ..core.errors import BadInput
from ..core.taps import EVERYWHERE, CapturePoint, TapWindow, final_norm, merge_windows
from ..io.prompts import Prompt, load_prompts
from ..io.train_dumps import DumpSequence, load_dump
from .target import Batch, Target, batches, capture, make_batch


class Recorded(Protocol):
    """Taps a decode recorded over the sequences it generated (:class:`model.recorded.Recording`)."""

    def covers(self, wanted: Mapping[CapturePoint, TapWindow]) -> bool: ...

    def capture(
        self, index: Sequence[int], batch: Batch, wanted: Mapping[CapturePoint, TapWindow], logits: TapWindow | None
    ) -> tuple[dict[CapturePoint, torch.Tensor], torch.Tensor | None]: ...


@dataclass
class Sources:
    """What gets replayed: prompts (from a file, ids or the defaults) or a training dump's sequences."""

    prompts: list[Prompt]
    dump: list[DumpSequence] | None
    notes: list[str]

    @property
    def sequences(self) -> list[list[int]]:
        return [p.ids for p in self.prompts] if self.dump is None else [d.input_ids.tolist() for d in self.dump]


def load_sources(
    target: Target,
    prompts_path: str | None,
    train_dump: str | None,
    max_tokens: int | None,
    limit: int | None,
    prompt_ids: Sequence[Sequence[int]] | None,
) -> Sources:
    if train_dump:
        dump = load_dump(
            train_dump, vocab_size=target.vocab_size, hidden_size=target.hidden_size, limit=limit, max_tokens=max_tokens
        )
        return Sources([], dump, [])
    prompts, notes = prompts_from(target, prompts_path, max_tokens, limit, prompt_ids)
    return Sources(prompts, None, notes)


def prompt_sequences(
    target: Target, prompts_path: str | None, max_tokens: int | None, limit: int | None = None
) -> tuple[list[Prompt], list[str]]:
    prompts = load_prompts(target.tokenizer, prompts_path, max_tokens=max_tokens, max_positions=target.max_positions, limit=limit)
    notes = []
    cut = [p.truncated_from for p in prompts if p.truncated_from]
    if cut:
        keep = min(max(cut), target.max_positions) if target.max_positions else max(cut)
        notes.append(
            f"{len(cut)} prompt(s) truncated to --max-tokens {max_tokens} (longest had {max(cut)} tokens): "
            f"--max-tokens {keep} measures them whole"
            + (f" (the target's context is {target.max_positions})" if keep < max(cut) else "")
        )
    return prompts, notes


def prompts_from(
    target: Target,
    prompts_path: str | None,
    max_tokens: int | None,
    limit: int | None,
    prompt_ids: Sequence[Sequence[int]] | None,
) -> tuple[list[Prompt], list[str]]:
    """Prompts from ids (library use; they win) or from a prompts file / the built-in prompts."""
    if prompt_ids is None:
        return prompt_sequences(target, prompts_path, max_tokens, limit)
    ids = [list(p) for p in prompt_ids][:limit] if limit else [list(p) for p in prompt_ids]
    if not ids or not all(ids):
        raise BadInput("prompt_ids must be non-empty token lists", "pass at least one token per prompt")
    return [Prompt("", p[:max_tokens] if max_tokens else p, None) for p in ids], []


def check_seq_len(target: Target, n: int) -> None:
    mp = target.max_positions
    if mp and n > mp:
        raise BadInput(
            f"a sequence of {n} tokens exceeds the target's {mp} positions", f"pass --max-tokens {mp} or fewer new tokens"
        )


def replay_order(seqs: Sequence[Sequence[int]]) -> list[int]:
    """Longest first: similar lengths share a batch (less padding). Results go back to prompt order."""
    return sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))


@dataclass
class ReplayBatch:
    index: list[int]  # which sequences (positions in the replayed list) this batch holds, longest first
    batch: Batch  # input_ids / attention_mask [B, T], right-padded
    captured: dict[CapturePoint, torch.Tensor]  # every point asked for: [B, T, H]
    last: torch.Tensor | None  # final_norm [B, T, H], the head's input, when logits were asked for

    @property
    def mask(self) -> torch.Tensor:
        return self.batch.attention_mask.bool()  # [B, T]

    @property
    def tokens(self) -> torch.Tensor:
        return self.batch.input_ids  # [B, T]


def iter_captures(
    target: Target,
    seqs: Sequence[Sequence[int]],
    points: Iterable[CapturePoint],
    *,
    batch_size: int,
    want_logits: bool = False,
    progress: Callable[[int, int], None] | None = None,
    recorded: Recorded | None = None,
    windows: Mapping[CapturePoint, TapWindow] | None = None,
) -> Iterator[ReplayBatch]:
    """Batches of ``seqs`` through the target with taps on ``points``; progress(done, total) after each batch.
    ``windows``: where the caller reads some points, each point's :class:`core.taps.TapWindow` (every position of
    every sequence where a point is not named; the final norm's where logits are asked for).
    Where ``recorded`` (the decode that generated ``seqs``) holds every point in its window, the batches are read
    from it and the target does not run again: a windowed point then comes back as wide as its window."""
    pad = target.tokenizer.pad_token_id if target.tokenizer.pad_token_id is not None else 0
    pts = set(points)
    from .stream import replay_batch_size

    wanted = {p: (windows or {}).get(p, EVERYWHERE) for p in pts}
    logits = (windows or {}).get(final_norm(), EVERYWHERE) if want_logits else None
    batch_size = replay_batch_size(target, seqs, len(pts) + int(want_logits), batch_size)
    if recorded is not None and not recorded.covers(merge_windows(wanted, {final_norm(): logits} if logits else {})):
        recorded = None
    done = 0
    for _, idx in batches(replay_order(seqs), batch_size):
        batch = make_batch([seqs[i] for i in idx], pad, target.device)
        if recorded is not None:
            got, last = recorded.capture(idx, batch, wanted, logits)
        else:
            got, last = capture(target, batch, pts, want_logits=want_logits)
            # padded slots read zero, as a recording leaves them: what a position there computed is no token's
            # state, and a figure taken over the batch's slots (diagnose's mean-ablated modules) must not depend on it
            with torch.inference_mode():  # the taps are inference tensors: written in place only inside it
                for t in [*got.values(), *([last] if last is not None else [])]:
                    t.masked_fill_(~batch.attention_mask.bool().to(t.device)[..., None], 0)
        yield ReplayBatch(list(idx), batch, got, last)
        done += len(idx)
        if progress is not None:
            progress(done, len(seqs))


def dump_slots(dump: Sequence[DumpSequence], rb: ReplayBatch, width: int, dtype: torch.dtype) -> torch.Tensor:
    """The dump's aux tensors for one batch, zero-padded to [B, T, width]."""
    return _padded([dump[i].aux for i in rb.index], rb, width, dtype)


def dump_hidden(dump: Sequence[DumpSequence], rb: ReplayBatch, width: int, dtype: torch.dtype) -> torch.Tensor | None:
    """The dump's hidden_state for one batch, zero-padded to [B, T, width]; None when a sequence of the
    batch has none."""
    rows = [dump[i].hidden_state for i in rb.index]
    known = [h for h in rows if h is not None]
    return _padded(known, rb, width, dtype) if len(known) == len(rows) else None


def _padded(rows: Sequence[torch.Tensor], rb: ReplayBatch, width: int, dtype: torch.dtype) -> torch.Tensor:
    """One [T_i, width] tensor per sequence of the batch, in its order, zero-padded to [B, T, width]."""
    B, T = rb.tokens.shape
    dev = rb.tokens.device
    out = torch.zeros(B, T, width, dtype=dtype, device=dev)
    for b, src in enumerate(rows):
        out[b, : src.shape[0]] = src.to(dev, dtype)
    return out
