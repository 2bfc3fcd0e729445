"""What diagnose writes: the verdict and the rows it rests on, and how its figures are read from the
per-prompt counts (mean acceptance length, step-1 accuracy, each with a paired interval over prompts)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ...core.findings import Finding
from ...core.stats import Interval, acceptance_counts, mean_acceptance_length, paired, ratio
from ...core.typed_json import JsonFields

if TYPE_CHECKING:
    from ..results import PathResult


STEP1 = ratio(0, 1)  # step-1 accuracy from [hits, positions] rows


@dataclass
class LeverRow(JsonFields):
    """Acceptance with one serving-vs-training difference set back to training."""

    name: str
    what: str
    mean_acceptance_length: Interval
    recovery: Interval  # lever - serving, paired over prompts (mean acceptance length)
    step1_recovery: Interval
    fix: str | None
    part_of: str | None = None  # the lever this one is a part of (one difference of several set back alone)

    JSON_OMIT_NONE: ClassVar[tuple[str, ...]] = ("part_of",)


@dataclass
class ModuleRow(JsonFields):
    """Step-1 accuracy with one module mean-ablated, and what the ablation costs."""

    module: str
    step1: Interval
    cost: Interval  # unablated - ablated step-1 accuracy, paired over prompts
    consistent: bool  # False: the ablation costs nothing a trained module would
    verdict: str  # trained | contributes nothing | ablation helps | unclear


@dataclass
class ContextRow(JsonFields):
    """Step-1 accuracy over absolute positions ``start``..``end`` (one bucket), over the prompts reaching it."""

    start: int
    end: int
    step1: Interval
    positions: int


@dataclass
class Diagnosis(JsonFields):
    """The verdict, and the measurements it rests on."""

    branch: str  # pipeline | checkpoint | context | data | runtime | undetermined
    verdict: str
    serving: Interval  # mean acceptance length, serving side as the engine runs it
    training: Interval  # the same with every lever on the training side
    gap: Interval  # training - serving, paired
    base_path: str  # the path module health and context are measured on
    levers: list[LeverRow]
    modules: list[ModuleRow]
    context: list[ContextRow]
    findings: list[Finding]
    notes: list[str] = field(default_factory=list)
    prompts: int = 0

    JSON_SCHEMA: ClassVar = {"findings": {"type": "array", "items": {"$ref": "#/$defs/finding"}}}

    def to_dict(self) -> dict[str, Any]:
        from ...core.typed_json import fields_json

        return {**fields_json(self), "findings": [f.to_dict() for f in self.findings]}


SCHEMA = "eagle3-doctor/diagnose/1"


def _mal(results: dict[str, PathResult], names: list[str], K: int) -> tuple[list[Interval], list[Interval]]:
    """Mean acceptance length of each path, paired over prompts: the tree's where the engine drafts one."""
    return paired([_counts(results[n], K) for n in names], mean_acceptance_length, 0)


def _counts(res: PathResult, K: int) -> np.ndarray:
    if res.tree is not None and res.tree.accepted_lengths is not None:
        return acceptance_counts(res.tree.accepted_lengths, None, None, 1)  # passes and accepted: all _mal reads
    return res.counts(K)


def _step1(results: dict[str, PathResult], names: list[str]) -> tuple[list[Interval], list[Interval]]:
    return paired([np.asarray(results[n].step1_counts, dtype=np.float64).reshape(-1, 2) for n in names], STEP1, 0)
