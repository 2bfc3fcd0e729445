"""Finding codes are stable API: each has a severity and a README entry."""

from __future__ import annotations

import re

import pytest

from conftest import ROOT
from eagle3_doctor.findings import CODES, Finding


def test_every_code_is_documented_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    documented = set(re.findall(r"^\| `([A-Z]+\d{3})` \|", readme, flags=re.M))
    assert documented == set(CODES), sorted(set(CODES) ^ documented)


def test_unknown_code_is_rejected():
    with pytest.raises(ValueError):
        Finding("XYZ999", "nope")
    assert Finding("CAP001", "t").severity == "error"
