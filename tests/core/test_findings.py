"""Finding codes are stable API: each has a severity and an entry in docs/findings.md (generated from
the code by tools/gen_docs.py and linked from the README)."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT

from eagle3_doctor.core.findings import CODES, Finding


def test_every_code_is_documented():
    page = (ROOT / "docs" / "findings.md").read_text()
    documented = set(re.findall(r"^\| `([A-Z]+\d{3})` \|", page, flags=re.M))
    assert documented == set(CODES), sorted(set(CODES) ^ documented)
    assert "](docs/findings.md)" in (ROOT / "README.md").read_text()


def test_findings_page_is_generated_from_the_code():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_docs.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr + " (run: python tools/gen_docs.py)"


def test_unknown_code_is_rejected():
    with pytest.raises(ValueError):
        Finding("XYZ999", "nope")
    assert Finding("CAP001", "t").severity == "error"
