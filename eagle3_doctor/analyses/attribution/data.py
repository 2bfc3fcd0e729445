"""The data verdict: the draft's step-1 accuracy along the user's prompts against its accuracy along its
own training conversations (``--train-data``), position for position.

Both sides are measured the same way: the draft's step 1 against the target's own next-token choice at
every position of the text (the prompts with their continuation; the training data as written, in any layout
io/conversations.py reads: conversations rendered with the target's template, tokenized rows as they are, every
position as for conversations, their loss mask not a filter), on the
same features and the same draft forward, and only at positions before the context's fall where one
was found: a prompt set that is merely longer than the draft's training sequences is the context
finding's, not a different distribution."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ...core.findings import Finding
from ...core.stats import MIN_PROMPTS, Interval, difference_interval, paired
from .context import ContextCounts
from .result import STEP1

if TYPE_CHECKING:
    from ...model.setup import Setup
    from ..acceptance.options import AcceptanceOptions
    from .plan import Plan


def training_sample(setup: Setup, opts: AcceptanceOptions, path: str, plan: Plan, bucket: int, progress: Any) -> ContextCounts:
    """Step-1 counts by position along the training conversations as written, on the base path."""
    from ...model.replay import load_sources
    from ...model.target import target_argmax
    from ..acceptance.measurement import Measurement
    from ..acceptance.run import acceptance_sequences

    src = load_sources(setup.target, path, None, opts.max_tokens, opts.limit, None)
    rep = acceptance_sequences(setup, src, replace(opts, continuation="text"), progress)
    paths, drafts = {plan.base: plan.paths[plan.base]}, {plan.base: plan.drafts[plan.base]}
    m = Measurement(setup, rep, paths, None, drafts, cands=[])
    ctx = ContextCounts(bucket, len(rep.seqs))

    def each(rb: Any) -> None:
        assert rb.last is not None  # replayed with want_logits
        aux = torch.cat([rb.captured[p] for p in plan.paths[plan.base]], dim=-1)
        ctx.add_along(rb, plan.drafts[plan.base], aux, target_argmax(setup.target, rb.last))

    m.replay(opts.batch_size, "training sample", progress, each)
    return ctx


def _before(ctx: ContextCounts, horizon: int | None) -> np.ndarray:
    """Per prompt [hits, positions] over the positions before ``horizon`` (all with None), measured prompts only."""
    keys = [b for b in ctx.counts if horizon is None or (b + 1) * ctx.bucket <= horizon]
    total = sum((ctx.counts[b] for b in keys), np.zeros((ctx.n, 2)))
    return total[total[:, 1] > 0]


def data_finding(prompts: ContextCounts, sample: ContextCounts, base: str, path: str) -> tuple[Finding | None, str]:
    """DGN007 where the prompts are predicted worse than the training sample beyond the noise, at the same
    positions; else None, and the line that says how the two compared (or why they could not be)."""
    drops = [d[0] for d in (prompts.drop(), sample.drop()) if d is not None]
    horizon = min(drops) if drops else None
    a, b = _before(prompts, horizon), _before(sample, horizon)
    where = f"positions before {horizon} (where the context finding starts)" if horizon is not None else "every position"
    if len(a) < MIN_PROMPTS or len(b) < MIN_PROMPTS:
        return None, (
            f"the data verdict is undetermined: {len(a)} prompts and {len(b)} training conversations reach {where}, "
            f"and an interval needs {MIN_PROMPTS} on each side"
        )
    (ia,), _ = paired([a], STEP1, 0)
    (ib,), _ = paired([b], STEP1, 0)
    d, how = difference_interval(a, b, STEP1, independent=True)
    line = (
        f"on the {base} features, at {where}: step-1 accuracy {ia.text()} along the prompts ({ia.n}) against "
        f"{ib.text()} along the training sample {path} ({ib.n}), difference {d.text()} ({how})"
    )
    if d.hi >= 0:
        return None, f"the prompts are predicted as well as the draft's training sample: {line}"
    return _finding(d, line), line


def _finding(d: Interval, line: str) -> Finding:
    return Finding(
        "DGN007",
        f"the prompts lie outside what the draft was trained on: step-1 accuracy {-d.point:.3f} "
        f"[{-d.hi:.3f}, {-d.lo:.3f}] below its training sample",
        [line, "the same features, draft forward and positions on both sides: what differs is the text"],
        "retrain (or fine-tune) the draft on traffic like these prompts, or serve it where the traffic looks like its "
        "training data",
        data={"step1_difference": [d.point, d.lo, d.hi]},
    )


def place_data(branch: str, findings: list[Finding], levers: list[Any], f: Finding) -> str:
    """Put DGN007 among the verdict's findings and return the branch: the data leads where nothing else is
    decided (no checkpoint fault, no serving difference whose lever recovers acceptance), else it follows."""
    from .plan import WEIGHTS

    # the weights' own lever is a step-1 fit measured on these very prompts: off the training distribution
    # it can favour another wiring by a little, so alone it does not outrank the data
    weights_only = all(r.name == WEIGHTS for r in levers if r.recovery.lo > 0)
    if branch not in ("", "context", "undetermined") and not (branch == "pipeline" and weights_only):
        findings.append(f)
        return branch
    if branch == "pipeline":
        for x in findings:
            if x.code == "DGN001":
                x.evidence.append("measured on prompts outside the draft's training distribution (DGN007): the fit may be theirs")
    findings.insert(0, f)
    return "data"
