"""Every drafter kind, in the order a checkpoint is recognised: stated once, here.

DFlash first (its config says so whatever its tensors), then P-EAGLE (an EAGLE-3 checkpoint that holds the
parallel slots' ``mask_hidden``, whatever a converter wrote into its config), then an MTP head (a layer the
target's own layout names), and EAGLE-3 last: every directory that holds none of the others is read as one,
and the EAGLE-3 reader says what is missing.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..core.errors import BadInput
from .kind import Kind

_KINDS: list[Kind] = []


def kinds() -> tuple[Kind, ...]:
    """The registry, in detection order (each kind's module registers itself when first asked for)."""
    if not _KINDS:
        from .dflash.kind import KIND as DFLASH
        from .eagle3.kind import KIND as EAGLE3
        from .mtp.kind import KIND as MTP
        from .peagle.kind import KIND as PEAGLE

        _KINDS.extend((DFLASH, PEAGLE, MTP, EAGLE3))
    return tuple(_KINDS)


def by_name(name: str) -> Kind:
    return next(k for k in kinds() if k.name == name)


def kind_of(draft: str | os.PathLike | None) -> tuple[Kind, str]:
    """(the kind, why) from a checkpoint directory's config.json and tensor names, without torch or the tensors
    themselves; no draft (compare-hidden on a recipe) is an EAGLE-3 run."""
    if draft is None:
        return by_name("eagle3"), "no draft: the training side is a recipe"
    d = Path(draft)
    if not (d / "config.json").is_file():
        return by_name("eagle3"), "no config.json (the EAGLE-3 reader says what is missing)"
    from ..io.safeio import read_json_object

    cfg = read_json_object(d / "config.json", "restore the checkpoint's config.json")
    names = _tensor_names(d)
    for kind in kinds():
        why = kind.detect(cfg, names)
        if why is not None:
            return kind, why
    raise AssertionError("the EAGLE-3 kind detects every checkpoint")  # its detect never answers None


def _tensor_names(d: Path) -> list[str]:
    """Every tensor name a safetensors directory holds (headers only: a target's shards are never read)."""
    from ..io.hub import tensor_shapes

    return sorted(tensor_shapes(d))


def refuse_other_kinds(draft: str | None) -> None:
    """An EAGLE-3-only command (gate, fingerprint, speedup) on another kind: one line naming the commands that
    run it (the EAGLE-3 reader would otherwise report keys the other layout does not have)."""
    if draft is None:
        return
    kind, why = kind_of(draft)
    if kind.name != "eagle3":
        names = list(kind.commands)
        runs = ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]
        raise BadInput(f"{draft} is {kind.one} ({why}); this command runs EAGLE-3 drafts", f"run {runs} on it")
