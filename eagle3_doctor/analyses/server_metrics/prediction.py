"""The server's measurement against the doctor's prediction per feature path: engine (SRV001), wiring
(SRV002), draft (SRV003) or undetermined (SRV004)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...core.errors import BadInput
from ...core.findings import Finding
from .measured import Measured

if TYPE_CHECKING:
    from ..results import PathResult, RunSettings


# Public reports of an engine runtime losing acceptance while wiring and draft were right
# (the cases issue 16 starts from); listed with the engine verdict as leads, not as diagnoses.
RUNTIME_REPORTS = {
    "vllm": ["vllm PR #20190 (spec-decode runtime fix)", "vllm issue #26191 (acceptance lower than expected)"],
    "sglang": [
        "sglang issue #10059 (acceptance lower than expected)",
        "SGLang 0.5.2: CUDA-graph decode used the default layer ids (PR #22836); run with --disable-cuda-graph to test",
    ],
    "trtllm": ["TensorRT-LLM PR #5146 (spec-decode runtime fix)"],
}


MIN_GAP = 0.10  # mean acceptance length: smaller gaps are not worth a verdict whatever the intervals


def bootstrap_prediction(accepted_lengths: list[list[int]], num_steps: int, n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Predicted figures with 95% intervals, resampling prompts (a workload is a set of prompts)."""
    import numpy as np

    reqs = [np.asarray(r, dtype=np.int64) for r in accepted_lengths if len(r)]
    if not reqs:
        raise BadInput("the prediction has no verify passes", "use prompts long enough for at least one draft")
    n = np.array([r.size for r in reqs], dtype=np.float64)
    s = np.array([r.sum() for r in reqs], dtype=np.float64)
    ge = np.array([[(r >= k).sum() for k in range(1, num_steps + 1)] for r in reqs], dtype=np.float64)  # [R, K]
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(reqs), size=(n_boot, len(reqs)))
    N = n[idx].sum(axis=1)
    mal_b = 1.0 + s[idx].sum(axis=1) / N
    pos_b = ge[idx].sum(axis=1) / N[:, None]
    lo, hi = np.percentile(mal_b, [2.5, 97.5])
    plo, phi = np.percentile(pos_b, [2.5, 97.5], axis=0)
    return {
        "passes": int(n.sum()),
        "requests": len(reqs),
        "mean_acceptance_length": float(1.0 + s.sum() / n.sum()),
        "mean_acceptance_length_ci": (float(lo), float(hi)),
        "per_position_rate": (ge.sum(axis=0) / n.sum()).tolist(),
        "per_position_ci": [(float(a), float(b)) for a, b in zip(plo, phi)],
    }


def _below(measured: Measured, pred: dict[str, Any] | None) -> bool:
    """The measurement itself rules the prediction out (its interval lies wholly below)."""
    if pred is None:
        return False
    hi = measured.mean_acceptance_length_ci[1] if measured.mean_acceptance_length_ci else measured.mean_acceptance_length
    return hi < pred["mean_acceptance_length_ci"][0]


def _relation(m: float, mci: tuple[float, float] | None, p: float, pci: tuple[float, float]) -> str:
    """below / above / agree / unclear: measured vs predicted, by their 95% intervals."""
    mlo, mhi = mci if mci is not None else (m, m)
    if mhi < pci[0] and p - m >= MIN_GAP:
        return "below"
    if mlo > pci[1] and m - p >= MIN_GAP:
        return "above"
    if pci[0] <= m <= pci[1] or (mlo <= p <= mhi) or abs(m - p) < MIN_GAP:
        return "agree"
    return "unclear"


@dataclass
class ServingComparison:
    verdict: str | None  # engine | wiring | draft | undetermined | None (measurement agrees)
    measured: Measured
    predicted: dict[str, Any]  # path name -> bootstrap_prediction
    relation: str
    settings: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "relation": self.relation,
            "measured": self.measured.to_dict(),
            "predicted": self.predicted,
            "settings": self.settings,
            "notes": self.notes,
        }


def compare_to_prediction(
    measured: Measured, paths: dict[str, PathResult], settings: RunSettings, capture_fix: str | None = None
) -> tuple[ServingComparison, list[Any]]:
    """The doctor's predicted acceptance (per feature path) against what the server counted.

    paths: the acceptance run's ``paths`` (``serving`` = the engine's own capture points,
    ``training`` = what the draft was trained on, when they differ). Returns the comparison and
    its findings: SRV001 engine, SRV002 wiring, SRV003 draft, SRV004 undetermined; none when the
    server measured what the doctor predicts for healthy wiring.
    """
    K = settings.num_steps
    if measured.num_spec_tokens is not None and measured.num_spec_tokens != K:
        raise BadInput(
            f"the server drafted {measured.num_spec_tokens} tokens per pass (per-position counters) but the "
            f"prediction used --num-steps {K}",
            f"rerun with --num-steps {measured.num_spec_tokens}",
        )
    if "serving" not in paths:
        raise BadInput("no serving-path prediction to compare with the server", "fix the slot count first (see notes)")
    pred = {name: bootstrap_prediction(p.accepted_lengths, K) for name, p in paths.items()}
    ps = pred["serving"]
    rel = _relation(
        measured.mean_acceptance_length,
        measured.mean_acceptance_length_ci,
        ps["mean_acceptance_length"],
        ps["mean_acceptance_length_ci"],
    )
    notes = [
        "the verdict assumes the server ran the same prompts with the same settings (K, top-k, draft tokens, "
        "temperature) as this prediction; counters cannot show it"
    ]
    if settings.topk > 1 or settings.temperature > 0:
        notes.append("the prediction is for the tree/temperature settings given; chain figures are compared")
    ev = _evidence(measured, ps, pred.get("training"))
    verdict, findings = _verdict(rel, measured, paths, ps, pred.get("training"), ev, capture_fix)
    return ServingComparison(
        verdict,
        measured,
        pred,
        rel,
        {k: getattr(settings, k) for k in ("num_steps", "topk", "num_draft_tokens", "temperature", "sequences", "engine")},
        notes,
    ), findings


def _fmt(x: float, ci: tuple[float, float] | None) -> str:
    return f"{x:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def _evidence(measured: Measured, ps: dict[str, Any], pt: dict[str, Any] | None) -> list[str]:
    """Measured against predicted, overall and per position."""
    m = _fmt(measured.mean_acceptance_length, measured.mean_acceptance_length_ci)
    ev = [
        f"server ({measured.engine}, {measured.source}): mean acceptance length {m} over {measured.passes:g} verify passes",
        f"predicted under the serving features: {_fmt(ps['mean_acceptance_length'], ps['mean_acceptance_length_ci'])} "
        f"over {ps['passes']} passes / {ps['requests']} prompts",
    ]
    if pt is not None:
        ev.append(f"predicted under the training features: {_fmt(pt['mean_acceptance_length'], pt['mean_acceptance_length_ci'])}")
    if measured.per_position_rate is not None:
        for k, (r, ci) in enumerate(zip(measured.per_position_rate, measured.per_position_ci or [])):
            pr, pci = ps["per_position_rate"][k], ps["per_position_ci"][k]
            flag = "   <-- below" if ci[1] < pci[0] else ""
            ev.append(f"position {k + 1}: server {_fmt(r, ci)}, predicted {_fmt(pr, pci)}{flag}")
    return ev


def _verdict(
    rel: str,
    measured: Measured,
    paths: dict[str, PathResult],
    ps: dict[str, Any],
    pt: dict[str, Any] | None,
    ev: list[str],
    capture_fix: str | None,
) -> tuple[str | None, list[Any]]:
    """engine (SRV001), wiring (SRV002), draft (SRV003), undetermined (SRV004), or None: healthy."""
    t = paths.get("training")
    ref_step1 = t.step1 if t is not None and t.acc_k else paths["serving"].step1
    wiring_gap = (
        pt is not None
        and pt["mean_acceptance_length_ci"][0] > ps["mean_acceptance_length_ci"][1]
        and pt["mean_acceptance_length"] - ps["mean_acceptance_length"] >= MIN_GAP
    )
    if rel == "below":
        return "engine", [_engine_finding(measured, ps, ev)]
    if rel == "agree" and wiring_gap and pt is not None and _below(measured, pt):  # (wiring_gap implies pt)
        return "wiring", [_wiring_finding(measured, paths, ps, pt, ev, capture_fix)]
    if rel == "agree" and ref_step1 < 0.3:
        return "draft", [_draft_finding(measured, ref_step1, ev)]
    if rel in ("unclear", "above") or (rel == "agree" and wiring_gap):
        return "undetermined", [_undetermined_finding(rel, ev)]
    return None, []


def _engine_finding(measured: Measured, ps: dict[str, Any], ev: list[str]) -> Finding:
    """SRV001: below the prediction for the very capture points the server uses: the runtime."""
    m = measured.mean_acceptance_length
    reports = RUNTIME_REPORTS.get(measured.engine, [])
    return Finding(
        "SRV001",
        f"the server accepts less than the doctor predicts for these very capture points: "
        f"{m:.2f} measured vs {ps['mean_acceptance_length']:.2f} predicted mean acceptance length",
        ev + [f"known runtime reports for {measured.engine}: " + "; ".join(reports)] if reports else ev,
        f"suspect the {measured.engine} runtime, not the wiring or the draft: rerun the same prompts eagerly "
        "(vLLM --enforce-eager; SGLang --disable-cuda-graph) and with one request at a time; if acceptance "
        "recovers, report it to the engine with these figures",
        data={"measured": m, "predicted": ps["mean_acceptance_length"], "predicted_ci": ps["mean_acceptance_length_ci"]},
    )


def _wiring_finding(
    measured: Measured,
    paths: dict[str, PathResult],
    ps: dict[str, Any],
    pt: dict[str, Any],
    ev: list[str],
    capture_fix: str | None,
) -> Finding:
    """SRV002: the server agrees with the serving-feature prediction, and the training features would do better."""
    m = measured.mean_acceptance_length
    from ..results import spec_label

    trained = spec_label(paths["training"].spec)
    return Finding(
        "SRV002",
        f"the server's {m:.2f} matches the prediction under the serving features; the training "
        f"features would give {pt['mean_acceptance_length']:.2f}: the capture mismatch explains the gap",
        ev + [f"serving feeds {spec_label(paths['serving'].spec)}; trained on {trained}"],
        capture_fix or "run eagle3-doctor compare-hidden for the exact layer ids to write",
        data={
            "measured": m,
            "predicted_serving": ps["mean_acceptance_length"],
            "predicted_training": pt["mean_acceptance_length"],
        },
    )


def _draft_finding(measured: Measured, ref_step1: float, ev: list[str]) -> Finding:
    """SRV003: the server agrees with the prediction and the draft is weak on its own features."""
    return Finding(
        "SRV003",
        f"the server's {measured.mean_acceptance_length:.2f} matches the prediction, and the draft is weak even on its "
        f"training features (step-1 accuracy {ref_step1:.3f})",
        ev,
        "the draft itself needs work: check lm_head, d2t/t2d, embeddings, chat template, then retrain on data like this workload",
    )


def _undetermined_finding(rel: str, ev: list[str]) -> Finding:
    """SRV004: the figures cannot say which of engine, wiring or draft is at fault."""
    why = (
        "the server measured MORE than predicted: the workload or settings probably differ from this prediction"
        if rel == "above"
        else "the measured and predicted intervals neither separate nor agree"
        if rel == "unclear"
        else "the server agrees with the serving-feature prediction but cannot rule out the training-feature one: "
        "measure more verify passes"
    )
    return Finding(
        "SRV004",
        f"server vs prediction undetermined: {why}",
        ev,
        "replay the server's own prompts (--prompts) with its settings (--num-steps, --topk, --num-draft-tokens, "
        "--temperature), and scrape before and after exactly that workload",
    )
