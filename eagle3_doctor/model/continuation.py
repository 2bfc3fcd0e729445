"""The target's own greedy continuation of prompts: what acceptance and fingerprint measure along.

Each batch runs over a static KV cache, CUDA-graphed on a GPU (:mod:`static`), where the model allows
it; else through transformers' ``generate``. The tokens are the same either way (tests/model/test_static.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch

from .static import eos_and_pad, greedy_static, left_padded, until_eos
from .target import Target, batches

if TYPE_CHECKING:
    from .recorded import Recording


@torch.inference_mode()
def greedy_continue(
    target: Target,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    batch_size: int,
    progress: Callable[[int, int], None] | None = None,
    record: Recording | None = None,
) -> list[list[int]]:
    """The target's own greedy continuation of each prompt, stopping at the tokenizer's EOS.

    Each batch runs over a static KV cache (CUDA-graphed on a GPU, :mod:`static`) where the model allows
    it, else through ``generate`` (left-padded batches, a dynamic cache): the same tokens either way.
    progress(done, total) is called per generated token (total = batches x max_new_tokens). ``record`` takes
    the taps of every position as the static decoder runs them (:mod:`recorded`); a batch through ``generate``
    records nothing and marks it incomplete, so the replay runs its own forward.
    """
    n_batches = (len(prompts) + batch_size - 1) // batch_size
    total = n_batches * max_new_tokens
    outs: list[list[int]] = []
    for bi, (first, chunk) in enumerate(batches([list(p) for p in prompts], batch_size)):

        def tick(k: int, bi: int = bi) -> None:
            if progress is not None:
                progress(min(bi * max_new_tokens + k, total), total)

        into = record.into(range(first, first + len(chunk))) if record is not None else None
        got = greedy_static(target, list(chunk), max_new_tokens, tick, into)
        if got is None and record is not None:
            record.complete = False
        outs += got if got is not None else _generate(target, chunk, max_new_tokens, tick)
    if progress is not None:
        progress(total, total)
    return outs


def _generate(target: Target, chunk: Sequence[list[int]], max_new_tokens: int, tick: Callable[[int], None]) -> list[list[int]]:
    """One left-padded batch through transformers' ``generate`` (greedy, dynamic cache)."""
    from transformers import StoppingCriteria, StoppingCriteriaList

    step = [0]

    class _Tick(StoppingCriteria):  # never stops generation: a per-token hook for the progress bar
        def __call__(self, input_ids, scores, **kwargs):
            step[0] += 1
            tick(step[0])
            return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

    eos, pad = eos_and_pad(target.tokenizer)
    ids, pads = left_padded(chunk, pad)
    T = ids.shape[1]
    mask = (torch.arange(T)[None, :] >= pads[:, None]).long()
    gen = target.model.generate(
        input_ids=ids.to(target.device),
        attention_mask=mask.to(target.device),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        num_beams=1,
        pad_token_id=pad,
        eos_token_id=eos,
        temperature=None,
        top_p=None,
        top_k=None,
        stopping_criteria=StoppingCriteriaList([_Tick()]),
    )
    outs = []
    for i, p in enumerate(chunk):
        outs.append(list(p) + until_eos(gen[i, T:].tolist(), eos))
    return outs
