"""The one error boundary: every way out of a command is one line on stderr and a meaningful exit code."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from conftest import DRAFTS, ROOT, TARGET, invoke

from eagle3_doctor.core.errors import EXIT_BAD_INPUT, EXIT_BUG, EXIT_TERMINATED, one_line


def one_stderr_line(r) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.output
    return lines[0]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["compare-hidden"], "Missing option '--target'"),
        (["compare-hidden", "-t", "x", "--limit", "two"], "--limit"),
        (["compare-hidden", "-t", "x", "--no-such-flag"], "No such option: --no-such-flag"),
        (["no-such-command"], "No such command"),
        (["acceptance", "-t", "x"], "--draft"),
    ],
)
def test_click_usage_errors_are_one_line_exit_2(args, needle):
    r = invoke(*args)
    assert r.exit_code == EXIT_BAD_INPUT
    line = one_stderr_line(r)
    assert line.startswith("eagle3-doctor: error: ") and needle in line and "-- fix: see `eagle3-doctor" in line


def test_bare_command_prints_help_and_exits_0():
    r = invoke()
    assert r.exit_code == 0 and "compare-hidden" in r.stdout


def test_an_unanticipated_exception_is_a_bug_exit_3_with_the_traceback_in_a_file(monkeypatch):
    import eagle3_doctor.model.setup as doctor  # where load_models finds load_setup

    def boom(**kw):
        raise ValueError("something nobody anticipated")

    monkeypatch.setattr(doctor, "load_setup", boom)
    r = invoke("compare-hidden", "--target", TARGET, "--draft", DRAFTS["sglang"], "-q")
    assert r.exit_code == EXIT_BUG
    line = one_stderr_line(r)
    assert line.startswith("eagle3-doctor: bug: ValueError: something nobody anticipated (eagle3-doctor ")
    path = line.split("full traceback in ")[1].split(";")[0]
    text = open(path).read()
    os.unlink(path)
    assert "Traceback" in text and "something nobody anticipated" in text and "boom" in text


def test_sigterm_unwinds_like_ctrl_c_and_keeps_the_old_report(tmp_path, monkeypatch):
    import eagle3_doctor.model.setup as doctor  # where load_models finds load_setup

    out = tmp_path / "r.json"
    out.write_text('{"old": true}')

    def killed(**kw):
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not interrupt the command")

    monkeypatch.setattr(doctor, "load_setup", killed)
    before = signal.getsignal(signal.SIGTERM)
    r = invoke("compare-hidden", "--target", TARGET, "--draft", DRAFTS["sglang"], "--json", out, "-q")
    assert r.exit_code == EXIT_TERMINATED
    assert "terminated" in one_stderr_line(r)
    assert out.read_text() == '{"old": true}'
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is the command's, not left behind


def test_newlines_and_control_characters_in_messages_stay_on_one_line():
    assert one_line("dir/a\nb\rc\x1bd") == "dir/a\\nb\\rc\\x1bd"
    r = invoke("compare-hidden", "--target", "/nonexistent/a\nb", "--draft", DRAFTS["sglang"])
    assert r.exit_code == EXIT_BAD_INPUT and "a\\nb" in one_stderr_line(r)


def test_a_path_with_brackets_is_not_read_as_markup(tmp_path):
    import shutil

    t = tmp_path / "run[red]x[/bold]"
    shutil.copytree(TARGET, t)
    r = invoke("compare-hidden", "--target", t, "--draft", DRAFTS["sglang"], "--limit", "1", "-q")
    assert r.exit_code in (0, 1), r.output
    assert str(t) in r.stdout


def _run(args, **kw):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "eagle3_doctor.cli.app", *map(str, args)], env=env, timeout=300, **kw)


def test_stdout_closed_is_not_a_crash():
    r = _run(
        ["compare-hidden", "--target", TARGET, "--draft", DRAFTS["sglang"], "--limit", 1, "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: os.close(1),
    )
    assert r.returncode in (0, 1), r.stderr
    assert "Traceback" not in r.stderr and "bug" not in r.stderr


def test_stdout_reader_gone_is_one_line():
    # a reader that closes the pipe at once: every write after that raises EPIPE
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eagle3_doctor.cli.app",
            "compare-hidden",
            "--target",
            str(TARGET),
            "--draft",
            str(DRAFTS["sglang"]),
            "--limit",
            "1",
            "--matrix",
            "-q",
        ],
        env=dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    p.stdout.close()
    err = p.stderr.read()
    rc = p.wait(timeout=300)
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == EXIT_BAD_INPUT and len(lines) == 1 and "standard output was closed" in lines[0], (rc, err)


def test_hub_lookups_honour_hf_hub_offline():
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "eagle3_doctor.cli.app",
            "inspect",
            "--target",
            "no-such-org/no-such-model",
            "--draft",
            str(DRAFTS["sglang"]),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == EXIT_BAD_INPUT and len(lines) == 1, r.stderr
    assert "no-such-org/no-such-model" in lines[0] and "HF_HUB_OFFLINE" in lines[0]
