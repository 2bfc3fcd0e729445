"""Bootstrap intervals over prompts (eagle3_doctor.core.stats): reproducible, correct points, honest coverage."""

from __future__ import annotations

import numpy as np
import pytest

from eagle3_doctor.analyses.acceptance.metrics import metrics_from_passes, tau_from_acc
from eagle3_doctor.core.stats import (
    acceptance_counts,
    acceptance_intervals,
    bootstrap,
    difference_interval,
    paired,
    ratio,
    weights,
)


def test_weights_are_multiplicities_and_seeded():
    w = weights(7, B=50, seed=3)
    assert w.shape == (50, 7) and (w.sum(axis=1) == 7).all()
    assert (w == weights(7, B=50, seed=3)).all() and not (w == weights(7, B=50, seed=4)).all()


@pytest.mark.parametrize("n", [1, 5, 37, 1024])
def test_weights_are_the_seeded_draws_counted(n):
    """Each row counts the prompts the seeded generator drew for it: the multiplicities np.add.at gave before, bit
    for bit (every interval and the calibration table rest on them), kept read-only since every path shares them."""
    rng = np.random.Generator(np.random.PCG64(0))
    idx = rng.integers(0, n, size=(2000, n))
    want = np.zeros((2000, n))
    np.add.at(want, (np.repeat(np.arange(2000), n), idx.ravel()), 1.0)
    got = weights(n)
    assert np.array_equal(got, want) and got.dtype == np.float64
    with pytest.raises(ValueError):
        got[0, 0] = 5.0


def test_point_is_the_pooled_ratio_and_interval_brackets_it():
    c = np.array([[3, 10], [8, 10], [1, 5], [9, 12], [4, 9], [6, 6]])
    iv = bootstrap(c, ratio())
    assert iv.point == c[:, 0].sum() / c[:, 1].sum()
    assert iv.lo <= iv.point <= iv.hi and iv.lo < iv.hi
    assert iv == bootstrap(c, ratio())  # reproducible bit for bit


def test_constant_per_prompt_rate_gives_a_zero_width_interval():
    c = np.array([[5, 10], [10, 20], [2, 4], [7, 14]])
    iv = bootstrap(c, ratio())
    assert iv.lo == iv.hi == 0.5


def test_coverage_is_near_nominal():
    """95% intervals from 30 prompts cover the true rate in about 95% of repeated experiments."""
    rng = np.random.default_rng(0)
    true_p, cover, reps = 0.6, 0, 200
    for r in range(reps):
        # prompts differ in difficulty (beta-distributed rate) and length: the realistic case
        p = rng.beta(6, 4, size=30)
        n = rng.integers(20, 80, size=30)
        h = rng.binomial(n, p)
        iv = bootstrap(np.stack([h, n], 1), ratio(), B=500, seed=r)
        cover += iv.lo <= true_p <= iv.hi
    assert 0.88 <= cover / reps <= 0.99, cover / reps


def test_paired_differences_cancel_shared_prompt_difficulty():
    rng = np.random.default_rng(1)
    n = rng.integers(50, 100, size=12)
    base = rng.uniform(0.2, 0.9, size=12)  # prompts vary a lot...
    a = np.stack([np.round(base * n), n], 1)
    b = np.stack([np.round((base - 0.03) * n), n], 1)  # ...b is a little worse on every one of them
    own, diff = paired([a, b, a], ratio(), ref=0)
    assert own[0].lo < own[1].hi  # separately, the intervals overlap
    assert diff[1].hi < 0 and diff[1].excludes_zero()  # paired, the difference is clearly negative
    assert diff[2].lo == diff[2].hi == 0.0 and not diff[2].excludes_zero()


def test_difference_interval_pairs_when_the_prompt_count_matches():
    c = np.array([[3, 10], [8, 10], [1, 5], [9, 12], [4, 9], [6, 6]])
    iv, how = difference_interval(c, c, ratio())
    assert how.startswith("paired") and iv.lo == iv.hi == 0.0
    iv, how = difference_interval(c[:4], c, ratio())
    assert how.startswith("independent") and iv.lo < 0 < iv.hi


def test_acceptance_intervals_points_match_the_reported_metrics():
    K = 3
    acc = [[0, 2, 3, 1], [1, 1], [3, 3, 0], [2], [0, 0, 1, 2, 3]]
    hits = [[5, 3, 2], [4, 2, 1], [6, 5, 4], [2, 1, 0], [3, 2, 2]]
    tots = [[8, 7, 6], [5, 4, 3], [7, 6, 5], [3, 2, 1], [9, 8, 7]]
    out = acceptance_intervals(acceptance_counts(acc, hits, tots, K), K, B=300)
    flat = [x for a in acc for x in a]
    m = metrics_from_passes(flat, [K] * len(flat), K)
    assert np.isclose(out.mean_acceptance_length.point, m.mean_acceptance_length)
    assert np.allclose([r.point for r in out.per_position_rate], m.per_position_rate)
    acc_k = [sum(h[k] for h in hits) / sum(t[k] for t in tots) for k in range(K)]
    assert np.allclose([r.point for r in out.acc_k], acc_k)
    assert np.isclose(out.tau.point, tau_from_acc(acc_k))
    for r in [out.mean_acceptance_length, out.tau, *out.acc_k, *out.per_position_rate]:
        assert r.lo <= r.point <= r.hi
    assert out.reliable is True and "seed=0" in out.method
