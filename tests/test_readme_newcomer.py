"""A newcomer reads only the README's first 60 lines: the commands there run as written on the local
fixtures (a target directory and a draft directory), with no usage error and no traceback."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from conftest import ROOT

FIRST = 60


def _first_screen_commands() -> str:
    lines = (ROOT / "README.md").read_text().splitlines()[:FIRST]
    blocks, cur, inside = [], [], False
    for ln in lines:
        if ln.startswith("```"):
            if inside and cur:
                blocks.append("\n".join(cur))
            inside, cur = (not inside), []
            continue
        if inside:
            cur.append(ln)
    # a block of commands a newcomer types: one of its lines is an eagle3-doctor command (the install
    # block names the package too, and running it would reach the network and rerun `make test`)
    return "\n".join(b for b in blocks if any(ln.startswith("eagle3-doctor ") for ln in b.splitlines()))


def test_readme_first_screen_has_the_three_commands():
    text = _first_screen_commands()
    for cmd in ("eagle3-doctor inspect", "eagle3-doctor compare-hidden", "eagle3-doctor acceptance"):
        assert cmd in text, cmd
    assert "--serve-cmd" in text
    assert "fixtures/target" in text and "fixtures/draft-" in text


def test_readme_first_screen_commands_run_as_written(tmp_path):
    script = _first_screen_commands()
    # every line starting with `eagle3-doctor` is a command a newcomer would type; record each exit code
    wrapped = ['eagle3-doctor() { "$PY" -m eagle3_doctor.cli.app "$@"; }', "set -u"]
    n = 0
    for ln in script.splitlines():
        wrapped.append(ln)
        if ln.startswith("eagle3-doctor "):
            n += 1
            wrapped.append(f'echo "exit[{n}]=$?"')
    env = dict(os.environ, PY=sys.executable, PYTHONPATH=str(ROOT), COLUMNS="100")
    r = subprocess.run(["bash", "-c", "\n".join(wrapped)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    codes = [int(c) for c in re.findall(r"exit\[\d+\]=(\d+)", r.stdout)]
    assert len(codes) == n >= 3, r.stdout[-3000:] + r.stderr[-3000:]
    assert all(c in (0, 1) for c in codes), (codes, r.stderr[-3000:])
    assert "Traceback" not in r.stderr and "error:" not in r.stderr, r.stderr[-3000:]
