"""gate: inspect + compare-hidden + acceptance under one policy, for CI.

Policy (TOML, table ``[gate]``; every key optional, flags override the file):

    engine = "sglang"            # and engine_version
    fail_on = "error"            # findings at or above this severity fail the gate
    min_cosine = 0.999           # mean cosine of every serving slot vs its training slot
    min_step1_accuracy = 0.5     # serving path acc_1
    min_tau = 2.0                # serving path tau
    max_regression = 0.02        # allowed drop vs --baseline in acc_1 and mean acceptance length / tau (absolute)
    num_steps = 5
    max_new_tokens = 64
    limit = 16                   # prompts
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .errors import BadInput
from .findings import Finding, at_or_above

SCHEMA = "eagle3-doctor/gate/1"


@dataclass
class Policy:
    engine: str = "sglang"
    engine_version: str | None = None
    fail_on: str = "error"
    min_cosine: float | None = 0.999
    min_step1_accuracy: float | None = None
    min_tau: float | None = None
    max_regression: float | None = 0.02
    num_steps: int = 5
    max_new_tokens: int = 64
    limit: int | None = 16

    @classmethod
    def load(cls, path: str | None, overrides: dict[str, Any]) -> "Policy":
        data: dict[str, Any] = {}
        if path:
            try:
                import tomllib
            except ImportError:  # Python 3.10
                raise BadInput("--policy needs Python 3.11+ (tomllib)", "pass the thresholds as flags instead") from None
            p = Path(path)
            if not p.is_file():
                raise BadInput(f"policy file {p} not found", "pass --policy FILE.toml")
            try:
                raw = tomllib.loads(p.read_text())
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
                raise BadInput(f"policy file {p} is not valid TOML ({e})", "fix the file") from None
            data = raw.get("gate", raw)
            known = {f.name for f in fields(cls)}
            unknown = sorted(set(data) - known)
            if unknown:
                raise BadInput(f"policy file {p}: unknown key(s) {', '.join(unknown)}", f"use only {', '.join(sorted(known))}")
        data.update({k: v for k, v in overrides.items() if v is not None})
        pol = cls(**data)
        if pol.fail_on not in ("error", "warning", "info"):
            raise BadInput(f"fail_on = {pol.fail_on!r}", "use error, warning or info")
        return pol


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
    sections: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "passed": self.passed, "policy": self.policy.__dict__,
                "checks": [c.__dict__ for c in self.checks], "metrics": self.metrics,
                "findings": [f.to_dict() for f in self.findings]}


def _metric(run_paths: dict[str, Any]) -> dict[str, Any]:
    s = run_paths.get("serving", {})
    return {"step1_accuracy": s.get("acc_k", [float("nan")])[0], "tau": s.get("tau", float("nan")),
            "mean_acceptance_length": s.get("chain", {}).get("mean_acceptance_length", float("nan")),
            "per_position_rate": s.get("chain", {}).get("per_position_rate", [])}


def run_gate(*, target: str, draft: str, policy: Policy, prompts: str | None, baseline: str | None,
             dtype: str = "auto", device: str = "auto", draft_format: str | None = None,
             trust_remote_code: bool = False) -> GateResult:
    import json

    from .doctor import acceptance, compare_hidden, load_setup
    from .inspect_draft import inspect

    ins = inspect(target, draft, engine=policy.engine, engine_version=policy.engine_version, draft_format=draft_format)
    setup = load_setup(target=target, draft=draft, draft_format=draft_format, engine=policy.engine,
                       engine_version=policy.engine_version, dtype=dtype, device=device, trust_remote_code=trust_remote_code)
    cmp = compare_hidden(setup, prompts_path=prompts, limit=policy.limit)
    acc = acceptance(setup, prompts_path=prompts, num_steps=policy.num_steps, max_new_tokens=policy.max_new_tokens,
                     limit=policy.limit)
    # one finding per code and title: inspect and compare-hidden both diagnose the capture points
    seen, findings = set(), []
    for f in ins.findings + cmp.findings + acc.findings:
        if (f.code, f.title) not in seen:
            seen.add((f.code, f.title))
            findings.append(f)
    m = _metric(acc.paths)
    m["slot_cosine"] = [s.cos_mean for s in cmp.slots]
    checks = []
    blocking = at_or_above(findings, policy.fail_on)
    checks.append(Check(f"no findings at or above {policy.fail_on}", float(len(blocking)), 0.0, not blocking,
                        ", ".join(f.code for f in blocking)))
    if policy.min_cosine is not None:
        worst = min(m["slot_cosine"]) if m["slot_cosine"] else float("nan")
        checks.append(Check("min slot cosine", worst, policy.min_cosine, worst >= policy.min_cosine))
    if policy.min_step1_accuracy is not None:
        v = m["step1_accuracy"]
        checks.append(Check("step-1 accuracy", v, policy.min_step1_accuracy, v >= policy.min_step1_accuracy))
    if policy.min_tau is not None:
        checks.append(Check("tau", m["tau"], policy.min_tau, m["tau"] >= policy.min_tau))
    if baseline:
        p = Path(baseline)
        if not p.is_file():
            raise BadInput(f"baseline {p} not found", "pass the JSON written by an earlier `gate --json`")
        try:
            base = json.loads(p.read_text())["metrics"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise BadInput(f"baseline {p} is not a gate JSON (no 'metrics')", "pass the JSON written by `gate --json`") from None
        tol = policy.max_regression if policy.max_regression is not None else 0.0
        for key in ("step1_accuracy", "tau", "mean_acceptance_length"):
            if key in base and not math.isnan(base[key]):
                drop = base[key] - m[key]
                ok = drop <= tol
                checks.append(Check(f"{key} vs baseline", m[key], base[key] - tol, ok, f"baseline {base[key]:.4f}, drop {drop:+.4f}"))
                if not ok:
                    findings.append(Finding("GATE001", f"{key} regressed by {drop:.4f} (allowed {tol})",
                                            [f"baseline {base[key]:.4f} ({p}), now {m[key]:.4f}"],
                                            "compare the new checkpoint's training run with the baseline's"))
    return GateResult(policy, checks, findings, m, {"inspect": ins.to_dict(), "compare": cmp.to_dict(), "acceptance": acc.to_dict()})


def markdown(res: GateResult, draft: str) -> str:
    from .report import findings_markdown

    head = "PASS" if res.passed else "FAIL"
    lines = [f"## eagle3-doctor gate: {head}", "", f"draft `{draft}`, engine {res.policy.engine}", "",
             "| check | value | threshold | result |", "|---|---|---|---|"]
    for c in res.checks:
        v = "-" if c.value is None else f"{c.value:.4f}"
        t = "-" if c.threshold is None else f"{c.threshold:.4f}"
        lines.append(f"| {c.name} | {v} | {t} | {'pass' if c.passed else '**fail**'} {c.detail} |")
    rates = res.metrics.get("per_position_rate") or []
    lines += ["", f"mean acceptance length {res.metrics['mean_acceptance_length']:.3f}, tau {res.metrics['tau']:.3f}, "
              f"per-position acceptance {', '.join(f'{r:.2f}' for r in rates)}", "", "### Findings", "", findings_markdown(res.findings)]
    return "\n".join(lines)


def write_summary(text: str, path: str | None) -> None:
    from .safeio import write_output

    if path:
        write_output(path, text.encode())
    gh = os.environ.get("GITHUB_STEP_SUMMARY")
    if gh:
        with open(gh, "a", encoding="utf-8") as f:  # GitHub appends step summaries; so do we
            f.write(text + "\n")
