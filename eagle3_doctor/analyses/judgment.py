"""The judgment every measuring command and every drafter kind ends in: absolute health against a stated
reference, and the size rule that decides whether a measured difference explains what is missing.

Rules, stated once (docs/diagnose.md, "How a verdict is decided", prints them):

- **No skill.** A verify pass always yields one token, the target's own, so a draft that proposes nothing the target
  takes has a mean acceptance length of 1.0. A draft whose interval over prompts stays under 1.0 + ``USEFUL`` on
  every path measured has no useful skill (speculation with it costs more than it saves): that is the checkpoint's
  problem whatever its serving and training paths agree on (HLT001). A figure that is NaN counts as none.
- **Size and interval together.** A lever (a serving difference set back, a wiring the weights fit, a tap or way
  run as trained) decides only when its recovery's interval clears 0 *and* its point recovers at least
  ``practical(missing)``: ``PRACTICAL_TOKENS`` tokens per pass, or ``PRACTICAL_SHARE`` of what is missing where
  that is more. A smaller recovery whose interval clears 0 is a lead, printed with its share, never the verdict.
- **A measured serving cost** (a parallel drafter's served path against its trained one, DFL004 and PEA004) is
  an error only where setting it back decides by that same rule, a warning where it leans (practical size, interval
  reaching 0), and a lead (info) where its interval clears 0 under the practical size: the same rule ACC001 follows
  for EAGLE-3's features, whichever kind prints it.
- **Healthy is a positive finding** (HLT002), given only where the draft has skill as served, nothing the run
  measured accepts practically more, and no other finding is a warning or an error; its evidence names each
  reference used and what the command did not look at.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.findings import Finding
from ..core.stats import Interval

NO_SKILL = 1.0  # tokens per verify pass of a draft that proposes nothing the target takes: the bonus token alone
USEFUL = 0.2  # draft tokens accepted per pass under which a draft has no useful skill
PRACTICAL_TOKENS = 0.1  # the least recovery (tokens per pass) a lever must point at to decide
PRACTICAL_SHARE = 0.1  # ... or this share of what is missing, where that is more


def no_skill(mal: Interval) -> bool:
    """The whole interval of a mean acceptance length under the no-skill band (NaN: nothing accepted)."""
    return not mal.hi >= NO_SKILL + USEFUL


def practical(missing: float) -> float:
    """The recovery a lever must point at to decide, given the tokens per pass that are ``missing``."""
    return max(PRACTICAL_TOKENS, PRACTICAL_SHARE * max(missing, 0.0))


def decides(recovery: Interval, missing: float) -> bool:
    """A recovery of practical size whose interval clears 0."""
    return recovery.lo > 0 and recovery.point >= practical(missing)


def leans(recovery: Interval, missing: float) -> bool:
    """A recovery of practical size whose interval reaches 0: more prompts would decide it either way."""
    return recovery.point >= practical(missing) and recovery.lo <= 0


def missing(served: Interval, sides: Mapping[str, Interval]) -> float:
    """Tokens per pass between the served figure and the best path measured beside it (0 where none is better)."""
    best = max((iv.point for iv in sides.values() if iv.point == iv.point), default=served.point)
    return max(0.0, best - served.point) if served.point == served.point else max(0.0, best - NO_SKILL)


def cost_severity(diff: Interval) -> tuple[str, str] | None:
    """(severity, why) of a measured serving cost ``diff`` (served - trained, paired over prompts): "error" where
    setting it back decides (its interval clears 0 and its point is of practical size), "warning" where it leans,
    "info" where it clears 0 under the practical size (a lead), None where it is neither."""
    back = diff.negated()
    gone = max(back.point, 0.0)
    size = f"{practical(gone):.2f} tokens per pass"
    if decides(back, gone):
        return "error", f"setting it back recovers at least the practical {size}, its interval clear of 0"
    if leans(back, gone):
        return "warning", f"of practical size ({size} or more) but its interval reaches 0: more prompts decide it"
    if back.lo > 0:
        return "info", f"its interval clears 0 but it is under the practical {size}: a lead, not the verdict"
    return None


def share_text(recovery: Interval, gone: float) -> str:
    """What a recovery explains of what is missing, and the residual."""
    if gone <= 0:
        return "where nothing measured is missing"
    pct = 100.0 * recovery.point / gone
    return f"{pct:.0f}% of the {gone:.2f} missing, residual {gone - recovery.point:+.2f}"


DEAD = 0.01  # the share of verify passes (upper bound) under which a drafted position accepts nothing


def wilson_upper(hits: float, n: float, z: float = 1.96) -> float:
    """The Wilson score upper bound of a proportion, ``hits`` of ``n``: what a count of zero still allows (about
    3.84 / n), which a bootstrap over prompts, resampling those zeros, cannot say."""
    if n <= 0:
        return 1.0
    p = hits / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return min(1.0, (centre + spread) / (1 + z * z / n))


def depth_finding(accepted: Sequence[Sequence[int]], K: int, setting: str) -> Finding | None:
    """HLT004 where the last two or more of the K positions drafted a pass are reached by under DEAD of the
    passes, on ``accepted`` (per prompt, draft tokens accepted in each pass). A position's upper bound is the larger
    of its bootstrap interval over prompts and the Wilson bound over all passes pooled: a position no pass reached
    has a bootstrap interval of [0, 0] on any run, so only enough passes (381 at zero) make "reached by under 1%"
    a measurement rather than a small sample's silence."""
    from ..core.stats import MIN_PROMPTS, acceptance_counts, acceptance_intervals

    if K < 3 or len(accepted) < MIN_PROMPTS:
        return None
    counts = acceptance_counts(accepted, None, None, K)
    rates = acceptance_intervals(counts, K).per_position_rate
    total = counts.sum(axis=0)
    upper = [max(r.hi, wilson_upper(float(total[2 + k]), float(total[0]))) for k, r in enumerate(rates)]
    useful = max((k + 1 for k, u in enumerate(upper) if not u < DEAD), default=0)
    seen = max((k + 1 for k, r in enumerate(rates) if not r.point < DEAD), default=0)
    if seen == 0:  # nothing accepted anywhere is HLT001's
        return None
    if K - useful < 2:
        return _depth_undecided(rates, upper, seen, K, int(total[0])) if K - seen >= 2 else None
    return Finding(
        "HLT004",
        f"positions {useful + 1}-{K} of the {K} drafted a pass are reached by at most {max(upper[useful:]):.3f} "
        "of verify passes: drafted for no acceptance",
        [
            "per-position rate (passes reaching position k), 95% intervals over prompts: "
            + ", ".join(f"{k + 1}: {r.text()}" for k, r in enumerate(rates)),
            f"a position whose upper bound is under {DEAD} accepts nothing: drafting it costs a draft forward and a "
            f"verify token a pass; the bound is the larger of the interval over prompts and the Wilson bound over the "
            f"{int(total[0])} passes pooled (a count of zero bounds the rate only through the number of passes)",
        ],
        f"draft {useful} tokens a pass ({setting} {useful}); eagle3-doctor speedup measures which setting is fastest "
        "on your hardware",
        data={"useful": useful, "drafted": K},
    )


def passes_to_bound(rate: float, cap: int = 1_000_000) -> int | None:
    """The fewest passes at which a position reached at ``rate`` has a Wilson upper bound under DEAD (None: more than
    ``cap``, or never: the rate itself is DEAD or more)."""
    if rate >= DEAD:
        return None
    lo, hi = 1, 1
    while wilson_upper(rate * hi, hi) >= DEAD:
        if hi > cap:
            return None
        lo, hi = hi, hi * 2
    while lo < hi:  # the bound falls as passes grow at a fixed rate: bisect the first n under DEAD
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if wilson_upper(rate * mid, mid) >= DEAD else (lo, mid)
    return lo


def _depth_undecided(rates: Sequence[Interval], upper: Sequence[float], seen: int, K: int, passes: int) -> Finding:
    """HLT005: the last positions look unreached on this run (each rate under DEAD) but their bounds reach DEAD."""
    needs = [passes_to_bound(r.point) for r, u in zip(rates[seen:], upper[seen:]) if not u < DEAD]
    need = None if any(n is None for n in needs) else max([n for n in needs if n is not None] or [passes])
    more = f"about {need:,} verify passes at these rates" if need is not None else "far more verify passes"
    return Finding(
        "HLT005",
        f"undetermined: positions {seen + 1}-{K} of the {K} drafted a pass are reached by under {DEAD} of these "
        f"{passes} verify passes, too few to tell whether they accept anything",
        [
            "per-position rate (passes reaching position k) and its upper bound: "
            + ", ".join(f"{k + 1}: {r.point:.3f} (<= {u:.3f})" for k, (r, u) in enumerate(zip(rates, upper))),
            f"a position is decided dead where its upper bound, the larger of the interval over prompts and the Wilson "
            f"bound over the passes pooled, is under {DEAD} (with none reaching it, from {passes_to_bound(0.0)} passes)",
        ],
        f"rerun on more prompts or longer continuations ({more}) to decide whether drafting {K} a pass spends draft "
        "and verify work for nothing",
        data={"useful": seen, "drafted": K, "passes": passes, "decided": False},
    )


# the verdict's opening words per branch, the same for every command and drafter kind that prints one
BRANCHES = {
    "pipeline": "the gap lives in the pipeline: how the engine feeds or runs the draft",
    "checkpoint": "the problem lives in the checkpoint: the weights as saved",
    "context": "acceptance falls along the context: the prompts run past what the draft was trained on",
    "data": "the gap lives in the data: the prompts are not what the draft was trained on",
    "runtime": "healthy offline: as the engine feeds and runs it, the draft accepts as trained",
    "undetermined": "undetermined by these measurements",
}


def verdict_line(branch: str, detail: str) -> str:
    """The one-line verdict: the branch's words, then what decided it."""
    return f"{BRANCHES[branch]} ({detail})"


# the findings that state the runtime and undetermined branches: superseded, with them, by a launch's error
SUPERSEDED = ("DGN004", "DGN005", "HLT002", "HLT003")


def with_launch(branch: str, verdict: str, launch: Sequence[Finding]) -> tuple[str, str]:
    """A diagnosis judged on the measurements, amended by the launch command's own findings (read before anything is
    measured, joined to the report at its end): an error there (a server that refuses to start, or that never runs
    the draft as measured) is the verdict wherever the measurements found the draft healthy offline or could not
    decide; a verdict the measurements decided stands, with the launch's error beside it."""
    err = next((f for f in launch if f.severity == "error"), None)
    if err is None or branch not in ("runtime", "undetermined"):
        return branch, verdict
    return "pipeline", verdict_line("pipeline", f"{err.code}: {err.title}")


def branch_of(verdict: str) -> str:
    """The branch a verdict line opens with (BRANCHES), or "" where it opens with none."""
    return next((b for b, words in BRANCHES.items() if verdict.startswith(words)), "")


def lever_branch(
    served: Interval, lever: Interval | None, sides: Mapping[str, Interval], found: Sequence[Finding]
) -> tuple[str, Finding | None]:
    """The branch of a drafter whose diagnosis has one lever (the served way set back to the trained one), ``lever``
    its gain over served, paired, and the finding that decided it where a finding did: checkpoint where the draft
    has no skill on any path (HLT001 among ``found``), then pipeline where the lever decides by size and interval,
    undetermined where it leans; an error or a warning among ``found`` is never healthy (its branch by FINDING_BRANCH);
    else runtime."""
    hlt = next((f for f in found if f.code == "HLT001"), None)
    if hlt is not None and no_skill(served):
        return ("checkpoint" if all(no_skill(iv) for iv in sides.values()) else "pipeline"), hlt
    gone = missing(served, sides)
    if lever is not None and decides(lever, gone):
        return "pipeline", None
    if lever is not None and leans(lever, gone):
        return "undetermined", None
    err = blocking(found)
    if err is None:
        return "runtime", None
    return FINDING_BRANCH.get(err.code, FINDING_BRANCH.get(err.code.rstrip("0123456789"), "pipeline")), err


def lever_verdict(
    served: Interval,
    lever: Interval | None,
    sides: Mapping[str, Interval],
    found: Sequence[Finding],
    *,
    decided: str,
    leaning: str,
    as_trained: str,
) -> str:
    """The verdict line of a one-lever drafter (DFlash's taps, P-EAGLE's way), by :func:`lever_branch`: the finding
    that decided it, else the kind's own words for a deciding lever (``decided``), a leaning one (``leaning``), or
    none (``as_trained``: served as trained), each followed by what the draft accepts as served."""
    branch, decided_by = lever_branch(served, lever, sides, found)
    if decided_by is not None:
        return verdict_line(branch, f"{decided_by.code}: {decided_by.title}")
    if lever is not None and branch in ("pipeline", "undetermined"):
        return verdict_line(branch, decided if branch == "pipeline" else leaning)
    why = as_trained if lever is None else f"setting it back gains {lever.text()}, under the practical size"
    return verdict_line(branch, f"{why}; the draft accepts {served.text()} tokens per pass as served")


# the branch a finding puts a verdict in where no measurement decides: the files are the checkpoint's, and so is a
# layout only retraining changes; every other family names how the engine feeds, runs or loads the draft
FINDING_BRANCH = {"DRF": "checkpoint", "QNT": "checkpoint", "HLT": "checkpoint", "PEA005": "checkpoint"}


def blocking(found: Sequence[Finding]) -> Finding | None:
    """The first error among a run's findings, else the first warning: a verdict beside either is never "healthy"."""
    for level in ("error", "warning"):
        f = next((f for f in found if f.severity == level and not f.code.startswith("HLT")), None)
        if f is not None:
            return f
    return None


def settle(found: Sequence[Finding]) -> list[Finding]:
    """A run's findings with its health verdict (HLT002 healthy, HLT003 undecided) withdrawn where an error or a
    warning stands beside it, whichever came later (the acceptance gate's ACC003 joins after the judgment):
    health()'s own rule, applied once more at the end of every command, so no report says "nothing to fix" beside a
    failed gate, nor "no finding decides it" beside the finding that does."""
    return list(found) if blocking(found) is None else [f for f in found if f.code not in ("HLT002", "HLT003")]


@dataclass(frozen=True)
class _Judged:
    """What one health judgment reads: the kind, the served figure and every other path beside it."""

    drafter: Any  # the draft model: its kind and checkpoint_hint (eagle3_doctor/draft/drafter.py)
    served_name: str
    served: Interval
    others: Mapping[str, Interval]

    @property
    def figures(self) -> str:
        return "mean acceptance length: " + "; ".join(
            [f"{self.served_name} {self.served.text(2)}"] + [f"{n} {iv.text(2)}" for n, iv in self.others.items()]
        )

    @property
    def best(self) -> str:
        return max(self.others, key=lambda n: self.others[n].point)


BASELINE = (
    f"the no-skill baseline is {NO_SKILL:.2f} tokens per verify pass (the target's own token alone); a draft "
    f"under {NO_SKILL + USEFUL:.2f} on every path costs more than it saves"
)


def health(
    drafter: Any,
    served: Interval,
    sides: Mapping[str, Interval],
    found: Sequence[Finding],
    *,
    served_name: str = "as served",
    references: Sequence[str] = (),
    unseen: Sequence[str] = (),
    alone: str = "serving and training are the same path here",
) -> list[Finding]:
    """HLT001, HLT002 or HLT003 for the draft model ``drafter`` (or its class) accepting ``served`` (mean acceptance length as the engine
    runs it), beside every other path the run measured (``sides``, name -> interval), after the run's own findings
    ``found``; nothing where another finding already says what is wrong. ``references``: what else the run judged
    the draft against (the weights' own fit, module health), a line each; ``unseen``: the references it did not
    look at, named in the healthy verdict so a reader can tell a judged draft from an unexamined one."""
    j = _Judged(drafter, served_name, served, {n: iv for n, iv in sides.items() if n != served_name})
    if no_skill(served) and all(no_skill(iv) for iv in j.others.values()):
        return [_no_skill_finding(j)]
    if no_skill(served):  # another path has skill: the serving difference costs all of it
        return [] if any(f.severity == "error" for f in found) else [_no_skill_as_served(j)]
    if any(f.severity in ("error", "warning") for f in found):
        return []
    gone = missing(served, j.others)
    if gone >= practical(0.0):  # a path beside it accepts practically more, and no finding of the run says why
        return [_undecided_finding(j, gone)]
    return [_healthy_finding(j, references, unseen, alone)]


def _no_skill_as_served(j: _Judged) -> Finding:
    return Finding(
        "HLT001",
        f"the draft has no skill as served: {j.served.text(2)} tokens per verify pass, where {j.best} accepts "
        f"{j.others[j.best].text(2)}",
        [j.figures, BASELINE],
        f"the serving difference costs all of it: serve the draft as it is measured on {j.best} "
        "(eagle3-doctor diagnose names the lever and its exact edit)",
        data={"served": j.served.to_dict(), "best": j.best},
    )


def _undecided_finding(j: _Judged, gone: float) -> Finding:
    return Finding(
        "HLT003",
        f"undetermined: {j.best} accepts {gone:.2f} tokens per verify pass more than {j.served_name}, "
        f"not decided on these {j.served.n} prompts",
        [
            j.figures,
            f"a difference of {PRACTICAL_TOKENS} or more, whose cause no finding of this run decides (its paired "
            "interval reaches 0, or the run is small)",
        ],
        "rerun on more prompts (--limit, --max-new-tokens), or run eagle3-doctor diagnose: it pairs each lever over prompts",
        data={"served": j.served.to_dict(), "best": j.best, "missing": gone},
    )


def _healthy_finding(j: _Judged, references: Sequence[str], unseen: Sequence[str], alone: str) -> Finding:
    compared = (
        f"paths compared: {'; '.join(j.others)} (none accepts {PRACTICAL_TOKENS} tokens per pass or more above it)"
        if j.others
        else f"paths compared: none beside {j.served_name} ({alone})"
    )
    evidence = [j.figures, BASELINE, compared, *references]
    if unseen:
        evidence.append("not looked at by this command: " + "; ".join(unseen))
    return Finding(
        "HLT002",
        f"the draft has skill on {j.served_name}: {j.served.text(2)} tokens per verify pass, "
        f"{j.served.point - NO_SKILL:.2f} above the no-skill baseline",
        evidence,
        "nothing to fix offline; compare with what the server measures (eagle3-doctor server-metrics)",
        data={"served": j.served.to_dict(), "references": list(j.others), "unseen": list(unseen)},
    )


def _no_skill_finding(j: _Judged) -> Finding:
    where = "on every path measured" if j.others else "as served (the only path measured)"
    return Finding(
        "HLT001",
        f"the draft has no skill: {j.served.text(2)} tokens per verify pass, at the no-skill baseline {where}",
        [j.figures, BASELINE, "no serving setting recovers acceptance the weights do not have: the checkpoint is the problem"],
        f"re-export the draft from its trained checkpoint ({j.drafter.checkpoint_hint}), "
        "then run eagle3-doctor inspect and fingerprint on the export; retrain if the trained checkpoint is the same",
        data={"served": j.served.to_dict(), "kind": j.drafter.kind},
    )
