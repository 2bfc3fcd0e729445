"""diagnose's scrapes per batch size, read before torch: each later scrape paired with the earlier one of its size,
the profiles sorted by size; one scrape without a size is the one-profile reading itself."""

from __future__ import annotations

from conftest import SERVING

from eagle3_doctor.analyses.server_metrics.measured import load_measured
from eagle3_doctor.cli.server_batches import diagnose_evidence, split_evidence

AFTER, BEFORE = SERVING / "vllm-after-healthy.prom", SERVING / "vllm-before.prom"
B1, B8 = SERVING / "vllm-after-other-sequence-b1.prom", SERVING / "vllm-after-other-sequence-b8.prom"


def test_each_size_takes_its_own_earlier_scrape_and_the_sizes_come_sorted():
    got = diagnose_evidence(*split_evidence([f"{B8}@8", f"{AFTER}@2"], [f"{BEFORE}@2"]), None, None)
    assert [p.batch for p in got] == [2, 8]
    assert got[0].measured.passes == load_measured(str(AFTER), str(BEFORE)).passes  # after minus before
    assert got[0].measured.passes != load_measured(str(AFTER)).passes
    assert got[1].measured.passes == load_measured(str(B8)).passes  # no earlier scrape: since the start
    assert got[0].measured.source.startswith(str(BEFORE))


def test_one_scrape_without_a_size_is_the_one_profile_reading():
    got = diagnose_evidence(*split_evidence([str(AFTER)], [str(BEFORE)]), None, None)
    assert got.to_dict() == load_measured(str(AFTER), str(BEFORE)).to_dict()
    assert diagnose_evidence(*split_evidence(None, None), None, None) is None
