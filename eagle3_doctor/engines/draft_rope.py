"""The RoPE each SGLang and vLLM release builds its EAGLE-3 draft's attention with, as executed.

``conformance/rope_exec.py`` (``make conformance``) builds every release's draft on its own llama.py attention and
its own ``get_rope`` from a draft config presented as transformers hands it over (transformers 4 reading a config.json
in the 4.x layout, transformers 4 reading one in the 5.x layout, transformers 5 reading either), one rope type at a
time, and records the rotary class and the numbers it was given. This module maps a user's draft config.json onto
those probes: per transformers major the release allows (its own ``Requires-Dist``), the RoPE its draft runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .draft_table import _release, behaviour, table

PROBE_THETA = 500000.0  # conformance/rope_exec.py THETA
PROBE_SCALING: dict[str, dict[str, float]] = {  # the factor each probe stated, as the rotary class's argument holds it
    "llama3": {"scaling_factor": 8.0},
    "yarn": {"scaling_factor": 4.0},
    "linear": {"scaling_factors": 2.0},
}
ROPE_FILES = {
    "sglang": "srt/models/llama.py + srt/layers/rotary_embedding get_rope",
    "vllm": "transformers_utils/config.py RoPE patch + model_executor/models/llama.py + layers/rotary_embedding get_rope",
}


@dataclass(frozen=True)
class ServedRope:
    """What one release runs for one draft config under one transformers major."""

    major: int  # the transformers major this reading assumes
    rope: dict[str, Any] | None  # transformers-5 form {"rope_type", "rope_theta", ...}; None: the release raises
    error: str | None  # the error the release raises on the config (rope None)
    theta_read: bool  # the config's own theta reached the rotary embedding
    scaling_read: bool  # the config's own scaling reached it


@dataclass(frozen=True)
class ExecutedRope:
    requirement: str | None  # the release's Requires-Dist on transformers
    majors: tuple[int, ...]  # the transformers majors that requirement admits
    source: str
    built: dict[str, Any]

    def served(self, config: dict[str, Any], trained: dict[str, Any]) -> list[ServedRope] | None:
        """Per admitted transformers major, the RoPE the release's draft runs for this config.json, loaded as a
        LlamaConfig, given ``trained``, the config's RoPE as the trainer reads it (``draft.rope.config_rope``); None
        where the probes do not cover the config (a rope type not probed, or both layouts at once under
        transformers 4)."""
        kind = str(trained["rope_type"])
        if kind not in ("default", *PROBE_SCALING):
            return None
        out = []
        for major in self.majors:
            presentation = _presentation(config, major)
            if presentation is None:
                return None
            out.append(_reading(self.built[presentation][kind], config, trained, kind, major))
        return out


def _presentation(config: dict[str, Any], major: int) -> str | None:
    """Which executed presentation transformers of that major hands the release for this config.json."""
    if major >= 5:
        return "tf5"  # transformers 5 reads either layout into rope_parameters (executed on 5.0.0rc0 and 5.24.0)
    layout5 = isinstance(config.get("rope_parameters"), dict)
    layout4 = "rope_theta" in config or isinstance(config.get("rope_scaling"), dict)
    if layout5 and layout4:
        return None
    return "tf4_rope_parameters" if layout5 else "tf4_rope_scaling"


def _reading(cell: Any, config: dict[str, Any], trained: dict[str, Any], kind: str, major: int) -> ServedRope:
    if isinstance(cell, str):
        return ServedRope(major, None, cell, False, False)
    numbers = cell["numbers"]
    theta_read = numbers.get("base") == PROBE_THETA
    want = PROBE_SCALING.get(kind, {})
    scaling_read = kind == "default" or (cell["class"] != "RotaryEmbedding" and all(numbers.get(k) == v for k, v in want.items()))
    rope: dict[str, Any] = dict(trained) if scaling_read else {"rope_type": "default"}
    rope["rope_theta"] = trained["rope_theta"] if theta_read else float(numbers.get("base", 10000.0))
    if "partial_rotary_factor" in config:
        rope["partial_rotary_factor"] = config["partial_rotary_factor"]
    return ServedRope(major, rope, None, theta_read, scaling_read)


def _versions_named() -> list[str]:
    """Every transformers version the table's requirements name: the candidates a requirement is tested on."""
    found = set()
    for per_release in table()["transformers"].values():
        for req in per_release.values():
            found |= set(re.findall(r"\d+\.\d+(?:\.\d+)?(?:rc\d+)?", req or ""))
    return sorted(found)


def admitted_majors(requirement: str | None) -> tuple[int, ...]:
    """The transformers majors (4, 5) a Requires-Dist admits, tested on every version the table's requirements name
    (a bare requirement admits both)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if not requirement or requirement == "any":
        return (4, 5)
    try:
        spec = SpecifierSet(requirement)
    except InvalidSpecifier:
        return (4, 5)
    majors = {int(v.split(".")[0]) for v in _versions_named() if spec.contains(v, prereleases=True)}
    return tuple(sorted(m for m in majors if m in (4, 5))) or (4, 5)


def rope_rule(engine: str, version: str) -> ExecutedRope | None:
    got = behaviour(engine, version)
    if got is None or "rope" not in got[0]:
        return None
    b, where = got
    req = table()["transformers"][engine].get(_release(version))
    src = f"{where.split(',')[0]} on the release's own {ROPE_FILES[engine]}, executed (conformance/rope_exec.py)"
    return ExecutedRope(req, admitted_majors(req), src, b["rope"]["built"])
