"""SGLang's per-request accept histogram, read from the server's responses: the whole per-position profile.

SGLang keeps, per request, ``spec_acceptance_histogram`` (``managers/schedule_batch.py`` ``Req``: list index = draft
tokens accepted in one verify step, value = steps that accepted that many; the scheduler adds each step's
``accept_length_per_req_cpu``, bonus excluded) and returns it in the response's ``meta_info`` as
``spec_accept_histogram`` (older releases: ``spec_correct_drafts_histogram``). Summed over the workload's requests it
is the histogram of accepted lengths vLLM's per-position counters also hold, so it reads into the same figures:
per-position rates with Wilson intervals and the mean with its interval over passes.

Input: the /generate responses as JSON lines or one JSON array, each an object with ``meta_info`` (or a bare
meta_info object).
"""

from __future__ import annotations

import json
from typing import Any

from ...core.errors import BadInput
from .measured import Measured, mean_interval, wilson

KEYS = ("spec_accept_histogram", "spec_correct_drafts_histogram")


def looks_like_responses(text: str) -> bool:
    """JSON (an object or an array at the start), not a Prometheus text exposition."""
    head = text.lstrip()[:1]
    return head in ("{", "[")


def _objects(text: str, src: str) -> list[Any]:
    try:
        whole = json.loads(text)
        return whole if isinstance(whole, list) else [whole]
    except json.JSONDecodeError:
        pass
    out = []
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise BadInput(
                f"{src}: line {n} is not JSON ({e.msg})", "save SGLang's /generate responses one JSON object a line"
            ) from None
    return out


def _histogram(obj: Any) -> list[int] | None:
    if not isinstance(obj, dict):
        return None
    meta = obj.get("meta_info", obj)
    if not isinstance(meta, dict):
        return None
    for k in KEYS:
        h = meta.get(k)
        if h is not None:
            return h
    return None


def measure_sglang_histograms(text: str, src: str) -> Measured:
    """The workload's figures from every response's accept histogram, summed."""
    total: list[float] = []
    requests = 0
    for obj in _objects(text, src):
        h = _histogram(obj)
        if h is None:
            continue
        if not isinstance(h, list) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in h):
            raise BadInput(
                f"{src}: an accept histogram is not a list of counts ({str(h)[:60]})", "pass SGLang's responses unedited"
            )
        requests += 1
        total += [0.0] * (len(h) - len(total))
        for j, x in enumerate(h):
            total[j] += x
    passes = sum(total)
    if not requests or passes <= 0:
        raise BadInput(
            f"{src} holds no SGLang accept histogram with a verify step ({' or '.join(KEYS)} in meta_info)",
            "pass the /generate responses of an SGLang server with speculative decoding on",
        )
    K = len(total) - 1  # the deepest accepted length seen: positions past it were reached by no pass
    per_pos = [sum(total[j] for j in range(k + 1, K + 1)) for k in range(K)]
    accepted = sum(j * x for j, x in enumerate(total))
    notes = [
        f"{requests} responses' accept histograms summed; positions past {K} were reached by no verify step, and the "
        "histogram does not say how many tokens the server drafted"
    ]
    return Measured(
        "sglang",
        src,
        passes,
        1.0 + accepted / passes,
        mean_interval(passes, per_pos),
        None,
        accepted,
        None,
        [p / passes for p in per_pos],
        [wilson(p, passes) for p in per_pos],
        None,
        float(requests),
        {"verify_steps": passes, "accepted_tokens": accepted},
        notes,
    )
