"""fix on an MTP head: MTP001's copy (the target's final norm folded into hnorm, the record set to final_norm),
checked again and measured against the original under the same engine."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ...core.findings import Finding
from ...model.setup import Setup
from .checks import MTPChecks


@dataclass
class MTPFixResult:
    out: str | None
    applied: list[str]
    before: dict[str, float]  # mean acceptance length by path, the original head
    after: dict[str, float]  # the copy's
    findings: list[Finding] = field(default_factory=list)  # the copy's, after the fix
    findings_before: list[Finding] = field(default_factory=list)
    checks: MTPChecks | None = None  # the original head's

    @property
    def loses(self) -> bool:
        """The copy accepts less than the original on the serving state: the fold is not the fix here."""
        return self.out is not None and self.after.get("serving", 0.0) < self.before.get("serving", 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            **(self.checks.to_dict("fix") if self.checks is not None else {}),
            "out": self.out,
            "applied": self.applied,
            "before": self.before,
            "after": self.after,
            "findings_before": [f.to_dict() for f in self.findings_before],
            "copy_loses": self.loses,
            "findings": [f.to_dict() for f in self.findings],
        }


def write_folded(setup: Setup, checks: MTPChecks, out: str) -> None:
    """The folded copy in the checkpoint's own layout; the original is only read. ``out`` appears only once
    the copy is complete (outputs.new_directory)."""
    from ...draft.mtp.fold import folded_copy
    from ...draft.mtp.formats import HIDDEN_KEY
    from ...draft.mtp.writing import write_mtp
    from ...io.copies import new_directory, write_file

    head = setup.draft
    fixed = folded_copy(head, setup.target.parts.norm.weight.detach())
    info = checks.info
    with new_directory(out) as stage:
        if info.format == "deepseek":
            write_mtp(fixed, stage, "deepseek", target_dir=info.path, layer=info.layer_index)
            return
        write_mtp(fixed, stage, "speculators", num_steps=info.num_speculative_tokens or 1)
        cfg = {**info.config, HIDDEN_KEY: "final_norm"}  # every other key of the original kept as it was
        write_file(stage / "config.json", (json.dumps(cfg, indent=2, sort_keys=True) + "\n").encode())


def mtp_fix(setup: Setup, checks: MTPChecks, out: str, opts: Any, prompts_path: str | None, progress: Any) -> MTPFixResult:
    from ...analyses.acceptance.run import measure_acceptance
    from .measure import judged_health
    from .setup import assemble_mtp

    def lengths(s: Setup, c: MTPChecks) -> tuple[dict[str, float], list[Finding]]:
        """Each path's mean acceptance length, and the health judgment of the head as served after its checks."""
        run = measure_acceptance(s, opts, prompts_path=prompts_path, progress=progress)
        return {name: p.chain.mean_acceptance_length for name, p in run.paths.items()}, judged_health(s, run, list(c.findings))

    before, judged = lengths(setup, checks)
    if not any(f.code == "MTP001" for f in checks.findings):
        found = [*checks.findings, *judged]
        return MTPFixResult(None, [], before, before, found, list(checks.findings), checks)
    write_folded(setup, checks, out)
    s2, c2 = assemble_mtp(setup.target, out, setup.serving.engine, setup.serving.version)
    applied = [f"MTP001: hnorm.weight folded with the target's final-norm weight, {c2.info.path}/config.json records final_norm"]
    after, judged = lengths(s2, c2)
    return MTPFixResult(out, applied, before, after, [*c2.findings, *judged], list(checks.findings), checks)
