"""The chi-square survival function the fault ranking decides with, against its tabulated 95% points."""

from __future__ import annotations

import math

import pytest

from eagle3_doctor.core.stats import chi2_sf


@pytest.mark.parametrize("x,dof", [(3.841, 1), (5.991, 2), (7.815, 3), (9.488, 4), (11.070, 5), (16.919, 9), (18.307, 10)])
def test_tabulated_95_percent_points(x, dof):
    assert chi2_sf(x, dof) == pytest.approx(0.05, abs=2e-4)


def test_edges():
    assert chi2_sf(0.0, 3) == 1.0
    assert chi2_sf(1e4, 4) == pytest.approx(0.0, abs=1e-12)
    assert math.isnan(chi2_sf(1.0, 0))
    # dof 2 is exp(-x/2) exactly
    assert chi2_sf(2.0, 2) == pytest.approx(math.exp(-1.0))
