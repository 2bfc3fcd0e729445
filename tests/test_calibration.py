"""The judgment measured like any other behaviour: the calibration corpus of tools/calibrate.py (clean and broken
pairs of every drafter kind, each command at three run sizes, through the CLI as typed) holds 0 false alarms,
0 misses and 100% stability, and docs/diagnose.md shows the table this run produces."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("calibrate", ROOT / "tools" / "calibrate.py")
assert _spec is not None and _spec.loader is not None
cal = importlib.util.module_from_spec(_spec)
sys.modules["calibrate"] = cal
_spec.loader.exec_module(cal)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return cal.calibrate(tmp_path_factory.mktemp("calibration"))


def test_every_drafter_kind_has_a_clean_and_a_no_skill_case():
    for kind in ("eagle3", "mtp", "dflash", "peagle"):
        cases = [c for c in cal.CASES if c.kind == kind]
        assert any(c.clean for c in cases), kind
        assert any("HLT001" in c.expect.values() for c in cases), kind


def test_no_false_alarm_on_a_clean_pair(corpus):
    assert not corpus.false_alarms(), [r.__dict__ for r in corpus.false_alarms()]


def test_every_planted_fault_is_found_at_every_run_size(corpus):
    assert not corpus.misses(), [r.__dict__ for r in corpus.misses()]


def test_the_same_conclusion_at_every_run_size(corpus):
    groups = corpus.by_case()
    assert not corpus.unstable(), {k: [r.conclusion for r in groups[k]] for k in corpus.unstable()}


def test_a_clean_pair_is_judged_healthy_not_merely_unflagged(corpus):
    """Healthy is a positive finding (HLT002) wherever acceptance was measured, never a bare OK."""
    clean = {c.name for c in cal.CASES if c.clean}
    measured = [r for r in corpus.runs if r.case in clean and r.command in ("acceptance", "diagnose")]
    assert measured and all(r.codes == ["HLT002"] for r in measured), [r.__dict__ for r in measured if r.codes != ["HLT002"]]


def test_the_docs_show_this_table(corpus):
    doc = (ROOT / "docs" / "diagnose.md").read_text()
    assert corpus.table() in doc, "docs/diagnose.md's calibration table is stale: paste `python tools/calibrate.py`"
