"""The acceptance run's results, typed until they are written.

The estimator, the reference loop and the scan fill these; renderers (report, plots, gate, serving,
templates) read their attributes; ``to_dict()`` is the JSON document, field for field
(:mod:`typed_json`), and the JSON Schema of those parts of ``schemas/acceptance.v1.schema.json`` is
generated from these classes (``tools/gen_schemas.py``). Capture points stay :class:`CapturePoint`
objects until ``to_dict`` writes them as text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..core.findings import Finding
from ..core.stats import AcceptanceIntervals, Interval, acceptance_counts
from ..core.taps import FeatureSpec, format_spec
from ..core.typed_json import JsonFields, fields_json

SCHEMA = "eagle3-doctor/acceptance/1"
NAN = float("nan")


def spec_text(spec: FeatureSpec | None) -> list[str] | str:
    """A path's capture points as written to JSON: their names, or "dump" for a training dump's own tensors."""
    return [str(p) for p in spec] if spec is not None else "dump"


def spec_label(spec: FeatureSpec | None) -> str:
    """A path's capture points in a sentence: "embed, layer_out[2]", or "dump"."""
    return format_spec(spec) if spec is not None else "dump"


@dataclass
class ChainMetrics(JsonFields):
    """Every engine's acceptance figures from one list of verify passes (see acceptance.metrics_from_passes).

    With no pass at all only ``passes`` (0) is written; the figures read as nan.
    """

    passes: int = 0
    accepted_tokens: int = 0
    drafted_tokens: int = 0
    mean_acceptance_length: float = NAN  # vLLM and SGLang accept_length: bonus included
    mean_accepted_without_bonus: float = NAN
    draft_acceptance_rate: float = NAN  # vLLM
    sglang_accept_length: float = NAN
    sglang_accept_rate: float = NAN
    per_position_rate: list[float] = field(default_factory=list)  # vLLM, unconditional
    conditional_rate: list[float] = field(default_factory=list)  # P(A >= k | A >= k-1)
    accepted_length_histogram: list[int] = field(default_factory=list)
    accepted_lengths: list[list[int]] | None = None  # per prompt, in prompt order (the tree's figures only)

    JSON_OMIT_NONE: ClassVar = ("accepted_lengths",)
    JSON_REQUIRED: ClassVar = ("passes",)  # no verify pass: no figures

    def to_dict(self) -> dict[str, Any]:
        d = fields_json(self)
        return d if self.passes else {k: v for k, v in d.items() if k in ("passes", "accepted_lengths")}


@dataclass
class PositionBucket(JsonFields):
    """Step-1 accuracy over the bases at positions ``start``..``end`` (accuracy as the context grows)."""

    start: int
    end: int
    acc: float
    n: int

    JSON_NAMES: ClassVar = {"start": "from", "end": "to"}


@dataclass
class RequestCounts(JsonFields):
    """One prompt's teacher-forced hits and positions per draft step (what the bootstrap resamples)."""

    hits: list[int]
    positions: list[int]


@dataclass
class TemperatureFigures(JsonFields):
    """Expected acceptance at temperature > 0 along the teacher-forced path (no sampling noise)."""

    expected_per_position_rate: list[float]
    expected_mean_acceptance_length: float


@dataclass
class PathResult(JsonFields):
    """Acceptance of the draft fed one feature path (serving, training, or the draft as an engine runs it)."""

    name: str
    acc_k: list[float]  # SpecForge/EAGLE: teacher-forced token accuracy per TTT step
    acc_k_positions: list[int]
    tau: float
    chain: ChainMetrics
    step1_by_position: list[PositionBucket]
    per_request_mean_acceptance_length: float
    accepted_lengths: list[list[int]]  # per prompt (prompt order): draft tokens accepted in each verify pass
    acc_k_by_request: list[RequestCounts]
    step1_counts: list[list[int]]  # per prompt [hits, positions] at step 1: a paired bootstrap resamples these
    tree: ChainMetrics | None = None
    temperature: TemperatureFigures | None = None
    spec: FeatureSpec | None = None  # None: a training dump's own tensors
    intervals: AcceptanceIntervals | None = None
    triage: list[str] = field(default_factory=list)

    @property
    def step1(self) -> float:
        """Step-1 draft accuracy (nan when no position was measured)."""
        return self.acc_k[0] if self.acc_k else NAN

    def counts(self, num_steps: int) -> np.ndarray:
        """Per prompt [passes, accepted, #(A>=1..K), acc_k hits (K), acc_k positions (K)]: what intervals resample."""
        by = self.acc_k_by_request
        return acceptance_counts(self.accepted_lengths, [r.hits for r in by], [r.positions for r in by], num_steps)

    JSON_OMIT_NONE: ClassVar = ("tree", "temperature", "intervals")
    JSON_SCHEMA: ClassVar = {"spec": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"const": "dump"}]}}

    def to_dict(self) -> dict[str, Any]:
        return {**fields_json(self), "spec": spec_text(self.spec)}


@dataclass
class TreePlan(JsonFields):
    """Which draft tree the engine builds for these settings (acceptance of it is exact: tree.py)."""

    kind: str  # "static" (vLLM speculative_token_tree, or its full top-k tree) or "sglang" (EAGLE dynamic tree)
    depth: int
    num_draft_tokens: int
    label: str
    paths: list[list[int]] | None = None  # static: every node's path of child ranks
    width: int | None = None  # static: the widest rank in any path
    topk: int | None = None  # sglang: --speculative-eagle-topk

    JSON_OMIT_NONE: ClassVar = ("paths", "width", "topk")  # a static tree has paths and width, SGLang's a topk
    JSON_SCHEMA: ClassVar = {"kind": {"enum": ["static", "sglang"]}}


@dataclass
class RunSettings(JsonFields):
    """What was measured and how."""

    target: str
    draft: dict[str, Any] | None
    engine: str
    num_steps: int
    continuation: str
    max_new_tokens: int | None  # None in text mode
    temperature: float
    temperature_mode: str | None
    topk: int
    num_draft_tokens: int | None
    dtype: str
    device: str
    compiled: bool
    sequences: int
    tokens: int
    serving_spec: FeatureSpec
    serving_source: str
    training_spec: FeatureSpec | None
    training_source: str | None
    tree: TreePlan | None = None
    serve: dict[str, Any] | None = None  # the server launch command's settings (--serve-cmd)

    JSON_OMIT_NONE: ClassVar = ("tree", "serve")
    # tree_note: the tree's label again, where earlier readers of the document look for it
    JSON_SCHEMA: ClassVar = {"serve": {"$ref": "#/$defs/serve"}, "tree_note": {"type": "string"}}

    def to_dict(self) -> dict[str, Any]:
        d = fields_json(self)
        if self.tree is not None:
            d["tree_note"] = self.tree.label
        return d


@dataclass
class TreeReference(JsonFields):
    """The sequential tree-verify loop's figures, per prompt."""

    accepted_lengths: list[list[int]]
    metrics: ChainMetrics
    agrees_with_estimator: bool


@dataclass
class ReferenceResult(JsonFields):
    """The plain sequential decode loop over every prompt, and whether the estimator agrees with it."""

    accepted_lengths: list[list[int]]
    chain: ChainMetrics
    agrees_with_estimator: bool
    same_tokens: bool
    same_tokens_per_prompt: list[bool]  # False: the loop's full-prefix target forwards chose other tokens
    tree: TreeReference | None = None

    JSON_OMIT_NONE: ClassVar = ("tree",)


@dataclass
class ScanRow(JsonFields):
    """One candidate wiring of the scan: step-1 accuracy with its interval over prompts."""

    spec: FeatureSpec
    step1_acc: float
    n: int  # positions scored
    step1_acc_ci: tuple[float, float]  # 95% over prompts
    configured: bool  # the capture points the run is configured with (training side, else serving)
    diff_to_configured: Interval | None  # paired over prompts: this candidate minus the configured one
    tied_with_best: bool  # the paired interval against the best candidate reaches 0


@dataclass
class AcceptanceRun:
    """One acceptance run: per-path results, the settings, findings, and the optional reference loop and scan."""

    paths: dict[str, PathResult]
    settings: RunSettings
    findings: list[Finding]
    notes: list[str]
    reference: ReferenceResult | None = None
    scan: list[ScanRow] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "settings": self.settings.to_dict(),
            "paths": {n: p.to_dict() for n, p in self.paths.items()},
            "findings": [f.to_dict() for f in self.findings],
            "reference": self.reference.to_dict() if self.reference is not None else None,
            "scan": [r.to_dict() for r in self.scan] if self.scan is not None else None,
            "notes": self.notes,
        }
