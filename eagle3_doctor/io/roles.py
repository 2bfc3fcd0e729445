"""Which model a checkpoint is: a draft or the target it drafts for, told from its config.json and tensor names
(headers only, no torch), so a draft passed as --target, a target as --draft, or the two swapped, is one line
before either is loaded as what it was passed as. Pure functions of what checks.py has read."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# what marks a checkpoint as a draft rather than the model it drafts for: an architecture no target has, a key
# only drafters' configs carry, a tensor only a draft holds (EAGLE's fc over the concatenated taps)
_DRAFT_ARCH = re.compile(r"eagle|dflash|speculator|medusa|draft", re.IGNORECASE)
_DRAFT_KEYS = ("eagle_config", "dflash_config", "speculators_config", "speculators_model_type")


def draft_evidence(cfg: dict[str, Any], names: Iterable[str] = ()) -> str | None:
    """Why a checkpoint (its config.json and tensor names) is a draft, or None: read before torch, so a draft passed
    as --target is one line instead of a size-mismatch trace from transformers' loader."""
    archs = cfg.get("architectures")
    for a in archs if isinstance(archs, list) else []:
        if isinstance(a, str) and _DRAFT_ARCH.search(a):
            return f"architectures {a}"
    for k in _DRAFT_KEYS:
        if k in cfg:
            return f"its config.json has {k}"
    held = set(names)
    if "fc.weight" in held or any(n.startswith("midlayer.") for n in held):
        return "its weights hold an EAGLE fc over the target's features"
    return None


def target_evidence(cfg: dict[str, Any], names: Iterable[str]) -> str | None:
    """Why a checkpoint is a whole target model (a causal LM's architecture, its decoder layers under model.layers.*
    and no draft's marks), or None."""
    if draft_evidence(cfg, names) is not None:
        return None
    archs = cfg.get("architectures")
    arch = next((a for a in archs if isinstance(a, str)), None) if isinstance(archs, list) else None
    layers = {int(m.group(1)) for n in names for m in [re.match(r"model\.layers\.(\d+)\.", n)] if m}
    if arch is None or not arch.endswith(("ForCausalLM", "ForConditionalGeneration")) or not layers:
        return None
    return f"a {arch} with {max(layers) + 1} decoder layers"
