"""Loading tensors from files people download: safetensors checked, pickles never executed."""

from __future__ import annotations

import gzip
import json
import os
import struct
from pathlib import Path
from typing import Any

from .errors import BadInput

_MAX_HEADER = 100 * 1024 * 1024  # the safetensors spec caps the JSON header at 100 MB


def read_json_object(path: Path, missing_fix: str) -> dict[str, Any]:
    """A JSON object from a file, or one clear BadInput (missing, not JSON, not an object)."""
    if not path.is_file():
        raise BadInput(f"{path} not found", missing_fix)
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadInput(f"{path} is not valid JSON ({e})", "restore the file from the original checkpoint") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path} holds a JSON {type(data).__name__}, not an object", "restore the file from the original checkpoint")
    return data


def check_safetensors_header(path: Path) -> dict[str, Any]:
    """Validate the header before handing the file to the library: clearer errors, no huge reads."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise BadInput(f"{path} is truncated ({size} bytes, no safetensors header)", "re-download or re-export the file")
        (n,) = struct.unpack("<Q", head)
        if n > _MAX_HEADER or n + 8 > size:
            raise BadInput(
                f"{path} has a corrupt safetensors header (declares {n} header bytes, file has {size})",
                "re-download or re-export the file",
            )
        raw = f.read(n)
    try:
        header = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise BadInput(f"{path} has a corrupt safetensors header (not JSON)", "re-download or re-export the file") from None
    if not isinstance(header, dict):
        raise BadInput(f"{path} has a corrupt safetensors header", "re-download or re-export the file")
    end = 0
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        try:
            end = max(end, int(meta["data_offsets"][1]))
        except (KeyError, TypeError, ValueError, IndexError):
            raise BadInput(f"{path}: tensor {name!r} has a malformed header entry", "re-export the file") from None
    if 8 + n + end > size:
        raise BadInput(
            f"{path} is truncated: its header needs {8 + n + end} bytes, the file has {size}",
            "re-download or re-export the file",
        )
    return header


def load_file(path: str | os.PathLike, device: str = "cpu") -> dict[str, Any]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file as st_load

    p = Path(path)
    check_safetensors_header(p)
    try:
        return st_load(str(p), device=device)
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise BadInput(f"{p} cannot be read as safetensors ({e})", "re-download or re-export the file") from None


def load_pickle(path: str | os.PathLike) -> Any:
    """torch.load with ``weights_only=True`` only; ``.gz`` is decompressed first."""
    import pickle
    import warnings

    import torch

    p = Path(path)
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols on stderr; the error says enough
            warnings.simplefilter("ignore")
            if p.suffix == ".gz":
                with gzip.open(p, "rb") as f:
                    return torch.load(f, map_location="cpu", weights_only=True)
            return torch.load(p, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        first = next((ln for ln in lines if "Unsupported global" in ln or "unsupported" in ln.lower()),
                     lines[0] if lines else "unpickling refused")
        raise BadInput(
            f"{p} was refused by the safe loader (weights_only=True): {first[:160]}",
            "only plain tensors and containers are loaded; re-save the dump with torch.save of tensors, or as safetensors",
        ) from None
    except (EOFError, OSError, RuntimeError, gzip.BadGzipFile, ValueError) as e:
        raise BadInput(f"{p} cannot be read ({type(e).__name__}: {str(e)[:160]})", "re-create the file") from None
