"""SGLang's per-request accept histograms (the /generate responses' meta_info) read into the workload's figures."""

from __future__ import annotations

import json

import pytest

from eagle3_doctor.analyses.server_metrics.measured import load_measured
from eagle3_doctor.core.errors import BadInput


def _responses(tmp_path, hists, key="spec_accept_histogram", lines=True):
    objs = [{"text": "x", "meta_info": {key: h, "spec_verify_ct": sum(h)}} for h in hists]
    f = tmp_path / "responses.jsonl"
    f.write_text("\n".join(json.dumps(o) for o in objs) if lines else json.dumps(objs))
    return str(f)


@pytest.mark.parametrize("lines", [True, False])
@pytest.mark.parametrize("key", ["spec_accept_histogram", "spec_correct_drafts_histogram"])
def test_histograms_sum_into_the_per_position_profile(tmp_path, key, lines):
    # two requests: steps accepting 0, 1, 2, 3 draft tokens
    m = load_measured(_responses(tmp_path, [[2, 1, 0, 1], [1, 3, 2]], key, lines))
    assert m.engine == "sglang" and m.passes == 10 and m.requests == 2
    # accepted = 1*4 + 2*2 + 3*1 = 11: mean acceptance length 1 + 11/10
    assert m.mean_acceptance_length == pytest.approx(2.1)
    # passes accepting more than k: 7, 3, 1 of 10
    assert m.per_position_rate == pytest.approx([0.7, 0.3, 0.1])
    lo, hi = m.mean_acceptance_length_ci
    assert lo < 2.1 < hi
    assert all(a <= r <= b for r, (a, b) in zip(m.per_position_rate, m.per_position_ci))


def test_responses_refuse_a_before_scrape_and_broken_histograms(tmp_path):
    f = _responses(tmp_path, [[1, 2]])
    with pytest.raises(BadInput, match="no earlier scrape applies"):
        load_measured(f, before=f)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"meta_info": {"spec_accept_histogram": [1, -2]}}))
    with pytest.raises(BadInput, match="not a list of counts"):
        load_measured(str(bad))
    none = tmp_path / "none.jsonl"
    none.write_text(json.dumps({"meta_info": {"completion_tokens": 3}}))
    with pytest.raises(BadInput, match="no SGLang accept histogram"):
        load_measured(str(none))
