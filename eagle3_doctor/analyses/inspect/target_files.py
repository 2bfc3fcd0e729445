"""The target's config and single tensors, read from its files without loading the model."""

from __future__ import annotations

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


def read_target_tensor(target: str, names: tuple[str, ...]) -> np.ndarray | None:
    """One tensor from a local target's safetensors in float32, without loading the model (nor torch)."""
    from ...io.safeio import check_safetensors_header, read_array

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
                return read_array(f, n).float32()
    return None
