"""Bootstrap intervals over prompts: the figures a gate or a user decides on, with their noise.

Every statistic here is a function of per-prompt *counts* summed over prompts (hits and positions
for acc_k, accepted tokens and verify passes for the acceptance length, log-likelihood and token
counts for the fingerprint). Resampling prompts with replacement is then one matrix product: a
[B, n] matrix of multiplicities times the [n, m] per-prompt counts gives B resampled sums, and the
statistic is evaluated on each. Prompts are the unit because tokens within a prompt are not
independent (one hard prompt drags all its positions down together).

Seeded: the same counts and seed give the same interval, bit for bit, on every machine
(numpy's PCG64 is platform-independent). Percentile intervals; with fewer than
``MIN_PROMPTS`` prompts an interval is reported but flagged as unreliable.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

DEFAULT_B = 2000
DEFAULT_SEED = 0
DEFAULT_LEVEL = 0.95
MIN_PROMPTS = 5

Stat = Callable[[np.ndarray], np.ndarray]  # [..., m] summed counts -> [...] statistic


@dataclass(frozen=True)
class Interval:
    point: float
    lo: float
    hi: float
    level: float
    n: int  # prompts resampled
    B: int
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def excludes_zero(self) -> bool:
        return self.lo > 0 or self.hi < 0

    def negated(self) -> Interval:
        """The same resamples, negated: b - a from a paired a - b."""
        return dataclasses.replace(self, point=-self.point, lo=-self.hi, hi=-self.lo)

    def text(self, nd: int = 3) -> str:
        if not math.isfinite(self.point):
            return "n/a"
        return f"{self.point:.{nd}f} [{self.lo:.{nd}f}, {self.hi:.{nd}f}]"


@functools.lru_cache(maxsize=8)
def weights(n: int, B: int = DEFAULT_B, seed: int = DEFAULT_SEED) -> np.ndarray:
    """[B, n] multiplicities: row b says how often each prompt appears in bootstrap sample b. Read-only and kept:
    a diagnose draws the same prompts' weights for every path, lever and ablation (19 draws of one matrix)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    idx = rng.integers(0, n, size=(B, n))
    # counted per row in one pass: the same integers np.add.at gave, at a tenth of its time
    w = np.bincount((np.arange(B)[:, None] * n + idx).ravel(), minlength=B * n).reshape(B, n).astype(np.float64)
    w.flags.writeable = False
    return w


def _interval(point: float, samples: np.ndarray, level: float, n: int, B: int, seed: int) -> Interval:
    s = samples[np.isfinite(samples)]
    if s.size == 0 or not np.isfinite(point):
        return Interval(float(point), float("nan"), float("nan"), level, n, B, seed)
    a = (1 - level) / 2
    lo, hi = np.quantile(s, [a, 1 - a])
    return Interval(float(point), float(lo), float(hi), level, n, B, seed)


def bootstrap(
    counts: np.ndarray,
    stat: Stat,
    *,
    B: int = DEFAULT_B,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
    w: np.ndarray | None = None,
) -> Interval:
    """counts [n, m] per prompt; stat maps summed counts [..., m] to the statistic."""
    c = np.asarray(counts, dtype=np.float64)
    n = c.shape[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        point = float(stat(c.sum(axis=0)))
    if n == 0:
        return Interval(point, float("nan"), float("nan"), level, 0, B, seed)
    w = weights(n, B, seed) if w is None else w
    with np.errstate(divide="ignore", invalid="ignore"):
        samples = stat(w @ c)
    return _interval(point, samples, level, n, B, seed)


def paired(
    counts: Sequence[np.ndarray],
    stat: Stat,
    ref: int,
    *,
    B: int = DEFAULT_B,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
) -> tuple[list[Interval], list[Interval]]:
    """Intervals for several statistics measured on the SAME prompts, and for each one's difference to ``ref``.

    The same resampled prompts are used for every candidate, so the shared per-prompt difficulty
    cancels in the differences: a paired interval is far narrower than two separate ones.
    Returns (each candidate's interval, interval of candidate - counts[ref]).
    """
    cs = [np.asarray(c, dtype=np.float64) for c in counts]
    n = cs[0].shape[0]
    if any(c.shape[0] != n for c in cs):
        raise ValueError("paired intervals need the same prompts for every candidate")
    w = weights(n, B, seed) if n else np.zeros((B, 0))
    with np.errstate(divide="ignore", invalid="ignore"):
        samples = [stat(w @ c) for c in cs]
        points = [float(stat(c.sum(axis=0))) for c in cs]
    own = [_interval(p, s, level, n, B, seed) for p, s in zip(points, samples)]
    diff = [_interval(p - points[ref], s - samples[ref], level, n, B, seed) for p, s in zip(points, samples)]
    return own, diff


def ratio(num: int = 0, den: int = 1) -> Stat:
    """sum(num column) / sum(den column)."""
    return lambda s: s[..., num] / s[..., den]


# --------------------------------------------------------------------------- acceptance figures


def mean_acceptance_length(s: np.ndarray) -> np.ndarray:
    """From summed :func:`acceptance_counts` rows: 1 + accepted / passes (vLLM's mean acceptance length,
    SGLang's accept length: the bonus token included)."""
    return 1.0 + s[..., 1] / s[..., 0]


def paired_mean_lengths(walked: Mapping[str, Sequence[Sequence[int]]]) -> tuple[dict[str, Interval], Interval | None]:
    """Each path's mean acceptance length over prompts (``walked``: per path, per prompt, the tokens each verify pass
    accepted), and the second path's minus the first's (served - trained), paired over the same prompts; the depth
    each path drafts does not enter (the statistic reads the passes and the accepted tokens alone)."""
    names = list(walked)
    own, diff = paired([acceptance_counts(walked[n], None, None, 0) for n in names], mean_acceptance_length, 0)
    return dict(zip(names, own)), (diff[1] if len(names) > 1 else None)


def acceptance_counts(
    accepted_lengths: Sequence[Sequence[int]],
    hits: Sequence[Sequence[int]] | None,
    totals: Sequence[Sequence[int]] | None,
    num_steps: int,
) -> np.ndarray:
    """Per prompt: [passes, accepted, #(A>=1..K), acc_k hits (K), acc_k positions (K)] -> [n, 2 + 3K]."""
    K = num_steps
    rows = []
    for i, acc in enumerate(accepted_lengths):
        a = np.asarray(acc if acc is not None else [], dtype=np.int64)
        ge = [(a >= k).sum() for k in range(1, K + 1)]
        h = list(hits[i]) if hits is not None else [0] * K
        t = list(totals[i]) if totals is not None else [0] * K
        rows.append([a.size, a.sum(), *ge, *h, *t])
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), 2 + 3 * K)


def _tau(acc: np.ndarray) -> np.ndarray:
    return 1.0 + np.cumprod(np.nan_to_num(acc), axis=-1).sum(axis=-1)


@dataclass
class AcceptanceIntervals:
    """Intervals over prompts for one path's acceptance figures (one shared resample for all of them)."""

    method: str
    reliable: bool  # at least MIN_PROMPTS prompts
    mean_acceptance_length: Interval
    per_position_rate: list[Interval]
    acc_k: list[Interval]
    tau: Interval

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "reliable": self.reliable,
            "mean_acceptance_length": self.mean_acceptance_length.to_dict(),
            "per_position_rate": [i.to_dict() for i in self.per_position_rate],
            "acc_k": [i.to_dict() for i in self.acc_k],
            "tau": self.tau.to_dict(),
        }

    def lines(self) -> list[str]:
        """As text lines (terminal, Markdown report, gate summary)."""
        n = self.mean_acceptance_length.n
        return [
            f"95% intervals over {n} prompts ({self.method}"
            + ("" if self.reliable else f"; fewer than {MIN_PROMPTS} prompts: too few to trust")
            + ")",
            f"mean acceptance length {self.mean_acceptance_length.text()}; tau {self.tau.text()}",
            "per-position rate (vLLM): " + ", ".join(i.text() for i in self.per_position_rate),
            "acc_k (SpecForge): " + ", ".join(i.text() for i in self.acc_k),
        ]


def acceptance_intervals(
    counts: np.ndarray, num_steps: int, *, B: int = DEFAULT_B, seed: int = DEFAULT_SEED, level: float = DEFAULT_LEVEL
) -> AcceptanceIntervals:
    """Intervals over prompts for mean acceptance length, per-position rates, acc_k and tau (one shared resample)."""
    K = num_steps
    c = np.asarray(counts, dtype=np.float64)
    n = c.shape[0]
    w = weights(n, B, seed) if n else None

    def iv(stat: Stat) -> Interval:
        return bootstrap(c, stat, B=B, seed=seed, level=level, w=w)

    hits = slice(2 + K, 2 + 2 * K)
    tots = slice(2 + 2 * K, 2 + 3 * K)
    return AcceptanceIntervals(
        method=f"percentile bootstrap over {n} prompts, B={B}, seed={seed}, level={level}",
        reliable=n >= MIN_PROMPTS,
        mean_acceptance_length=iv(mean_acceptance_length),
        per_position_rate=[iv(ratio(2 + k, 0)) for k in range(K)],
        acc_k=[iv(ratio(2 + K + k, 2 + 2 * K + k)) for k in range(K)],
        tau=iv(lambda s: _tau(s[..., hits] / s[..., tots])),
    )


def difference_interval(
    cur: np.ndarray,
    base: np.ndarray,
    stat: Stat,
    *,
    B: int = DEFAULT_B,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
    independent: bool = False,
) -> tuple[Interval, str]:
    """Interval of stat(cur) - stat(base): paired over prompts when both ran the same number of prompts
    (the gate replays the same prompt file), otherwise two independent resamples. ``independent``: two
    different prompt sets, never paired even where their counts happen to agree."""
    cur, base = np.asarray(cur, dtype=np.float64), np.asarray(base, dtype=np.float64)
    if cur.shape[0] == base.shape[0] and cur.shape[0] > 0 and not independent:
        _, diff = paired([base, cur], stat, ref=0, B=B, seed=seed, level=level)
        return diff[1], "paired over prompts"
    wc, wb = weights(cur.shape[0], B, seed), weights(base.shape[0], B, seed + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = stat(wc @ cur) - stat(wb @ base)
    point = float(stat(cur.sum(0)) - stat(base.sum(0)))
    why = "independent resamples of the two prompt sets" if independent else "independent resamples (prompt counts differ)"
    return _interval(point, s, level, cur.shape[0], B, seed), why


def chi2_sf(x: float, dof: int) -> float:
    """P(X >= x) for X chi-square with ``dof`` (integer) degrees of freedom, in closed form (no scipy):
    even dof: exp(-x/2) sum_{i < dof/2} (x/2)^i / i!; odd: 2 P(N > sqrt(x)) plus the matching series."""
    if dof <= 0:
        return float("nan")
    if x <= 0:
        return 1.0
    if dof % 2 == 0:
        term, total = 1.0, 1.0
        for i in range(1, dof // 2):
            term *= (x / 2) / i
            total += term
        return min(1.0, math.exp(-x / 2) * total)
    s = math.sqrt(x)
    out = math.erfc(s / math.sqrt(2))
    term = math.sqrt(2 * x / math.pi) * math.exp(-x / 2)  # the i = 1 term: x^(1/2) phi-scaled
    for i in range(1, (dof + 1) // 2):
        out += term
        term *= x / (2 * i + 1)
    return min(1.0, out)
