"""Result files: complete or absent, the usual mode, '-' is stdout, and nothing but a regular file is ever replaced."""

from __future__ import annotations

import json
import os
import stat
import threading

import pytest
from conftest import DRAFTS, TARGET, invoke

from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.io.outputs import OutputSet, write_output


@pytest.fixture()
def umask():
    def set_mask(m: int) -> None:
        os.umask(m)

    old = os.umask(0o022)
    os.umask(old)
    yield set_mask
    os.umask(old)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_files_get_the_mode_open_would_give(tmp_path, umask, mask, mode):
    umask(mask)
    write_output(tmp_path / "r.json", b"{}")
    assert stat.S_IMODE((tmp_path / "r.json").stat().st_mode) == mode
    with OutputSet(tmp_path / "rep") as out:
        out.add("a.md", b"# a")
        out.add("a.png", b"\x89PNG")
    assert stat.S_IMODE((tmp_path / "rep" / "a.md").stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "rep" / "a.png").stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "rep").stat().st_mode) == 0o777 & ~mask


def test_an_existing_file_keeps_its_mode(tmp_path, umask):
    umask(0o022)
    f = tmp_path / "r.json"
    f.write_text("old")
    os.chmod(f, 0o640)
    write_output(f, b"new")
    assert f.read_bytes() == b"new" and stat.S_IMODE(f.stat().st_mode) == 0o640


def test_dash_is_stdout(capfdbinary):
    write_output("-", b'{"a": 1}\n')
    assert capfdbinary.readouterr().out == b'{"a": 1}\n'


def test_a_symlink_to_a_device_is_written_into_not_replaced(tmp_path):
    link = tmp_path / "stdout-like"
    os.symlink("/dev/null", link)
    write_output(link, b"data")
    assert link.is_symlink() and os.readlink(link) == "/dev/null"


def test_a_symlink_to_a_file_keeps_the_link_and_replaces_the_file(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    os.symlink(real, link)
    write_output(link, b"new")
    assert link.is_symlink() and real.read_text() == "new"


def test_a_fifo_without_reader_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    done = []
    t = threading.Thread(target=lambda: done.append(pytest.raises(BadInput, write_output, fifo, b"x")))
    t.start()
    t.join(10)
    assert done, "write_output blocked on a FIFO"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_directory_is_never_replaced(tmp_path):
    with pytest.raises(BadInput, match="is a directory"):
        write_output(tmp_path, b"x")


def test_a_new_report_is_complete_or_absent(tmp_path):
    rep = tmp_path / "rep"
    with pytest.raises(KeyboardInterrupt):
        with OutputSet(rep) as out:
            out.add("heatmap.png", b"\x89PNG")
            raise KeyboardInterrupt
    assert not rep.exists() and list(tmp_path.iterdir()) == []


def test_an_existing_report_keeps_its_old_files_until_all_new_ones_are_written(tmp_path):
    rep = tmp_path / "rep"
    rep.mkdir()
    (rep / "compare-hidden.md").write_text("old")
    (rep / "notes.txt").write_text("mine")
    with pytest.raises(RuntimeError):
        with OutputSet(rep) as out:
            out.add("heatmap.png", b"new png")
            raise RuntimeError("plotting failed")
    assert sorted(p.name for p in rep.iterdir()) == ["compare-hidden.md", "notes.txt"]
    assert (rep / "compare-hidden.md").read_text() == "old"
    with OutputSet(rep) as out:
        out.add("heatmap.png", b"new png")
        out.add("compare-hidden.md", b"new")
    assert (rep / "compare-hidden.md").read_text() == "new" and (rep / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in rep.iterdir()) == ["compare-hidden.md", "heatmap.png", "notes.txt"]


def test_json_dash_puts_the_json_alone_on_stdout():
    r = invoke("compare-hidden", "--target", TARGET, "--draft", DRAFTS["sglang"], "--limit", 1, "--json", "-", "-q")
    assert r.exit_code in (0, 1), r.output
    data = json.loads(r.stdout)
    assert data["schema"] == "eagle3-doctor/compare-hidden/1"
    assert "feature slots" in r.stderr  # the human report moved to stderr
    assert not os.path.exists("-")


def test_an_interrupted_report_leaves_no_report_and_no_temp_files(tmp_path, monkeypatch):
    import eagle3_doctor.report.plots as plots

    real = plots.heatmap_png

    def interrupted(*args, **kwargs):
        real(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(plots, "heatmap_png", interrupted)
    r = invoke(
        "compare-hidden", "--target", TARGET, "--draft", DRAFTS["sglang"], "--limit", 1, "--report", tmp_path / "rep", "-q"
    )
    assert r.exit_code == 130
    assert list(tmp_path.iterdir()) == []


def test_json_to_dev_stdout_redirected_to_a_file_appends_and_keeps_the_link(tmp_path):
    """`--json /dev/stdout > out.txt`: the report and then the JSON land in out.txt; /dev/stdout stays a link."""
    import subprocess
    import sys

    from conftest import ROOT

    out = tmp_path / "out.txt"
    code = (
        "import sys; from eagle3_doctor.io.outputs import write_output; print('report line', flush=True); "
        "write_output('/dev/stdout', b'{\"a\": 1}\\n')"
    )
    with open(out, "wb") as f:
        subprocess.run(
            [sys.executable, "-c", code], stdout=f, check=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT))
        )
    assert out.read_text() == 'report line\n{"a": 1}\n'
    assert os.path.islink("/dev/stdout")
