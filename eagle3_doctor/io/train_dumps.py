"""Feature paths: where the draft's input features come from on the training side.

Either a recipe (a function of the target: capture points computed by one forward with taps),
or a dump on disk that some producer wrote:

SpecForge offline dump (``scripts/prepare_hidden_states.py``): ``rows_{a}-{b}/data_{i}.ckpt`` or
``.ckpt.gz``, each a ``torch.save`` dict with ``input_ids`` [T] int64, ``loss_mask`` [T],
``aux_hidden_state`` [1, T, n*H] (the concatenated capture) and ``hidden_state`` [1, T, H]
(post final norm). Loaded with ``weights_only=True``; any ``*.ckpt`` below the directory counts,
as in SpecForge's own ``list_local_files``.

safetensors dump (for other producers): one ``*.safetensors`` file per sequence holding the same
four names (``input_ids`` [T] or [1, T]; ``aux_hidden_state`` [T, n*H] or [1, T, n*H];
``hidden_state`` and ``loss_mask`` optional).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from ..core.errors import BadInput
from .safeio import load_file, load_pickle

DUMP_SUFFIXES = (".ckpt", ".ckpt.gz", ".safetensors")


@dataclass
class DumpSequence:
    path: str
    input_ids: torch.Tensor  # [T] long
    aux: torch.Tensor  # [T, n*H]
    hidden_state: torch.Tensor | None  # [T, H]
    loss_mask: torch.Tensor | None  # [T]


def list_dump_files(path: str | Path) -> list[Path]:
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise BadInput(f"training dump {p} does not exist", "pass --train-dump DIR (SpecForge rows_*/data_*.ckpt) or a file")
    files = sorted(f for f in p.rglob("*") if f.is_file() and f.name.endswith(DUMP_SUFFIXES))
    if not files:
        raise BadInput(f"no .ckpt, .ckpt.gz or .safetensors files under {p}", "point --train-dump at the dump's output directory")
    # natural order: data_2 before data_10
    import re

    def key(f: Path):
        return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(f))]

    return sorted(files, key=key)


def _as_2d(t: torch.Tensor, name: str, f: Path) -> torch.Tensor:
    if t.dim() == 3 and t.shape[0] == 1:
        t = t[0]
    if t.dim() != 2:
        raise BadInput(f"{f}: {name} has shape {tuple(t.shape)}, expected [1, T, D] or [T, D]", "re-create the dump")
    return t


def load_dump_file(f: Path, *, vocab_size: int | None = None, hidden_size: int | None = None) -> DumpSequence:
    data = load_file(f) if f.suffix == ".safetensors" else load_pickle(f)
    if not isinstance(data, dict):
        raise BadInput(f"{f} holds a {type(data).__name__}, expected a dict of tensors", "re-create the dump")
    for k in ("input_ids", "aux_hidden_state"):
        if k not in data or not isinstance(data[k], torch.Tensor):
            raise BadInput(
                f"{f} has no tensor {k!r} (keys: {', '.join(map(str, data))})",
                "the dump needs input_ids and aux_hidden_state (SpecForge prepare_hidden_states.py layout)",
            )
    ids = data["input_ids"]
    if ids.dim() == 2 and ids.shape[0] == 1:
        ids = ids[0]
    if ids.dim() != 1 or ids.is_floating_point():
        raise BadInput(f"{f}: input_ids has shape {tuple(ids.shape)} / {ids.dtype}, expected [T] integers", "re-create the dump")
    ids = ids.long()
    if ids.numel() == 0:
        raise BadInput(f"{f}: input_ids is empty (a zero-length sequence)", "drop this sample or re-create the dump")
    aux = _as_2d(data["aux_hidden_state"], "aux_hidden_state", f)
    if aux.shape[0] != ids.shape[0]:
        raise BadInput(f"{f}: aux_hidden_state has {aux.shape[0]} positions, input_ids {ids.shape[0]}", "re-create the dump")
    if not aux.is_floating_point() or not bool(aux.isfinite().all()):
        raise BadInput(
            f"{f}: aux_hidden_state holds NaN or Inf (or is not floating point)",
            "drop this sample (SpecForge skips NaN samples) or re-create the dump",
        )
    if hidden_size and aux.shape[1] % hidden_size:
        raise BadInput(
            f"{f}: aux_hidden_state width {aux.shape[1]} is not a multiple of the target hidden size {hidden_size}",
            "the dump comes from another model; pass the target it was made with",
        )
    if vocab_size is not None and ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        raise BadInput(
            f"{f}: input_ids range {int(ids.min())}..{int(ids.max())} does not fit the target vocabulary of {vocab_size}",
            "the dump was tokenized for another model; pass the target (and tokenizer) it was made with",
        )
    hs = data.get("hidden_state")
    if isinstance(hs, torch.Tensor):
        hs = _as_2d(hs, "hidden_state", f)
        if hs.shape[0] != ids.shape[0]:
            raise BadInput(f"{f}: hidden_state has {hs.shape[0]} positions, input_ids {ids.shape[0]}", "re-create the dump")
        if not bool(hs.isfinite().all()):
            raise BadInput(f"{f}: hidden_state holds NaN or Inf", "drop this sample or re-create the dump")
    else:
        hs = None
    lm = data.get("loss_mask")
    lm = lm.reshape(-1) if isinstance(lm, torch.Tensor) else None
    return DumpSequence(str(f), ids, aux, hs, lm)


def load_dump(
    path: str | Path,
    *,
    vocab_size: int | None = None,
    hidden_size: int | None = None,
    limit: int | None = None,
    max_tokens: int | None = None,
) -> list[DumpSequence]:
    files = list_dump_files(path)
    if limit:
        files = files[:limit]
    seqs = []
    for f in files:
        s = load_dump_file(f, vocab_size=vocab_size, hidden_size=hidden_size)
        if max_tokens and s.input_ids.numel() > max_tokens:
            s = DumpSequence(
                s.path,
                s.input_ids[:max_tokens],
                s.aux[:max_tokens],
                None if s.hidden_state is None else s.hidden_state[:max_tokens],
                None if s.loss_mask is None else s.loss_mask[:max_tokens],
            )
        seqs.append(s)
    widths = {s.aux.shape[1] for s in seqs}
    if len(widths) > 1:
        raise BadInput(f"dump files disagree on aux_hidden_state width: {sorted(widths)}", "use files from one dump run")
    return seqs
