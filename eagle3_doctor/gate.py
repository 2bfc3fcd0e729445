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
    training_from_config = "warning"   # GATE002's severity when the engine's own config is the only training truth

A ``[training]`` table names the training side independently of the config the engine reads
(flags ``--train-recipe`` / ``--train-dump`` override it):

    [training]
    recipe = "specforge"         # a --train-recipe name (hf-hidden-states, specforge, speculators, modelopt, ...)
    ids = [1, 3, 4]              # the ids the training run used, in that recipe's convention
    # dump = "path/to/specforge-dump"   # or a training feature dump (relative paths: from the working directory)
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
    training_from_config: str = "warning"
    training: dict[str, Any] = field(default_factory=dict)

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
            data = dict(raw.get("gate", raw))
            data.pop("training", None)
            known = {f.name for f in fields(cls)} - {"training"}
            unknown = sorted(set(data) - known)
            if unknown:
                raise BadInput(f"policy file {p}: unknown key(s) {', '.join(unknown)}", f"use only {', '.join(sorted(known))}")
            data["training"] = _training_table(raw.get("training", {}), p)
        data.update({k: v for k, v in overrides.items() if v is not None})
        pol = cls(**data)
        if pol.fail_on not in ("error", "warning", "info"):
            raise BadInput(f"fail_on = {pol.fail_on!r}", "use error, warning or info")
        if pol.training_from_config not in ("error", "warning", "info"):
            raise BadInput(f"training_from_config = {pol.training_from_config!r}", "use error, warning or info")
        return pol

    def train_recipe(self) -> str | None:
        """The [training] table as a --train-recipe string (recipe[:ids])."""
        rec = self.training.get("recipe")
        if not rec:
            return None
        ids = self.training.get("ids")
        return f"{rec}:{','.join(str(i) for i in ids)}" if ids else str(rec)


TRAINING_KEYS = ("recipe", "ids", "dump")


def _training_table(t: Any, path: Path) -> dict[str, Any]:
    if not isinstance(t, dict):
        raise BadInput(f"policy file {path}: [training] must be a table", 'write [training] with recipe = "specforge" and ids = [...]')
    unknown = sorted(set(t) - set(TRAINING_KEYS))
    if unknown:
        raise BadInput(f"policy file {path}: unknown key(s) {', '.join(unknown)} in [training]", f"use only {', '.join(TRAINING_KEYS)}")
    if "ids" in t and (not isinstance(t["ids"], list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in t["ids"])):
        raise BadInput(f"policy file {path}: [training] ids = {t['ids']!r} is not a list of integers", "write e.g. ids = [1, 3, 4]")
    if "ids" in t and "recipe" not in t:
        raise BadInput(f"policy file {path}: [training] ids without a recipe", 'add recipe = "specforge" (or speculators, modelopt, hf-hidden-states)')
    if "recipe" in t and "dump" in t:
        raise BadInput(f"policy file {path}: [training] has both recipe and dump", "keep one: the dump is the stronger evidence")
    for k in ("recipe", "dump"):
        if k in t and not isinstance(t[k], str):
            raise BadInput(f"policy file {path}: [training] {k} must be a string", f'write {k} = "..."')
    return dict(t)


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


def training_side_finding(setup: Any, policy: Policy) -> Finding:
    """GATE002: the training side is read from the same config the engine reads, so they agree by construction."""
    key = setup.info.layer_ids_key if setup.info is not None and setup.info.layer_ids_key else "the draft config"
    return Finding(
        "GATE002", "the only training-side truth is the config the engine reads: wiring errors in this config are "
        "invisible to this gate",
        [f"training side: {setup.train_source}", f"serving side: {setup.serving.source}",
         "both come from the same file, so serving equals training by construction"],
        'name what the draft was trained on: a [training] table in the policy (recipe = "specforge", ids = [...], '
        "or dump = DIR), or --train-recipe / --train-dump",
        severity=policy.training_from_config,
        data={"policy_key": "training_from_config"},
    )


def run_gate(*, target: str, draft: str, policy: Policy, prompts: str | None, baseline: str | None,
             dtype: str = "auto", device: str = "auto", draft_format: str | None = None,
             trust_remote_code: bool = False, train_recipe: str | None = None,
             train_dump: str | None = None) -> GateResult:
    """train_recipe / train_dump override the policy's [training] table (a flag names one side, so it replaces both)."""
    import json

    from .doctor import acceptance, compare_hidden, load_setup
    from .inspect_draft import inspect

    if train_recipe and train_dump:
        raise BadInput("both --train-recipe and --train-dump given", "pass one: the dump is the stronger evidence")
    if not train_recipe and not train_dump:
        train_recipe, train_dump = policy.train_recipe(), policy.training.get("dump")
    if train_dump and not Path(train_dump).exists():
        raise BadInput(f"training dump {train_dump} not found", "pass the SpecForge dump directory (relative paths: from the working directory)")
    ins = inspect(target, draft, engine=policy.engine, engine_version=policy.engine_version, draft_format=draft_format)
    setup = load_setup(target=target, draft=draft, draft_format=draft_format, engine=policy.engine,
                       engine_version=policy.engine_version, train_recipe=train_recipe, dtype=dtype, device=device,
                       trust_remote_code=trust_remote_code)
    cmp = compare_hidden(setup, prompts_path=prompts, train_dump=train_dump, limit=policy.limit)
    acc = acceptance(setup, prompts_path=prompts, num_steps=policy.num_steps, max_new_tokens=policy.max_new_tokens,
                     limit=policy.limit)
    own = [] if (train_recipe or train_dump) else [training_side_finding(setup, policy)]
    # one finding per code and title: inspect and compare-hidden both diagnose the capture points
    seen, findings = set(), []
    for f in own + ins.findings + cmp.findings + acc.findings:
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
    # the severity check is made after GATE001 joins, so a policy failing on warnings sees everything
    blocking = at_or_above(findings, policy.fail_on)
    checks[0] = Check(f"no findings at or above {policy.fail_on}", float(len(blocking)), 0.0, not blocking,
                      ", ".join(f.code for f in blocking))
    m["training_source"] = cmp.train_source
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
