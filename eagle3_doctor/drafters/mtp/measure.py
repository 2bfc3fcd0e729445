"""MTP measured: the trained and served target states side by side (compare-hidden), the chain's acceptance
on both paths (acceptance, with the sequential loop as its check), and where the gap lives (diagnose)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ...analyses.results import AcceptanceRun
from ...core.findings import Finding
from ...model.setup import Setup
from .checks import MTPChecks

MAL = "mean acceptance length"


@dataclass
class MTPCompare:
    """The trained and the served state over the replayed tokens: relative L2 and cosine, as for EAGLE-3 slots."""

    checks: MTPChecks
    tokens: int
    rel_l2: float
    cosine: float
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**self.checks.to_dict("compare-hidden"), "tokens": self.tokens, "rel_l2": self.rel_l2, "cosine": self.cosine,
                "findings": [f.to_dict() for f in self.findings]}  # fmt: skip


@torch.inference_mode()
def mtp_compare(
    setup: Setup, checks: MTPChecks, prompts_path: str | None, max_tokens: int, limit: int | None, batch_size: int
) -> MTPCompare:
    from ...model.replay import iter_captures, load_sources

    src = load_sources(setup.target, prompts_path, None, max_tokens, limit, None)
    tp, sp = checks.trained, checks.serving.hidden
    num = den = dot = 0.0
    n = 0
    for rb in iter_captures(setup.target, src.sequences, {tp, sp}, batch_size=batch_size):
        m = rb.batch.attention_mask.bool()
        t, s = rb.captured[tp][m].double(), rb.captured[sp][m].double()
        num += float(((s - t) ** 2).sum())
        den += float((t**2).sum())
        dot += float((s * t).sum(-1).div(s.norm(dim=-1) * t.norm(dim=-1)).sum())
        n += int(m.sum())
    rel, cos = (num / den) ** 0.5 if den else float("nan"), dot / n if n else float("nan")
    findings = [f for f in checks.findings]
    for f in findings:
        if f.code == "MTP001":
            f.evidence.append(f"measured over {n} tokens: relative L2 {rel:.3f} between {sp} and {tp}, mean cosine {cos:.4f}")
            f.data.update({"rel_l2": rel, "cosine": cos, "tokens": n})
    return MTPCompare(checks, n, rel, cos, findings)


def weigh(checks: MTPChecks, run: AcceptanceRun, K: int) -> Any:
    """MTP001 against its measurement: the paired difference of mean acceptance length, training - serving.
    Where the interval reaches 0 the measurement wins: a warning, saying so (hnorm absorbs a nearly uniform
    final-norm weight). Returns the interval (None without both paths)."""
    from ...core.stats import difference_interval, mean_acceptance_length

    s, t = run.paths.get("serving"), run.paths.get("training")
    if s is None or t is None:
        return None
    diff, how = difference_interval(t.counts(K), s.counts(K), mean_acceptance_length)
    for f in checks.findings:
        if f.code != "MTP001":
            continue
        f.evidence.append(
            f"measured: {MAL} {s.chain.mean_acceptance_length:.3f} fed {checks.serving.hidden}, {t.chain.mean_acceptance_length:.3f} "
            f"fed {checks.trained} (difference {diff.text()}, {how}); step-1 accuracy {s.acc_k[0]:.3f} vs {t.acc_k[0]:.3f}"
        )
        f.data["recovered"] = diff.to_dict()
        if diff.lo <= 0:
            f.severity = "warning"
            f.evidence.append("not measurably worse on these prompts: the rule stands, the cost here is within the noise")
    return diff


def mtp_acceptance(setup: Setup, checks: MTPChecks, opts: Any, prompts_path: str | None, progress: Any) -> AcceptanceRun:
    """The acceptance run on the serving and training states (the shared estimator and, with --reference-loop,
    the sequential loop); ACC001's EAGLE-3 layer-id fix gives way to MTP001's, which carries the measured gap."""
    from ...analyses.acceptance.run import measure_acceptance

    run = measure_acceptance(setup, opts, prompts_path=prompts_path, progress=progress)
    run.findings = [f for f in run.findings if f.code != "ACC001"]
    weigh(checks, run, opts.num_steps)
    if any(f.code == "MTP002" for f in checks.findings):
        recycled_as_served(setup, checks, run, opts, prompts_path)
    own = [f for f in run.findings if not f.code.startswith("HLT")]
    run.findings = [*checks.findings, *own, *judged_health(setup, run, list(checks.findings))]
    return run


def recycled_as_served(setup: Setup, checks: MTPChecks, run: AcceptanceRun, opts: Any, prompts_path: str | None) -> None:
    """MTP002 measured: the serving path again with the head recycling what the engine recycles (a copy)."""
    import copy

    from ...analyses.acceptance.run import measure_acceptance

    s = copy.copy(setup)
    head: Any = copy.deepcopy(setup.draft)  # an MTPHead (Setup types its draft as EAGLE-3's)
    head.config.recycle = checks.serving.recycle
    s.draft = head
    s.train_spec = None  # the serving path only
    served = measure_acceptance(s, opts, prompts_path=prompts_path).paths["serving"]
    trained = run.paths["serving"]
    for f in checks.findings:
        if f.code == "MTP002":
            f.evidence.append(
                f"measured on the serving state: {MAL} {served.chain.mean_acceptance_length:.3f} recycled as served, "
                f"{trained.chain.mean_acceptance_length:.3f} recycled as trained"
            )
            f.data["as_served_mean_acceptance_length"] = served.chain.mean_acceptance_length


@dataclass
class MTPDiagnosis:
    """The one lever an MTP head has on the target side: step 1's state set back to the trained one."""

    checks: MTPChecks
    serving: float
    training: float | None
    difference: Any  # Interval of training - serving, paired over prompts
    findings: list[Finding] = field(default_factory=list)
    verdict: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.checks.to_dict("diagnose"),
            "serving_mean_acceptance_length": self.serving,
            "training_mean_acceptance_length": self.training,
            "recovered": None if self.difference is None else self.difference.to_dict(),
            "verdict": self.verdict,
            "findings": [f.to_dict() for f in self.findings],
        }


def mtp_diagnose(setup: Setup, checks: MTPChecks, opts: Any, prompts_path: str | None, progress: Any) -> MTPDiagnosis:
    """Measure both paths; MTP001 leads the verdict when the trained state recovers acceptance beyond the noise."""
    from ...analyses.acceptance.run import measure_acceptance
    from ...analyses.judgment import lever_branch, verdict_line

    run = measure_acceptance(setup, opts, prompts_path=prompts_path, progress=progress)
    s, t = run.paths["serving"], run.paths.get("training")
    diff = weigh(checks, run, opts.num_steps)
    if any(f.code == "MTP002" for f in checks.findings):
        # the release's own recycling, measured as acceptance measures it: MTP002 carries the figure here too
        recycled_as_served(setup, checks, run, opts, prompts_path)
    found = list(checks.findings)
    health = judged_health(setup, run, found)
    assert s.intervals is not None  # path_results fills them
    served = s.intervals.mean_acceptance_length
    sides = {"serving": served, **({"training": t.intervals.mean_acceptance_length} if t is not None and t.intervals else {})}
    branch, decided_by = lever_branch(served, diff, sides, [*found, *health])
    if t is None or diff is None:
        d = MTPDiagnosis(checks, s.chain.mean_acceptance_length, None, None, [*found, *health])
        why = f"the engine feeds the head the state it was trained on ({checks.trained}): no serving difference to set back"
    else:
        d = MTPDiagnosis(checks, s.chain.mean_acceptance_length, t.chain.mean_acceptance_length, diff, [*found, *health])
        lever = f"step 1 fed {checks.trained} instead of {checks.serving.hidden}: {MAL} {d.serving:.3f} -> {d.training:.3f}, recovered {diff.text()}"
        why = (
            f"MTP001 decides the gap: {lever}" if branch == "pipeline" else f"the served state is not measurably worse ({lever})"
        )
    if decided_by is not None:
        why = f"{decided_by.code}: {decided_by.title}"
    d.verdict = verdict_line(branch, why)
    return d


def judged_health(setup: Setup, run: AcceptanceRun, found: list[Finding]) -> list[Finding]:
    """The health judgment over the run's paths, after the head's own checks (an error there is never healthy)."""
    from ...analyses.acceptance.findings import acceptance_health

    return acceptance_health(run.paths, [*found, *(f for f in run.findings if not f.code.startswith("HLT"))], setup)
