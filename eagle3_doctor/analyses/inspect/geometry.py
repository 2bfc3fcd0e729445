"""Forensics of the draft's geometry: every dimension the tensor shapes determine against config.json,
with the implied value as the edit (DRF012)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from ...core.findings import DRAFT_CONFIG, Finding, Fix, Location, config_fix, json_snippet


@dataclass
class GeometryRow:
    """One dimension: what config.json says, what the shapes say, and where the shapes say it."""

    what: str
    key: str | None  # the dotted config key, None for a dimension no key holds
    config: Any
    weights: Any
    source: str
    agrees: bool | None  # None: the shapes leave it undetermined, or nothing to compare


def _int(v: Any) -> int | None:
    """A config dimension as an int, or None (a mistyped value is read_draft's to refuse)."""
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@dataclass
class _Ctx:
    """The config as the geometry reads it: the layer section (speculators nest it) and its key prefix."""

    cfg: dict[str, Any]
    layer: dict[str, Any]
    prefix: str
    canon: dict[str, Any]  # canonical tensor name -> tensor

    def key(self, name: str) -> str:
        return self.prefix + name

    def shape(self, name: str) -> list[int] | None:
        t = self.canon.get(name)
        return list(t.shape) if t is not None else None


def _context(cfg: dict[str, Any], fmt: str, canon: dict[str, Any]) -> _Ctx:
    tl = cfg.get("transformer_layer_config")
    if fmt == "speculators" and isinstance(tl, dict):
        return _Ctx(cfg, tl, "transformer_layer_config.", canon)
    return _Ctx(cfg, cfg, "", canon)


def _row(what: str, key: str | None, config: Any, weights: Any, source: str) -> GeometryRow:
    agrees = None if weights is None or _int(config) is None else config == weights
    return GeometryRow(what, key, config, weights, source, agrees)


def simple_rows(c: _Ctx) -> list[GeometryRow]:
    """Dimensions one tensor axis decides on its own."""
    rows = []
    fc, gate = c.shape("fc.weight"), c.shape("midlayer.mlp.gate_proj.weight")
    if fc:
        rows.append(_row("hidden size", c.key("hidden_size"), c.layer.get("hidden_size"), fc[0], "fc.weight rows"))
    if gate:
        rows.append(
            _row(
                "intermediate size",
                c.key("intermediate_size"),
                c.layer.get("intermediate_size"),
                gate[0],
                "mlp.gate_proj.weight rows",
            )
        )
    vocab_src = ("t2d", "t2d length") if c.shape("t2d") else ("embed_tokens.weight", "embed_tokens.weight rows")
    vkey = c.key("vocab_size") if "vocab_size" in c.layer or "vocab_size" not in c.cfg else "vocab_size"
    vcfg = c.layer.get("vocab_size", c.cfg.get("vocab_size"))
    vshape = c.shape(vocab_src[0])
    if vshape:
        rows.append(_row("vocabulary", vkey, vcfg, vshape[0], vocab_src[1]))
    dv = c.shape("lm_head.weight") or c.shape("d2t")
    if dv:
        src = "lm_head.weight rows" if c.shape("lm_head.weight") else "d2t length"
        rows.append(_row("draft vocabulary", "draft_vocab_size", c.cfg.get("draft_vocab_size", vcfg), dv[0], src))
    n_layers = _decoder_layers(c.canon)
    if n_layers and "num_hidden_layers" in c.layer:
        rows.append(
            _row(
                "decoder layers",
                c.key("num_hidden_layers"),
                c.layer.get("num_hidden_layers"),
                n_layers,
                "decoder layers in the file",
            )
        )
    return rows


def _decoder_layers(canon: dict[str, Any]) -> int:
    """How many decoder layers the file holds: midlayer (layers.0 is read as midlayer) plus the later ones."""
    # the reader names the first layer midlayer.* and the later ones extra_layers.{j} (layer j + 1)
    idx = {int(m.group(1)) for k in canon if (m := re.match(r"^(?:model\.)?layers\.(\d+)\.", k))}
    idx |= {int(m.group(1)) + 1 for k in canon if (m := re.match(r"^extra_layers\.(\d+)\.", k))}
    return len(idx | ({0} if any(k.startswith("midlayer.") for k in canon) else set()))


def aux_rows(c: _Ctx, n_ids: int | None) -> list[GeometryRow]:
    """fc's input width = aux slots x target hidden size: the config holds one, the ids the other."""
    fc = c.shape("fc.weight")
    if not fc:
        return []
    width, hidden = fc[1], fc[0]
    th = _int(c.cfg.get("target_hidden_size")) or _int(c.layer.get("hidden_size")) or hidden
    n_aux = n_ids or 3
    rows = [
        GeometryRow(
            "aux slots",
            None,
            n_ids if n_ids else "3 (engine default)",
            width / th if width % th else width // th,
            f"fc.weight width {width} / target hidden {th}",
            None if width % th else width // th == n_aux,
        )
    ]
    # a width target_hidden_size does not divide cannot be built; a whole other number of slots is
    # DRF005's (the fc against the target's hidden size and the ids the engine feeds)
    implied = width // n_aux if width % n_aux == 0 else None
    cfg_th = c.cfg.get("target_hidden_size")
    rows.append(
        GeometryRow(
            "target hidden size",
            "target_hidden_size",
            cfg_th if cfg_th is not None else f"{th} (hidden_size)",
            implied,
            f"fc.weight width {width} / {n_aux} aux slots",
            None if implied is None else not (width % th) or implied == th,
        )
    )
    return rows


ATTN_KEYS = ("num_attention_heads", "num_key_value_heads", "head_dim")


def attention_readings(q_rows: int, k_rows: int, head_dim: int | None = None) -> list[tuple[int, int, int]]:
    """Every (heads, KV heads, head_dim) the q/k shapes allow: heads*head_dim = q rows, KV*head_dim =
    k rows, head_dim even (RoPE rotates pairs), heads a multiple of KV heads; ``head_dim`` fixed when
    a q_norm weight gives it."""
    out = []
    for d in range(2, math.gcd(q_rows, k_rows) + 1, 2):
        if q_rows % d or k_rows % d or (head_dim is not None and d != head_dim):
            continue
        nh, nkv = q_rows // d, k_rows // d
        if nh % nkv == 0:
            out.append((nh, nkv, d))
    return out


def _edits(reading: tuple[int, int, int], layer: dict[str, Any], hidden: int | None) -> dict[str, int]:
    """The keys to change so config.json reads as ``reading`` (head_dim, if absent, is hidden // heads)."""
    nh, nkv, d = reading
    out = {}
    if nh != layer.get("num_attention_heads"):
        out["num_attention_heads"] = nh
    if nkv != layer.get("num_key_value_heads", layer.get("num_attention_heads")):
        out["num_key_value_heads"] = nkv
    current = layer.get("head_dim") if "head_dim" in layer else (hidden // nh if hidden else None)
    if d != current:
        out["head_dim"] = d
    return out


def attention_geometry(c: _Ctx) -> tuple[GeometryRow | None, list[dict[str, int]]]:
    """The attention row and, where config.json disagrees, the smallest edits that make it agree
    (one edit: determined; several of the same size: the shapes cannot choose between them)."""
    q, k = c.shape("midlayer.self_attn.q_proj.weight"), c.shape("midlayer.self_attn.k_proj.weight")
    if not q or not k or any(_int(c.layer.get(x)) is None for x in ATTN_KEYS if x in c.layer):
        return None, []
    qn = c.shape("midlayer.self_attn.q_norm.weight")
    hidden = _int(c.layer.get("hidden_size"))
    readings = attention_readings(q[0], k[0], qn[0] if qn else None)
    edits = [_edits(r, c.layer, hidden) for r in readings]
    nh, nkv = c.layer.get("num_attention_heads"), c.layer.get("num_key_value_heads", c.layer.get("num_attention_heads"))
    hd = c.layer.get("head_dim", hidden // nh if hidden and nh else None)
    src = f"q_proj.weight rows {q[0]}, k_proj.weight rows {k[0]}" + (f", q_norm.weight {qn[0]}" if qn else "")
    row = GeometryRow("attention", c.key("head_dim"), _reading_text((nh, nkv, hd)), None, src, None)
    if any(not e for e in edits):
        row.weights, row.agrees = row.config, True
        return row, []
    best = min((len(e) for e in edits), default=0)
    smallest = [e for e in edits if len(e) == best]
    row.weights = " or ".join(_reading_text(r) for r, e in zip(readings, edits) if len(e) == best) or "no reading"
    row.agrees = False if smallest else None
    return row, smallest


def _reading_text(r: tuple[Any, Any, Any]) -> str:
    return f"{r[0]} heads x head_dim {r[2]}, {r[1]} KV heads"


def geometry_findings(rows: list[GeometryRow], attn: GeometryRow | None, edits: list[dict[str, int]], c: _Ctx) -> list[Finding]:
    """DRF012: one finding per dimension config.json states otherwise than the tensor shapes."""
    out = []
    for r in rows:
        if r.agrees is False and r.key and r.what != "aux slots" and r is not attn:
            out.append(
                Finding(
                    "DRF012",
                    f"config.json {r.key} = {r.config}, the weights say {r.weights} ({r.what})",
                    [
                        f"{r.source}: {r.weights}",
                        "engines build the draft from config.json: it then refuses these tensors or runs a mis-sized module",
                    ],
                    config_fix(f"set {json_snippet(r.key, r.weights)} in the draft's config.json", r.key, r.weights),
                    data={"key": r.key, "config": r.config, "implied": r.weights},
                )
            )
    if attn is not None and attn.agrees is False:
        out.append(_attention_finding(attn, edits, c))
    return out


def _attention_finding(attn: GeometryRow, edits: list[dict[str, int]], c: _Ctx) -> Finding:
    ev = [f"{attn.source}; config.json: {attn.config}"]
    snippets = [", ".join(json_snippet(c.key(k), v) for k, v in e.items()) for e in edits]
    data = {"config": attn.config, "readings": [{c.key(k): v for k, v in e.items()} for e in edits]}
    if len(edits) == 1:
        (e,) = edits
        text = f"set {snippets[0]} in the draft's config.json"
        if len(e) == 1:
            ((k, v),) = e.items()
            fix: Fix | str = config_fix(text, c.key(k), v)
        else:
            section = c.prefix.rstrip(".") or None
            fix = Fix(text, file=DRAFT_CONFIG, key=section, value=e, snippet=snippets[0])
        ev.append(f"the one smallest edit that makes config.json read as these shapes: {attn.weights}")
        return Finding(
            "DRF012", f"config.json's attention geometry disagrees with the weights: they say {attn.weights}", ev, fix, data=data
        )
    ev += [f"consistent with the shapes: {s}" for s in snippets]
    return Finding(
        "DRF012",
        f"config.json's attention geometry disagrees with the weights, undetermined between {len(edits)} readings",
        ev + ["the shapes fix only heads x head_dim and KV heads x head_dim: they cannot tell these readings apart"],
        "set the reading training used, one of: " + " | ".join(snippets),
        data=data,
        location=Location(DRAFT_CONFIG, c.key("head_dim")),
    )
