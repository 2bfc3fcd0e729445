"""A signal that lands inside an import (transformers' lazy modules, numpy, torch's C++ init) still
ends the console's process with 130/143 and one line. An exception raised into an import is not
safe to unwind: transformers turns it into a ModuleNotFoundError (a run that reported itself as a
bug, exit 3), numpy's import could end in a RecursionError, and torch could abort (status -6). So
the console's handler raises nothing: it removes what a write has staged and exits.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT

# a module whose import is interrupted, and which re-raises whatever interrupted it as an import error,
# as transformers' _LazyModule does ("Could not import module 'LlamaConfig'")
LAZY = """
import os, signal, time
try:
    os.kill(os.getpid(), signal.{sig})
    time.sleep(5)
except BaseException as e:
    raise ModuleNotFoundError(f"Could not import module 'LlamaConfig' ({{e!r}})") from e
"""

COMMAND = """
import sys
sys.path.insert(0, {where!r})
from eagle3_doctor.cli import app
from eagle3_doctor.io.outputs import OutputSet

app._owns_process = True  # as the console entry (app.run) sets it

def command():
    report = OutputSet({report!r})
    report.add("r.md", b"half a report")
    import lazy_module  # noqa
    return 0

app.guarded(command)()
"""


@pytest.mark.parametrize("sig,code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_inside_an_import_is_the_shells_code_and_one_line(sig, code, tmp_path):
    (tmp_path / "lazy_module.py").write_text(LAZY.format(sig=sig))
    report = tmp_path / "report"
    script = COMMAND.format(where=str(tmp_path), report=str(report))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == code, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr and len(lines) == 1, r.stderr[-2000:]
    assert lines[0] == f"eagle3-doctor: {'interrupted' if sig == 'SIGINT' else 'terminated (SIGTERM)'}: no report was written"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lazy_module.py"], "the staged report was left behind"


def test_what_a_write_has_staged_is_removed_and_nothing_else(tmp_path):
    from eagle3_doctor.io import outputs

    old = tmp_path / "old"
    old.mkdir()
    (old / "r.md").write_text("the previous report")
    fresh, existing = outputs.OutputSet(tmp_path / "new"), outputs.OutputSet(old)
    fresh.add("a.png", b"png")
    existing.add("r.md", b"new report")
    outputs.remove_staged()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old"]
    assert [p.name for p in old.iterdir()] == ["r.md"] and (old / "r.md").read_text() == "the previous report"
    assert not outputs._STAGED
    outputs.write_json(tmp_path / "j.json", {"a": 1})  # a completed write leaves nothing staged
    assert not outputs._STAGED


AFTER = """
import os, signal, sys, time
from eagle3_doctor.cli import app

app._owns_process = True  # as the console entry (app.run) sets it
try:
    app.guarded(lambda: 1)()  # a command that ran to its end: findings, exit 1
except BaseException as e:  # typer.Exit carries the command's code
    code = e.exit_code
for sig in (signal.SIGINT, signal.SIGTERM):  # as a signal lands in the interpreter's teardown
    os.kill(os.getpid(), sig)
    time.sleep(0.2)
sys.exit(code)
"""


def test_a_signal_after_the_command_has_ended_leaves_its_exit_code():
    """Once the command has said what it had to, the teardown left (a second or more with torch loaded) is no
    moment to interrupt: the run's own exit code stands, with nothing more on stderr."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", AFTER], capture_output=True, text=True, env=env, timeout=60)
    assert (r.returncode, r.stderr) == (1, ""), (r.returncode, r.stderr[-2000:])
