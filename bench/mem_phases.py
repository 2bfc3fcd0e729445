"""A CLI command run in this process, with the CUDA allocator's figures at each phase it reports.

    PYTHONPATH=. python3 bench/mem_phases.py diagnose --target T --draft D --prompts P ...

The driver's count of a process's memory (what bench_e2e.py samples) includes the allocator's cache, so it cannot
say whether a phase's peak is tensors the phase holds or blocks freed earlier and cached. Here each progress line
the command prints is followed by one line to stderr: the bytes tensors hold now, the most they held since the
previous phase began (torch.cuda.max_memory_allocated, reset at each new phase) and what the allocator reserves.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator

import torch

import eagle3_doctor.cli.resolve as resolve
from eagle3_doctor.cli import run

GB = 1e9


def _line(label: str, t0: float) -> None:
    if not torch.cuda.is_available():
        return
    a, m, r = torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated(), torch.cuda.memory_reserved()
    print(f"mem[{time.perf_counter() - t0:7.1f}s] {label}: allocated {a / GB:.1f} GB, peak since last "
          f"{m / GB:.1f} GB, reserved {r / GB:.1f} GB", file=sys.stderr, flush=True)  # fmt: skip


@contextlib.contextmanager
def progress(quiet: bool) -> Iterator[Callable[[str, int, int], None]]:
    t0, seen = time.perf_counter(), set()

    def each(label: str, done: int, total: int) -> None:
        if label not in seen:  # a phase begins: what the previous one held at most
            _line(f"before {label}", t0)
            seen.add(label)
            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()
        elif done >= total:
            _line(f"end of {label}", t0)
            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()

    try:
        yield each
    finally:
        _line("the report", t0)


def _target(spec: str) -> tuple[object, str, str]:
    """``module:Qual.name`` -> (the object that holds the function, its attribute name, ``Qual.name``)."""
    import importlib

    mod, _, qual = spec.partition(":")
    owner: object = importlib.import_module(mod)
    *path, name = qual.split(".")
    for part in path:
        owner = getattr(owner, part)
    return owner, name, qual


def hook(spec: str) -> None:
    """``module:Qual.name``: each of the first three calls prints the most tensors held during it above what they
    held when it began (where inside one phase the peak is), and its time. It resets the peak the phase lines report."""
    import functools

    owner, name, qual = _target(spec)
    fn, seen = getattr(owner, name), [0]

    @functools.wraps(fn)
    def wrapped(*a: object, **k: object) -> object:
        if seen[0] >= 3 or not torch.cuda.is_available():
            return fn(*a, **k)
        seen[0] += 1
        torch.cuda.synchronize()
        base, t0 = torch.cuda.memory_allocated(), time.perf_counter()
        torch.cuda.reset_peak_memory_stats()
        try:
            return fn(*a, **k)
        finally:
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated()
            print(f"hook {qual}: call {seen[0]} took {time.perf_counter() - t0:.2f} s and held up to "
                  f"{(peak - base) / GB:.1f} GB above its start ({base / GB:.1f} GB)", file=sys.stderr, flush=True)  # fmt: skip

    setattr(owner, name, wrapped)


def profiled(spec: str) -> None:
    """``module:Qual.name``: its first call runs under torch's profiler; the kernels and the host-side ops that
    took the most time are printed to stderr."""
    import functools

    from torch.profiler import ProfilerActivity, profile

    owner, name, qual = _target(spec)
    fn, done = getattr(owner, name), [False]

    @functools.wraps(fn)
    def wrapped(*a: object, **k: object) -> object:
        if done[0]:
            return fn(*a, **k)
        done[0] = True
        t0 = time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            out = fn(*a, **k)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
        print(f"profile {qual}: the call took {time.perf_counter() - t0:.2f} s under the profiler", file=sys.stderr)
        avg = prof.key_averages()
        for key in ("cuda_time_total", "cpu_time_total"):
            print(f"profile {qual} by {key}:\n{avg.table(sort_by=key, row_limit=30, max_name_column_width=70)}",
                  file=sys.stderr, flush=True)  # fmt: skip
        return out

    setattr(owner, name, wrapped)


if __name__ == "__main__":
    import os

    for spec in filter(None, os.environ.get("PROFILE", "").split(",")):
        profiled(spec)

    for spec in filter(None, os.environ.get("MEM_HOOKS", "").split(",")):
        hook(spec)
    resolve.progress = progress  # type: ignore[assignment]
    sys.argv = ["eagle3-doctor", *sys.argv[1:]]
    run()
