"""diagnose and fix on a P-EAGLE draft.

diagnose: where the gap between the served and the trained way of running the draft lives, by intervention: each
attribute the engine runs differently (chain or parallel, the slots' token, the taps) is set back to its trained
value alone and the tokens per verify pass measured again on the same prompts (paired intervals against the
served way), beside all of them at once (the trained way). One more lever asks what no config says: the trained
way with every parallel slot at its anchor's position, the layout a trainer that ignored position_ids teaches
(PEA005 where it accepts more than the positions the engines use).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ...analyses.passes import CopyFix, continue_prompts
from ...core.findings import Finding, Fix
from ...core.stats import Interval, acceptance_counts, mean_acceptance_length, paired
from .analysis import cost_finding, differs, peagle_acceptance, peagle_health, read_sides
from .measure import Way, measure_ways

DIAGNOSE_SCHEMA = "eagle3-doctor/peagle-diagnose/1"
FIX_SCHEMA = "eagle3-doctor/peagle-fix/1"
_ATTRS = (("mode", "parallel drafting"), ("token", "mask token"), ("spec", "taps"), ("k", "tokens a pass"))
ANCHOR = "trained, slots at the anchor's position"


def levers(t: Way, s: Way | None) -> dict[str, Way]:
    """served, each differing attribute set back alone, trained, and trained with the slots at the anchor."""
    out: dict[str, Way] = {}
    if s is not None and differs(s, t):
        out["served"] = s
        for attr, label in _ATTRS:
            if getattr(s, attr) != getattr(t, attr) and not (attr == "token" and s.mode == "chain"):
                back = {attr: getattr(t, attr), **({"token": t.token} if attr == "mode" else {})}  # parallel needs its token
                out[f"{label} as trained"] = replace(s, name=f"{label} as trained", **back)
    out["trained"] = t
    out[ANCHOR] = replace(t, name=ANCHOR, positions="anchor")
    return out


@dataclass
class PEagleDiagnosis:
    engine: str
    prompts: int
    paths: dict[str, dict[str, Any]]  # name -> way, mean acceptance length, gain over the first way
    verdict: str
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": DIAGNOSE_SCHEMA, "command": "diagnose", "drafter": "peagle", "engine": self.engine,
                "prompts": self.prompts, "paths": self.paths, "order": list(self.paths), "verdict": self.verdict,
                "findings": [f.to_dict() for f in self.findings]}  # fmt: skip


def peagle_diagnose(
    target: Any, draft_path: str, engine: str, version: str | None, prompts: list[list[int]], max_new_tokens: int,
    progress: Callable[[str, int, int], None], k: int | None = None, layer_ids: list[int] | None = None,
) -> PEagleDiagnosis:  # fmt: skip
    side = read_sides(target, draft_path, engine, version, k, layer_ids)
    ways = levers(side.trained, side.served)
    seqs = continue_prompts(target, prompts, max_new_tokens, progress)
    walked = measure_ways(target, side.pe, ways, seqs, [len(p) for p in prompts], lambda i, n: progress("diagnose", i, n))
    K = max(w.k for w in ways.values())
    own, gain = paired([acceptance_counts(walked[n], None, None, K) for n in ways], mean_acceptance_length, 0)
    names = list(ways)
    paths = {n: {**ways[n].to_dict(), "mean_acceptance_length": o.to_dict(), f"gain_over_{names[0]}": g.to_dict()}
             for n, o, g in zip(names, own, gain)}  # fmt: skip
    found = side.findings
    figs = dict(zip(names, own))
    ti = names.index("trained")
    if "served" in ways:  # trained - served, paired: what the served way costs, judged by size and interval
        cost = cost_finding(side.trained, side.served, figs, gain[ti].negated(), found)  # type: ignore[arg-type]
        found += [cost] if cost is not None else []
    pair = [acceptance_counts(walked[n], None, None, K) for n in ("trained", ANCHOR)]
    (t_own, a_own), (_, a_minus_t) = paired(pair, mean_acceptance_length, 0)
    paths[ANCHOR]["gain_over_trained"] = a_minus_t.to_dict()
    if a_minus_t.lo > 0:
        found.append(anchor_finding(t_own, a_own, a_minus_t))
    found += peagle_health({n: iv for n, iv in figs.items() if n in ("served", "trained")}, found)
    return PEagleDiagnosis(engine, len(prompts), paths, _verdict(names, gain, ti, figs, found), found)


def anchor_finding(t: Interval, a: Interval, diff: Interval) -> Finding:
    """PEA005: the slots at the anchor's position accept more than at anchor + d, paired over prompts."""
    return Finding(
        "PEA005",
        f"the parallel slots accept {a.point:.3f} tokens per pass at the anchor's position, {t.point:.3f} at anchor + d",
        evidence=[
            f"anchor position: {a.text()}",
            f"anchor + d (vLLM, speculators): {t.text()}",
            f"anchor - (anchor + d), paired over prompts: {diff.text()}",
        ],  # fmt: skip
        fix="retrain the draft with position_ids honoured for the parallel slots (slot d at anchor + d); no engine key moves them",
    )


def _verdict(names: list[str], gain: list[Interval], ti: int, figs: dict[str, Interval], found: list[Finding]) -> str:
    """The judgment's verdict line: the way lever decides by size and interval, after the draft's absolute health."""
    from ...analyses.judgment import lever_verdict

    total = gain[ti] if names[0] == "served" else None
    parts = "; ".join(f"{n}: {g.text()}" for n, g in zip(names, gain) if n.endswith("as trained"))
    g = total.text() if total is not None else ""
    return lever_verdict(
        figs.get("served", figs["trained"]), total, {n: iv for n, iv in figs.items() if n != ANCHOR}, found,
        decided=f"the way the engine runs the draft: running it as trained gains {g} tokens per pass ({parts})",
        leaning=f"the engine runs the draft otherwise than it was trained, but the measured gain {g} reaches 0 on these "
                f"prompts ({parts}); more prompts or longer continuations would decide it",
        as_trained="the engine runs the draft as it was trained",
    )  # fmt: skip


def peagle_fix(
    target: Any, draft_path: str, engine: str, version: str | None, prompts: list[list[int]], max_new_tokens: int,
    out: str, progress: Callable[[str, int, int], None], k: int | None = None,
) -> CopyFix:  # fmt: skip
    """acceptance on the draft; the copy at ``out`` with every config edit its findings carry; acceptance on the copy."""
    from ...analyses.fixing import write_copy

    before = peagle_acceptance(target, draft_path, engine, version, prompts, max_new_tokens, progress, k=k)
    edits = [(f.code, f.fix) for f in before.findings if f.code in ("PEA001", "PEA003") and isinstance(f.fix, Fix) and f.fix.key]
    if not edits:
        return CopyFix(FIX_SCHEMA, "peagle", draft_path, None, [], before, None)
    applied = write_copy(draft_path, out, edits)
    after = peagle_acceptance(target, out, engine, version, prompts, max_new_tokens, progress, k=k)
    return CopyFix(FIX_SCHEMA, "peagle", draft_path, out, applied, before, after)
