"""What a run on a GPU can do while this process imports torch: make the device's CUDA context, and import Triton
and compute its cache key, on a thread started before torch's import.

Why: ``import torch`` is 2.8-4.5 s of a command's start on an H200 host, and what came after it waited in turn for
the CUDA context (0.33-0.40 s at the first tensor) and, on the load's second thread, for Triton (its import 0.14-0.38
s, then its key, a SHA-256 over its 400 MB library, 0.35-0.73 s, before the fused kernels' first compile can look its
cache up; bench/check_start.py, bench/RESULTS.md 2026-12-05). Made here the context costs torch nothing: the runtime
takes the device's primary context, which the driver made from this thread (the first tensor then took 0.02 s).
Both run in C with the interpreter released for most of their time (the driver's calls, the hash), so they overlap
the import instead of queueing behind it. Triton imports nothing but the standard library, so the two imports meet
nowhere.

Nothing here is required: any failure (no driver library, no Triton, another device numbering) leaves the work to
the moment it is needed, as before. ``EAGLE3_DOCTOR_AHEAD=0`` turns it off.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading

ENV = "EAGLE3_DOCTOR_AHEAD"
_STARTED: list[threading.Thread] = []


def device_index(device: str | None) -> int | None:
    """The CUDA device a ``--device`` value will run on (``auto`` on a machine with a driver: the first), or None."""
    text = (device or "auto").strip().lower()
    if text in ("auto", "cuda"):
        return 0
    if text.startswith("cuda:") and text[5:].isdigit():
        return int(text[5:])
    return None


def start(device: str | None, kernels: bool) -> None:
    """Start the thread for a run on ``device`` (``--device``'s value) where an NVIDIA driver is loaded and torch is
    not imported yet; ``kernels``: the run may take the fused Triton kernels (a 16-bit target), so Triton is readied
    too. At most once a process."""
    index = device_index(device)
    if _STARTED or index is None or "torch" in sys.modules or os.environ.get(ENV, "1") == "0":
        return
    if not os.path.exists("/proc/driver/nvidia/version"):
        return
    t = threading.Thread(target=_ahead, args=(index, kernels), name="ahead-of-torch", daemon=True)
    _STARTED.append(t)
    t.start()


def _ahead(index: int, kernels: bool) -> None:
    _context(index)
    if kernels:
        _triton()


def _context(index: int) -> bool:
    """The device's primary context retained through the driver API (the one the CUDA runtime, and so torch, takes
    for that device); False where the driver library or the device is not there."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        return (
            lib.cuInit(0) == 0
            and lib.cuDeviceGet(ctypes.byref(dev), index) == 0
            and lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
        )
    except (OSError, AttributeError):
        return False


def _triton() -> None:
    """Triton imported and its cache key computed (kept by its own ``functools`` cache for the compiles to come)."""
    try:
        from triton.runtime.cache import triton_key

        triton_key()
    except Exception:  # noqa: BLE001 - an absent or other Triton: the kernels' own check decides, as before
        return


def wait() -> None:
    """The thread's work done (a test's, or a caller's that must not race it)."""
    for t in _STARTED:
        t.join()
