"""eagle3-doctor inspect: the draft checkpoint and config audited against the target and engine."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

from ..drive import drive
from ..options import FORMAT, JSON_OUT, REPORT, SERVED, options


@options(**SERVED, json_out=JSON_OUT, format=FORMAT, report=REPORT)
def inspect_cmd(**given: Any) -> int:
    """Audit the draft checkpoint and config against the target and engine. No forward pass."""
    # read when numpy loads OpenBLAS, so before anything (the preflight too) imports numpy: inspect's
    # matrices are at most 512 a side (tensors.SUBSAMPLE), where one thread is fastest, and OpenBLAS's
    # idle threads spin; on a loaded 2-core machine one 256x128 SVD took 1.4 s of CPU with them, 0.01 s without
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    return drive("inspect", inspect_cmd, SimpleNamespace(**given))
