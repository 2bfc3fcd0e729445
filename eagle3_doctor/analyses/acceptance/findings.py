"""What an acceptance run concludes: the gap and the weak draft (ACC001, ACC002), a better-fitting wiring
(ACC004), the user's thresholds (ACC003), and hints for the report."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core.findings import Finding
from ..results import PathResult, ScanRow, spec_label

if TYPE_CHECKING:
    from ...model.setup import Setup


def triage(path: PathResult, dtype: str) -> list[str]:
    """What an acceptance pattern usually means (hints for the report, not findings)."""
    hints: list[str] = []
    length, rates, cond = path.chain.mean_acceptance_length, path.chain.per_position_rate, path.chain.conditional_rate
    if length <= 1.1:
        hints.append(
            f"mean acceptance length {length:.2f} (about 1): the draft proposes almost nothing the target takes; "
            "run eagle3-doctor diagnose (module ablation names a module that contributes nothing, the levers a "
            "serving difference) and eagle3-doctor inspect (every tensor of the checkpoint)"
        )
    elif len(rates) >= 2 and 0.15 <= rates[0] <= 0.6 and len(cond) >= 2 and cond[1] < 0.3:
        hints.append(
            f"first position moderate ({rates[0]:.2f}) then near zero (P(2nd | 1st) = {cond[1]:.2f}): the "
            "draft's own later steps fail: typical of wrong capture points or RoPE settings "
            "(run eagle3-doctor compare-hidden; inspect CFG003/CFG004)"
        )
    buckets = [b for b in path.step1_by_position if b.n >= 50]
    if len(buckets) >= 3 and buckets[0].acc - buckets[-1].acc > 0.15:
        first, last = buckets[0], buckets[-1]
        hints.append(
            f"step-1 accuracy falls with context ({first.acc:.2f} at positions {first.start}-"
            f"{first.end}, {last.acc:.2f} at {last.start}-{last.end}): "
            "suspect positions: rope_scaling, max_position_embeddings or the position base"
        )
    if dtype in ("bfloat16", "float16") and rates and rates[0] < 0.5:
        hints.append(
            f"measured in {dtype}: rerun with --dtype float32; a large gap between the two points at numerics "
            "(draft dtype, fp16 overflow) rather than wiring"
        )
    return hints


def acc_fix(setup: Setup) -> str:
    """The fix line of an acceptance gap: the ids that make serving feed what was trained."""
    from ..compare.fixes import fix_for

    if setup.train_spec is None:
        return "run eagle3-doctor compare-hidden for the exact layer ids to write"
    text, _ = fix_for(setup.serving, setup.train_spec)
    return text or f"{setup.serving.label} cannot feed what was trained: see eagle3-doctor compare-hidden"


def acceptance_findings(results: dict[str, PathResult], scan_res: list[ScanRow] | None, setup: Setup) -> list[Finding]:
    """ACC001 (serving features cost accuracy), ACC002 (low even on the best path), ACC004 (scan found better)."""
    out: list[Finding] = []
    s, t = results.get("serving"), results.get("training")
    if s and t and s.acc_k and t.acc_k:
        ds, dt = s.step1, t.step1
        ls, lt = s.chain.mean_acceptance_length, t.chain.mean_acceptance_length
        if dt - ds > 0.05:
            out.append(
                Finding(
                    "ACC001",
                    f"the serving features cost {100 * (dt - ds):.1f} points of step-1 accuracy "
                    f"({ds:.3f} served vs {dt:.3f} trained)",
                    [
                        f"step-1 accuracy: serving {ds:.3f}, training {dt:.3f}",
                        f"mean acceptance length: serving {ls:.2f}, training {lt:.2f}",
                        f"serving feeds {spec_label(s.spec)}; trained on {spec_label(t.spec)}",
                    ],
                    acc_fix(setup),
                )
            )
    ref = t or s
    if ref and ref.acc_k and ref.step1 < 0.3:
        out.append(
            Finding(
                "ACC002",
                f"step-1 accuracy is {ref.step1:.3f} even on the {ref.name} features",
                [f"acc_k: {', '.join(f'{a:.3f}' for a in ref.acc_k)}"],
                "run eagle3-doctor diagnose: it measures where the gap lives (which serving difference, which module of "
                "the draft, which part of the context) instead of guessing",
            )
        )
    return out + _scan_finding(scan_res, setup)


def _scan_finding(scan_res: list[ScanRow] | None, setup: Setup) -> list[Finding]:
    from ...core.stats import MIN_PROMPTS

    if not scan_res:
        return []
    best = scan_res[0]
    cur_row = next((r for r in scan_res if r.configured), None)
    d = best.diff_to_configured
    # decided on the paired interval over prompts, not on the point estimate: a better-looking
    # candidate whose interval reaches 0 is not reported (the scan table shows it with its interval)
    if not (cur_row and not best.configured and d is not None and d.lo > 0 and d.n >= MIN_PROMPTS):
        return []
    evidence = [
        f"step-1 accuracy {best.step1_acc:.3f} vs {cur_row.step1_acc:.3f}; difference "
        f"{d.point:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}] (95%, paired bootstrap over {d.n} prompts)"
    ]
    tied = [spec_label(r.spec) for r in scan_res[1:] if r.tied_with_best and not r.configured]
    fix = "the draft was probably trained on those capture points: set the training recipe accordingly and re-run compare-hidden"
    if tied:  # the best one is not singled out: say which, and what can tell them apart
        evidence.append(f"not separated from it on these prompts (paired 95% interval reaching 0): {'; '.join(tied)}")
        fix = (
            "the draft was probably trained on one of these capture points: `eagle3-doctor fingerprint` tells them "
            "apart; then set the training recipe accordingly and re-run compare-hidden"
        )
    return [Finding("ACC004", f"{spec_label(best.spec)} fits the draft better than {spec_label(cur_row.spec)}", evidence, fix)]


def threshold_findings(paths: dict[str, PathResult], min_accept_rate: float | None, min_tau: float | None) -> list[Finding]:
    """ACC003: the serving path below --min-accept-rate (first position) or --min-tau."""
    out = []
    serving = paths.get("serving")
    rates = (serving.chain.per_position_rate or None) if serving is not None else None
    rate1 = (rates or [float("nan")])[0]
    if min_accept_rate is not None and not rate1 >= min_accept_rate:
        out.append(
            Finding(
                "ACC003",
                f"first-position acceptance {rate1:.3f} is below --min-accept-rate {min_accept_rate}",
                [f"serving path per-position rates: {rates}"],
                "fix the findings above, or retrain the draft",
            )
        )
    tau = serving.tau if serving is not None else float("nan")
    if min_tau is not None and not tau >= min_tau:
        out.append(
            Finding(
                "ACC003",
                f"tau {tau:.3f} is below --min-tau {min_tau}",
                [f"acc_k: {serving.acc_k if serving is not None else None}"],
                "fix the findings above, or retrain the draft",
            )
        )
    return out
