"""The CI gate's run: inspect + compare-hidden + acceptance (and the draft's fingerprint) under one policy
(gate_policy.py), the checks it decides on, and the findings only the gate makes. gate_report.py writes
its Markdown summary and GitHub annotations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import BadInput
from ..core.findings import Finding, at_or_above, by_root_cause
from ..core.taps import format_spec
from .formats import drop_ignored
from .gate_policy import Policy

if TYPE_CHECKING:
    from ..analyses.compare.comparison import CompareResult
    from ..analyses.fingerprint import FingerprintResult, FingerprintRow
    from ..analyses.results import AcceptanceRun, PathResult

SCHEMA = "eagle3-doctor/gate/1"


@dataclass
class Check:
    name: str
    value: float | None
    threshold: float | None
    passed: bool
    detail: str = ""


@dataclass
class GateResult:
    policy: Policy
    checks: list[Check]
    findings: list[Finding]
    metrics: dict[str, Any]
    # the runs the gate made: the Markdown summary and the annotations read them; only the fingerprint is written
    inspect: Any = None  # analyses.inspect.inspection.InspectResult
    compare: CompareResult | None = None
    acceptance: AcceptanceRun | None = None
    fingerprint: FingerprintResult | None = None

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "passed": self.passed,
            "policy": self.policy.__dict__,
            "checks": [c.__dict__ for c in self.checks],
            "metrics": self.metrics,
            "fingerprint": self.fingerprint.to_dict() if self.fingerprint is not None else None,
            "findings": [f.to_dict() for f in self.findings],
        }


def _metric(run_paths: dict[str, PathResult], num_steps: int) -> dict[str, Any]:
    """The serving path's figures the policy decides on, as written to the gate JSON (the next run's baseline)."""
    nan = float("nan")
    s = run_paths.get("serving")
    if s is None:
        return {"step1_accuracy": nan, "tau": nan, "mean_acceptance_length": nan, "per_position_rate": []}
    m: dict[str, Any] = {
        "step1_accuracy": s.step1,
        "tau": s.tau,
        "mean_acceptance_length": s.chain.mean_acceptance_length,
        "per_position_rate": s.chain.per_position_rate,
    }
    iv = s.intervals
    if iv is not None:
        m["intervals"] = {
            "step1_accuracy": iv.acc_k[0].to_dict(),
            "tau": iv.tau.to_dict(),
            "mean_acceptance_length": iv.mean_acceptance_length.to_dict(),
            "per_position_rate": [i.to_dict() for i in iv.per_position_rate],
            "acc_k": [i.to_dict() for i in iv.acc_k],
            "method": iv.method,
        }
        # per-prompt counts: the next run's baseline comparison resamples them (paired over prompts)
        m["samples"] = {"num_steps": num_steps, "counts": s.counts(num_steps).tolist()}
    return m


def _stat(key: str, K: int):
    from ..core.stats import _tau

    if key == "step1_accuracy":
        return lambda c: c[..., 2 + K] / c[..., 2 + 2 * K]
    if key == "tau":
        return lambda c: _tau(c[..., 2 + K : 2 + 2 * K] / c[..., 2 + 2 * K : 2 + 3 * K])
    return lambda c: 1.0 + c[..., 1] / c[..., 0]


def _decided(m: dict[str, Any], key: str, policy: Policy) -> tuple[float, str]:
    """The value a threshold is applied to, and words saying which one it is."""
    point = m[key]
    iv = (m.get("intervals") or {}).get(key)
    if policy.decide_on == "point" or not iv or math.isnan(iv.get("lo", float("nan"))):
        why = "" if policy.decide_on == "point" else " (no interval)"
        return point, f"decided on the point estimate{why}"
    return iv[
        "lo"
    ], f"decided on the lower bound of the 95% interval {point:.4f} [{iv['lo']:.4f}, {iv['hi']:.4f}] over {iv['n']} prompts"


def fingerprint_findings(fp: FingerprintResult, setup: Any) -> list[Finding]:
    """What the draft's own fingerprint says about the configured and the declared training wiring."""
    rows = fp.rows
    if not rows:
        return []
    if not fp.determined:
        return [_undetermined_fingerprint(fp)]
    out: list[Finding] = []
    top = rows[0]
    conf = next((r for r in rows if r.configured), None)
    if conf is not None and conf.rank != 1:
        out.append(_configured_not_best(fp, setup, top, conf))
    trained = next((r for r in rows if r.trained), None)
    if trained is not None and trained.rank != 1 and not (conf is not None and conf.spec == trained.spec):
        d = trained.diff_to_best
        out.append(
            Finding(
                "FPR002",
                f"the draft's weights fit {format_spec(top.spec)} better than the declared training side {format_spec(trained.spec)}",
                [
                    f"paired difference to the best {d.point:.4f} [{d.lo:.4f}, {d.hi:.4f}]",
                    f"training side: {setup.train_source}",
                ],
                "check the training record (recipe, ids, the run's config) against the checkpoint: one of them is not what was trained",
                data={"best": [str(p) for p in top.spec], "trained": [str(p) for p in trained.spec]},
            )
        )
    return out


def _undetermined_fingerprint(fp: FingerprintResult) -> Finding:
    """FPR003: no candidate stands out (no fingerprint at all, or several within noise of the best)."""
    top = fp.rows[0]
    why = (
        "the best fit is no better than a uniform guess: the weights carry no trained fingerprint"
        if fp.settings.get("chance") and not fp.settings["chance"]["above_chance"]
        else f"{len(fp.tied)} candidate(s) within noise of the best"
    )
    return Finding(
        "FPR003",
        f"the draft's fingerprint is undetermined: {why}",
        [f"best {format_spec(top.spec)}: log-lik {top.log_lik.point:.4f}"] + [f"tied: {format_spec(t)}" for t in fp.tied[:4]],
        "replay more prompts (policy limit / max_new_tokens) or name the training side in the policy's [training] table",
    )


def _configured_not_best(fp: FingerprintResult, setup: Any, top: FingerprintRow, conf: FingerprintRow) -> Finding:
    """FPR001: the weights fit another wiring better than the one the engine feeds, with the ids that serve it."""
    from ..analyses.compare.fixes import fix_for

    text, _ = fix_for(setup.serving, top.spec)
    d = conf.diff_to_best
    return Finding(
        "FPR001",
        f"the draft's weights fit {format_spec(top.spec)} best, but the engine feeds {format_spec(conf.spec)}",
        [
            f"{format_spec(conf.spec)} (configured): log-lik {conf.log_lik.point:.4f}, "
            f"paired difference to the best {d.point:.4f} [{d.lo:.4f}, {d.hi:.4f}] (95%, over prompts)",
            f"serving side: {setup.serving.source}",
            fp.statistic,
        ],
        text or f"{setup.serving.label} cannot feed {format_spec(top.spec)}: see eagle3-doctor compare-hidden",
        data={"best": [str(p) for p in top.spec], "configured": [str(p) for p in conf.spec]},
    )


def training_side_finding(setup: Any, policy: Policy) -> Finding:
    """GATE002: the training side is read from the same config the engine reads, so they agree by construction."""
    return Finding(
        "GATE002",
        "the only training-side truth is the config the engine reads: wiring errors in this config are invisible to this gate",
        [
            f"training side: {setup.train_source}",
            f"serving side: {setup.serving.source}",
            "both come from the same file, so serving equals training by construction",
        ],
        'name what the draft was trained on: a [training] table in the policy (recipe = "specforge", ids = [...], '
        "or dump = DIR), or --train-recipe / --train-dump",
        severity=policy.training_from_config,
        data={"policy_key": "training_from_config"},
    )


def run_gate(
    *,
    target: str,
    draft: str,
    policy: Policy,
    prompts: str | None,
    baseline: str | None,
    dtype: str = "auto",
    device: str = "auto",
    draft_format: str | None = None,
    trust_remote_code: bool = False,
    train_recipe: str | None = None,
    train_dump: str | None = None,
) -> GateResult:
    """train_recipe / train_dump override the policy's [training] table (a flag names one side, so it replaces both)."""
    from ..analyses.inspect.inspection import inspect
    from ..doctor import acceptance, compare_hidden, load_setup
    from ..drafters.registry import refuse_other_kinds

    refuse_other_kinds(draft)
    train_recipe, train_dump = _training_side(policy, train_recipe, train_dump)
    ins = inspect(target, draft, engine=policy.engine, engine_version=policy.engine_version, draft_format=draft_format)
    setup = load_setup(
        target=target,
        draft=draft,
        draft_format=draft_format,
        engine=policy.engine,
        engine_version=policy.engine_version,
        train_recipe=train_recipe,
        dtype=dtype,
        device=device,
        trust_remote_code=trust_remote_code,
    )
    cmp = compare_hidden(setup, prompts_path=prompts, train_dump=train_dump, limit=policy.limit)
    acc = acceptance(
        setup, prompts_path=prompts, num_steps=policy.num_steps, max_new_tokens=policy.max_new_tokens, limit=policy.limit
    )
    fp, fp_findings = _gate_fingerprint(setup, policy, prompts)
    independent = bool(train_recipe or train_dump or (fp is not None and fp.determined))
    own = [] if independent else [training_side_finding(setup, policy)]
    findings = _unique(own + fp_findings + ins.findings + cmp.findings + acc.findings)
    if any(f.code == "FPR001" for f in fp_findings):
        # the fingerprint answers the weights' fit by log-likelihood: one root cause, one diagnostic (its step-1 twin goes)
        findings = [f for f in findings if f.code != "ACC004"]
    m = _metric(acc.paths, policy.num_steps)
    m["slot_cosine"] = [s.cos_mean for s in cmp.slots]
    findings = by_root_cause(drop_ignored(findings))  # one wrong id list is one error, its other sightings attached
    checks = [_severity_check(findings, policy)]
    checks += _threshold_checks(m, policy, acc, findings)
    if baseline:
        checks += _baseline_checks(m, _load_baseline(baseline), baseline, policy, findings)
    # the severity check is made after GATE001 joins, so a policy failing on warnings sees everything
    checks[0] = _severity_check(findings, policy)
    m["training_source"] = cmp.train_source
    return GateResult(policy, checks, findings, m, ins, cmp, acc, fp)


def _training_side(policy: Policy, train_recipe: str | None, train_dump: str | None) -> tuple[str | None, str | None]:
    """The training evidence to compare against: the flags, else the policy's [training] table."""
    if train_recipe and train_dump:
        raise BadInput("both --train-recipe and --train-dump given", "pass one: the dump is the stronger evidence")
    if not train_recipe and not train_dump:
        train_recipe, train_dump = policy.train_recipe(), policy.training.get("dump")
    if train_dump and not Path(train_dump).exists():
        raise BadInput(
            f"training dump {train_dump} not found",
            "pass the SpecForge dump directory (relative paths: from the working directory)",
        )
    return train_recipe, train_dump


def _gate_fingerprint(setup: Any, policy: Policy, prompts: str | None) -> tuple[Any, list[Finding]]:
    """The capture-point fingerprint and its findings, when the policy asks for it and a draft loaded."""
    if not (policy.fingerprint and setup.draft is not None):
        return None, []
    from ..analyses.fingerprint import fingerprint

    fp = fingerprint(
        setup, prompts_path=prompts, num_steps=policy.fingerprint_steps, max_new_tokens=policy.max_new_tokens, limit=policy.limit
    )
    return fp, fingerprint_findings(fp, setup)


def _unique(findings: list[Finding]) -> list[Finding]:
    """One finding per code and title: inspect and compare-hidden both diagnose the capture points."""
    seen, out = set(), []
    for f in findings:
        if (f.code, f.title) not in seen:
            seen.add((f.code, f.title))
            out.append(f)
    return out


def _severity_check(findings: list[Finding], policy: Policy) -> Check:
    blocking = at_or_above(findings, policy.fail_on)
    return Check(
        f"no findings at or above {policy.fail_on}", float(len(blocking)), 0.0, not blocking, ", ".join(map(_codes, blocking))
    )


def _codes(f: Finding) -> str:
    """A finding's code, with the codes of the sightings of the same root cause attached to it."""
    also = [r["code"] for r in f.data.get("related", [])]
    return f.code + (f" (with {', '.join(also)})" if also else "")


def _threshold_checks(m: dict[str, Any], policy: Policy, acc: Any, findings: list[Finding]) -> list[Check]:
    """The policy's absolute floors (slot cosine, step-1 accuracy, tau); a failed accuracy floor adds ACC003 to findings."""
    checks = []
    if policy.min_cosine is not None:
        worst = min(m["slot_cosine"]) if m["slot_cosine"] else float("nan")
        checks.append(Check("min slot cosine", worst, policy.min_cosine, worst >= policy.min_cosine))
    for key, name, thr in (("step1_accuracy", "step-1 accuracy", policy.min_step1_accuracy), ("tau", "tau", policy.min_tau)):
        if thr is None:
            continue
        v, how = _decided(m, key, policy)
        ok = v >= thr
        checks.append(Check(name, v, thr, ok, how))
        if not ok:
            findings.append(
                Finding(
                    "ACC003",
                    f"{name} {v:.4f} is below the gate's threshold {thr} ({how.split(' over ')[0]})",
                    [how, "serving features: " + format_spec(acc.settings.serving_spec)],
                    "find the cause with the findings above (eagle3-doctor acceptance); "
                    "replay more prompts if the interval is wide",
                    data={"decided_on": policy.decide_on},
                )
            )
    return checks


def _load_baseline(baseline: str) -> dict[str, Any]:
    """The metrics of an earlier `gate --json`."""
    import json

    from ..io.safeio import loads_json, read_regular_bytes

    p = Path(baseline)
    fix = "pass the JSON written by an earlier `gate --json`"
    if not p.exists() and not p.is_symlink():
        raise BadInput(f"baseline {p} not found", fix)
    try:
        return loads_json(read_regular_bytes(p, "baseline", fix, 64 << 20), f"baseline {p}", fix)["metrics"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise BadInput(f"baseline {p} is not a gate JSON (no 'metrics')", "pass the JSON written by `gate --json`") from None


def _baseline_checks(
    m: dict[str, Any], base: dict[str, Any], baseline: str, policy: Policy, findings: list[Finding]
) -> list[Check]:
    """Regression against the baseline within policy.max_regression; a regression adds GATE001 to findings."""
    p = Path(baseline)
    checks = []
    tol = policy.max_regression if policy.max_regression is not None else 0.0
    for key in ("step1_accuracy", "tau", "mean_acceptance_length"):
        if key not in base or base[key] is None or math.isnan(base[key]):
            continue
        drop, how = _drop(m, base, key, policy)
        ok = drop <= tol
        checks.append(
            Check(f"{key} vs baseline", m[key], base[key] - tol, ok, f"baseline {base[key]:.4f}, drop {drop:+.4f}, {how}")
        )
        if not ok:
            findings.append(
                Finding(
                    "GATE001",
                    f"{key} regressed by {drop:.4f} (allowed {tol}; {how.split(':')[0]})",
                    [f"baseline {base[key]:.4f} ({p}), now {m[key]:.4f}", how],
                    "compare the new checkpoint's training run with the baseline's",
                    data={"decided_on": policy.decide_on},
                )
            )
    return checks


def _drop(m: dict[str, Any], base: dict[str, Any], key: str, policy: Policy) -> tuple[float, str]:
    """How far the metric fell from the baseline, as the policy decides it, and words saying how."""
    import numpy as np

    from ..core.stats import difference_interval

    point = base[key] - m[key]
    if policy.decide_on == "point":
        return point, "decided on the point estimate"
    cur, old = m.get("samples"), base.get("samples")
    if cur and old and cur.get("num_steps") == old.get("num_steps") and old.get("counts"):
        K = int(cur["num_steps"])
        iv, pairing = difference_interval(np.asarray(cur["counts"]), np.asarray(old["counts"]), _stat(key, K))
        # the drop is -(now - baseline): its pessimistic end is the lower bound of the change
        return -iv.lo, (
            f"decided on the lower bound of the change's 95% interval {iv.point:+.4f} [{iv.lo:+.4f}, {iv.hi:+.4f}], {pairing}"
        )
    run_iv = (m.get("intervals") or {}).get(key)  # this run's interval, as its JSON holds it
    if run_iv and not math.isnan(run_iv.get("lo", float("nan"))):
        return base[key] - run_iv["lo"], (
            f"decided on the lower bound of this run's 95% interval [{run_iv['lo']:.4f}, {run_iv['hi']:.4f}] "
            "(the baseline has no per-prompt samples)"
        )
    return point, "decided on the point estimate (no interval)"
