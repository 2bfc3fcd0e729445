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
    decide_on = "lower_bound"    # thresholds/baselines decide on the 95% bootstrap interval's lower bound, or "point"
    fingerprint = true           # recover the trained capture points from the draft's weights (FPR001-FPR003)
    fingerprint_steps = 3

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
from typing import TYPE_CHECKING, Any

from ..core.errors import BadInput
from ..core.findings import Finding, at_or_above, display_path
from ..core.taps import format_spec

if TYPE_CHECKING:
    from ..analyses.compare.comparison import CompareResult
    from ..analyses.fingerprint import FingerprintResult, FingerprintRow
    from ..analyses.results import AcceptanceRun, PathResult

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
    decide_on: str = "lower_bound"  # thresholds and baselines decide on the interval's lower bound, or "point"
    fingerprint: bool = True  # recover the trained capture points from the draft's weights
    fingerprint_steps: int = 3
    training: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | None, overrides: dict[str, Any]) -> Policy:
        data: dict[str, Any] = {}
        if path:
            try:
                import tomllib
            except ImportError:  # Python 3.10
                raise BadInput("--policy needs Python 3.11+ (tomllib)", "pass the thresholds as flags instead") from None
            from ..io.safeio import read_regular_text

            p = Path(path)
            if not p.exists() and not p.is_symlink():
                raise BadInput(f"policy file {p} not found", "pass --policy FILE.toml")
            try:
                raw = tomllib.loads(read_regular_text(p, "policy file", "pass --policy FILE.toml", 4 << 20))
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
        if pol.decide_on not in ("lower_bound", "point"):
            raise BadInput(f"decide_on = {pol.decide_on!r}", 'use "lower_bound" (the 95% interval\'s) or "point"')
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
        raise BadInput(
            f"policy file {path}: [training] must be a table", 'write [training] with recipe = "specforge" and ids = [...]'
        )
    unknown = sorted(set(t) - set(TRAINING_KEYS))
    if unknown:
        raise BadInput(
            f"policy file {path}: unknown key(s) {', '.join(unknown)} in [training]", f"use only {', '.join(TRAINING_KEYS)}"
        )
    if "ids" in t and (
        not isinstance(t["ids"], list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in t["ids"])
    ):
        raise BadInput(
            f"policy file {path}: [training] ids = {t['ids']!r} is not a list of integers", "write e.g. ids = [1, 3, 4]"
        )
    if "ids" in t and "recipe" not in t:
        raise BadInput(
            f"policy file {path}: [training] ids without a recipe",
            'add recipe = "specforge" (or speculators, modelopt, hf-hidden-states)',
        )
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
    # the runs the gate made: the Markdown summary and the annotations read them; only the fingerprint is written
    inspect: Any = None  # inspect_draft.InspectResult
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
    m = _metric(acc.paths, policy.num_steps)
    m["slot_cosine"] = [s.cos_mean for s in cmp.slots]
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
        f"no findings at or above {policy.fail_on}", float(len(blocking)), 0.0, not blocking, ", ".join(f.code for f in blocking)
    )


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
    iv = (m.get("intervals") or {}).get(key)
    if iv and not math.isnan(iv.get("lo", float("nan"))):
        return base[key] - iv["lo"], (
            f"decided on the lower bound of this run's 95% interval [{iv['lo']:.4f}, {iv['hi']:.4f}] "
            "(the baseline has no per-prompt samples)"
        )
    return point, "decided on the point estimate (no interval)"


def markdown(res: GateResult, draft: str) -> str:
    from ..report.render import findings_markdown

    head = "PASS" if res.passed else "FAIL"
    lines = [
        f"## eagle3-doctor gate: {head}",
        "",
        f"draft `{draft}`, engine {res.policy.engine}",
        "",
        "| check | value | threshold | result |",
        "|---|---|---|---|",
    ]
    for c in res.checks:
        v = "-" if c.value is None else f"{c.value:.4f}"
        t = "-" if c.threshold is None else f"{c.threshold:.4f}"
        lines.append(f"| {c.name} | {v} | {t} | {'pass' if c.passed else '**fail**'} {c.detail} |")
    serving = res.acceptance.paths.get("serving") if res.acceptance is not None else None
    iv = serving.intervals if serving is not None else None
    lines += [""] + (
        [f"- {x}" for x in iv.lines()]
        if iv is not None
        else [f"mean acceptance length {res.metrics['mean_acceptance_length']:.3f}, tau {res.metrics['tau']:.3f}"]
    )
    if res.fingerprint is not None:
        from ..analyses.fingerprint import fingerprint_markdown

        lines += ["", fingerprint_markdown(res.fingerprint)]
    lines += ["", "### Findings", "", findings_markdown(res.findings)]
    return "\n".join(lines)


def write_summary(text: str, path: str | None) -> None:
    from ..io.outputs import write_output

    if path:
        write_output(path, text.encode())
    gh = os.environ.get("GITHUB_STEP_SUMMARY")
    if gh:  # GitHub appends step summaries; so do we
        from ..io.outputs import append_text

        append_text(gh, text + "\n")


# findings whose fix is a change to the layer-id key in the draft's config.json
_KEY_CODES = ("CAP", "FPR001", "CFG001", "CFG002", "GATE002", "ACC001")


def _escape(text: str) -> str:
    # GitHub workflow commands: % CR LF are escaped in the message, and also , : in properties
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_annotations(res: GateResult, draft: str) -> list[str]:
    """`::error file=...,line=...::` workflow commands, one per finding, at the file and key to change:
    the file the finding's location names (filled by findings.locate), else the draft's config.json."""
    from ..core.findings import by_severity

    cfg = Path(draft) / "config.json"
    dr = (res.compare.draft if res.compare is not None else None) or {}
    ids_line = _key_line(cfg, str(dr["layer_ids_key"])) if dr.get("layer_ids_key") else None
    out = []
    level = {"error": "error", "warning": "warning", "info": "notice"}
    for f in by_severity(res.findings):
        loc = f.location
        if loc is not None and loc.path and Path(loc.path).is_file():
            file, line = display_path(loc.path), _key_line(Path(loc.path), loc.key)
        else:
            file, line = str(cfg), ids_line if f.code.startswith(_KEY_CODES) else None
        props = f"file={file}" + (f",line={line}" if line is not None else "")
        props += f",title={_escape('eagle3-doctor ' + f.code).replace(',', '%2C').replace(':', '%3A')}"
        msg = f.title + (f" -- fix: {f.fix}" if f.fix else "")
        out.append(f"::{level[f.severity or 'info']} {props}::{_escape(msg)}")
    return out


def _key_line(path: Path, dotted: str | None) -> int | None:
    """The 1-based line of a JSON file where the dotted key's last part is written, if it is."""
    if not dotted or not path.is_file():
        return None
    key = f'"{dotted.split(".")[-1]}"'
    try:
        return next((i + 1 for i, t in enumerate(path.read_text(errors="replace").splitlines()) if key in t), None)
    except OSError:
        return None
