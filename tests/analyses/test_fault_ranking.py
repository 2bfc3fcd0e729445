"""The ranking's decisions on predictions given as passes (no model): named, undetermined, none, and the window;
live figures from a vLLM-style profile or SGLang's accept histograms; profiles at several batch sizes ranked jointly."""

from __future__ import annotations

import json

from eagle3_doctor.analyses.faults.attribute import Candidate, rank
from eagle3_doctor.analyses.faults.batches import BatchProfile, rank_batches
from eagle3_doctor.analyses.faults.classes import CLASSES
from eagle3_doctor.analyses.server_metrics.measured import Measured, load_measured

K = 5
WINDOW = next(c for c in CLASSES if c.window)
SHIFT = next(c for c in CLASSES if c.name == "kv-layout-shift")


def _prompts(pattern: list[int], n: int = 6, reps: int = 20) -> list[list[int]]:
    return [pattern * reps for _ in range(n)]


def _live(accepted: list[list[int]], k: int = K) -> Measured:
    flat = [a for r in accepted for a in r]
    n = len(flat)
    rates = [sum(a >= j for a in flat) / n for j in range(1, k + 1)]
    return Measured("vllm", "test", float(n), 1 + sum(flat) / n, None, None, None, None, rates, None, k)


CLEAN = Candidate("as trained", "as trained", _prompts([5, 3, 2, 4, 0, 1]))
BROKEN = Candidate(SHIFT.name, SHIFT.title, _prompts([1, 0, 0, 2, 0, 1]), SHIFT)


def test_the_matching_prediction_is_named():
    assert rank([CLEAN, BROKEN], _live(BROKEN.accepted), K).verdict == SHIFT.name
    assert rank([CLEAN, BROKEN], _live(CLEAN.accepted), K).verdict == "as trained"


def test_a_fault_within_the_margin_of_running_fault_free_is_undetermined():
    rows = _prompts([5, 3, 2, 4, 0, 1])
    rows[0][0] = 4  # one pass of 720 accepts one token fewer
    near = Candidate(SHIFT.name, SHIFT.title, rows, SHIFT)
    r = rank([CLEAN, near], _live(near.accepted), K)
    assert r.verdict == "undetermined"
    assert {r.separating["a"], r.separating["b"]} == {"as trained", SHIFT.name}
    # the other way round the default stands: a fault must fit decisively better to be named
    assert rank([CLEAN, near], _live(CLEAN.accepted), K).verdict == "as trained"


def test_a_profile_no_prediction_fits_is_none():
    r = rank([CLEAN, BROKEN], _live(_prompts([1, 1, 1, 1, 1, 1])), K)
    assert r.verdict == "none" and r.separating is not None


def test_the_window_is_named_only_where_the_tail_is_dead():
    shallow = Candidate("as trained", "as trained", _prompts([5, 3, 2, 4, 0, 1]))
    window = Candidate(WINDOW.name, WINDOW.title, shallow.accepted, WINDOW)
    k = 8  # positions 6-8 are reached by no pass
    r = rank([shallow, window, BROKEN], _live(shallow.accepted, k), k)
    assert r.verdict == WINDOW.name
    assert next(f for f in r.fits if f.candidate is window).useful == 5
    # drafting 5, every position is reached: the window does not apply and the fault-free prediction is named
    assert rank([shallow, window, BROKEN], _live(shallow.accepted), K).verdict == "as trained"


def test_sglang_histograms_feed_the_ranking(tmp_path):
    # the broken passes as SGLang counts them, one histogram per request (index: draft tokens accepted in a step)
    lines = []
    for row in BROKEN.accepted:
        h = [0] * (max(row) + 1)
        for a in row:
            h[a] += 1
        lines.append(json.dumps({"meta_info": {"spec_accept_histogram": h}}))
    f = tmp_path / "responses.jsonl"
    f.write_text("\n".join(lines))
    m = load_measured(str(f))
    assert len(m.per_position_rate) == 2  # the deepest length seen; the ranking pads the rest with zeros
    assert rank([CLEAN, BROKEN], m, K).verdict == SHIFT.name


# ----------------------------------------------------------------------------- live profiles at several batch sizes
OTHER = next(c for c in CLASSES if c.batched)
CLEAN8 = Candidate("as trained", "as trained", _prompts([5, 3, 2, 4, 0, 1], n=8))
OTHER8 = Candidate(OTHER.name, OTHER.title, _prompts([2, 0, 1, 0, 0, 1], n=8), OTHER)
SHIFT8 = Candidate(SHIFT.name, SHIFT.title, _prompts([1, 0, 0, 2, 0, 1], n=8), SHIFT)


def _at(*profiles: tuple[int, list[list[int]]]) -> list[BatchProfile]:
    return [BatchProfile(b, _live(acc)) for b, acc in profiles]


def test_a_profile_falling_with_batch_size_is_the_batched_class():
    # 8 prompts decoded 8 to a batch: 7 fed another's rows, the batch's last its own
    at8 = OTHER8.accepted[:7] + CLEAN8.accepted[7:]
    r = rank_batches([CLEAN8, OTHER8, SHIFT8], _at((1, CLEAN8.accepted), (8, at8)), K, CLEAN8)
    assert r.verdict == OTHER.name and r.batches == [1, 8]
    best = r.fits[0]
    assert best.candidate.name == OTHER.name and best.chi2 < 1e-6 and best.dof == 10
    assert [b for b, _ in best.parts] == [1, 8] and best.dof == sum(p.dof for _, p in best.parts)
    # the batch-1 profile alone cannot tell: there the class is the fault-free prediction
    assert rank_batches([CLEAN8, OTHER8, SHIFT8], _at((1, CLEAN8.accepted)), K, CLEAN8).verdict == "as trained"


def test_a_flat_profile_is_fault_free_or_a_fault_of_every_batch_size():
    flat = _at((1, CLEAN8.accepted), (8, CLEAN8.accepted))
    r = rank_batches([CLEAN8, OTHER8, SHIFT8], flat, K, CLEAN8)
    assert r.verdict == "as trained"
    assert not next(f for f in r.fits if f.candidate.name == OTHER.name).fits
    broken = _at((1, SHIFT8.accepted), (8, SHIFT8.accepted))
    assert rank_batches([CLEAN8, OTHER8, SHIFT8], broken, K, CLEAN8).verdict == SHIFT.name


def test_every_profile_at_batch_one_makes_the_batched_class_the_fault_free_prediction():
    r = rank_batches([CLEAN8, OTHER8], _at((1, CLEAN8.accepted)), K, CLEAN8)
    other = next(f for f in r.fits if f.candidate.name == OTHER.name)
    assert other.candidate.same_as == "as trained" and r.verdict == "as trained"


def test_one_profile_keeps_its_shape():
    d = rank([CLEAN, BROKEN], _live(BROKEN.accepted), K).to_dict()
    assert "batch_sizes" not in d and all("per_batch" not in f for f in d["ranking"])
