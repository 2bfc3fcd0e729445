"""The numeric comparison: per-position similarity of served and trained features, slot by slot and
against every capture point (NUM001, NUM002).

Matching is on relative L2 error (magnitude-aware), with cosine reported beside it: adjacent
layers of a trained model have cosine 0.90-0.98, and final_norm vs layer_out[L-1] can reach
0.999 while still costing the draft several points (fixtures/README.md: final_norm in the last
slot costs 3.6 points of step-1 accuracy)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ...core.findings import Finding
from ...core.taps import CapturePoint

DRIFT_REL = 1e-3  # relative L2 above which a matching capture point is reported as drifting


WARN_REL = 0.02  # ... and above which the drift is a warning (bf16 rounding alone stays below)


def position_metrics(a: torch.Tensor, b: torch.Tensor) -> dict[str, torch.Tensor]:
    """a (served), b (reference): [..., H] -> per-position cosine, relative L2, max |a-b| (float32)."""
    a32, b32 = a.float(), b.float()
    diff = a32 - b32
    nb = b32.norm(dim=-1).clamp_min(1e-12)
    return {
        "cos": torch.nn.functional.cosine_similarity(a32, b32, dim=-1, eps=1e-12),
        "rel": diff.norm(dim=-1) / nb,
        "maxabs": diff.abs().amax(dim=-1),
    }


@dataclass
class SlotStats:
    slot: int
    trained: CapturePoint | None  # None: a training dump's slot (identified numerically: see the matrix)
    served: CapturePoint | None  # None: a capture point an engine dump does not name
    n: int
    cos_mean: float
    cos_min: float
    cos_p05: float
    rel_mean: float
    rel_p95: float
    maxabs: float
    worst: list[dict[str, Any]] = field(default_factory=list)

    @property
    def trained_label(self) -> str:
        return str(self.trained) if self.trained is not None else f"dump slot {self.slot}"

    @property
    def served_label(self) -> str:
        return str(self.served) if self.served is not None else "?"

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "trained": self.trained_label, "served": self.served_label}


class SlotAccumulator:
    """Per-position metrics of one slot over all batches, kept as small 1-D arrays on the CPU."""

    def __init__(self, slot: int, trained: CapturePoint | None, served: CapturePoint | None):
        self.slot, self.trained, self.served = slot, trained, served
        self.cos: list[torch.Tensor] = []
        self.rel: list[torch.Tensor] = []
        self.maxabs: list[torch.Tensor] = []
        self.where: list[tuple[int, int, int]] = []  # (sequence, position, token)

    def add(
        self, served: torch.Tensor, ref: torch.Tensor, seq_ids: Sequence[int], tokens: torch.Tensor, mask: torch.Tensor
    ) -> None:
        m = position_metrics(served, ref)
        sel = mask.bool()
        for k, store in (("cos", self.cos), ("rel", self.rel), ("maxabs", self.maxabs)):
            store.append(m[k][sel].cpu())
        b_idx, t_idx = sel.nonzero(as_tuple=True)
        toks = tokens[sel].cpu().tolist()
        for b, t, tok in zip(b_idx.tolist(), t_idx.tolist(), toks):
            self.where.append((seq_ids[b], t, tok))

    def finish(self, tokenizer: Any = None, worst: int = 3) -> SlotStats:
        cos, rel, mx = torch.cat(self.cos), torch.cat(self.rel), torch.cat(self.maxabs)
        order = torch.argsort(rel, descending=True)[:worst].tolist()
        w = []
        for i in order:
            s, t, tok = self.where[i]
            text = tokenizer.decode([tok]) if tokenizer is not None else str(tok)
            w.append(
                {"sequence": s, "position": t, "token": text, "cos": round(float(cos[i]), 6), "rel_l2": round(float(rel[i]), 6)}
            )
        return SlotStats(
            self.slot,
            self.trained,
            self.served,
            int(cos.numel()),
            float(cos.mean()),
            float(cos.min()),
            float(torch.quantile(cos, 0.05)),
            float(rel.mean()),
            float(torch.quantile(rel, 0.95)),
            float(mx.max()),
            w,
        )


@dataclass
class MatrixBest:
    """One row's closest column, and its margin over the runner-up (how sure the match is)."""

    row: str
    best: CapturePoint | str  # a capture point; a training slot's label in dump-vs-dump
    rel_l2: float
    cos: float
    runner_up: CapturePoint | str
    runner_up_rel_l2: float

    @property
    def margin(self) -> float:
        return self.runner_up_rel_l2 - self.rel_l2

    def to_dict(self) -> dict[str, Any]:
        return {
            "row": self.row,
            "best": str(self.best),
            "rel_l2": self.rel_l2,
            "cos": self.cos,
            "runner_up": str(self.runner_up),
            "runner_up_rel_l2": self.runner_up_rel_l2,
            "margin": self.margin,
        }


@dataclass
class Matrix:
    """Mean relative L2 and cosine of every row tensor (a slot) against every column (a capture point)."""

    rows: list[str]
    cols: list[CapturePoint] | list[str]  # capture points; training slots' labels in dump-vs-dump
    rel_l2: list[list[float]]
    cos: list[list[float]]
    best: list[MatrixBest]

    @classmethod
    def of(cls, rows: list[str], cols: Sequence[Any], rel: Any, cos: Any, names: Sequence[Any] | None = None) -> Matrix:
        """Each row's best column and runner-up by relative L2; rel and cos are [rows, cols] (nested lists or a
        tensor); ``names``: what the best/runner-up entries call each column (default: the column itself)."""
        rel, cos = [list(map(float, r)) for r in rel], [list(map(float, r)) for r in cos]
        names = cols if names is None else names
        best = []
        for i, name in enumerate(rows):
            order = sorted(range(len(cols)), key=lambda j: rel[i][j])
            b, s = order[0], order[1] if len(order) > 1 else order[0]
            best.append(MatrixBest(name, names[b], rel[i][b], cos[i][b], names[s], rel[i][s]))
        return cls(list(rows), list(cols), rel, cos, best)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "cols": [str(c) for c in self.cols],
            "rel_l2": self.rel_l2,
            "cos": self.cos,
            "best": [b.to_dict() for b in self.best],
        }


class MatrixAccumulator:
    """Mean relative L2 and cosine of each row tensor against every capture point."""

    def __init__(self, rows: list[str], cols: list[CapturePoint]):
        self.rows, self.cols = rows, cols
        self.rel = torch.zeros(len(rows), len(cols), dtype=torch.float64)
        self.cos = torch.zeros(len(rows), len(cols), dtype=torch.float64)
        self.n = 0

    def add(self, row_tensors: list[torch.Tensor], captured: dict[CapturePoint, torch.Tensor], mask: torch.Tensor) -> None:
        sel = mask.bool()
        for i, r in enumerate(row_tensors):
            for j, c in enumerate(self.cols):
                m = position_metrics(r[sel], captured[c][sel])
                self.rel[i, j] += float(m["rel"].double().sum())
                self.cos[i, j] += float(m["cos"].double().sum())
        self.n += int(sel.sum())

    def result(self) -> Matrix:
        rel, cos = self.rel / max(self.n, 1), self.cos / max(self.n, 1)
        return Matrix.of(self.rows, self.cols, rel.tolist(), cos.tolist())


def numeric_findings(slots: list[SlotStats], matrix: Matrix | None, symbolic_equal: list[bool]) -> list[Finding]:
    """Findings the numbers add on top of the symbolic step."""
    out: list[Finding] = []
    best = {b.row: b for b in matrix.best} if matrix is not None else {}
    drifting = []
    for st, same in zip(slots, symbolic_equal):
        if not same or st.rel_mean <= DRIFT_REL:
            continue
        b = best.get(f"train slot {st.slot}")
        if b is not None and b.best != st.served:
            out.append(
                Finding(
                    "NUM002",
                    f"slot {st.slot}: the training features best match {b.best}, not {st.served_label}",
                    [f"rel L2 to {st.served_label}: {st.rel_mean:.4f}; to {b.best}: {b.rel_l2:.4f} (cos {b.cos:.4f})"],
                    "check how the training features were produced (layer ids, norm, model revision)",
                )
            )
        else:
            drifting.append(st)
    if drifting:
        worst = max(s.rel_mean for s in drifting)
        out.append(
            Finding(
                "NUM001",
                "the capture points match but their values drift: "
                + ", ".join(f"slot {s.slot} rel L2 {s.rel_mean:.4f} (cos {s.cos_mean:.5f})" for s in drifting),
                [
                    f"slot {s.slot} ({s.served_label}): mean rel L2 {s.rel_mean:.4f}, p95 {s.rel_p95:.4f}, min cos {s.cos_min:.5f}, "
                    f"max |diff| {s.maxabs:.4g}"
                    for s in drifting
                ]
                + [f"reported above mean relative L2 {DRIFT_REL}; a warning above {WARN_REL} (bf16 rounding alone stays below)"],
                "make the training features and the serving target agree: same checkpoint revision, dtype "
                "(--dtype) and quantisation; a bf16-vs-fp32 gap alone is usually harmless, check acceptance",
                severity="warning" if worst > WARN_REL else "info",
            )
        )
    return out
