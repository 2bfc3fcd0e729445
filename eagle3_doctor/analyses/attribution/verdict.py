"""The verdict: which branch the measurements point to (pipeline, checkpoint, context, runtime, or
undetermined), with its finding (DGN001-DGN005)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core.findings import Finding
from ...core.stats import MIN_PROMPTS, Interval, paired
from ..acceptance.findings import depth_findings
from .context import CONTEXT_DROP, CONTEXT_LEAD, ContextCounts
from .data import place_data
from .plan import ABLATED, SERVING, TRAINING, WEIGHTS, Plan
from .result import STEP1, Diagnosis, LeverRow, ModuleRow, _mal, _step1

if TYPE_CHECKING:
    from ...model.setup import Setup
    from ..results import PathResult


LOW_STEP1 = 0.3  # below this even as trained, the draft itself (or the data) is in question


def _levers(plan: Plan, results: dict[str, PathResult], K: int) -> list[LeverRow]:
    if SERVING not in results:
        return []
    names = [SERVING] + [p for _, _, p, _ in plan.levers]
    own, diff = _mal(results, names, K)
    _, s1 = _step1(results, names)
    rows = [
        LeverRow(name, what, own[i + 1], diff[i + 1], s1[i + 1], fix, plan.parts.get(name))
        for i, (name, what, _, fix) in enumerate(plan.levers)
    ]
    return sorted(rows, key=lambda r: -r.recovery.point)


def _modules(plan: Plan) -> list[ModuleRow]:
    counts = [plan.step1[""]] + [plan.step1[mod] for mod in ABLATED]
    keep = counts[0][:, 1] > 0  # prompts with a measured position (a prompt with no continuation has none)
    own, diff = paired([c[keep] for c in counts], STEP1, 0)
    rows = []
    for i, mod in enumerate(ABLATED, start=1):
        cost = Interval(-diff[i].point, -diff[i].hi, -diff[i].lo, diff[i].level, diff[i].n, diff[i].B, diff[i].seed)
        rows.append(ModuleRow(mod, own[i], cost, cost.lo > 0, _module_verdict(cost)))
    return rows


NOTHING = 0.02  # |cost| of step-1 accuracy under which an ablation "changes nothing"


def _module_verdict(cost: Interval) -> str:
    # an ablation that helps shows wherever the draft fails for another reason (past the training length of
    # the context, ablating the fixture draft's intact MLP raises step-1 accuracy by 0.07).
    # measured on the fixtures: trained modules cost 0.27-0.66; an attention saved at initialisation costs
    # exactly 0 (its output is near zero), and the MLP after it then costs -0.08 (ablating it helps: it was
    # trained to work with an attention that is no longer there)
    if cost.lo > 0:
        return "trained"
    if -NOTHING <= cost.lo and cost.hi <= NOTHING:
        return "contributes nothing"
    return "ablation helps" if cost.hi < 0 else "unclear"


def _verdict(
    setup: Setup,
    plan: Plan,
    results: dict[str, PathResult],
    ctx: ContextCounts,
    K: int,
    notes: list[str],
    n: int,
    extra: LeverRow | None = None,
    leaning: list[str] | None = None,
    data: Finding | None = None,
    sampled: bool = False,
) -> Diagnosis:
    """The branch and its findings, by the rules of :mod:`..judgment`: absolute health first (a draft with no skill
    on any path is the checkpoint's), then levers and the gap by size and interval together, then the modules, the
    context and the data; what leans without deciding is "undetermined", never "healthy"."""
    from .. import judgment as jd

    sides, serving, training, gap = _sides(results, K, notes)
    levers, modules, context = _levers(plan, results, K), _modules(plan), ctx.rows()
    if extra is not None:
        levers = sorted([*levers, extra], key=lambda r: -r.recovery.point)
    measured = {**({TRAINING: training} if len(sides) == 2 else {}), **{r.name: r.mean_acceptance_length for r in levers}}
    gone = jd.missing(serving, measured)
    findings: list[Finding] = []
    branch = ""
    paths = {f"the {TRAINING} path" if k == TRAINING else f"lever {k}": v for k, v in measured.items()}
    if SERVING in results and jd.no_skill(serving) and all(jd.no_skill(iv) for iv in measured.values()):
        # no skill on any path: a lever that recovers a few hundredths is noise around zero, not a cause
        findings += jd.health(setup.draft, serving, paths, [], served_name="the serving path")
        branch = "checkpoint"
    gap_decides = len(sides) == 2 and jd.decides(gap, gone)
    if not branch and (gap_decides or any(jd.decides(r.recovery, gone) for r in levers)):
        branch = "pipeline"
        findings.append(_pipeline_finding(gap, serving, training, levers, gone))
    branch = _engine_failure(setup, results, findings) or branch
    leads = list(leaning or [])
    branch = _checkpoint_and_context(plan, results, modules, ctx, notes, findings, branch, leads)
    base_step1 = results[plan.base].step1
    if not branch and SERVING not in results:
        branch = "undetermined"
        findings.append(_unmeasurable_finding(notes, plan.base, base_step1))
    if data is not None:  # DGN007, decided before the last resort: a decided data verdict is not "undetermined"
        branch = place_data(branch, findings, levers, data)
    findings += (depth := depth_findings(results, setup))  # a serving setting that costs speed without acceptance
    codes = {f.code for f in depth}
    branch = branch or ("pipeline" if "HLT004" in codes else "undetermined" if "HLT005" in codes else "")
    if not branch:
        branch, last = _last_resort(
            [*leads, *_undecided(levers, gap if len(sides) == 2 else None, n, gone)], n, base_step1, plan.base, serving
        )
        findings.append(last)
    if branch == "runtime":
        refs, unseen = _references(modules, not plan.unmeasured), [*plan.unmeasured, *_unseen(sampled)]
        alone = {"alone": "a dump holds what the engine fed only"} if plan.unmeasured else {}
        findings += jd.health(
            setup.draft, serving, paths, findings, served_name="the serving path", references=refs, unseen=unseen, **alone
        )
    verdict = _verdict_line(branch, findings)
    return Diagnosis(branch, verdict, serving, training, gap, plan.base, levers, modules, context, findings, notes, n)


def _sides(results: dict[str, PathResult], K: int, notes: list[str]) -> tuple[list[str], Interval, Interval, Interval]:
    """The sides measured, serving's and training's mean acceptance length, and training - serving, paired."""
    sides = [x for x in (SERVING, TRAINING) if x in results]
    own, diff = _mal(results, sides, K)
    if len(sides) == 1:
        notes.append(f"only the {sides[0]} side is measurable: no gap between the sides, no levers")
    return sides, own[0], own[-1], diff[-1]


def _engine_failure(setup: Setup, results: dict[str, PathResult], findings: list[Finding]) -> str:
    """The engine refuses, crashes or is not modelled: that is the finding (appended), whatever the rest measures."""
    if SERVING in results or setup.serving.failure is None or setup.train_spec is None:
        return ""
    from ..compare.engine_failures import engine_failure_finding

    findings.append(engine_failure_finding(setup.serving, setup.train_spec))
    return "undetermined" if setup.serving.failure.when == "undetermined" else "pipeline"


def _checkpoint_and_context(
    plan: Plan,
    results: dict[str, PathResult],
    modules: list[ModuleRow],
    ctx: ContextCounts,
    notes: list[str],
    findings: list[Finding],
    branch: str,
    leads: list[str],
) -> str:
    """The module and context findings (appended to ``findings``), and the branch they give where none is set; a
    large fall too few prompts decide joins ``leads`` (the verdict is then undetermined), a small one ``notes``."""
    # the module that changes nothing is the cause; one whose ablation helps is none (_module_verdict says why)
    bad = [r for r in modules if r.verdict == "contributes nothing"]
    hlt = next((f for f in findings if f.code == "HLT001"), None)
    if bad and len(bad) == len(modules) and hlt is not None:  # one root cause, one diagnostic: the ablations are its evidence
        hlt.evidence.append(
            "no module contributes anything, "
            + _nothing_trained_finding(modules, results[plan.base].step1, plan.base).evidence[0]
        )
    elif bad and len(bad) == len(modules):
        findings.append(_nothing_trained_finding(modules, results[plan.base].step1, plan.base))
    else:
        findings += [_module_finding(r, modules, plan.base) for r in bad]
    branch = branch or ("checkpoint" if bad else "")
    drop = ctx.drop()
    if drop is not None and decided_fall(drop[2]):
        findings.append(_context_finding(*drop, plan.base))
        return branch or "context"
    few = drop or ctx.drop(min_prompts=2)  # a fall the prompts reaching past it are too few to decide
    if few is not None:
        pos, change = few[0], few[2]
        line = (
            f"step-1 accuracy falls by {-change.point:.3f} [{-change.hi:.3f}, {-change.lo:.3f}] past position {pos} of the "
            f"context, over the {change.n} prompts that reach past it; a fall decides at {CONTEXT_DROP} with its whole "
            f"interval beyond it, on {MIN_PROMPTS} prompts or more"
        )
        if -change.point >= CONTEXT_LEAD:
            leads.append(line)
        else:
            notes.append(f"a lead, not a finding: {line}")
    return branch


def decided_fall(change: Interval) -> bool:
    """Size and interval together for the context: the whole interval of the fall beyond CONTEXT_DROP."""
    return change.hi <= -CONTEXT_DROP


def _references(modules: list[ModuleRow], fit: bool = True) -> list[str]:
    """What diagnose judged a healthy draft against beside the paths: the weights' fit (where measured) and the modules."""
    return [
        *(
            ["the weights' own fit: no wiring around the configured capture points fits them better by the decision rule"]
            if fit
            else []
        ),
        "module health: " + ", ".join(f"{m.module} {m.verdict} (ablation costs {m.cost.text()})" for m in modules),
    ]


def _unseen(sampled: bool) -> list[str]:
    """The references a diagnose run did not look at (the training sample only with --train-data)."""
    return ([] if sampled else ["the draft's own training sample (--train-data)"]) + ["a training record of acceptance"]


def _unmeasurable_finding(notes: list[str], base: str, base_step1: float) -> Finding:
    return Finding(
        "DGN004",
        "undetermined: the serving side cannot be measured, so no gap can be placed",
        [*notes, f"measured instead: the {base} side, step-1 accuracy {base_step1:.3f}"],
        "run eagle3-doctor inspect, which names what the engine feeds and why the draft cannot take it",
    )


def _last_resort(leads: list[str], n: int, base_step1: float, base: str, serving: Interval) -> tuple[str, Finding]:
    """No branch decided: a measurement that leans is undetermined (never healthy), then low accuracy is
    undetermined, else the offline prediction is healthy."""
    if leads:
        return "undetermined", _leaning_finding(leads, n)
    if base_step1 < LOW_STEP1:
        return "undetermined", _undetermined_finding(base_step1, base)
    return "runtime", _runtime_finding(serving)


def _verdict_line(branch: str, findings: list[Finding]) -> str:
    from ..judgment import verdict_line

    return verdict_line(branch, f"{findings[0].code}: {findings[0].title}")


def _pipeline_finding(gap: Interval, serving: Interval, training: Interval, levers: list[LeverRow], gone: float) -> Finding:
    from ..judgment import decides, practical, share_text

    need = practical(gone)
    ev = [
        f"mean acceptance length: serving {serving.text(2)}, training {training.text(2)}, gap {gap.text(2)} (paired over {gap.n} prompts)",
        f"decision rule: a lever decides where its interval clears 0 and it recovers at least {need:.2f} tokens per pass "
        f"(0.1, or a tenth of the {gone:.2f} missing between serving and the best path measured)",
    ]
    ev += [
        f"lever {r.name}: recovers {r.recovery.text(2)}: {share_text(r.recovery, gone)}"
        + ("" if decides(r.recovery, gone) else " (a lead: it does not decide)")
        + f" ({r.what})"
        for r in levers
    ]
    top = _top_lever(levers, gone)
    # the weights lever is no part of the serving-training gap, and a part is counted in its whole
    sides = [r for r in levers if r.name != WEIGHTS and r.part_of is None]
    if sides and gap.lo > 0:
        rest = sum(r.recovery.point for r in sides) - gap.point
        ev.append(f"residual (gap not explained by the levers one at a time): {-rest:+.2f}")
    if top is not None:
        how = "feeding the capture points the weights fit" if top.name == WEIGHTS else f"setting the {top.name} back to training"
        title = f"{how} recovers {top.recovery.text(2)} of mean acceptance length: {share_text(top.recovery, gone)}"
        return Finding("DGN001", title, ev, top.fix or "apply the lever's training-side setting", data={"lever": top.name})
    title = f"serving loses {gap.text(2)} of mean acceptance length, and no single lever recovers it alone"
    return Finding(
        "DGN001",
        title,
        ev,
        "apply every lever's training-side setting together (the training side recovers the gap): the fixes of the FWD and CAP findings",
        data={"lever": None},
    )


def _top_lever(levers: list[LeverRow], gone: float) -> LeverRow | None:
    """The lever recovering most that decides (size and interval); where it is a whole whose one part recovers as
    much (its interval reaches the whole's point), that part, whose fix is the one edit that matters."""
    from ..judgment import decides

    top = next((r for r in levers if decides(r.recovery, gone) and r.part_of is None), None)
    if top is None:
        return next((r for r in levers if decides(r.recovery, gone)), None)
    part = next(
        (r for r in levers if r.part_of == top.name and decides(r.recovery, gone) and r.recovery.hi >= top.recovery.point), None
    )
    return part or top


def _module_finding(r: ModuleRow, modules: list[ModuleRow], base: str) -> Finding:
    others = ", ".join(f"{o.module} costs {o.cost.text()} ({o.verdict})" for o in modules if o is not r)
    what = "contributes nothing" if r.verdict == "contributes nothing" else "works against the rest of the draft"
    return Finding(
        "DGN002",
        f"the draft's {r.module} {what}: mean-ablating it costs {r.cost.text()} of step-1 accuracy",
        [
            f"on the {base} features, step-1 accuracy {r.step1.point:.3f} with {r.module} ablated; {others}",
            "a trained module costs accuracy when its output is replaced by its mean; this one does not, so it is "
            "inconsistent with the rest of the checkpoint (saved at initialisation, loaded under another key, or "
            "converted in another layout)",
        ],
        f"re-export the draft from its training checkpoint with a key map that loads {r.module}.* (check the converter's "
        "renames and a non-strict load's missing keys), then run eagle3-doctor inspect on the export",
        data={"module": r.module},
    )


def _nothing_trained_finding(modules: list[ModuleRow], step1: float, base: str) -> Finding:
    # with no module carrying anything, ablation cannot point at one: the whole checkpoint is in question
    return Finding(
        "DGN002",
        f"no module of the draft contributes anything: step-1 accuracy {step1:.3f}, and ablating any module changes nothing",
        [f"on the {base} features: " + ", ".join(f"{m.module} costs {m.cost.text()}" for m in modules)],
        "the draft is at initialisation or belongs to another target: re-export it from the trained checkpoint (check the "
        "converter's key map), then run eagle3-doctor inspect and fingerprint on it",
        data={"module": None},
    )


def _context_finding(pos: int, before: Interval, change: Interval, base: str) -> Finding:
    return Finding(
        "DGN003",
        f"step-1 accuracy falls by {-change.point:.3f} past position {pos} of the context",
        [
            f"on the {base} features: {before.point:.3f} before position {pos}, change after it {change.text()} "
            f"(paired over the {change.n} prompts that reach past it)",
            "the draft was most likely trained on sequences shorter than this (or with another RoPE scaling)",
        ],
        f"serve with contexts under {pos} tokens for speculation, or retrain the draft on sequences past {pos} "
        "tokens (SpecForge/speculators max length)",
        data={"position": pos},
    )


def _undecided(levers: list[LeverRow], gap: Interval | None, n: int, gone: float) -> list[str]:
    """Measurements that point at a cause without deciding it: a gap or a lever whose point recovers a practical
    share (judgment.leans) but whose interval reaches 0, or any measurement on too few prompts."""
    from ..judgment import leans

    out = []
    if n < MIN_PROMPTS:
        out.append(f"{n} prompts: an interval over fewer than {MIN_PROMPTS} decides nothing, healthy or not")
    if gap is not None and leans(gap, gone):
        out.append(f"training - serving mean acceptance length {gap.text(2)}: the gap's interval reaches 0")
    out += [
        f"lever {r.name} recovers {r.recovery.text(2)} mean acceptance length: its interval reaches 0"
        for r in levers
        if leans(r.recovery, gone)
    ]
    return out


def _leaning_finding(leaning: list[str], n: int) -> Finding:
    return Finding(
        "DGN004",
        f"undetermined: on these {n} prompts the measurements lean towards a cause without deciding it",
        leaning,
        "what would decide it: the same run on more prompts (--limit, or a larger --prompts file) and longer "
        "continuations (--max-new-tokens), until the leaning interval's lower bound clears 0 or its point falls to 0",
    )


def _undetermined_finding(step1: float, base: str) -> Finding:
    return Finding(
        "DGN004",
        f"undetermined: step-1 accuracy is {step1:.3f} on the {base} features, and no lever, module or position explains it",
        [
            "every module of the draft costs accuracy when ablated (they are trained), the levers recover nothing, "
            "and accuracy does not fall along the context"
        ],
        "what would decide it: the draft's own training sample (compare-hidden --train-dump, and acceptance on it), "
        "the training chat template (template-diff), and the target revision it was trained on (fingerprint)",
    )


def _runtime_finding(serving: Interval) -> Finding:
    return Finding(
        "DGN005",
        f"offline, the draft accepts {serving.text(2)} tokens per verify pass as served: any gap in serving is the engine's runtime",
        [f"mean acceptance length as the engine feeds and runs the draft: {serving.text(2)}"],
        "compare with what the server measures: eagle3-doctor server-metrics (or acceptance --server-metrics), "
        "which names the engine, wiring or draft side of a live gap",
    )
