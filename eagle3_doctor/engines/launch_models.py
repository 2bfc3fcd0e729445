"""The models the options name against the ones the launch command serves (CMD009).

``--target`` and ``--draft`` win over the launch's paths: the doctor measures what they name. Where both sides are
local directories holding different checkpoints (config.json or the weight files' names and sizes differ), the
server loads another model than the one measured and every figure is about the wrong one. A copy (same config,
same files) is the same model; a side that is not a local directory (a hub id) cannot be compared here, which the
launch's notes say.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from .launch_config import ServeConfig

# the launch's key that names each model, per engine (the fix's edit)
_KEYS = {
    "sglang": {"target": "--model-path", "draft": "--speculative-draft-model-path"},
    "vllm": {"target": "--model", "draft": "--speculative-config.model"},
    "trtllm": {"target": "MODEL", "draft": "speculative_config.speculative_model"},
}
_WEIGHTS = ("*.safetensors", "*.bin", "*.pt", "*.pth")


def _config(d: Path) -> Any:
    try:
        return json.loads((d / "config.json").read_text())
    except (OSError, ValueError):
        return None


def _weights(d: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for pat in _WEIGHTS for p in d.glob(pat) if p.is_file()}


def differences(given: Path, launched: Path) -> list[str]:
    """How two checkpoint directories differ (config.json, the weight files' names and sizes); empty: a copy."""
    out = []
    if _config(given) != _config(launched):
        out.append("their config.json differ")
    a, b = _weights(given), _weights(launched)
    if a != b:
        only = sorted(set(a) ^ set(b))
        sized = sorted(n for n in set(a) & set(b) if a[n] != b[n])
        out.append(
            "their weight files differ: "
            + "; ".join(
                x
                for x in (f"in one only: {', '.join(only)}" if only else "", f"sizes differ: {', '.join(sized)}" if sized else "")
                if x
            )  # fmt: skip
        )
    return out


def other_models(sc: ServeConfig, target: Optional[str], draft: Optional[str]) -> list[Any]:
    """CMD009 for each model an option names that is another local checkpoint than the launch's; a note on the
    launch where one side is not a local directory (the two cannot be compared here)."""
    from ..core.findings import SERVER_COMMAND, Finding, Fix

    out = []
    for role, given in (("target", target), ("draft", draft)):
        launched = getattr(sc, role)
        if not given or not launched or given == launched:
            continue
        g, served = Path(given), Path(launched)
        if not (g.is_dir() and served.is_dir()):
            sc.notes.append(
                f"--{role} {given} is measured; the launch serves {launched}: not compared (not both local directories)"
            )
            continue
        if g.resolve() == served.resolve() or not (diff := differences(g, served)):
            continue
        key = _KEYS.get(sc.engine, {}).get(role)
        out.append(
            Finding(
                "CMD009",
                f"the launch serves another {role} than the one measured: {launched}, not {given}",
                [
                    f"--{role} {given} is what the doctor loads and measures (an option wins over the launch command)",
                    f"the launch command's {role}: {launched} ({key or 'as read'})",
                    *diff,
                ],
                Fix(
                    f"measure the {role} the launch serves (--{role} {launched}), or set {key or role} to {given} in the "
                    "launch if that is the one to serve",
                    file=SERVER_COMMAND,
                    key=key,
                    value=given,
                ),
                data={"role": role, "measured": given, "served": launched},
            )  # fmt: skip
        )
    return out
