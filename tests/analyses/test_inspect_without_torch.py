"""inspect is the answer that needs no model: on the fixtures the real CLI, in a fresh process, never imports
torch (importing it alone costs more CPU than the whole inspect), and still reports what it reported."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import DRAFTS, ROOT, TARGET

# Runs the CLI as `eagle3-doctor` does, then says which torch modules this process imported.
PROBE = """
import json, sys
from eagle3_doctor.cli import run
sys.argv = ["eagle3-doctor", *json.loads(sys.argv[1])]
try:
    run()
    code = 0
except SystemExit as e:
    code = e.code
print(json.dumps({"exit": code, "torch": sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))}), file=sys.__stderr__)
"""

SERVE = (
    f"python -m sglang.launch_server --model-path {TARGET} --speculative-algorithm EAGLE3 "
    f"--speculative-draft-model-path {DRAFTS['sglang']} --speculative-num-steps 3 "
    "--speculative-eagle-topk 2 --speculative-num-draft-tokens 6"
)


def _probe(argv: list[str], home) -> tuple[subprocess.CompletedProcess, dict]:
    """The CLI in a fresh process with a bare environment: (the process, PROBE's report of its imports and exit)."""
    p = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argv)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(home), "HF_HUB_OFFLINE": "1"},
        timeout=300,
    )
    return p, json.loads(p.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "argv",
    [
        ["--target", str(TARGET), "--draft", str(DRAFTS["sglang"]), "--engine", "sglang"],
        ["--target", str(TARGET), "--draft", str(DRAFTS["speculators"]), "--engine", "vllm"],
        ["--target", str(TARGET), "--draft", str(DRAFTS["eagle"]), "--engine", "eagle"],
        ["--serve-cmd", SERVE],  # the README's form
    ],
    ids=["sglang", "speculators", "eagle", "serve-cmd"],
)
def test_inspect_imports_no_torch(argv, tmp_path):
    out = tmp_path / "inspect.json"
    p, probe = _probe(["inspect", *argv, "--json", str(out), "--report", str(tmp_path / "r")], tmp_path)
    assert probe["torch"] == [], f"inspect imported {probe['torch'][:5]}"
    assert probe["exit"] == 0, p.stderr[-2000:]
    res = json.loads(out.read_text())
    assert [f["code"] for f in res["findings"] if f["severity"] in ("warning", "error")] == []
    assert res["forensics"]["tensors"] and all(t["verdict"] in ("trained", "map") for t in res["forensics"]["tensors"])


def test_inspect_on_an_mtp_head_imports_no_torch(tmp_path):
    """The MTP branch of inspect reads the head's tensors through the same numpy reader: no torch either."""
    out = tmp_path / "inspect.json"
    argv = [
        "inspect",
        "-t",
        str(TARGET),
        "-d",
        str(ROOT / "fixtures" / "mtp-speculators"),
        "--engine",
        "vllm",
        "--json",
        str(out),
    ]
    _, probe = _probe(argv, tmp_path)
    assert probe["torch"] == [], f"inspect imported {probe['torch'][:5]}"
    assert probe["exit"] == 1 and [f["code"] for f in json.loads(out.read_text())["findings"]] == ["MTP003", "MTP001"]
