"""The CI gate and the shipped examples/ci script, run as a CI job would run them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from safetensors.torch import load_file, save_file

from conftest import DRAFTS, PROMPTS, ROOT, TARGET


def gate_sh(draft, tmp_path, baseline=None, summary_env=None):
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", PROMPTS=str(PROMPTS),
               PYTHONPATH=str(ROOT), COLUMNS="200")
    if summary_env:
        env["GITHUB_STEP_SUMMARY"] = str(summary_env)
    args = ["bash", str(ROOT / "examples/ci/gate.sh"), str(TARGET), str(draft)] + ([str(baseline)] if baseline else [])
    return subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)


def test_shipped_ci_script_passes_clean_and_fails_broken(tmp_path, tmp_copy):
    summary = tmp_path / "step-summary.md"
    r = gate_sh(DRAFTS["sglang"], tmp_path, summary_env=summary)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    data = json.loads((tmp_path / "gate.json").read_text())
    assert data["passed"] is True and data["schema"] == "eagle3-doctor/gate/1"
    assert "eagle3-doctor gate: PASS" in summary.read_text()
    assert (tmp_path / "gate-summary.md").read_text().startswith("## eagle3-doctor gate: PASS")

    broken = tmp_copy(DRAFTS["sglang"], "broken")
    sd = load_file(broken / "model.safetensors")
    sd.pop("lm_head.weight")
    save_file(sd, broken / "model.safetensors")
    (tmp_path / "b").mkdir()
    r = gate_sh(broken, tmp_path / "b")
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    data = json.loads((tmp_path / "b" / "gate.json").read_text())
    assert data["passed"] is False and "DRF001" in {f["code"] for f in data["findings"]}


def test_regression_against_baseline(tmp_path):
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"metrics": {"step1_accuracy": 0.99, "tau": 9.0, "mean_acceptance_length": 9.0}}))
    r = gate_sh(DRAFTS["sglang"], tmp_path, baseline=base)
    assert r.returncode == 1
    data = json.loads((tmp_path / "gate.json").read_text())
    assert "GATE001" in {f["code"] for f in data["findings"]}


def test_bad_policy_is_bad_input(tmp_path):
    p = tmp_path / "p.toml"
    p.write_text("[gate]\nmin_cosin = 0.9\n")
    r = subprocess.run([sys.executable, "-m", "eagle3_doctor.cli", "gate", "--target", str(TARGET), "--draft",
                        str(DRAFTS["sglang"]), "--policy", str(p)], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 2 and "unknown key(s) min_cosin" in r.stderr and "Traceback" not in r.stderr
