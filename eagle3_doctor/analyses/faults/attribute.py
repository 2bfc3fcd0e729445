"""Which candidate explains the live per-position profile: the fit of each prediction, the ranking, the verdict.

The fit is a chi-square over the draft positions on the *conditional* rates (passes accepting position k among
those that reached it): for a histogram of accepted lengths they are the sequential factors of one multinomial,
so their differences are asymptotically independent and their squared z-scores add up to a chi-square with one
degree of freedom per position both sides reach. Each z-score is a two-proportion test of the live passes against
the simulated ones at the pooled rate (half a pass added, so a rate of 0 or 1 keeps a spread). The predictions
are made on the user's prompts and the comparison assumes the server ran those prompts with those settings, as
``server_metrics/prediction.py`` does; each prediction's interval over prompts is reported beside its fit. Where
the server gives only a mean acceptance length (SGLang's counters), that mean is the one figure, against the
prediction's interval over prompts.

A candidate fits where its chi-square is not rejected at ALPHA. The best is named where it fits and the next
distinct prediction lies DECISIVE above it; else the verdict is undetermined (two fit alike) or none (nothing
fits), naming the position where the two closest predictions differ most and the live verify passes that would
tell them apart there.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ...core.stats import Interval, acceptance_counts, acceptance_intervals, chi2_sf

if TYPE_CHECKING:
    from ..server_metrics.measured import Measured
    from .classes import FaultClass


ALPHA = 0.05  # a prediction the live counts reject at this level does not explain them
Z = 1.96
# the chi-square by which the next distinct prediction must lie above the best for the best to be named: the 95%
# point of one degree of freedom, a likelihood ratio of exp(3.84 / 2) ~ 6.8 to 1 in the best's favour
DECISIVE = 3.84


@dataclass
class Candidate:
    """One prediction of the live profile: as trained, as modelled for the engine release, or a fault class."""

    name: str  # "as trained", "as modelled", or the fault class's name
    label: str  # what it is, in words
    accepted: list[list[int]]  # per prompt, draft tokens accepted in each pass
    fault: FaultClass | None = None
    same_as: str | None = None  # the candidate whose passes these are, pass for pass
    # temperature > 0: per prompt, per pass, the probability each position is accepted (sampled.py); the counts are
    # then these expectations summed, not the draws in ``accepted``
    reach: list[list[list[float]]] | None = None
    # a prediction that is an expectation over pass lists: per prompt, each list's counts at its weight (the weights
    # sum to 1); ``accepted`` is then the list the candidate is named for, its counts not read
    mixture: list[tuple[float, list[list[int]]]] | None = None


@dataclass
class Fit:
    candidate: Candidate
    mean: Interval  # predicted mean acceptance length
    rates: list[Interval]  # predicted unconditional per-position rates
    chi2: float
    dof: int
    p: float
    worst: int | None  # the position (1-based) contributing most to chi2
    applies: bool = True  # False: the window class where no position is dead
    useful: int | None = None  # the window class: the deepest position still reached
    # a joint fit over live profiles at several batch sizes: each profile's own fit, by batch size; chi2 and dof are
    # their sums, mean and rates the first profile's
    parts: list[tuple[int, Fit]] | None = None

    @property
    def fits(self) -> bool:
        return self.applies and self.dof > 0 and self.p >= ALPHA

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.candidate.name,
            "label": self.candidate.label,
            "same_as": self.candidate.same_as,
            "mean_acceptance_length": self.mean.to_dict(),
            "per_position_rate": [r.to_dict() for r in self.rates],
            "chi2": self.chi2,
            "dof": self.dof,
            "p": self.p,
            "fits": self.fits,
            "worst_position": self.worst,
            "applies": self.applies,
            "useful_depth": self.useful,
            **({"per_batch": [{"batch_size": b, **f.to_dict()} for b, f in self.parts]} if self.parts is not None else {}),
        }


@dataclass
class Ranking:
    fits: list[Fit]  # best first
    num_steps: int
    verdict: str  # the winning candidate's name, "undetermined" (two fit alike) or "none" (nothing fits)
    separating: dict[str, Any] | None = None  # where the two closest differ most
    notes: list[str] = field(default_factory=list)
    batches: list[int] | None = None  # a joint ranking: the batch sizes of the live profiles, in their order

    def to_dict(self) -> dict[str, Any]:
        return {
            **({"batch_sizes": self.batches} if self.batches is not None else {}),
            "num_steps": self.num_steps,
            "verdict": self.verdict,
            "ranking": [f.to_dict() for f in self.fits],
            "separating": self.separating,
            "notes": self.notes,
        }


def _counts(cand: Candidate, K: int) -> np.ndarray:
    if cand.mixture is not None:
        return np.sum([w * acceptance_counts(acc, None, None, K) for w, acc in cand.mixture], axis=0)
    if cand.reach is None:
        return acceptance_counts(cand.accepted, None, None, K)
    rows = []
    for passes in cand.reach:  # expected passes reaching each position: the sum of its probabilities
        r = np.asarray(passes, dtype=np.float64).reshape(-1, K)
        rows.append([r.shape[0], r.sum(), *r.sum(axis=0), *([0.0] * 2 * K)])
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), 2 + 3 * K)


def _live_per_position(m: Measured, K: int) -> list[float] | None:
    """Passes reaching each position, live: the counts behind the server's unconditional rates."""
    if m.per_position_rate is None or len(m.per_position_rate) > K:
        return None
    # a histogram (SGLang's) ends at the deepest accepted length seen: the positions past it were reached by none
    return [float(round(r * m.passes)) for r in m.per_position_rate] + [0.0] * (K - len(m.per_position_rate))


def fit(cand: Candidate, m: Measured, K: int) -> Fit:
    """One candidate's chi-square against the live counts."""
    c = _counts(cand, K)
    ivs = acceptance_intervals(c, K)
    tot = c.sum(axis=0)
    ge_pred = [float(tot[0])] + [float(x) for x in tot[2 : 2 + K]]  # passes, then reaching 1..K
    live = _live_per_position(m, K)
    terms: list[float] = []
    where: list[int] = []
    if live is not None:
        ge_live = [float(m.passes), *live]
        for k in range(K):
            r, x, n, y = ge_live[k], ge_live[k + 1], ge_pred[k], ge_pred[k + 1]
            if r <= 0 or n <= 0:
                continue
            pooled = (x + y + 0.5) / (r + n + 1.0)
            var_live = pooled * (1 - pooled) / r
            var_pred = pooled * (1 - pooled) / n
            terms.append((x / r - y / n) ** 2 / (var_live + var_pred))
            where.append(k + 1)
    else:  # a mean acceptance length alone: one figure
        sd_pred = (ivs.mean_acceptance_length.hi - ivs.mean_acceptance_length.lo) / (2 * Z)
        ci = m.mean_acceptance_length_ci
        sd_live = (ci[1] - ci[0]) / (2 * Z) if ci is not None else 0.0
        var = sd_pred**2 + sd_live**2
        if var > 0:
            terms.append((m.mean_acceptance_length - ivs.mean_acceptance_length.point) ** 2 / var)
            where.append(0)
    chi2 = float(sum(terms))
    worst = where[int(np.argmax(terms))] if terms else None
    return Fit(cand, ivs.mean_acceptance_length, ivs.per_position_rate, chi2, len(terms), chi2_sf(chi2, len(terms)), worst)


def _group(f: Fit) -> str:
    return f.candidate.same_as or f.candidate.name


def rank(cands: list[Candidate], m: Measured, K: int) -> Ranking:
    """Every candidate's fit, best first, and the verdict: the best prediction where it fits and the next distinct
    one lies DECISIVE above it in chi-square, else undetermined between the two."""
    return decide([fit(c, m, K) for c in cands], K, lambda a, b: separating(a, b, m))


def decide(fits: list[Fit], K: int, sep: Callable[[Fit, Fit], dict[str, Any]]) -> Ranking:
    """The ranking of ``fits`` (one a candidate) and its verdict; ``sep``: where two predictions differ most."""
    from ..judgment import depth_finding

    notes = []
    for f in fits:  # the window class explains a profile only where the modelled passes have a dead tail
        if f.candidate.fault is not None and f.candidate.fault.window:
            # a tail the modelled passes leave unreached, decided (HLT004) or on too few passes to bound (HLT005):
            # the class is then a candidate, and the chi-square against the server's counts ranks it
            dead = depth_finding(f.candidate.accepted, K, "K")
            f.applies = dead is not None
            f.useful = dead.data["useful"] if dead is not None else None
            if dead is not None:
                f.candidate.same_as = None  # the modelled prediction, named for its tail
    fits.sort(key=lambda f: (not f.applies, f.chi2 if f.dof else math.inf, f.candidate.name))
    same = [f"{f.candidate.name} = {f.candidate.same_as}" for f in fits if f.candidate.same_as]
    if same:
        notes.append("the same passes, pass for pass, on these prompts (one prediction): " + "; ".join(same))
    pair = _two_closest([f for f in fits if f.applies])
    best = pair[0] if pair else None
    if best is None or not best.fits:
        return Ranking(fits, K, "none", sep(pair[0], pair[1]) if len(pair) == 2 else None, notes)
    if best.candidate.fault is None or best.candidate.fault.window:
        # running fault-free is the default: a fault is named only where it explains the counts decisively better
        return Ranking(fits, K, _named(best, fits), None, notes)
    if len(pair) == 1 or pair[1].chi2 - best.chi2 >= DECISIVE:
        return Ranking(fits, K, _group(best), None, notes)
    return Ranking(fits, K, "undetermined", sep(pair[0], pair[1]), notes)


def _named(best: Fit, fits: list[Fit]) -> str:
    """The fault-free prediction's name, or the window class's where that one applies to the same passes."""
    window = [f for f in fits if f.applies and f.candidate.fault is not None and f.candidate.fault.window]
    if window and window[0].candidate.accepted is best.candidate.accepted:
        return window[0].candidate.name
    return _group(best)


def not_excluded(r: Ranking) -> list[Fit]:
    """Fault classes whose chi-square lies within DECISIVE of the named prediction's: the counts cannot exclude them."""
    named = next((f for f in r.fits if f.candidate.name == r.verdict), None)
    if named is None:
        return []
    return [
        f for f in r.fits
        if f.applies and f.candidate.fault is not None and not f.candidate.fault.window
        and _key(f) != _key(named) and f.chi2 - named.chi2 < DECISIVE
    ]  # fmt: skip


def _two_closest(fits: list[Fit]) -> list[Fit]:
    """The two best predictions that differ (a prediction under several names counts once; the window class is the
    modelled prediction itself)."""
    out: list[Fit] = []
    for f in fits:
        if all(_key(f) != _key(g) for g in out):
            out.append(f)
        if len(out) == 2:
            break
    return out


def _key(f: Fit) -> int:
    """One prediction, whatever its names: candidates with the same passes share one list (run.candidates)."""
    return id(f.candidate.accepted)


def separating(a: Fit, b: Fit, m: Measured) -> dict[str, Any]:
    """The position where predictions a and b differ most for their spreads, and the live verify passes that
    resolve that difference (a live 95% interval half as wide as the gap)."""
    best, _ = widest(a, b)
    ra, rb = a.rates[best], b.rates[best]
    gap = abs(ra.point - rb.point)
    p = (ra.point + rb.point) / 2
    need = math.ceil((2 * Z) ** 2 * p * (1 - p) / gap**2) if gap > 0 else None
    apart = ra.hi < rb.lo or rb.hi < ra.lo
    return {
        "a": a.candidate.name,
        "b": b.candidate.name,
        "position": best + 1,
        "a_rate": ra.to_dict(),
        "b_rate": rb.to_dict(),
        "passes_needed": need,
        "passes_measured": m.passes,
        "predictions_apart": apart,
        "per_position_available": m.per_position_rate is not None,
    }


def widest(a: Fit, b: Fit) -> tuple[int, float]:
    """The position (0-based) where predictions a and b differ most for their spreads, and that difference."""
    best, score = 0, -1.0
    for k, (ra, rb) in enumerate(zip(a.rates, b.rates)):
        spread = max((ra.hi - ra.lo) + (rb.hi - rb.lo), 1e-9)
        s = abs(ra.point - rb.point) / spread
        if s > score:
            best, score = k, s
    return best, score
