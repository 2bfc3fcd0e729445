"""fixtures/build.py stays runnable: a tiny build end to end, loaded back by the doctor."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_quick_build_produces_loadable_fixtures(tmp_path):
    r = subprocess.run(
        [sys.executable, str(ROOT / "fixtures/build.py"), "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    from eagle3_doctor.doctor import compare_hidden, load_setup

    for fmt in ("eagle", "sglang", "speculators"):
        setup = load_setup(
            target=str(tmp_path / "target"), draft=str(tmp_path / f"draft-{fmt}"), engine="sglang", dtype="float32", device="cpu"
        )
        res = compare_hidden(setup, prompts_path=str(tmp_path / "prompts.jsonl"), limit=2)
        assert res.consistent
    setup = load_setup(target=str(tmp_path / "target"), draft=str(tmp_path / "draft-sglang"), dtype="float32", device="cpu")
    assert compare_hidden(setup, train_dump=str(tmp_path / "specforge-dump")).consistent
    assert "| correct taps |" in (tmp_path / "README.md").read_text()
