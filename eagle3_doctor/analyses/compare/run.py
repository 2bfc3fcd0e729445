"""compare-hidden's library entry: training features against the serving engine's, slot by slot, on one replay
(with the weights' own fit beside the config's training side)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ...core.errors import BadInput
from ...model.replay import check_seq_len, iter_captures, load_sources
from ...model.setup import Setup
from ..acceptance.options import Progress, _no_progress
from .comparison import CompareResult, HiddenComparison, comparison_result


@torch.inference_mode()
def compare_hidden(
    setup: Setup,
    *,
    prompts_path: str | None = None,
    train_dump: str | None = None,
    max_tokens: int | None = 512,
    batch_size: int = 8,
    matrix: bool = False,
    limit: int | None = None,
    prompt_ids: Sequence[Sequence[int]] | None = None,
    progress: Progress = _no_progress,
) -> CompareResult:
    """Training features vs the serving engine's, slot by slot, on replayed prompts or a training dump.

    prompt_ids: token sequences to replay as they are (library use; overrides prompts_path).
    Returns a :class:`compare.CompareResult`: ``serving`` (the engine's resolved ids and capture points),
    ``train_spec``/``train_source`` (what was trained on; for a dump, identified numerically),
    ``findings`` (symbolic CAP/ENG, dump NUM003/NUM004, numeric NUM001/NUM002), ``slots`` (per slot:
    mean/min cosine, relative L2, worst positions), ``matrix`` (slot x capture-point similarities, with
    --matrix or a dump), ``dump`` (what the dump holds), ``n_sequences``/``n_tokens`` and ``notes``.
    """
    tgt = setup.target
    if not train_dump and setup.train_spec is None:
        raise BadInput("no training side: nothing to compare against", "pass --train-recipe, --train-dump or --draft")
    src = load_sources(tgt, prompts_path, train_dump, max_tokens, limit, prompt_ids)
    for s in (seqs := src.sequences):
        check_seq_len(tgt, len(s))
    cmp = HiddenComparison(setup.serving, setup.train_spec, src.dump, tgt.num_layers, tgt.hidden_size, matrix)
    from ...model.stream import begin_replay, replay_note
    from ..weights_fit import WeightsFit, fit_candidates, fit_outcome, text_labels

    # the weights' own fit beside the config's training side, on the same replay (a dump's side is its own tensors)
    spec = setup.train_spec
    cands = fit_candidates(setup, spec) if spec is not None and src.dump is None else None
    fit = WeightsFit(setup.draft, spec, cands, len(seqs)) if cands and setup.draft is not None and spec else None
    points = cmp.points | (fit.points if fit is not None else set())
    begin_replay(tgt)
    for rb in iter_captures(
        tgt,
        seqs,
        points,
        batch_size=batch_size,
        want_logits=fit is not None,
        progress=lambda d, n: progress("compare-hidden", d, n),
    ):
        cmp.add(rb)
        if fit is not None:
            fit.add(rb, text_labels(tgt, rb), [0] * len(rb.index))
    res = comparison_result(cmp, setup, src, train_dump)
    if fit is not None:
        finding, line = fit_outcome(fit.rows(), setup)
        res.findings += [finding] if finding is not None else []
        res.notes += [line] if line else []
    elif src.dump is None:
        res.notes.append(
            "the weights' own fit was not measured (no EAGLE-3 draft with aux slots): the training side is the config's"
        )
    if (note := replay_note(tgt)) is not None:
        res.notes.append(note)
    return res
