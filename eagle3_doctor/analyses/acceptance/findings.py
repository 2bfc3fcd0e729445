"""What an acceptance run concludes: the gap and the weak draft (ACC001, ACC002), the wiring the weights fit
(ACC004), the health judgment (HLT), the user's thresholds (ACC003), and hints for the report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...core.findings import Finding
from ...core.stats import Interval, acceptance_counts, mean_acceptance_length, paired
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


def acceptance_findings(
    results: dict[str, PathResult],
    scan_res: list[ScanRow] | None,
    setup: Setup,
    before: Sequence[Finding] = (),
    *,
    unseen: list[str] | None = None,
    alone: str | None = None,
) -> list[Finding]:
    """ACC001 (serving features cost acceptance, decided by size and interval), ACC002 (low even on the best path),
    ACC004 (the weights fit another wiring), then the health judgment (HLT001, HLT002) over every path, after the
    run's other findings ``before`` (the served forward's, which name what the as-served path costs)."""
    from ..judgment import decides

    out: list[Finding] = []
    s, t = results.get("serving"), results.get("training")
    if s and t and s.acc_k and t.acc_k:
        K = len(s.acc_k)
        (iv_s, iv_t), (_, gap) = paired([s.counts(K), t.counts(K)], mean_acceptance_length, 0)
        if decides(gap, gap.point):
            out.append(
                Finding(
                    "ACC001",
                    f"the serving features cost {gap.text(2)} tokens per verify pass ({iv_s.point:.2f} served vs "
                    f"{iv_t.point:.2f} trained)",
                    [
                        f"mean acceptance length: serving {iv_s.text(2)}, training {iv_t.text(2)}, training - serving "
                        f"{gap.text(2)} (paired over {gap.n} prompts)",
                        f"step-1 accuracy: serving {s.step1:.3f}, training {t.step1:.3f}",
                        f"serving feeds {spec_label(s.spec)}; trained on {spec_label(t.spec)}",
                    ],
                    acc_fix(setup),
                )
            )
    if scan_res:
        from ..weights_fit import fit_finding

        fit = fit_finding(scan_res, setup)
        out += [fit] if fit is not None else []
    out += depth_findings(results, setup)
    out += trained_depth_findings(results, setup)
    health = acceptance_health(results, [*before, *out], setup, scan_res, unseen=unseen, alone=alone)
    ref = t or s
    if ref and ref.acc_k and ref.step1 < 0.3 and not any(f.code == "HLT001" for f in health):
        out.append(
            Finding(
                "ACC002",
                f"step-1 accuracy is {ref.step1:.3f} even on the {ref.name} features",
                [f"acc_k: {', '.join(f'{a:.3f}' for a in ref.acc_k)}"],
                "run eagle3-doctor diagnose: it measures where the gap lives (which serving difference, which module of "
                "the draft, which part of the context) instead of guessing",
            )
        )
    return out + health


def depth_findings(results: dict[str, PathResult], setup: Setup) -> list[Finding]:
    """HLT004 on the chain as served: the engine's K past the last position that accepts anything."""
    from ..judgment import depth_finding

    chain = _served_chain(results, setup)
    if chain is None:
        return []
    res, setting, _ = chain
    f = depth_finding(res.accepted_lengths, len(res.acc_k), setting)
    return [f] if f is not None else []


def _served_chain(results: dict[str, PathResult], setup: Setup) -> tuple[PathResult, str, str | None] | None:
    """(the chain as served, its setting that sets the depth, the release or None), or None where no chain was
    measured. An engine dump's run names no release (``version`` None)."""
    from ..as_served import AS_SERVED

    res = results.get(AS_SERVED) or results.get("serving")
    if res is None or res.tree is not None or not res.acc_k:
        return None
    setting = "--speculative-num-steps" if setup.serving.engine == "sglang" else "num_speculative_tokens"
    return res, setting, getattr(setup.serving, "version", None)


def trained_depth_findings(results: dict[str, PathResult], setup: Setup) -> list[Finding]:
    """FWD013 (info) on the chain as served: steps past the depth the checkpoint records it was trained for. Kept
    apart from depth_findings, whose HLT004 decides diagnose's branch: this one is a fact about speed, not a verdict."""
    from ...draft.served_settings import depth_finding as trained_depth_finding

    chain = _served_chain(results, setup)
    if chain is None:
        return []
    res, setting, version = chain
    if version is None:  # no release, no key of one to name
        return []
    f = trained_depth_finding(
        getattr(setup, "info", None),
        res.accepted_lengths,
        len(res.acc_k),
        setup.serving.engine,
        version,
        setting,
    )
    return [f] if f is not None else []


def served_figure(res: PathResult) -> Interval:
    """Mean acceptance length of one path with its interval over prompts: the tree's where the engine drafts one."""
    if res.tree is not None and res.tree.accepted_lengths is not None:
        counts = acceptance_counts(res.tree.accepted_lengths, None, None, 1)  # passes and accepted: all it reads
        (iv,), _ = paired([counts], mean_acceptance_length, 0)
        return iv
    assert res.intervals is not None  # path_results fills them
    return res.intervals.mean_acceptance_length


def acceptance_health(
    results: dict[str, PathResult],
    found: list[Finding],
    setup: Setup,
    scan_res: list[ScanRow] | None = None,
    *,
    unseen: list[str] | None = None,
    alone: str | None = None,
) -> list[Finding]:
    """The health judgment of an acceptance run: the serving path (as the engine runs the draft, where it differs)
    against every other path measured, and the weights' own fit where it was measured. ``unseen`` and ``alone``: the
    references a run without the target could not look at, and why it measured one path only."""
    from ..as_served import AS_SERVED
    from ..judgment import health

    served_name = AS_SERVED if AS_SERVED in results else "serving"
    if served_name not in results:
        return []
    sides = {f"the {n} path": served_figure(r) for n, r in results.items()}
    assert setup.draft is not None  # acceptance always runs a draft
    unseen_here = ["the draft's own training sample (diagnose --train-data)"] if setup.draft.kind == "eagle3" else []
    refs = []
    if scan_res:
        from ..weights_fit import fit_outcome

        line = fit_outcome(scan_res, setup)[1]  # empty where the fit decided: ACC004 then speaks, not HLT002
        refs += [line] if line else []
    else:
        unseen_here.insert(0, "the weights' own fit (no aux-slot wiring to scan for this drafter)")
    served = f"the {served_name} path"
    if unseen is not None:
        unseen_here = unseen
    kw = {"alone": alone} if alone else {}
    return health(setup.draft, sides[served], sides, found, served_name=served, references=refs, unseen=unseen_here, **kw)


def served_figures(paths: dict[str, PathResult]) -> tuple[float, float]:
    """The serving path's (tau, first-position rate): what --min-tau and --min-accept-rate gate; NaN where the
    run has no serving path, so a gate asked for fails rather than passes."""
    serving = paths.get("serving")
    if serving is None:
        return float("nan"), float("nan")
    return serving.tau, (serving.chain.per_position_rate or [float("nan")])[0]


def threshold_findings(paths: dict[str, PathResult], min_accept_rate: float | None, min_tau: float | None) -> list[Finding]:
    """ACC003: the serving path below --min-accept-rate (first position) or --min-tau."""
    return gate_findings(*served_figures(paths), min_accept_rate, min_tau)


def gate_findings(tau: float, rate1: float | None, min_accept_rate: float | None, min_tau: float | None) -> list[Finding]:
    """ACC003 for any drafter kind, from the served path's tau (a parallel drafter's: its mean acceptance length)
    and first-position rate (the share of verify passes that accept a drafted token); a figure not measured
    (NaN, None) fails its gate rather than passing it."""
    out = []
    r1 = float("nan") if rate1 is None else rate1
    if min_accept_rate is not None and not r1 >= min_accept_rate:
        out.append(
            Finding(
                "ACC003",
                f"first-position acceptance {r1:.3f} is below --min-accept-rate {min_accept_rate}",
                [f"served path: first-position rate {r1:.3f}, tau {tau:.3f}"],
                "fix the findings above, or retrain the draft",
            )
        )
    if min_tau is not None and not tau >= min_tau:
        out.append(
            Finding(
                "ACC003",
                f"tau {tau:.3f} is below --min-tau {min_tau}",
                [f"served path: tau {tau:.3f}, first-position rate {r1:.3f}"],
                "fix the findings above, or retrain the draft",
            )
        )
    return out
