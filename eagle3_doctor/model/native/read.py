"""A checkpoint's tensors read once to the device.

On a GPU the files are read by several threads at once, each reading spans of up to 16 MB with ``preadv``
into its own two pinned buffers and copying each span on its own stream while it reads the next: the
reads release the interpreter, so they overlap one another, the copies and the Python the tokenizer's
thread runs beside the load. Mapping the files and copying tensor by tensor from pageable memory read an
8B-shaped checkpoint at 6 GB/s on an H200 host where these reads reach 21 GB/s (bench/check_load.py).
Tensors whose dtype changes on the way, and every read to another device, go through the mapped files
(``io.safeio.load_arrays``), converted one at a time.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ...core.errors import BadInput

if TYPE_CHECKING:
    import torch

# 8 threads in spans of 16 MB read an 8B-shaped checkpoint from the page cache at 21 GB/s on an H200 host, 4 x 64 MB
# at 13, 4 x 16 at 18, 16 x 16 at 18 (bench/check_load.py, bench/RESULTS.md 2026-12-04): smaller pinned buffers are
# quicker to allocate, and more reads in flight keep the copies busy
CHUNK = 16 << 20
THREADS = 8


@dataclass
class Span:
    """Bytes ``begin``..``end`` of a file (from its first byte), and where each piece of them goes:
    (tensor name, offset in the tensor's bytes, offset in the span, length)."""

    path: Path
    begin: int
    end: int
    pieces: list[tuple[str, int, int, int]] = field(default_factory=list)


def spans(path: Path, data_start: int, entries: list[tuple[str, int, int]], chunk: int = CHUNK) -> list[Span]:
    """``entries`` ((name, start, end) within the data section) as spans of at most ``chunk`` bytes: adjacent
    tensors share a span (a checkpoint's many small norms cost one read), a large one is cut across several."""
    out: list[Span] = []
    for name, start, end in sorted(entries, key=lambda e: e[1]):
        pos = data_start + start
        while pos < data_start + end:
            cur = out[-1] if out else None
            if cur is None or cur.path != path or cur.end != pos or cur.end - cur.begin >= chunk:
                cur = Span(path, pos, pos)
                out.append(cur)
            n = min(data_start + end - pos, chunk - (cur.end - cur.begin))
            cur.pieces.append((name, pos - data_start - start, cur.end - cur.begin, n))
            cur.end += n
            pos += n
    return out


def read_tensors(
    files: list[Path], dtype: torch.dtype, device: torch.device, *, threaded: bool | None = None, chunk: int = CHUNK
) -> dict[str, torch.Tensor]:
    """Every tensor of ``files`` on ``device``, floating ones in ``dtype``, each read once. ``threaded`` (default:
    on a GPU, where the platform has ``preadv``) reads the tensors that keep their dtype by spans of ``chunk`` bytes,
    as the module says; where pinned memory is refused, they take the mapped route too."""
    import math

    import torch

    from ...io.safeio import tensor_layout

    if threaded is None:
        threaded = device.type == "cuda" and hasattr(os, "preadv")
    work: list[Span] = []
    kinds: dict[str, tuple[tuple[int, ...], torch.dtype]] = {}
    mapped: dict[Path, set[str]] = {}  # per file, the tensors read through the mapping
    direct: dict[Path, set[str]] = {}  # per file, the tensors read by the threads
    for f in files:
        data_start, layout = tensor_layout(f)
        for name, (_, _, shape, tname) in layout.items():
            stored = getattr(torch, tname)
            threads_read = threaded and (stored == dtype or not stored.is_floating_point)
            (direct if threads_read else mapped).setdefault(f, set()).add(name)
            if threads_read:
                kinds[name] = (shape, stored)
        work += spans(f, data_start, [(n, *layout[n][:2]) for n in direct.get(f, ())], chunk)
    out = _mapped(mapped, dtype, device)
    raw = {n: torch.empty(math.prod(s) * d.itemsize, dtype=torch.uint8, device=device) for n, (s, d) in kinds.items()}
    if work and not _copy(work, raw, device):
        del raw  # before the mapped copies take the device memory again
        return {**out, **_mapped(direct, dtype, device)}
    out.update({n: raw[n].view(d).view(s) for n, (s, d) in kinds.items()})
    return out


def _mapped(names: dict[Path, set[str]], dtype: torch.dtype, device: torch.device) -> dict[str, torch.Tensor]:
    """The tensors ``names`` lists of each file, from the mapped file one by one, floating ones converted to ``dtype``."""
    from ...io.safeio import load_arrays

    out = {}
    for f, wanted in names.items():
        for k, a in load_arrays(f).items():
            if k in wanted:
                t = a.to_torch().to(device)
                out[k] = t.to(dtype) if t.is_floating_point() and t.dtype != dtype else t
    return out


def _copy(work: list[Span], raw: dict[str, torch.Tensor], device: torch.device) -> bool:
    """The spans read and copied into ``raw`` by THREADS threads, spans dealt round-robin (they are of about one size);
    the first thread's error (a file shortened or unreadable since its header was read) raised. False, with nothing
    read, where the buffers cannot be had (pinned memory refused: a container's locked-memory limit)."""
    threads = min(THREADS, len(work))
    try:
        bufs = _buffers(threads, max(s.end - s.begin for s in work), device.type == "cuda")
    except RuntimeError:
        return False
    fds = {s.path: os.open(s.path, os.O_RDONLY) for s in work}
    try:
        with ThreadPoolExecutor(threads, thread_name_prefix="weights") as pool:
            jobs = [pool.submit(_reader, work[i::threads], fds, raw, device, bufs[i]) for i in range(threads)]
            for j in jobs:
                j.result()
    finally:
        for fd in fds.values():
            os.close(fd)
        del bufs
        if device.type == "cuda":
            _release_pinned()
    return True


def _buffers(threads: int, size: int, pinned: bool) -> list[list[torch.Tensor]]:
    """Two buffers of ``size`` bytes for each thread, cut from one allocation (one pinning call, not one a buffer)."""
    import torch

    pool = torch.empty(threads * 2 * size, dtype=torch.uint8, pin_memory=pinned)
    return [[pool[(2 * i + j) * size : (2 * i + j + 1) * size] for j in range(2)] for i in range(threads)]


def _reader(
    work: list[Span], fds: dict[Path, int], raw: dict[str, torch.Tensor], device: torch.device, bufs: list[torch.Tensor]
) -> None:
    """One thread's spans, read into its two buffers in turn; on a GPU (pinned buffers) copied on the thread's own
    stream while the next span is read (elsewhere the copies are synchronous)."""
    import contextlib

    import torch

    gpu = device.type == "cuda"
    stream = torch.cuda.Stream(device=device) if gpu else None
    done: list[torch.cuda.Event | None] = [None] * len(bufs)
    for i, s in enumerate(work):
        b = i % len(bufs)
        ev = done[b]
        if ev is not None:
            ev.synchronize()  # the copies out of this buffer have finished: it may be overwritten
        _pread(fds[s.path], bufs[b].numpy().data[: s.end - s.begin], s.begin, s.path)
        with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
            for name, at, off, n in s.pieces:
                raw[name][at : at + n].copy_(bufs[b][off : off + n], non_blocking=gpu)
            if stream is not None:
                ev = done[b] = torch.cuda.Event()
                ev.record(stream)
    if stream is not None:
        stream.synchronize()


def _pread(fd: int, view: memoryview, offset: int, path: Path) -> None:
    """``view`` filled from ``offset``; a read that comes back short is continued, one at the end refused."""
    got = 0
    while got < len(view):
        try:
            n = os.preadv(fd, [view[got:]], offset + got)
        except OSError as e:
            raise BadInput(f"{path} cannot be read ({e.strerror})", "re-download or re-export the file") from None
        if n == 0:
            raise BadInput(f"{path} ended while it was read (shortened since its header was checked)", "re-download the file")
        got += n


def _release_pinned() -> None:
    """The pinned buffers handed back to the system (torch keeps freed ones for reuse); no-op where this torch
    has no such call."""
    import torch

    for name in ("_host_emptyCache", "_accelerator_emptyHostCache"):
        fn = getattr(torch._C, name, None)
        if fn is not None:
            fn()
            return
