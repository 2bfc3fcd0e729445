"""A KV cache sized from the user's numbers (speedup's --batch-sizes and --context) is checked against the
device's memory before it is allocated: one ResourceError, exit 2, never the allocator's failure (exit 3)."""

from __future__ import annotations

import pytest

from eagle3_doctor.core.errors import EXIT_BAD_INPUT, ResourceError
from eagle3_doctor.model.static import check_cache_fits, static_cache


def test_a_cache_larger_than_the_machine_is_refused_before_it_is_allocated(target):
    with pytest.raises(ResourceError) as e:
        static_cache(target, 99999, 16777216)
    assert "a KV cache of 99999 sequences x 16777216 positions needs" in str(e.value) and "--context" in str(e.value)
    assert e.value.exit_code == EXIT_BAD_INPUT


def test_a_cache_that_fits_is_let_through(target):
    check_cache_fits(target, 8, 4096)  # 8 x 4096 positions of the fixture's 8 layers: a few hundred MB at most
