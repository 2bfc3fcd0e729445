"""The models the options name against the ones the launch command serves (CMD009).

``--target`` and ``--draft`` win over the launch's paths: the doctor measures what they name. Where both sides are
local directories holding different checkpoints (config.json, the weight files' names and sizes, or their bytes at
the head, the middle and the end differ), the server loads another model than the one measured and every figure is
about the wrong one. A copy (same config,
same files) is the same model; a side that is not a local directory (a hub id) cannot be compared here, which the
launch's notes say.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from ..io.hub import config_if_local
from .launch_config import ServeConfig

# the launch's key that names each model, per engine (the fix's edit)
_KEYS = {
    "sglang": {"target": "--model-path", "draft": "--speculative-draft-model-path"},
    "vllm": {"target": "--model", "draft": "--speculative-config.model"},
    "trtllm": {"target": "MODEL", "draft": "speculative_config.speculative_model"},
}
_WEIGHTS = ("*.safetensors", "*.bin", "*.pt", "*.pth")


_SAMPLE = 1 << 16  # bytes read at each of a few offsets of a weight file: trained weights differ everywhere


def _weights(d: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for pat in _WEIGHTS for p in d.glob(pat) if p.is_file()}


def _sample(path: Path, size: int) -> bytes:
    """The file's head (a safetensors header: its tensors' names, shapes and offsets) and chunks at the middle and
    the end: a few hundred KB, not the gigabytes, tell two trainings of one architecture apart."""
    out = b""
    with path.open("rb") as f:
        for at in sorted({0, max(0, size // 2 - _SAMPLE // 2), max(0, size - _SAMPLE)}):
            f.seek(at)
            out += f.read(_SAMPLE)
    return out


def differences(given: Path, launched: Path) -> list[str]:
    """How two checkpoint directories differ (config.json; the weight files' names and sizes; their bytes at the
    head, the middle and the end); empty: a copy."""
    out = []
    if config_if_local(str(given)) != config_if_local(str(launched)):
        out.append("their config.json differ")
    a, b = _weights(given), _weights(launched)
    if a != b:
        only = ", ".join(sorted(set(a) ^ set(b)))
        sized = ", ".join(sorted(n for n in set(a) & set(b) if a[n] != b[n]))
        parts = [f"in one only: {only}" if only else "", f"sizes differ: {sized}" if sized else ""]
        out.append("their weight files differ: " + "; ".join(x for x in parts if x))
        return out
    try:
        changed = sorted(n for n in a if _sample(given / n, a[n]) != _sample(launched / n, b[n]))
    except OSError:  # unreadable: the load refuses it in its own line
        changed = []
    if changed:
        out.append(f"their weights differ: {', '.join(changed)} (the same names and sizes, other bytes)")
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
