"""A quantized target against its 16-bit reference (--reference-target): the features' drift at every capture
point on the same sequences, and the draft's acceptance both ways, with QNT006 when the drift costs acceptance."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..core.errors import BadInput
from ..core.findings import Finding
from ..core.taps import all_points

if TYPE_CHECKING:
    from ..model.setup import Setup
    from ..model.target import Target
    from .results import AcceptanceRun


@dataclass
class PointDrift:
    point: str
    served: bool  # a capture point the serving engine feeds the draft
    cos_mean: float
    cos_min: float
    rel_l2_mean: float  # |q - ref| / |ref| per token, averaged
    rel_l2_p95: float

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class FeatureDrift:
    target: str
    reference: str
    scheme: str | None  # how the quantized target ran (its load note)
    n_tokens: int
    points: list[PointDrift]

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "reference": self.reference,
            "scheme": self.scheme,
            "n_tokens": self.n_tokens,
            "points": [p.to_dict() for p in self.points],
        }


def check_reference(tgt: Target, ref: Target) -> None:
    if ref.num_layers != tgt.num_layers or ref.hidden_size != tgt.hidden_size or ref.vocab_size != tgt.vocab_size:
        raise BadInput(
            f"--reference-target {ref.name} has {ref.num_layers} layers x {ref.hidden_size} (vocabulary {ref.vocab_size}), "
            f"the target {tgt.num_layers} x {tgt.hidden_size} ({tgt.vocab_size})",
            "pass the 16-bit checkpoint the quantized target was made from",
        )


@torch.inference_mode()
def feature_drift(setup: Setup, ref: Target, seqs: Sequence[Sequence[int]], batch_size: int) -> FeatureDrift:
    """Both targets over the same sequences in the same batches; per capture point, the quantized target's
    features against the reference's on every real token (cosine and relative L2)."""
    from ..model.replay import iter_captures

    tgt = setup.target
    check_reference(tgt, ref)
    pts = all_points(tgt.num_layers)
    served = set(setup.serving.spec)
    cos: dict[Any, list[torch.Tensor]] = {p: [] for p in pts}
    rel: dict[Any, list[torch.Tensor]] = {p: [] for p in pts}
    n = 0
    for rq, rr in zip(iter_captures(tgt, seqs, pts, batch_size=batch_size), iter_captures(ref, seqs, pts, batch_size=batch_size)):
        assert rq.index == rr.index  # the same order and batch size: the same sequences side by side
        mask = rq.mask
        n += int(mask.sum())
        for p in pts:
            a, b = rq.captured[p][mask].float(), rr.captured[p][mask].to(rq.captured[p].device).float()
            cos[p].append(torch.nn.functional.cosine_similarity(a, b, dim=-1).cpu())
            rel[p].append(((a - b).norm(dim=-1) / b.norm(dim=-1).clamp_min(1e-12)).cpu())
    rows = []
    for p in pts:
        c, r = torch.cat(cos[p]).numpy(), torch.cat(rel[p]).numpy()
        rows.append(
            PointDrift(str(p), p in served, float(c.mean()), float(c.min()), float(r.mean()), float(np.quantile(r, 0.95)))
        )
    return FeatureDrift(tgt.name, ref.name, tgt.quant_note, n, rows)


@dataclass
class AcceptanceBothWays:
    """The serving path's acceptance on the quantized target and on the reference, and their paired difference."""

    quantized: dict[str, Any]
    reference: dict[str, Any]
    difference: dict[str, Any]  # quantized - reference, mean acceptance length, paired over prompts

    def to_dict(self) -> dict[str, Any]:
        return {"quantized": self.quantized, "reference": self.reference, "difference": self.difference}


def _figures(run: AcceptanceRun) -> dict[str, Any]:
    res = run.paths["serving"]
    return {
        "target": run.settings.target,
        "mean_acceptance_length": res.chain.mean_acceptance_length,
        "acc_k": res.acc_k,
        "tau": res.tau,
    }


def acceptance_both_ways(run: AcceptanceRun, ref_run: AcceptanceRun, num_steps: int) -> tuple[AcceptanceBothWays, list[Finding]]:
    """QNT006 when the quantized target's acceptance is below the reference's beyond the paired interval."""
    from ..core.stats import difference_interval, mean_acceptance_length

    cur, base = run.paths["serving"].counts(num_steps), ref_run.paths["serving"].counts(num_steps)
    diff, how = difference_interval(cur, base, mean_acceptance_length)
    both = AcceptanceBothWays(_figures(run), _figures(ref_run), {**diff.to_dict(), "method": how})
    if not diff.hi < 0:
        return both, []
    q, r = both.quantized, both.reference
    ev = [
        f"mean acceptance length: {q['mean_acceptance_length']:.3f} on {q['target']}, "
        f"{r['mean_acceptance_length']:.3f} on the reference {r['target']}",
        f"difference {diff.text()} ({how})",
        "acc_k quantized "
        + ", ".join(f"{a:.3f}" for a in q["acc_k"])
        + "; reference "
        + ", ".join(f"{a:.3f}" for a in r["acc_k"]),
    ]
    return both, [
        Finding(
            "QNT006",
            f"the quantized target costs the draft {-diff.point:.3f} tokens of mean acceptance length against "
            "the 16-bit reference target",
            ev,
            "fine-tune the draft on hidden states of the quantized target as it is served (regenerate the training "
            "features with this checkpoint and the server's kernels), or serve the target in 16-bit",
        )
    ]


def load_reference(setup: Setup, path: str, trust_remote_code: bool = False) -> Target:
    """The 16-bit reference target in the quantized target's run dtype and device (so only quantization differs)."""
    from ..model.target import load_target

    tgt = setup.target
    ref = load_target(
        path, dtype=str(tgt.dtype).replace("torch.", ""), device=str(tgt.device), trust_remote_code=trust_remote_code
    )
    if ref.quant_note is not None:
        raise BadInput(
            f"--reference-target {path} is quantized itself", "pass the 16-bit checkpoint the target was quantized from"
        )
    check_reference(tgt, ref)
    return ref


def compare_reference(
    setup: Setup,
    ref: Target,
    *,
    prompts_path: str | None,
    train_dump: str | None,
    max_tokens: int | None,
    limit: int | None,
    batch_size: int,
) -> FeatureDrift:
    """compare-hidden --reference-target: the drift at every capture point on compare-hidden's own sequences."""
    from ..model.replay import load_sources

    src = load_sources(setup.target, prompts_path, train_dump, max_tokens, limit, None)
    return feature_drift(setup, ref, src.sequences, batch_size)


def acceptance_reference(
    setup: Setup, ref: Target, opts: Any, *, prompts_path: str | None, train_dump: str | None, run: AcceptanceRun
) -> tuple[AcceptanceBothWays, list[Finding]]:
    """acceptance --reference-target: the same draft, options and prompts with the reference as the target."""
    import dataclasses

    from .acceptance.run import measure_acceptance

    ref_run = measure_acceptance(dataclasses.replace(setup, target=ref), opts, prompts_path=prompts_path, train_dump=train_dump)
    return acceptance_both_ways(run, ref_run, opts.num_steps)


def drift_lines(d: FeatureDrift) -> list[str]:
    """The drift table as text lines (terminal)."""
    out = [f"quantized target vs reference {d.reference} ({d.n_tokens} tokens): features at each capture point"]
    out += [
        f"  {p.point:<14} cos mean {p.cos_mean:.5f} min {p.cos_min:.5f}   rel L2 mean {p.rel_l2_mean:.5f} p95 {p.rel_l2_p95:.5f}"
        + ("   <- served" if p.served else "")
        for p in d.points
    ]
    return out


def both_ways_lines(b: AcceptanceBothWays) -> list[str]:
    q, r, d = b.quantized, b.reference, b.difference
    return [
        "acceptance both ways (serving features, same draft and prompts):",
        f"  quantized {q['target']}: mean acceptance length {q['mean_acceptance_length']:.3f}, tau {q['tau']:.3f}",
        f"  reference {r['target']}: mean acceptance length {r['mean_acceptance_length']:.3f}, tau {r['tau']:.3f}",
        f"  difference {d['point']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}] ({d['method']})",
    ]
