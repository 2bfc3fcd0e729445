"""A training dump's slots, identified numerically against every capture point of the target (NUM003, NUM004)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from ...core.findings import Finding
from ...core.taps import CapturePoint, FeatureSpec, format_spec
from .numeric import Matrix, MatrixAccumulator

MATCH_REL = 0.5  # relative L2 above which a dump slot matches no capture point at all


@dataclass
class DumpIdentity:
    """What a training dump holds, recovered numerically: each slot's best-matching capture point."""

    spec: FeatureSpec
    source: str
    info: dict[str, Any]
    findings: list[Finding]


def identify_dump(
    path: str, files: int, n_slots: int, num_layers: int, matrix: Matrix, hs_mat: MatrixAccumulator | None
) -> DumpIdentity:
    """NUM004 for slots that match nothing, NUM003 for a hidden_state that is not final_norm."""
    from ...core.taps import final_norm

    best = matrix.best[:n_slots]
    # cast: the columns of a MatrixAccumulator's matrix are capture points (labels only in dump-vs-dump)
    spec = cast(FeatureSpec, tuple(b.best for b in best))
    unmatched = [j for j in range(n_slots) if best[j].rel_l2 > MATCH_REL]
    info: dict[str, Any] = {
        "path": path,
        "files": files,
        "slots": n_slots,
        "inferred_spec": [str(p) for p in spec],
        "best": [b.to_dict() for b in best],
    }
    findings = []
    if unmatched:
        findings.append(
            Finding(
                "NUM004",
                f"dump slot(s) {unmatched} match no capture point of this target",
                [f"slot {j}: best {best[j].best} at rel L2 {best[j].rel_l2:.3f}" for j in unmatched],
                "the dump was made with another model, revision or tokenizer; pass that target",
            )
        )
    if hs_mat is not None and hs_mat.n:
        hb = hs_mat.result()
        rel = hb.rel_l2[0][cast("list[CapturePoint]", hb.cols).index(final_norm())]  # columns: capture points, as above
        hbest = hb.best[0]
        info["hidden_state"] = {"rel_l2_to_final_norm": rel, "best": str(hbest.best), "best_rel_l2": hbest.rel_l2}
        if rel > 0.05:
            findings.append(
                Finding(
                    "NUM003",
                    f"the dump's hidden_state is not final_norm (rel L2 {rel:.3f}); it best matches {hbest.best}",
                    [f"rel L2 to final_norm {rel:.4f}; to {hbest.best} {hbest.rel_l2:.4f}"],
                    "SpecForge trains against target logits computed from hidden_state: re-dump it after the final norm",
                )
            )
    source = f"dump {path}: slots identified numerically as {format_spec(spec)}"
    return DumpIdentity(spec, source, info, findings)
