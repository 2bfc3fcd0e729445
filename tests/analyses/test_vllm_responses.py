"""vLLM's per-request speculative-decoding metrics (--per-request-spec-decode-metrics summary|detailed), read from the
responses into the same live profile as a scrape, and ranked; the shape is vLLM 0.33.0's RequestSpecDecodeMetrics
.to_dict (vllm/v1/metrics/stats.py) under the response's metrics.speculative_decoding."""

from __future__ import annotations

import json

import pytest

from eagle3_doctor.analyses.faults.attribute import Candidate, rank
from eagle3_doctor.analyses.faults.classes import CLASSES
from eagle3_doctor.analyses.server_metrics.measured import load_measured
from eagle3_doctor.core.errors import BadInput

K = 5
SHIFT = next(c for c in CLASSES if c.name == "kv-layout-shift")


def to_dict(steps: list[int], drafted: list[int], k: int, detailed: bool) -> dict:
    """What vLLM's RequestSpecDecodeMetrics.to_dict returns after observing these steps, written out here."""
    hist = [steps.count(j) for j in range(k + 1)]
    acc = sum(steps)
    out = {
        "mean_acceptance_length": 1.0 + acc / len(steps),
        "draft_acceptance_rate": acc / sum(drafted),
        "acceptance_histogram": hist,
        "num_spec_steps": len(steps),
        "num_accepted_draft_tokens": acc,
        "num_draft_tokens": sum(drafted),
        "num_spec_tokens": k,
    }
    if detailed:
        out |= {"per_step_accepted": steps, "per_step_drafted": drafted}
    return out


def _file(tmp_path, rows: list[list[int]], detailed: bool = True, k: int = K):
    objs = [
        {"id": f"chatcmpl-{i}", "object": "chat.completion", "choices": [{"index": 0, "message": {"content": "x"}}],
         "metrics": {"tokens_per_second": 1.0, "speculative_decoding": to_dict(r, [k] * len(r), k, detailed)}}
        for i, r in enumerate(rows)
    ]  # fmt: skip
    f = tmp_path / "responses.jsonl"
    f.write_text("\n".join(json.dumps(o) for o in objs))
    return str(f)


@pytest.mark.parametrize("detailed", [True, False])
def test_responses_sum_into_the_per_position_profile(tmp_path, detailed):
    m = load_measured(_file(tmp_path, [[0, 1, 3], [2, 5, 0, 1]], detailed))
    assert m.engine == "vllm" and m.passes == 7 and m.requests == 2 and m.num_spec_tokens == K
    assert m.mean_acceptance_length == pytest.approx(1 + 12 / 7)
    # steps accepting more than k: 5, 3, 2, 1, 1 of 7
    assert m.per_position_rate == pytest.approx([5 / 7, 3 / 7, 2 / 7, 1 / 7, 1 / 7])
    assert m.draft_acceptance_rate == pytest.approx(12 / 35)


def test_a_planted_fault_in_the_responses_is_named(tmp_path):
    clean = Candidate("as trained", "as trained", [[5, 3, 2, 4, 0, 1] * 20 for _ in range(6)])
    broken = Candidate(SHIFT.name, SHIFT.title, [[1, 0, 0, 2, 0, 1] * 20 for _ in range(6)], SHIFT)
    m = load_measured(_file(tmp_path, broken.accepted))
    assert rank([clean, broken], m, m.num_spec_tokens).verdict == SHIFT.name


def test_inconsistent_responses_are_refused(tmp_path):
    f = _file(tmp_path, [[1, 2]])
    with pytest.raises(BadInput, match="own per-request figures"):
        load_measured(f, before=f)
    doc = json.loads(open(f).read())
    doc["metrics"]["speculative_decoding"]["per_step_accepted"] = [2, 2]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(doc))
    with pytest.raises(BadInput, match="disagree with its histogram"):
        load_measured(str(bad))
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(open(_file(tmp_path, [[1]], k=3)).read() + "\n" + open(_file(tmp_path, [[1]], k=4)).read())
    with pytest.raises(BadInput, match="disagree on num_spec_tokens"):
        load_measured(str(mixed))


def test_the_fixture_responses_hold_the_fixture_scrape():
    """fixtures/serving/make_fault_scrapes.py writes one planted run both ways: the two read into one profile."""
    from conftest import SERVING

    a = load_measured(str(SERVING / "vllm-responses-kv-layout-shift.jsonl"))
    b = load_measured(str(SERVING / "vllm-after-kv-layout-shift.prom"))
    assert (a.passes, a.num_spec_tokens, a.accepted_tokens) == (b.passes, b.num_spec_tokens, b.accepted_tokens)
    assert a.per_position_rate == pytest.approx(b.per_position_rate)
