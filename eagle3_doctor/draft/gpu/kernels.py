"""Which of the doctor's own Triton kernels run, in the native decoder and in the draft: one answer for all of them.

There are two families, both for 16-bit forwards on a GPU: ``attention`` (:mod:`...model.native.spans`, a static
decoder's step over each row's own slots) and ``fused`` (:mod:`.fused`, RMSNorm with its residual add, RoPE and the
SiLU-gated product, each one pass over its tensors where PyTorch's ops make several; the draft's norms, RoPE and gated
product too). Each family is compiled and checked against PyTorch once, eagerly, before a CUDA graph capture could
meet a compiler's failure; a failure means PyTorch's own ops, said in one warning.

``EAGLE3_DOCTOR_KERNELS`` chooses: unset or ``all``, every family where it applies; ``torch``, none (PyTorch's
kernels throughout, to compare the two on one machine); or a comma-separated list of the families to keep
(``attention``).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import warnings
from collections.abc import Callable

import torch

FAMILIES = ("attention", "fused")
ENV = "EAGLE3_DOCTOR_KERNELS"


def chosen() -> frozenset[str]:
    """The families :data:`ENV` keeps (all of them unless it says otherwise)."""
    text = os.environ.get(ENV, "").strip().lower()
    if text in ("", "all"):
        return frozenset(FAMILIES)
    if text == "torch":
        return frozenset()
    names = frozenset(t.strip() for t in text.split(",") if t.strip())
    if not names <= set(FAMILIES):
        _warn_once(f"{ENV}={text!r} names no kernel family this release has ({', '.join(FAMILIES)}, all, torch); "
                   "PyTorch's kernels run throughout")  # fmt: skip
        return frozenset()
    return names


@functools.cache
def _warn_once(message: str) -> None:
    warnings.warn(message, stacklevel=3)


def wanted(family: str, device: torch.device, dtype: torch.dtype) -> bool:
    """The family may run here: a GPU, a 16-bit dtype, Triton installed, and :data:`ENV` keeping it."""
    return device.type == "cuda" and dtype in (torch.bfloat16, torch.float16) and family in chosen() and _triton()


@functools.cache
def _triton() -> bool:
    return importlib.util.find_spec("triton") is not None


def checked(family: str, run: Callable[[], None]) -> bool:
    """``run()`` (compile, run and compare against PyTorch; raise on any difference) succeeded: else one warning
    naming why, and False, so the caller keeps PyTorch's ops."""
    try:
        run()
    except Exception as exc:  # noqa: BLE001 - any failure of a third-party compiler means PyTorch's ops
        warnings.warn(f"the native decoder's {family} kernel did not run ({exc!s:.200}); PyTorch's kernels run "
                      f"instead ({ENV}=torch chooses them outright)", stacklevel=3)  # fmt: skip
        return False
    return True
