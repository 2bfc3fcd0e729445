"""The target's config and single tensors, read from its files without loading the model."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from ...core.errors import BadInput


def read_target_config(target: str) -> dict[str, Any]:
    p = Path(target)
    from ...io.checks import looks_local

    if p.exists() or looks_local(target):
        from ...io.hub import read_local_config

        cfg = read_local_config(target)
        if cfg is None:
            raise BadInput(f"target directory {target} does not exist", "pass --target DIR or a hub id like org/name")
        return cfg
    try:
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(target, trust_remote_code=False).to_dict()  # inspect runs no model code
    except (OSError, ValueError) as e:
        from ...io.hub import first_line, hub_fix

        raise BadInput(f"cannot read the target config {target!r}: {first_line(e)}", hub_fix(target)) from None


class TargetTensor:
    """A target tensor known by its header; its numbers are read and decoded (once) only when asked
    (``np.asarray``). Most checks stop at the shape: a draft head over 32k tokens is never compared with
    a 128k-token target head, and on an 8B target each such read is 1 GB, each decode 2 GB."""

    def __init__(self, path: Path, name: str, shape: tuple[int, ...]):
        self.path, self.name, self.shape = path, name, shape
        self._values: np.ndarray | None = None

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if self._values is None:
            from ...io.safeio import read_array

            self._values = read_array(self.path, self.name).float32()
        return self._values if dtype is None else self._values.astype(dtype, copy=False)


def read_target_tensor(target: str, names: tuple[str, ...]) -> TargetTensor | None:
    """One tensor of a local target's safetensors by the first of ``names`` it holds, without loading the
    model (nor torch): its header now, its numbers when first asked for (kept for the process)."""
    return _target_tensor(str(target), tuple(names))


@functools.lru_cache(maxsize=8)
def _target_tensor(target: str, names: tuple[str, ...]) -> TargetTensor | None:
    from ...io.safeio import check_safetensors_header

    p = Path(target)
    if not p.is_dir():
        return None
    files = sorted(p.glob("*.safetensors"))
    idx = p / "model.safetensors.index.json"
    if idx.is_file():
        from ...io.safeio import read_json_object

        wm = read_json_object(idx, "restore model.safetensors.index.json from the checkpoint").get("weight_map", {})
        for n in names:
            if n in wm:
                files = [p / wm[n]]
                break
    for f in files:
        keys = check_safetensors_header(f)
        for n in names:
            if n in keys and n != "__metadata__":
                return TargetTensor(f, n, tuple(int(x) for x in keys[n]["shape"]))
    return None
