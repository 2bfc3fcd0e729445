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

import math
import re
from dataclasses import asdict, dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from ..core.findings import DRAFT_CONFIG, DRAFT_WEIGHTS, Finding, Fix, Location, config_fix, json_snippet

# A matrix left at its initialisation has i.i.d. entries: its top singular value sits at the
# Marchenko-Pastur edge std*(sqrt(m)+sqrt(n)), and its row norms vary only as much as i.i.d.
# entries of its kurtosis allow. Measured (spectral ratio = top singular value / that edge; row
# ratio = row-norm coefficient of variation / the i.i.d. one):
#   trained draft fixture (hidden 128, 400 steps): spectral 1.27 (v_proj) .. 3.33 (lm_head), the
#     decoder layer's seven matrices 1.27-1.95, fc 1.39; row ratio 1.24 .. 2.77
#   fresh normal(0, 0.02), torch's kaiming-uniform and truncated-normal inits, 120 draws at each
#     shape from 32x64 to 384x128: spectral 0.91 .. 1.04, row ratio at most 1.34
# The trained target's layer-0 v_proj (spectral 0.93, row 0.98) shows one weakly trained matrix can
# look i.i.d., so a module is called "at init" only when every matrix in it is, and its norms too.
SPECTRAL_AT_INIT = 1.15
ROW_CV_AT_INIT = 1.5
# the spectral ratio is taken on an evenly strided sub-matrix at most this big on each side: the i.i.d.
# edge holds for any sub-matrix, structure survives it, and inspect stays fast on a 128k-row head
SUBSAMPLE = 512
DEFAULT_INIT_RANGE = 0.02  # transformers PretrainedConfig.initializer_range
UNTRAINED = ("at init", "all zero", "rows identical")


@dataclass
class TensorStat:
    """What one stored tensor says about itself."""

    name: str  # as stored in the file
    module: str  # the file's name without .weight/.bias
    shape: list[int]
    dtype: str
    kind: str  # matrix | norm | bias | map | other
    finite: bool = True
    std: float | None = None
    spectral_ratio: float | None = None
    row_cv_ratio: float | None = None
    frac_one: float | None = None  # norms: fraction of entries exactly 1.0
    zero_rows: int = 0
    verdict: str = "trained"  # trained | at init | all zero | rows identical | non-finite | map | ...

    def to_dict(self) -> dict[str, Any]:
        # JSON has no NaN: a statistic a degenerate matrix has none of is null
        return {k: (None if v != v else round(v, 4)) if isinstance(v, float) else v for k, v in asdict(self).items()}


@dataclass
class ModuleRow:
    name: str
    tensors: list[str]
    verdict: str


@dataclass
class GeometryRow:
    """One dimension: what config.json says, what the shapes say, and where the shapes say it."""

    what: str
    key: str | None  # the dotted config key, None for a dimension no key holds
    config: Any
    weights: Any
    source: str
    agrees: bool | None  # None: the shapes leave it undetermined, or nothing to compare


@dataclass
class KeyRow:
    key: str
    value: Any
    status: str  # modelled | inert | unknown
    reason: str


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


# ----------------------------------------------------------------------------- tensors


def _kind(canon: str, t: Any) -> str:
    if canon in ("d2t", "t2d"):
        return "map"
    if not t.is_floating_point():
        return "other"
    if canon.endswith(".bias"):
        return "bias"
    if t.dim() == 1 and re.search(r"(norm|layernorm)(\.\d+)?\.weight$", canon):
        return "norm"
    return "matrix" if t.dim() == 2 else "other"


def _strided(w: Any) -> Any:
    """An evenly strided sub-matrix at most SUBSAMPLE on each side, in float32."""
    rs = max(1, math.ceil(w.shape[0] / SUBSAMPLE))
    cs = max(1, math.ceil(w.shape[1] / SUBSAMPLE))
    return w[::rs, ::cs].float()


def matrix_stats(w: Any) -> tuple[float, float, float]:
    """(std, spectral ratio, row ratio) of a 2-D tensor; both ratios are ~1 for i.i.d. entries."""
    import torch

    s = _strided(w)
    m, n = s.shape
    std = float(s.std()) if s.numel() > 1 else 0.0
    if std == 0.0 or m < 2 or n < 2:
        return std, float("nan"), float("nan")
    c = s - s.mean()
    kurt = float((c**4).mean() / (c**2).mean() ** 2)
    top = float(torch.linalg.matrix_norm(s, ord=2))
    spectral = top / (std * (math.sqrt(m) + math.sqrt(n)))
    norms = s.norm(dim=1)
    iid_cv = 0.5 * math.sqrt(max(kurt - 1.0, 1e-6) / n)  # CV of an i.i.d. row's norm, delta method
    row = float(norms.std() / norms.mean().clamp_min(1e-30)) / iid_cv
    return std, spectral, row


def tensor_stat(name: str, canon: str, t: Any) -> TensorStat:
    """Every statistic of one stored tensor, and its verdict."""
    kind = _kind(canon, t)
    st = TensorStat(name, re.sub(r"\.(weight|bias)$", "", name), list(t.shape), str(t.dtype).replace("torch.", ""), kind)
    if kind == "map":
        st.verdict = "map"
        return st
    if t.is_floating_point():
        st.finite = bool(t.isfinite().all())
    if not st.finite:
        st.verdict = "non-finite"
    elif kind == "matrix":
        _matrix_verdict(st, t)
    elif kind == "norm":
        st.frac_one = float((t == 1).float().mean()) if t.numel() else None
        st.std = float(t.float().std()) if t.numel() > 1 else None
        st.verdict = "at init" if st.frac_one == 1.0 else "all zero" if not bool(t.any()) else "trained"
    elif kind == "bias":
        st.verdict = "at init" if not bool(t.any()) else "trained"
    else:
        st.verdict = "not examined"
    return st


def _matrix_verdict(st: TensorStat, w: Any) -> None:
    if not bool(w.any()):
        st.verdict, st.std = "all zero", 0.0
        return
    st.zero_rows = int((w == 0).all(dim=1).sum())
    if w.shape[0] > 1 and bool((w == w[0]).all()):
        st.verdict = "rows identical"
        return
    st.std, st.spectral_ratio, st.row_cv_ratio = matrix_stats(w)
    if st.spectral_ratio < SPECTRAL_AT_INIT and st.row_cv_ratio < ROW_CV_AT_INIT:
        st.verdict = "at init"


def init_signature(st: TensorStat, init_range: float) -> str:
    """One evidence line: the statistic that made the verdict, beside what an initialisation gives."""
    shape = f"{st.name} {st.shape}"
    if st.kind == "norm":
        return f"{shape}: {st.frac_one:.0%} of entries exactly 1.0 (RMSNorm init; trained norms measure 0% on the fixture)"
    if st.kind == "bias":
        return f"{shape}: every entry exactly 0 (bias init)"
    if st.verdict != "at init":
        return f"{shape}: {st.verdict}"
    std = st.std or 0.0
    fan_in = st.shape[1]
    named = f"initializer_range {init_range}"
    if abs(std - 1 / math.sqrt(3 * fan_in)) < 0.1 / math.sqrt(3 * fan_in):
        named = f"1/sqrt(3*{fan_in}) = {1 / math.sqrt(3 * fan_in):.4f}, torch's default Linear init"
    return (
        f"{shape}: std {std:.4f} ({named}); top singular value {st.spectral_ratio:.2f}x the i.i.d. edge and "
        f"row-norm spread {st.row_cv_ratio:.2f}x i.i.d. (no structure: trained matrices measure >= {SPECTRAL_AT_INIT})"
    )


def duplicates(stats: list[TensorStat], tensors: dict[str, Any]) -> list[tuple[str, str]]:
    """Pairs of stored tensors with identical values (a constant one is left to the init check)."""
    import torch

    groups: dict[tuple, list[str]] = {}
    for st in stats:
        if st.kind in ("matrix", "norm") and st.finite and st.verdict not in ("at init", "all zero", "rows identical"):
            groups.setdefault((tuple(st.shape), st.dtype), []).append(st.name)
    pairs = []
    for names in groups.values():
        for a, b in combinations(names, 2):
            if torch.equal(tensors[a], tensors[b]):
                pairs.append((a, b))
    return pairs


# ----------------------------------------------------------------------------- modules


def module_rows(stats: list[TensorStat]) -> tuple[list[ModuleRow], dict[str, str]]:
    """The per-module table and each leaf module's verdict (weight and bias together)."""
    by_module: dict[str, list[TensorStat]] = {}
    for st in stats:
        by_module.setdefault(st.module, []).append(st)
    rows, verdicts = [], {}
    for name, sts in by_module.items():
        verdicts[name] = _leaf_verdict(sts)
        tensors = [f"{s.name.rsplit('.', 1)[-1] if '.' in s.name else s.name} {s.shape} {s.dtype}" for s in sts]
        rows.append(ModuleRow(name, tensors, verdicts[name] + _headline(sts)))
    return rows, verdicts


def _leaf_verdict(sts: list[TensorStat]) -> str:
    if any(not s.finite for s in sts):
        return "non-finite"
    main = next((s for s in sts if s.kind in ("matrix", "norm")), sts[0])
    if main.verdict in UNTRAINED and all(s.verdict in UNTRAINED for s in sts if s.kind == "bias"):
        return main.verdict
    return "trained" if main.verdict in ("trained", *UNTRAINED) else main.verdict


def _headline(sts: list[TensorStat]) -> str:
    main = next((s for s in sts if s.kind in ("matrix", "norm")), None)
    if main is None:
        return ""
    if main.kind == "norm" and main.frac_one is not None:
        return f" ({main.frac_one:.0%} exactly 1.0)"
    if main.spectral_ratio is not None and not math.isnan(main.spectral_ratio):
        return f" (std {main.std:.4f}, spectral {main.spectral_ratio:.2f}, rows {main.row_cv_ratio:.2f})"
    return ""


def untrained_modules(verdicts: dict[str, str]) -> list[str]:
    """The largest modules every leaf of which is untrained, most specific where a module has one child."""
    leaves = {m: v in UNTRAINED for m, v in verdicts.items() if v not in ("map", "not examined", "unused")}
    nodes: dict[str, list[str]] = {}
    for leaf in leaves:
        parts = leaf.split(".")
        for i in range(1, len(parts) + 1):
            nodes.setdefault(".".join(parts[:i]), []).append(leaf)
    bad = {n for n, ls in nodes.items() if all(leaves[x] for x in ls)}
    top = sorted(n for n in bad if not any(n.startswith(p + ".") for p in bad if p != n))
    out = []
    for n in top:
        while True:  # "layers" holding only "layers.0": name the layer
            kids = [c for c in nodes if c.startswith(n + ".") and c.count(".") == n.count(".") + 1]
            if len(kids) != 1:
                break
            n = kids[0]
        out.append(n)
    return out


def init_findings(stats: list[TensorStat], verdicts: dict[str, str], init_range: float) -> list[Finding]:
    """DRF006 for a head left at init, DRF011 for any other module: named, with the statistic."""
    bad = [m for m in untrained_modules(verdicts) if _decisive(m, [s for s in stats if _under(s.module, m)])]
    trained = [m for m, v in verdicts.items() if v == "trained" and not any(m == b or m.startswith(b + ".") for b in bad)]
    out = []
    for mod in bad:
        sts = [s for s in stats if _under(s.module, mod)]
        order = {"matrix": 0, "norm": 1, "bias": 2}
        shown = sorted((s for s in sts if s.kind in order), key=lambda s: order[s.kind])
        ev = [init_signature(s, init_range) for s in shown[:12]] + (
            [f"... and {len(shown) - 12} more"] if len(shown) > 12 else []
        )
        keys = [s.name for s in sts]
        if mod.split(".")[-1] == "lm_head":
            out.append(_head_finding(ev, keys))
            continue
        ev.append(
            "likely cause: a converter's key map missed these keys and a non-strict load kept the freshly built module"
            + (f" (trained: {', '.join(_top_names(trained))})" if trained else " (no module of this draft is trained)")
        )
        out.append(
            Finding(
                "DRF011",
                f"draft module {mod} is left at its initialisation ({len(keys)} tensor(s))",
                ev,
                f"re-export from the training checkpoint with a key mapping that loads {mod}: the keys "
                f"{_key_list(keys, 12)} must receive the trained tensors; load with strict=True so a renamed key "
                "fails instead of leaving the module at init",
                data={"module": mod, "keys": keys},
                location=Location(DRAFT_WEIGHTS, keys[0]),
            )
        )
    return out


def _under(module: str, node: str) -> bool:
    return module == node or module.startswith(node + ".")


def _decisive(node: str, sts: list[TensorStat]) -> bool:
    """Whether a module at init is evidence on its own: a top-level module (fc, lm_head, the layer), a
    norm (exactly 1.0 never survives training), or two or more matrices; one i.i.d.-looking matrix
    inside a trained layer may be weakly trained (the fixture target's layer-0 v_proj measures 0.93)."""
    top = "." not in node or re.fullmatch(r"(model\.)?layers\.\d+", node) is not None
    return top or any(s.kind == "norm" for s in sts) or sum(s.kind == "matrix" for s in sts) >= 2


def _top_names(mods: list[str]) -> list[str]:
    """Trained modules by their top-level name (midlayer.self_attn.q_proj -> midlayer), in order."""
    seen: list[str] = []
    for m in mods:
        head = m.split(".")[0] if not re.match(r"^layers\.\d", m) else ".".join(m.split(".")[:2])
        if head not in seen:
            seen.append(head)
    return seen


def _key_list(keys: list[str], n: int = 6) -> str:
    return ", ".join(keys[:n]) + (f" and {len(keys) - n} more" if len(keys) > n else "")


def _head_finding(ev: list[str], keys: list[str]) -> Finding:
    return Finding(
        "DRF006",
        "the draft lm_head looks untrained",
        ev,
        "check that the exported head is the trained one (not a fresh init or a placeholder): re-export "
        f"{_key_list(keys)} from the training checkpoint",
        location=Location(DRAFT_WEIGHTS, keys[0]),
    )


def tensor_findings(stats: list[TensorStat], tensors: dict[str, Any]) -> list[Finding]:
    """DRF009 (NaN/Inf) and DRF013 (duplicated tensors, zero rows)."""
    out = []
    bad = [s.name for s in stats if not s.finite]
    if bad:
        out.append(
            Finding(
                "DRF009",
                f"{len(bad)} draft tensor(s) hold NaN or Inf",
                [", ".join(bad[:6])],
                "re-export from a healthy training checkpoint",
                location=Location(DRAFT_WEIGHTS, bad[0]),
            )
        )
    ev = [f"{a} and {b} hold identical values" for a, b in duplicates(stats, tensors)]
    ev += [
        f"{s.name} {s.shape}: {s.zero_rows} row(s) exactly zero"
        for s in stats
        if s.kind == "matrix" and s.zero_rows and s.verdict not in UNTRAINED
    ]
    if ev:
        out.append(
            Finding(
                "DRF013",
                "draft tensors are duplicated or have rows exactly zero",
                ev[:8],
                "check the export: one tensor was written under two names, or rows were zeroed; re-export from the training checkpoint",
                location=Location(DRAFT_WEIGHTS, ev[0].split(" ")[0]),
            )
        )
    return out


# ----------------------------------------------------------------------------- geometry


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
    if c.shape(vocab_src[0]):
        rows.append(_row("vocabulary", vkey, vcfg, c.shape(vocab_src[0])[0], vocab_src[1]))  # type: ignore[index]
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


# ----------------------------------------------------------------------------- keys

_DIM = "a dimension: checked against the tensor shapes"
_ROPE = "RoPE: compared with the target's and with how the engine rotates (CFG003, CFG004, FWD006)"
_FLAG = "a forward flag: compared with how each engine version reads it (FWD001)"
_IDS = "layer ids: what the engine captures (CAP*, CFG001, CFG002)"
MODELLED: dict[str, str] = {
    "architectures": "the class the engine builds (CFG007, FWD008)",
    "model_type": "the decoder layer kind (qwen3: q_norm/k_norm, FWD008)",
    **dict.fromkeys(("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim"), _DIM),
    **dict.fromkeys(("vocab_size", "draft_vocab_size", "target_hidden_size", "num_hidden_layers"), _DIM),
    "rms_norm_eps": "the RMSNorm epsilon the canonical draft runs with",
    **dict.fromkeys(
        (
            "rope_theta",
            "rope_scaling",
            "rope_parameters",
            "partial_rotary_factor",
            "max_position_embeddings",
            "rope_is_neox_style",
        ),
        _ROPE,
    ),
    "attention_bias": "q/k/v biases, checked against the tensors",
    "torch_dtype": "compared with the target's dtype (CFG005)",
    "dtype": "compared with the target's dtype (CFG005)",
    "tie_word_embeddings": "whether the engine uses embed_tokens as lm_head (FWD004)",
    **dict.fromkeys(("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output"), _FLAG),
    **dict.fromkeys(("eagle_aux_hidden_state_layer_ids", "aux_hidden_state_layer_ids", "eagle3_layers_to_capture"), _IDS),
    "use_aux_hidden_state": "SGLang captures nothing when false (engines.resolve_serving)",
    "speculators_model_type": "the format (draft/formats.py detect_format)",
    "initializer_range": "the init each matrix is compared with (forensics)",
    "eagle_config": "a section: every key in it examined",
    "transformer_layer_config": "a section: every key in it examined",
}
_META = "metadata: names the producer, changes no value"
INERT: dict[str, str] = {
    **dict.fromkeys(("transformers_version", "speculators_version", "_name_or_path", "_commit_hash"), _META),
    **dict.fromkeys(
        ("bos_token_id", "eos_token_id", "pad_token_id"), "generation-time token ids: the target's tokenizer decides"
    ),
    "use_cache": "KV caching changes no value",
    **dict.fromkeys(
        ("attention_dropout", "hidden_dropout", "dropout", "embd_pdrop", "resid_pdrop"), "dropout is off at inference"
    ),
    "pretraining_tp": "transformers splits the same matmuls into slices: the same values",
    "speculators_config": "the proposal policy and the verifier's name: how many tokens are drafted, not how",
    **dict.fromkeys(
        ("output_attentions", "output_hidden_states", "return_dict", "torchscript"),
        "which outputs are returned, not their values",
    ),
    **dict.fromkeys(
        ("id2label", "label2id", "problem_type", "task_specific_params", "finetuning_task", "tokenizer_class"), _META
    ),
}
# keys that leave the forward alone at one value only (the one the canonical draft runs)
INERT_AT: dict[str, tuple[Any, str]] = {
    "hidden_act": ("silu", "the canonical draft's MLP runs SiLU"),
    "mlp_bias": (False, "the draft's MLP has no bias"),
    "use_sliding_window": (False, "full attention"),
    "sliding_window": (None, "full attention"),
}


def classify(key: str, value: Any) -> tuple[str, str]:
    """(status, reason) of one config key, by its last component."""
    name = key.rsplit(".", 1)[-1]
    if name in INERT_AT:
        want, why = INERT_AT[name]
        return (
            ("modelled" if name == "hidden_act" else "inert", why) if value == want else ("unknown", f"{why}; this is {value!r}")
        )
    if name in MODELLED:
        return "modelled", MODELLED[name]
    if name in INERT:
        return "inert", INERT[name]
    return "unknown", "no modelled engine reads this key"


def key_rows(cfg: dict[str, Any]) -> list[KeyRow]:
    """Every key of the config and of its eagle_config / transformer_layer_config sections."""
    rows = []
    for k, v in cfg.items():
        rows.append(KeyRow(k, v, *classify(k, v)))
        if k in ("eagle_config", "transformer_layer_config") and isinstance(v, dict):
            rows += [KeyRow(f"{k}.{kk}", vv, *classify(f"{k}.{kk}", vv)) for kk, vv in v.items()]
    return rows


def key_findings(rows: list[KeyRow]) -> list[Finding]:
    """CFG008: the keys nothing here models, in one finding, so that silence means every key was checked."""
    unknown = [r for r in rows if r.status == "unknown"]
    if not unknown:
        return []
    return [
        Finding(
            "CFG008",
            f"{len(unknown)} config key(s) no modelled engine reads: {', '.join(r.key for r in unknown[:8])}",
            [f"{r.key} = {_short(r.value)}: {r.reason}" for r in unknown[:12]],
            "no modelled engine reads this key; check your engine applies it (and that training did)",
            data={"keys": [r.key for r in unknown]},
            location=Location(DRAFT_CONFIG, unknown[0].key),
        )
    ]


def _short(v: Any) -> str:
    import json

    try:
        s = json.dumps(v)
    except (TypeError, ValueError):
        s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


# ----------------------------------------------------------------------------- all of it


def examine(draft: str, fmt: str | None = None) -> Forensics:
    """Every tensor, dimension and key of the draft directory, read from the files as stored."""
    from ..draft.formats import _find_layer_ids, _native_ids_key, _resolve_format, canonical_state, native_to_canonical_name
    from ..io.hub import load_weights_dir
    from ..io.safeio import read_json_object

    d = Path(draft)
    cfg = read_json_object(d / "config.json", "point --draft at a directory holding config.json and *.safetensors")
    tensors = {k: v for k, v in load_weights_dir(d).items() if hasattr(v, "is_floating_point")}
    fmt, _ = _resolve_format(cfg, sorted(tensors), fmt)
    canon = canonical_state(tensors)
    fx = Forensics()
    fx.tensors = [tensor_stat(k, native_to_canonical_name(k), v) for k, v in sorted(tensors.items())]
    fx.modules, verdicts = module_rows(fx.tensors)
    _mark_unused(fx.modules, verdicts, cfg, fmt)
    c = _context(cfg, fmt, canon)
    init_range = c.layer.get("initializer_range", cfg.get("initializer_range", DEFAULT_INIT_RANGE))
    init_range = init_range if isinstance(init_range, (int, float)) and not isinstance(init_range, bool) else DEFAULT_INIT_RANGE
    native = _native_ids_key(fmt)
    ids = _find_layer_ids(cfg).get(native) if native else None
    attn, edits = attention_geometry(c)
    fx.geometry = simple_rows(c)[:1] + ([attn] if attn else []) + simple_rows(c)[1:] + aux_rows(c, len(ids) if ids else None)
    fx.keys = key_rows(cfg)
    fx.findings = (
        tensor_findings(fx.tensors, tensors)
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
