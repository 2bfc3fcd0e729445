"""Forensics of a draft checkpoint: every tensor and every config key examined, without a forward.

Three questions, each answered from the files alone (the raw tensors as stored, before any loader
renames, casts or fills anything in):

- tensors: is each one finite, in which dtype, and does each module still hold its initialisation
  (a decoder layer saved at init by a non-strict load under a renamed key, while fc and lm_head are
  trained, looks healthy to every loader and proposes noise);
- geometry: every dimension the shapes determine (hidden size, heads x head_dim, intermediate size,
  vocabularies, aux slots, decoder layers) against config.json, with the implied value as the edit;
- keys: every key of the config modelled (the doctor reads it), known not to change the forward, or
  unknown (one INFO finding lists the unknown, so silence means every key was checked).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...core.findings import Finding
from ...io.arrays import StoredArray
from .config_keys import KeyRow, key_findings, key_rows
from .geometry import GeometryRow, _context, attention_geometry, aux_rows, geometry_findings, simple_rows
from .tensors import (
    DEFAULT_INIT_RANGE,
    ModuleRow,
    TensorStat,
    inherited_zero_rows,
    init_findings,
    module_rows,
    tensor_findings,
    tensor_stat,
)


@dataclass
class Forensics:
    tensors: list[TensorStat] = field(default_factory=list)
    modules: list[ModuleRow] = field(default_factory=list)
    geometry: list[GeometryRow] = field(default_factory=list)
    keys: list[KeyRow] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def geometry_findings(self) -> list[Finding]:
        return [f for f in self.findings if f.code == "DRF012"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "tensors": [t.to_dict() for t in self.tensors],
            "modules": [asdict(m) for m in self.modules],
            "geometry": [asdict(g) for g in self.geometry],
            "keys": [{**asdict(k), "value": _jsonable(k.value)} for k in self.keys],
        }


def _jsonable(v: Any) -> Any:
    return v if isinstance(v, (str, int, float, bool, type(None), list, dict)) else repr(v)


def examine(
    draft: str, fmt: str | None = None, tensors: dict[str, StoredArray] | None = None, target: str | None = None
) -> Forensics:
    """Every tensor, dimension and key of the draft directory, read from the files as stored
    (``tensors``: those files' tensors, where the caller has read them already; ``target``: the target's
    directory, whose embedding tells a padding row copied with the rest from a row zeroed by an export)."""
    from ...draft.formats import _resolve_format, canonical_state, find_layer_ids, native_ids_key, native_to_canonical_name
    from ...io.hub import load_weights_dir
    from ...io.safeio import read_json_object

    d = Path(draft)
    cfg = read_json_object(d / "config.json", "point --draft at a directory holding config.json and *.safetensors")
    tensors = load_weights_dir(d) if tensors is None else tensors
    fmt, _ = _resolve_format(cfg, sorted(tensors), fmt)
    canon = canonical_state(tensors)
    fx = Forensics()
    fx.tensors = [tensor_stat(k, native_to_canonical_name(k), v) for k, v in sorted(tensors.items())]
    fx.modules, verdicts = module_rows(fx.tensors)
    _mark_unused(fx.modules, verdicts, cfg, fmt)
    c = _context(cfg, fmt, canon)
    init_range = c.layer.get("initializer_range", cfg.get("initializer_range", DEFAULT_INIT_RANGE))
    init_range = init_range if isinstance(init_range, (int, float)) and not isinstance(init_range, bool) else DEFAULT_INIT_RANGE
    native = native_ids_key(fmt)
    ids = find_layer_ids(cfg).get(native) if native else None
    attn, edits = attention_geometry(c)
    fx.geometry = simple_rows(c)[:1] + ([attn] if attn else []) + simple_rows(c)[1:] + aux_rows(c, len(ids) if ids else None)
    fx.keys = key_rows(cfg)
    fx.findings = (
        tensor_findings(fx.tensors, tensors, inherited_zero_rows(fx.tensors, tensors, target))
        + init_findings(fx.tensors, verdicts, float(init_range))
        + geometry_findings(fx.geometry, attn, edits, c)
        + key_findings(fx.keys)
    )
    return fx


def _mark_unused(rows: list[ModuleRow], verdicts: dict[str, str], cfg: dict[str, Any], fmt: str) -> None:
    """A module the trained forward never ran keeps its init legitimately: SpecForge's norm_output=false
    drops the norm before lm_head (llama3_eagle.py:1773-1778), so that norm.weight stays at 1.0."""
    if fmt == "sglang" and cfg.get("norm_output") is False and "norm" in verdicts:
        verdicts["norm"] = "unused"
        for r in rows:
            if r.name == "norm":
                r.verdict = "unused (norm_output false: no norm before lm_head)"


def geometry_fact(fx: Forensics) -> str:
    """The geometry table in one line, for the terminal's facts."""
    parts = [f"{g.what} {g.weights}" for g in fx.geometry if g.weights is not None]
    off = [g.what for g in fx.geometry if g.agrees is False]
    return ", ".join(parts) + (f"; disagrees with config.json: {', '.join(off)}" if off else "; config.json agrees")


def tensor_fact(fx: Forensics) -> str:
    dtypes = sorted({t.dtype for t in fx.tensors if t.kind in ("matrix", "norm", "bias")})
    bad = [m.name for m in fx.modules if not m.verdict.startswith(("trained", "map", "not examined", "unused"))]
    return f"{len(fx.tensors)} tensors in {len(fx.modules)} modules, {'/'.join(dtypes) or 'no floating'}; " + (
        f"not trained: {', '.join(bad)}" if bad else "every module trained, every tensor finite"
    )
