"""Every measuring command on every drafter beside EAGLE-3, as a user runs it: the process ends with a findings
verdict (0 or 1, never the bug code 3), writes a JSON document whose findings each carry a fix, and prints no bug
report. A command that crashes after its report (P-EAGLE's diagnose once did, its own test asserting only a
non-zero exit) fails here whatever its own test checks."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import FIX, PROMPTS, TARGET, invoke

DRAFTERS = {"mtp": FIX / "mtp-speculators", "dflash": FIX / "dflash-draft", "peagle": FIX / "peagle-draft"}
COMMANDS = ("inspect", "compare-hidden", "acceptance", "diagnose", "fix")


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("drafter", sorted(DRAFTERS))
def test_the_command_ends_with_a_verdict_and_a_document(tmp_path, drafter, command):
    d = tmp_path / drafter
    shutil.copytree(DRAFTERS[drafter], d)
    args = [command, "-t", TARGET, "-d", d, "--engine", "vllm", "--json", tmp_path / "out.json"]
    if command != "inspect":
        args += ["--prompts", PROMPTS, "--limit", "2"]
    if command in ("acceptance", "diagnose", "fix"):
        args += ["--max-new-tokens", "12"]
    if command == "fix":
        args += ["--out", tmp_path / "fixed"]
    r = invoke(*args)
    assert r.exit_code in (0, 1) and "bug:" not in r.output, r.output
    doc = json.loads((tmp_path / "out.json").read_text())
    assert all(f["fix"] for f in doc["findings"]), doc["findings"]
