"""What the two parallel drafters (DFlash, P-EAGLE) share as kinds: the target and the prompts' ids they
measure on, and the figures the acceptance gate reads from the passes they walk."""

from __future__ import annotations

from typing import Any, Optional

from .run import Run

# measured by the passes the estimator walks over the target's greedy continuation, so the options that shape
# a chain (sampling, trees, a scan, a text continuation) have nothing to act on
MEASURE = frozenset({"min_tau", "min_accept_rate"})


def target_and_prompts(run: Run) -> tuple[Any, list[list[int]]]:
    """The target, loaded as the run says, and the prompts' token ids."""
    from ..io.prompts import load_prompts
    from ..model.target import load_target

    with run.status(f"loading target {run.target} ..."):
        tgt = load_target(run.target, dtype=run.dtype, device=run.opt("device"), trust_remote_code=run.opt("trust_remote_code"))
    prompts = load_prompts(tgt.tokenizer, run.opt("prompts"), max_tokens=run.opt("max_tokens"),
                           max_positions=tgt.max_positions, limit=run.opt("limit"))  # fmt: skip
    return tgt, [p.ids for p in prompts]


def served_figures(mean: Any, accepted: list[list[int]], proposals: int) -> tuple[float, float]:
    """(mean acceptance length over prompts, the first-position rate) of the path the engine runs, ``proposals``
    tokens drafted a pass: the figures --min-tau and --min-accept-rate gate, the rate by the convention every
    chain's is counted with (metrics_from_passes: passes that accept at least one drafted token / passes)."""
    from ..analyses.acceptance.metrics import metrics_from_passes

    passes = [a for per_prompt in accepted for a in per_prompt]
    rates = metrics_from_passes(passes, [proposals] * len(passes), proposals).per_position_rate
    return mean.point, (rates or [float("nan")])[0]


def agrees(reference: Optional[dict[str, Any]]) -> bool:
    """False where the sequential loop ran and its tokens or passes differ from the estimator's."""
    return reference is None or bool(reference["tokens_equal_greedy"] and reference["passes_equal_estimator"])
