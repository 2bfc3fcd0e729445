"""explain: every finding code's long form, the list of codes, and a mistyped code answered in one line."""

from __future__ import annotations

import pytest
from conftest import invoke


def test_explain_prints_the_long_form():
    from eagle3_doctor.core.findings.registry import REGISTRY

    r = invoke("explain", "cap002")
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    assert out.startswith("CAP002 (error): the embeddings are fed")
    for part in ("What it means", "Why acceptance drops", "How to confirm"):
        assert part in out
    assert " ".join(REGISTRY["CAP002"].why.split()) in out


@pytest.mark.parametrize("typo,first", [("CAP02", "CAP002"), ("cap2", "CAP002"), ("TPL", "TPL001"), ("DRF01", "DRF001")])
def test_explain_unknown_code_is_one_line_naming_the_closest(typo, first):
    import subprocess
    import sys

    from conftest import ROOT

    r = subprocess.run(
        [sys.executable, "-m", "eagle3_doctor.cli.app", "explain", typo],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"eagle3-doctor: error: unknown finding code '{typo}'"), r.stderr
    assert f"did you mean {first}" in lines[0]


def test_explain_without_a_code_lists_every_code():
    from eagle3_doctor.core.findings import CODES

    r = invoke("explain")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert len(lines) == len(CODES)
    assert lines[0].split()[:2] == [next(iter(CODES)), CODES[next(iter(CODES))][0]]
    assert any(ln.startswith("CMD001 ") for ln in lines)
