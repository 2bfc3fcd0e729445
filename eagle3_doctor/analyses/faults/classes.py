"""The runtime fault classes, one record each: what the engine's runtime does wrong to the draft, as a perturbation
of the sequential decode loop in ``simulate.py``.

Each record fills only the hooks its fault touches; the loop calls every hook at one fixed point:

- ``features(rows, other)``: the target rows the draft's catch-up reads, all positions of one sequence
  [N, F] at once (``other``: the rows of another sequence of the same batch); the loop slices what it feeds.
- ``kv_read(x)``: a layer's draft keys or values [B, nkv, S, d] as its attention reads them (the cache itself
  keeps what was written).
- ``step_position(t, j)``: the position draft step j >= 2 of the pass at base t runs at (correct: t + j - 1).
- ``rollback``: whether the proposal steps' cache entries are cut off before the catch-up writes the verified
  positions; without it they stay, and every later input is written (and positioned) after them, as a slot
  counter that was not reset places it.
- ``prompt_context``: whether the draft's prefill catch-up covers the prompt; without it the draft first sees
  the prompt's last position. A disaggregated decode instance that never receives the draft's prefill state
  shows this same signature: the two are one class to the counts, and its fix names both.
- ``catch_up``: whether each catch-up after a verify pass covers every position verified since the last; without
  it only the newest, so the accepted tokens' rows never reach the draft's cache.
- ``proposal``: "argmax" where the draft proposes its argmax while the target samples (temperature > 0): not a
  perturbation of the greedy loop (at temperature 0 the two are one) but of the proposal, predicted by ``sampled.py``
  at the live profile's temperature.
- ``batched``: the fault's reach depends on how many sequences share a batch (a request alone in its batch has no
  other sequence to read): ``batches.py`` predicts it per batch size where the live figures give one.
- ``window``: not a perturbation but a setting: the draft as served, at a K whose last positions accept
  nothing (the cost of drafting them, not a loss of acceptance).

Adding a class is one record in ``CLASSES``: the loop, the ranking and the report read the tuple.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class FaultClass:
    name: str  # stable: the JSON and the tests match on it
    title: str  # what the runtime does wrong, in a sentence
    fix: str  # what to try on the server, concretely
    features: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
    kv_read: Callable[[torch.Tensor], torch.Tensor] | None = None
    step_position: Callable[[int, int], int] | None = None
    rollback: bool = True
    prompt_context: bool = True
    catch_up: bool = True
    window: bool = False
    proposal: str | None = None
    batched: bool = False


def _shift_slots(x: torch.Tensor) -> torch.Tensor:
    """Slot i read from slot i - 1 (slot 0 from itself): a cache read through a layout one slot off."""
    return torch.cat([x[:, :, :1], x[:, :, :-1]], dim=2)


def fp8_round(x: torch.Tensor, dtype: torch.dtype = torch.float8_e4m3fn) -> torch.Tensor:
    """Stored as ``dtype`` at scale 1 (vLLM's fp8 KV cache scale unless calibrated) and read back, saturating at its largest finite value: e4m3 keeps 3 mantissa
    bits up to +-448, e5m2 2 bits up to +-57344."""
    top = float(torch.finfo(dtype).max)
    return x.clamp(-top, top).to(dtype).to(x.dtype)


def _rows_one_back(rows: torch.Tensor, _other: torch.Tensor) -> torch.Tensor:
    """Position t paired with the target row of t - 1 (position 0 with its own): a gather offset by one."""
    return torch.cat([rows[:1], rows[:-1]], dim=0)


def _rows_of_other(rows: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """Position t paired with another sequence's row t (its last row past its end): a gather of the wrong request."""
    idx = torch.arange(rows.shape[0], device=rows.device).clamp(max=other.shape[0] - 1)
    return other[idx]


CLASSES: tuple[FaultClass, ...] = (
    FaultClass(
        "kv-layout-shift",
        "the draft's KV cache is read through another layout: every key and value one slot off",
        "check the draft's KV cache layout and block table against the target's (page size, slot mapping); rerun with "
        "the draft on its own KV cache group if the engine offers it",
        kv_read=_shift_slots,
    ),
    FaultClass(
        "step-metadata-stale",
        "the per-step attention metadata is not advanced: every draft step after the second runs at the second's position",
        "rerun eagerly (vLLM --enforce-eager, SGLang --disable-cuda-graph): a captured graph that keeps its first "
        "metadata buffer recovers there; report it to the engine with these figures",
        step_position=lambda t, j: t + 1,
    ),
    FaultClass(
        "hidden-rows-offset",
        "the draft is fed the target's hidden-state row of the previous position (a gather offset by one)",
        "check the hidden-state gather indices of the draft's input (the last-token indices after a partial "
        "acceptance, the query start locations); rerun with one request at a time",
        features=_rows_one_back,
    ),
    FaultClass(
        "hidden-rows-other-sequence",
        "the draft is fed another request's hidden-state rows (a batched gather of the wrong sequence)",
        "rerun with one request at a time (--max-num-seqs 1 / --max-running-requests 1): acceptance that recovers "
        "there points at the batched gather",
        features=_rows_of_other,
        batched=True,
    ),
    FaultClass(
        "stale-draft-state",
        "the draft's proposal-step state is not rolled back after verification: the rejected steps stay in its cache",
        "check that the draft's cache length is reset to the verified length before the catch-up (the rollback "
        "after a partial acceptance); rerun with --num-speculative-tokens 1, where no step is left to roll back",
        rollback=False,
    ),
    FaultClass(
        "no-prompt-context",
        "the draft is never given the prompt's context at prefill: its KV cache starts at the prompt's last position",
        "check that the draft's prefill runs over the whole prompt (chunked prefill and prefix-cache hits included); "
        "rerun with prefix caching off; under prefill/decode disaggregation, check that the draft's prefill state "
        "reaches the decode instance (rerun without disaggregation)",
        prompt_context=False,
    ),
    FaultClass(
        "catch-up-last-only",
        "after each verify pass the draft's catch-up is given only the newest verified position: the accepted "
        "tokens' rows never reach its KV cache",
        "check the draft's extend after verification (the accepted tokens' hidden-state rows and positions, the "
        "catch-up batch's query start locations); a profile that recovers with one speculative token a pass points there",
        catch_up=False,
    ),
    FaultClass(
        "kv-fp8-noise",
        "the draft's keys and values are stored in fp8 (e4m3, scale 1) and read back with its rounding",
        "serve the draft's KV cache in the model's dtype (vLLM --kv-cache-dtype auto), or calibrate its fp8 scales",
        kv_read=fp8_round,
    ),
    FaultClass(
        "argmax-proposal",
        "the draft proposes its argmax while the target samples: each token is accepted with the target's probability "
        "of it, not the sum of min(p, q) a proposal sampled from the draft's distribution gets",
        # vLLM 0.27.1 / 0.33.0 vllm/v1/spec_decode/llm_base_proposer.py: the proposer samples only where
        # speculative_config.rejection_sample_method is "standard"/"fly" and draft_sample_method "probabilistic"
        # (lines 249-251 / 257-260); else argmax with no draft probabilities, which the rejection sampler verifies
        # as draft_prob = 1 (NO_DRAFT_PROBS)
        "let the draft sample at the request's temperature: vLLM --speculative-config "
        '\'{"draft_sample_method": "probabilistic", "rejection_sample_method": "standard"}\' (in 0.27.1 and later); '
        "else expect the argmax proposal's acceptance at temperature > 0",
        proposal="argmax",
    ),
    FaultClass(
        "window-past-depth",
        "the draft window reaches far past where anything is accepted: drafting costs, acceptance is as modelled",
        "draft fewer tokens a pass (the deepest position still reached); eagle3-doctor speedup measures the fastest K",
        window=True,
    ),
)
