"""vLLM's per-request speculative-decoding metrics, read from the server's responses: the workload's histogram of
accepted lengths and, at ``--per-request-spec-decode-metrics detailed``, every verify step in order.

From the vLLM 0.33.0 wheel's own source:
- ``vllm/config/observability.py:50``: ``per_request_spec_decode_metrics`` is ``none`` | ``summary`` | ``detailed``;
  the figures go in the response under ``metrics.speculative_decoding``, for single-sequence requests (n == 1) only.
- ``vllm/v1/metrics/stats.py:350-422`` ``RequestSpecDecodeMetrics``: ``observe`` adds each verify step's accepted
  draft tokens j (bonus excluded) to ``histogram[j]``; ``to_dict`` gives ``acceptance_histogram`` (dense, length
  ``num_spec_tokens + 1``), ``num_spec_steps``, ``num_accepted_draft_tokens``, ``num_draft_tokens``,
  ``num_spec_tokens``, ``mean_acceptance_length`` (1 + accepted / steps) and, when detailed, ``per_step_accepted``
  and ``per_step_drafted`` (one entry per verify step).
- ``vllm/entrypoints/generate/base/protocol.py:103-131``: ``SpeculativeDecodingMetrics`` under
  ``PerRequestMetrics.speculative_decoding``; ``openai/chat_completion/protocol.py:165``: the response's ``metrics``.

Summed over the workload's responses the histogram is the one vLLM's per-position counters hold (a step that
accepted j reached positions 1..j), so it reads into the same figures as a scrape, with the server's K given.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from ...core.errors import BadInput

FIX = "save vLLM's responses unedited, one JSON object a line (server run with --per-request-spec-decode-metrics)"


def spec_metrics(obj: Any) -> dict[str, Any] | None:
    """The ``speculative_decoding`` object of one response (or of a bare ``metrics`` object), if any."""
    if not isinstance(obj, dict):
        return None
    metrics = obj.get("metrics", obj)
    sd = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    return sd if isinstance(sd, dict) else None


def _counts(x: Any) -> TypeGuard[list[int]]:
    return isinstance(x, list) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in x)


def _histogram(sd: dict[str, Any], src: str, n: int) -> tuple[list[int], int, int]:
    """One response's (histogram, K, draft tokens), the detailed steps checked against the histogram."""
    h, k, drafted = sd.get("acceptance_histogram"), sd.get("num_spec_tokens"), sd.get("num_draft_tokens")
    if not _counts(h) or not isinstance(k, int) or k < 1 or len(h) != k + 1 or not isinstance(drafted, int):
        raise BadInput(f"{src}: response {n}'s speculative_decoding is not vLLM's (acceptance_histogram of "
                       "num_spec_tokens + 1 counts, num_draft_tokens)", FIX)  # fmt: skip
    steps, proposed = sd.get("per_step_accepted"), sd.get("per_step_drafted")
    if steps is not None:
        if not _counts(steps) or not _counts(proposed) or len(steps) != len(proposed) or any(a > k for a in steps):
            raise BadInput(f"{src}: response {n}'s per_step_accepted / per_step_drafted are not one count a step", FIX)
        if [steps.count(j) for j in range(k + 1)] != h or sum(proposed) != drafted:
            raise BadInput(f"{src}: response {n}'s per-step arrays disagree with its histogram: not one server's", FIX)
    return h, k, drafted


def sum_histograms(objs: list[Any], src: str) -> tuple[list[float], int, float, int, int]:
    """Every response's histogram summed: (histogram, K, draft tokens, responses, responses with per-step arrays)."""
    total: list[float] = []
    K, drafted, requests, detailed = None, 0.0, 0, 0
    for n, obj in enumerate(objs, 1):
        sd = spec_metrics(obj)
        if sd is None:
            continue
        h, k, d = _histogram(sd, src, n)
        if K is not None and k != K:
            raise BadInput(f"{src}: responses disagree on num_spec_tokens ({K} and {k}): not one server's", FIX)
        K, drafted, requests = k, drafted + d, requests + 1
        detailed += sd.get("per_step_accepted") is not None
        total += [0.0] * (len(h) - len(total))
        for j, x in enumerate(h):
            total[j] += x
    if K is None or sum(total) <= 0:
        raise BadInput(f"{src} holds no vLLM metrics.speculative_decoding with a verify step", FIX)
    return total, K, drafted, requests, detailed
