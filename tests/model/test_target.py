"""The target's greedy continuation reports its progress per token, in order."""

from __future__ import annotations


def test_greedy_continuation_reports_per_token(target):
    from eagle3_doctor.model.target import greedy_continue

    seen = []
    greedy_continue(target, [[1, 2, 3], [4, 5]], 6, 1, progress=lambda d, n: seen.append((d, n)))
    assert seen[-1] == (12, 12) and len(seen) >= 10
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
