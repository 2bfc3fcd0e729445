"""diagnose on the engine's own capture, with only the draft loaded: the judgment, module ablation and the context.

What needs no target: the serving path's acceptance (the recorded greedy continuation is the label, as in
:mod:`..acceptance.from_dump`), each module of the draft mean-ablated on the same features (does it help?), and
step-1 accuracy along the position in the context. What needs the target and is not measured here: the levers that
set a serving difference back to training (other capture points need the target's forward at those layers; the
engine's own forward of the draft is checked against the target's head and embeddings), the weights' own fit, and
the training sample (--train-data replays the target on it). The verdict names what it did not look at.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..acceptance.options import AcceptanceOptions, Progress, Replay, _no_progress
from ..weights_fit import STEP1_POSITIONS
from .result import Diagnosis


@dataclass
class _NoTarget:
    """What a replay of the engine's capture reads of a target: the width and dtype of its rows, nothing loaded."""

    hidden_size: int
    dtype: torch.dtype
    num_layers: int = 0
    name: str = "(not loaded: the engine's own capture)"


def _batches(seqs: Sequence[Any], batch_size: int, device: torch.device) -> Iterator[Any]:
    """The dump's sequences as the replay batches them (longest first), with no target forward: captures come from
    the dump (a path's spec of None), labels from the recorded tokens."""
    from ...model.replay import ReplayBatch, replay_order
    from ...model.target import batches, make_batch

    for _, idx in batches(replay_order([s.tokens for s in seqs]), max(1, batch_size)):
        yield ReplayBatch(list(idx), make_batch([seqs[i].tokens for i in idx], 0, device), {}, None)


@torch.inference_mode()
def diagnose_from_dump(
    draft: str,
    engine_dump: str,
    opts: AcceptanceOptions,
    *,
    prompt_ids: Sequence[Sequence[int]] | None = None,
    prompts_path: str | None = None,
    target: str | None = None,
    draft_format: str | None = None,
    engine: str = "sglang",
    release: str | None = None,
    device: str = "cpu",
    trust_remote_code: bool = False,
    bucket: int = 32,
    progress: Progress = _no_progress,
) -> Diagnosis:
    """The diagnosis of ``draft`` on the engine's capture (arguments as :func:`..acceptance.from_dump.acceptance_from_dump`)."""
    from ...model.replay import Sources
    from ..acceptance.from_dump import UNSEEN, _check_options, dump_setup, load_dump_draft, prepared
    from ..acceptance.measurement import Measurement, _labels_fn, path_results
    from .context import ContextCounts
    from .plan import ABLATED, SERVING, Plan, mean_ablated
    from .verdict import _verdict

    _check_options(opts)
    d, info = load_dump_draft(draft, target, draft_format, device)
    seqs, ed, notes = prepared(d, engine_dump, opts, prompt_ids, prompts_path, target, trust_remote_code)
    setup = dump_setup(d, info, ed, engine, release, engine_dump, target, notes)
    setup.target = _NoTarget(d.config.fc_in_features // d.config.num_aux_states, seqs[0].aux.dtype)
    paths: dict[str, Any] = {SERVING: None}  # None: the path's features are the dump's own rows
    plan = Plan(paths, {SERVING: d}, [], SERVING, [], {mod: mean_ablated(d, mod) for mod in ABLATED},
                unmeasured=[*UNSEEN[:2], "the levers that set a serving difference back to training (they need the target)"])  # fmt: skip
    rep = Replay(Sources([], seqs, []), [s.tokens for s in seqs], [s.start for s in seqs], opts, [])  # type: ignore[arg-type]
    m = Measurement(setup, rep, paths, None, plan.drafts, cands=[])  # type: ignore[arg-type]  # what Measurement reads
    ctx = ContextCounts(bucket, len(seqs))
    step1 = {name: ContextCounts(1 << 40, len(seqs), STEP1_POSITIONS) for name in ("", *plan.ablations)}
    dev, done = next(d.parameters()).device, 0
    for rb in _batches(seqs, opts.batch_size, dev):
        m.add(rb)
        aux, starts = m._aux(rb, None), [rep.starts[i] for i in rb.index]
        labels = _labels_fn(rb, rb.tokens, True)
        ctx.add(rb, d, aux, labels, starts)  # the continuation only: the prompt's argmax is not recorded
        for name, counts in step1.items():
            counts.add(rb, plan.ablations.get(name, d), aux, labels, starts)
        done += len(rb.index)
        progress("diagnose on the engine dump", done, len(seqs))
    results = path_results(m)
    plan.step1 = {n: c.counts.get(0, np.zeros((len(seqs), 2))) for n, c in step1.items()}
    notes = [*setup.notes, "step-1 accuracy along the context: continuation positions only (the prompt's argmax is the target's)"]
    return _verdict(setup, plan, results, ctx, opts.num_steps, notes, len(seqs))  # type: ignore[arg-type]  # DumpSetup
