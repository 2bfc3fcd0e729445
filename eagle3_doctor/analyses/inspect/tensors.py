"""Forensics of the draft's tensors: each one finite, its dtype, and whether each module still holds its
initialisation (DRF006, DRF009, DRF011, DRF013), from the raw tensors as stored."""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from itertools import combinations
from typing import Any

import numpy as np

from ...core.errors import BadInput
from ...core.findings import DRAFT_WEIGHTS, Finding, Location
from ...io.arrays import StoredArray

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


def _kind(canon: str, t: StoredArray) -> str:
    if canon in ("d2t", "t2d"):
        return "map"
    if not t.is_floating_point:
        return "other"
    if canon.endswith(".bias"):
        return "bias"
    if t.ndim == 1 and re.search(r"(norm|layernorm)(\.\d+)?\.weight$", canon):
        return "norm"
    return "matrix" if t.ndim == 2 else "other"


def _strided(w: np.ndarray) -> np.ndarray:
    """An evenly strided sub-matrix at most SUBSAMPLE on each side, in float64 (the statistics then
    carry no rounding of their own)."""
    rs = max(1, math.ceil(w.shape[0] / SUBSAMPLE))
    cs = max(1, math.ceil(w.shape[1] / SUBSAMPLE))
    return w[::rs, ::cs].astype(np.float64)


def matrix_stats(w: np.ndarray) -> tuple[float, float, float]:
    """(std, spectral ratio, row ratio) of a 2-D array; both ratios are ~1 for i.i.d. entries."""
    s = _strided(w)
    m, n = s.shape
    std = float(s.std(ddof=1)) if s.size > 1 else 0.0
    if std == 0.0 or m < 2 or n < 2:
        return std, float("nan"), float("nan")
    c = s - s.mean()
    kurt = float((c**4).mean() / (c**2).mean() ** 2)
    top = float(np.linalg.norm(s, 2))
    spectral = top / (std * (math.sqrt(m) + math.sqrt(n)))
    norms = np.linalg.norm(s, axis=1)
    iid_cv = 0.5 * math.sqrt(max(kurt - 1.0, 1e-6) / n)  # CV of an i.i.d. row's norm, delta method
    row = float(norms.std(ddof=1) / max(norms.mean(), 1e-30)) / iid_cv
    return std, spectral, row


def tensor_stat(name: str, canon: str, t: StoredArray) -> TensorStat:
    """Every statistic of one stored tensor, and its verdict."""
    kind = _kind(canon, t)
    st = TensorStat(name, re.sub(r"\.(weight|bias)$", "", name), list(t.shape), t.dtype, kind)
    if kind == "map":
        st.verdict = "map"
        return st
    if kind == "matrix" and t.dtype in _INF_BITS:
        _matrix_from_bits(st, t)
        return st
    v = t.values()
    st.finite = is_finite(t)
    if not st.finite:
        st.verdict = "non-finite"
    elif kind == "matrix":
        _matrix_verdict(st, v)
    elif kind == "norm":
        # float32 as torch takes the mean of a 0/1 mask: k/n rounded once, so 100% is exactly 1.0
        st.frac_one = float((v == 1).astype(np.float32).mean(dtype=np.float32)) if v.size else None
        st.std = float(v.astype(np.float64).std(ddof=1)) if v.size > 1 else None
        st.verdict = "at init" if st.frac_one == 1.0 else "all zero" if not bool(v.any()) else "trained"
    elif kind == "bias":
        st.verdict = "at init" if not bool(v.any()) else "trained"
    else:
        st.verdict = "not examined"
    return st


# the first bit pattern past the finite ones, sign bit cleared: inf (and every NaN above it)
_INF_BITS = {"bfloat16": 0x7F80, "float16": 0x7C00}


def _magnitude_bits(t: StoredArray) -> np.ndarray:
    """A 16-bit float tensor's bits without the sign: 0 is +-0, and every value from _INF_BITS up is Inf or NaN."""
    return t.raw.view(np.uint16) & np.uint16(0x7FFF)


def _finite_bits(mag: np.ndarray, dtype: str) -> bool:
    return bool(mag.max() < _INF_BITS[dtype]) if mag.size else True


def _matrix_from_bits(st: TensorStat, t: StoredArray) -> None:
    """:func:`_matrix_verdict` on a 16-bit float matrix read as its bits: finite, zero and identical rows
    need no decoding, and the statistics decode only their strided sample. An 8B draft's head and fc
    decoded whole are GBs of float32 written once and read once."""
    raw = t.raw.view(np.uint16)
    mag = _magnitude_bits(t)
    st.finite = _finite_bits(mag, t.dtype)
    if not st.finite:
        st.verdict = "non-finite"
        return
    if mag.size == 0 or not mag.max():
        st.verdict, st.std = "all zero", 0.0
        return
    st.zero_rows = int((mag.max(axis=1) == 0).sum())
    if raw.shape[0] > 1 and np.array_equal(raw.min(axis=0), raw.max(axis=0)):
        st.verdict = "rows identical"
        return
    rs, cs = max(1, math.ceil(raw.shape[0] / SUBSAMPLE)), max(1, math.ceil(raw.shape[1] / SUBSAMPLE))
    st.std, st.spectral_ratio, st.row_cv_ratio = matrix_stats(StoredArray(t.raw[::rs, ::cs], t.dtype).values())
    if st.spectral_ratio < SPECTRAL_AT_INIT and st.row_cv_ratio < ROW_CV_AT_INIT:
        st.verdict = "at init"


def _matrix_verdict(st: TensorStat, w: np.ndarray) -> None:
    if not bool(w.any()):
        st.verdict, st.std = "all zero", 0.0
        return
    st.zero_rows = int((w == 0).all(axis=1).sum())
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


def duplicates(stats: list[TensorStat], tensors: dict[str, StoredArray]) -> list[tuple[str, str]]:
    """Pairs of stored tensors with identical values (a constant one is left to the init check)."""
    groups: dict[tuple, list[str]] = {}
    for st in stats:
        if st.kind in ("matrix", "norm") and st.finite and st.verdict not in ("at init", "all zero", "rows identical"):
            groups.setdefault((tuple(st.shape), st.dtype), []).append(st.name)
    pairs = []
    for names in groups.values():
        for a, b in combinations(names, 2):
            ta, tb = tensors[a], tensors[b]
            # 16-bit floats by their bits (finite here, so equal bits are equal values but for +-0)
            same = np.array_equal(ta.raw, tb.raw) if ta.dtype in _INF_BITS else np.array_equal(ta.values(), tb.values())
            if same:
                pairs.append((a, b))
    return pairs


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


def nonfinite_findings(bad: list[str]) -> list[Finding]:
    """DRF009 where any stored tensor holds NaN or Inf (``bad``, their names), naming them."""
    if not bad:
        return []
    return [
        Finding(
            "DRF009",
            f"{len(bad)} draft tensor(s) hold NaN or Inf",
            [", ".join(bad[:6])],
            "re-export from a healthy training checkpoint",
            location=Location(DRAFT_WEIGHTS, bad[0]),
        )
    ]


def is_finite(t: StoredArray) -> bool:
    """No NaN or Inf in a stored tensor: 16-bit floats by their bits (no decode), others decoded. The finiteness
    :func:`tensor_stat` reports, without the statistics: a measuring command's refusal spent 4.4 s of a fixture
    diagnose on spectral norms it never read."""
    if not t.is_floating_point:
        return True
    if t.dtype in _INF_BITS:
        return _finite_bits(_magnitude_bits(t), t.dtype)
    return bool(np.isfinite(t.values()).all())


def checkpoint_finite(draft: str) -> list[Finding]:
    """DRF009 for a checkpoint directory of any drafter kind, read from the files as stored (every floating
    tensor checked, 16-bit ones by their bits)."""
    from pathlib import Path

    from ...io.hub import load_weights_dir

    tensors = load_weights_dir(Path(draft))
    return nonfinite_findings(nonfinite_names(tensors))


# elements a thread checks at once: numpy's ufuncs let go of the interpreter, so a checkpoint's slices are checked
# side by side (an 8B-shaped EAGLE-3 draft's 1.9 GB took 0.36 s on one thread of an H200 host)
_SLICE = 1 << 25


def nonfinite_names(tensors: dict[str, StoredArray]) -> list[str]:
    """The tensors holding NaN or Inf (:func:`is_finite`), sorted; large 16-bit and numpy-float tensors are checked in
    slices on a pool of threads."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    def sliced(t: StoredArray) -> list[StoredArray]:
        if t.dtype not in _INF_BITS and not (t.is_floating_point and t.raw.dtype.kind == "f"):
            return [t]  # decoded whole (float8 and the like), as is_finite does
        flat = t.raw.reshape(-1)
        return [StoredArray(flat[i : i + _SLICE], t.dtype) for i in range(0, max(flat.size, 1), _SLICE)]

    work = [(k, part) for k, t in sorted(tensors.items()) for part in sliced(t)]
    with ThreadPoolExecutor(min(8, os.cpu_count() or 1)) as pool:
        ok = list(pool.map(lambda kp: is_finite(kp[1]), work))
    return sorted({k for (k, _), fine in zip(work, ok) if not fine})


def refuse_nonfinite(draft: str, target: str | None = None) -> None:
    """A measuring command's refusal of what inspect reports as DRF009, by the same check: a draft tensor holding
    NaN or Inf leaves nothing to measure (a DFlash fc or a P-EAGLE mask_hidden of NaN used to be measured as a draft
    with no skill, and MTP's named nowhere). A head stored inside the target's own checkpoint is the target's load
    to check: its shards are not read twice."""
    from pathlib import Path

    if target is not None and Path(draft).resolve() == Path(target).resolve():
        return
    found = checkpoint_finite(draft)
    if found:
        names = found[0].evidence[0]
        raise BadInput(
            f"draft tensor(s) in {draft} hold NaN or Inf ({names}): nothing can be measured (inspect reports it as DRF009)",
            "re-export the draft from a healthy training checkpoint",
        )


def zero_row_ids(t: StoredArray, limit: int = 64) -> list[int]:
    """The first ``limit`` rows of a matrix that are exactly zero, read from its bits where the dtype is 16-bit."""
    if t.dtype in _INF_BITS:
        mag = t.raw.view(np.uint16) & np.uint16(0x7FFF)
        rows = np.nonzero(mag.max(axis=1) == 0)[0]
    else:
        rows = np.nonzero((t.values() == 0).all(axis=1))[0]
    return [int(r) for r in rows[:limit]]


def inherited_zero_rows(stats: list[TensorStat], tensors: dict[str, StoredArray], target_dir: str | None) -> set[str]:
    """The draft's embedding matrices whose zero rows are zero in the target's own embedding too (a padding row
    copied with the rest): inherited, not an export fault. Read from the target's checkpoint, one row at a time."""
    if target_dir is None:
        return set()
    from pathlib import Path

    from ...io.hub import embedding_row

    out = set()
    for st in stats:
        if st.kind != "matrix" or not st.zero_rows or "embed" not in st.name or st.zero_rows > 64:
            continue
        rows = [embedding_row(Path(target_dir), r) for r in zero_row_ids(tensors[st.name])]
        if rows and all(got is not None and got[0] is not None and not got[0].any() for got in rows):
            out.add(st.name)
    return out


def tensor_findings(
    stats: list[TensorStat], tensors: dict[str, StoredArray], inherited: frozenset[str] | set[str] = frozenset()
) -> list[Finding]:
    """DRF009 (NaN/Inf) and DRF013 (duplicated tensors, zero rows; not the ``inherited`` ones)."""
    out = nonfinite_findings([s.name for s in stats if not s.finite])
    ev = [f"{a} and {b} hold identical values" for a, b in duplicates(stats, tensors)]
    ev += [
        f"{s.name} {s.shape}: {s.zero_rows} row(s) exactly zero"
        for s in stats
        if s.kind == "matrix" and s.zero_rows and s.verdict not in UNTRAINED and s.name not in inherited
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
