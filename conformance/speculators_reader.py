"""vLLM's reader of speculators-format configs (``transformers_utils/configs/speculators/{algos,base}.py``) of one
release, loaded in one way for every harness that executes it: mtp_exec (a speculators MTP head, refused) and
peagle_exec (the ``peagle`` type's reading). ``algos.py`` runs whole with its decorators, so ``register_speculator``
fills the registry; ``base.py`` runs over permissive stubs (mtp_stubs.load_module), its ``SpeculatorsConfig``
classmethods reading that registry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mtp_stubs as S

SPEC_DIR = "vllm/transformers_utils/configs/speculators"


def load_reader(root: Path) -> tuple[Any, dict[str, Any]] | None:
    """(SpeculatorsConfig, the registry of speculators types) of the release under ``root``, or None where the
    release has no reader."""
    base, algos = root / SPEC_DIR / "base.py", root / SPEC_DIR / "algos.py"
    if not base.exists():
        return None
    registry = (S.load_module(algos, decorators=True) if algos.exists() else {}).get("SUPPORTED_SPECULATORS_TYPES", {})
    g = S.load_module(base)
    g["SUPPORTED_SPECULATORS_TYPES"] = registry  # the class's methods read it from their module's globals
    return g["SpeculatorsConfig"], registry
