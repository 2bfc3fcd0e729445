"""The diagnostic vocabulary: every finding has a stable code, a severity, evidence and a fix.

Codes are stable API: CI policies and users' scripts match on them. The README lists them all
(tests/test_findings.py keeps README and this table in step).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITY_RANK = {INFO: 0, WARNING: 1, ERROR: 2}

CODES: dict[str, tuple[str, str]] = {
    # code: (default severity, what it means)
    # --- capture points: symbolic and numeric
    "CAP001": (ERROR, "every serving slot is shifted by the same number of layers from training"),
    "CAP002": (ERROR, "the embeddings are fed in a slot that was trained on a layer output"),
    "CAP003": (ERROR, "final_norm fed where a pre-norm layer output was trained, or the reverse"),
    "CAP004": (ERROR, "the serving slots are the training slots in another order"),
    "CAP005": (ERROR, "the engine feeds a different number of slots than the draft was trained on"),
    "CAP006": (ERROR, "serving slots differ from training slots (no simpler pattern)"),
    "CAP007": (WARNING, "layer ids sit in a config key this engine version does not read"),
    "CAP008": (WARNING, "the engine version uses different ids in CUDA-graph decode than in prefill"),
    "CAP009": (ERROR, "the named engine cannot capture what the draft was trained on"),
    "CAP010": (INFO, "the engine reorders or de-duplicates the configured ids"),
    "CAP011": (INFO, "an architecture- or version-specific id rule decided what these ids capture"),
    "NUM001": (WARNING, "each slot matches the right capture point but the values drift (dtype, revision, quantisation)"),
    "NUM002": (ERROR, "numerically, a serving slot best matches another capture point than the one trained"),
    "NUM003": (ERROR, "the training dump's hidden_state is not the target's final_norm output"),
    "NUM004": (ERROR, "a training dump's slot matches no capture point of this target"),
    # --- draft checkpoint and config (inspect)
    "DRF001": (ERROR, "the draft checkpoint has no lm_head"),
    "DRF002": (ERROR, "the draft has a smaller vocabulary than the target but no d2t table"),
    "DRF003": (ERROR, "d2t maps draft ids outside the target vocabulary"),
    "DRF004": (ERROR, "t2d disagrees with d2t"),
    "DRF005": (ERROR, "the fc input width does not equal number of aux states x target hidden size"),
    "DRF006": (WARNING, "the draft head looks untrained (weight statistics)"),
    "DRF007": (WARNING, "the draft ships its own embed_tokens and they differ from the target's"),
    "DRF008": (ERROR, "draft and target hidden or vocabulary sizes disagree"),
    "DRF009": (ERROR, "draft weights hold NaN or Inf"),
    "DRF010": (WARNING, "the draft checkpoint has weights its format does not use"),
    "CFG001": (ERROR, "layer ids are out of range for the target"),
    "CFG002": (WARNING, "layer ids are unsorted: engines that sort will permute the fc input"),
    "CFG003": (WARNING, "rope_theta differs between draft and target"),
    "CFG004": (WARNING, "rope_scaling / partial_rotary_factor / max_position_embeddings differ between draft and target"),
    "CFG005": (WARNING, "draft and target dtypes differ"),
    "CFG006": (INFO, "a forward-changing flag means different things in different engines"),
    "CFG007": (WARNING, "the draft config's architecture is not the one the engine registers for EAGLE-3"),
    # --- the draft as the engine runs it vs as trained (issue 13; draft/served.py)
    "FWD001": (ERROR, "the engine runs a forward flag (norm placement) differently from training"),
    "FWD002": (WARNING, "undetermined whether this engine version applies a forward flag the draft was trained with"),
    "FWD003": (ERROR, "the engine replaces the draft's own lm_head or embed_tokens with the target's"),
    "FWD004": (ERROR, "tie_word_embeddings makes the engine use embed_tokens as the draft's lm_head"),
    "FWD005": (WARNING, "the draft has both norm_before_fc and fc_norm, a pair speculators rejects"),
    "FWD006": (ERROR, "the engine rotates the draft's RoPE in another layout (NeoX vs GPT-J-interleaved) than training"),
    "FWD007": (WARNING, "undetermined whether the draft was trained with NeoX or GPT-J-interleaved RoPE"),
    # --- acceptance
    "ACC001": (ERROR, "acceptance under the serving features is far below the training features"),
    "ACC002": (ERROR, "acceptance is low on the training features too: the draft itself is weak"),
    "ACC003": (WARNING, "acceptance is below the gate's threshold"),
    "ACC004": (INFO, "a capture-point scan found features that fit the draft better than the configured ones"),
    "GATE001": (ERROR, "a metric regressed against the baseline beyond the allowed margin"),
    # --- serving evidence: the live server's counters vs the prediction (issue 16, serving.py)
    "SRV001": (ERROR, "engine: the server accepts well below the prediction for its own capture points"),
    "SRV002": (ERROR, "wiring: the server matches the serving-feature prediction; the capture mismatch explains the gap"),
    "SRV003": (ERROR, "draft: the server matches the prediction and the draft is weak even on its training features"),
    "SRV004": (INFO, "server vs prediction undetermined: the intervals neither separate nor agree"),
    "SRV010": (ERROR, "an engine dump slot matches no training-dump slot and is not the embeddings"),
    # --- the CI gate's own evidence (issue 14)
    "GATE002": (WARNING, "the gate's only training-side truth is the config the engine reads"),
    "FPR001": (ERROR, "the draft's own fingerprint names other capture points than the engine feeds"),
    "FPR002": (WARNING, "the draft's own fingerprint disagrees with the declared training side"),
    "FPR003": (INFO, "the draft's fingerprint cannot tell the candidate capture points apart"),
    # --- engine failures (issue 12: engine truth, from the engines' own code, executed)
    "ENG001": (ERROR, "the engine refuses to start with this target, draft config or ids"),
    "ENG002": (ERROR, "the engine crashes on the first forward with these ids"),
    "ENG003": (ERROR, "the engine runs but feeds the draft a tensor that is no capture point (an MLP branch, an unwritten slot)"),
}


@dataclass
class Finding:
    code: str
    title: str
    evidence: list[str] = field(default_factory=list)
    fix: str | None = None
    severity: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"unknown finding code {self.code}")
        if self.severity is None:
            self.severity = CODES[self.code][0]

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "severity": self.severity, "title": self.title, "evidence": self.evidence,
                "fix": self.fix, "data": self.data}


def worst(findings: list[Finding]) -> str | None:
    if not findings:
        return None
    return max((f.severity for f in findings), key=lambda s: SEVERITY_RANK[s or INFO])


def at_or_above(findings: list[Finding], severity: str) -> list[Finding]:
    return [f for f in findings if SEVERITY_RANK[f.severity or INFO] >= SEVERITY_RANK[severity]]
