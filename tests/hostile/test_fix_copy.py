"""fix's corrected copy: complete under its name or absent. An interruption (Ctrl-C, SIGTERM, SIGKILL), a full
disk or `ulimit -f` never leaves an --out that looks finished, nor blocks the next run; a link in the draft
directory is never followed blindly into /dev/zero or around a loop."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DRAFTS, FIX, PROMPTS, ROOT, TARGET, invoke

import eagle3_doctor.io.outputs as outputs
from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.io.copies import new_directory

FAST = ("--prompts", PROMPTS, "--limit", "4", "--max-new-tokens", "16", "--num-steps", "2", "-q")
BROKEN_IDS, FIXED_IDS = [-1, 1, 3], [1, 3, 4]  # SGLang's ids for the fixture, written wrong


def _broken_draft(tmp_path: Path) -> Path:
    """The sglang fixture with the seed incident in its config: fix has one edit to write."""
    import shutil

    d = tmp_path / "draft"
    shutil.copytree(DRAFTS["sglang"], d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = BROKEN_IDS
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    return d


def _fix_args(d: Path, out: Path) -> list[str]:
    return ["fix", "--target", str(TARGET), "--draft", str(d), "--engine", "sglang", "--train-recipe", "specforge",
            "--out", str(out), *map(str, FAST)]  # fmt: skip


def _fault_on_weights(monkeypatch, fault: BaseException) -> None:
    """The copy's weights file half written, then ``fault``: the moment a copy used to be left looking finished."""
    real = outputs._write_all

    def write(f, data):
        if str(getattr(f, "name", "")).endswith(".safetensors"):
            real(f, data[: len(data) // 2])
            raise fault
        real(f, data)

    monkeypatch.setattr(outputs, "_write_all", write)


def _assert_fixed(out: Path, d: Path) -> None:
    assert json.loads((out / "config.json").read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == FIXED_IDS
    assert (out / "model.safetensors").read_bytes() == (d / "model.safetensors").read_bytes()


def _one_error_line(output: str) -> str:
    lines = [ln for ln in output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("eagle3-doctor: error: ") and " -- fix: " in lines[0], output
    return lines[0]


def test_an_interrupted_copy_leaves_no_out_and_the_next_fix_writes_it(tmp_path, monkeypatch):
    d = _broken_draft(tmp_path)
    out = tmp_path / "fixed"
    _fault_on_weights(monkeypatch, KeyboardInterrupt())
    r = invoke(*_fix_args(d, out))
    assert r.exit_code == 130, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["draft"], "a partial copy, or its stage, was left"
    monkeypatch.undo()
    r = invoke(*_fix_args(d, out))
    assert r.exit_code in (0, 1) and "already exists" not in r.output, r.output
    _assert_fixed(out, d)


def test_an_mtp_copy_interrupted_after_its_weights_leaves_no_out(tmp_path, monkeypatch):
    """The MTP head's folded copy: weights complete, its config.json not yet written, then Ctrl-C."""
    mtp, out = FIX / "mtp-speculators", tmp_path / "fixed"
    real = outputs._write_all

    def write(f, data):
        if str(f.name).endswith("config.json"):
            raise KeyboardInterrupt
        real(f, data)

    monkeypatch.setattr(outputs, "_write_all", write)
    r = invoke("fix", "-t", TARGET, "-d", mtp, "--engine", "vllm", "--out", out, "--dtype", "float32",
               "--device", "cpu", "--limit", "2", "--max-new-tokens", "16", "--num-steps", "2", "-q")  # fmt: skip
    assert r.exit_code == 130, r.output
    assert list(tmp_path.iterdir()) == [], "a partial copy, or its stage, was left"


@pytest.mark.parametrize("name, words", [("ENOSPC", "no space left on the device"), ("EDQUOT", "disk quota exceeded")])
def test_a_full_disk_mid_copy_is_one_line_and_no_out(name, words, tmp_path, monkeypatch):
    d = _broken_draft(tmp_path)
    out = tmp_path / "fixed"
    code = getattr(errno, name)
    _fault_on_weights(monkeypatch, OSError(code, os.strerror(code)))
    r = invoke(*_fix_args(d, out))
    assert r.exit_code == 2, r.output
    line = _one_error_line(r.stderr)
    assert f"cannot write --out {out}: {words} ({name})" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["draft"]


def _console(code: str, timeout: int = 240, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env, **kw)


@pytest.mark.parametrize("sig, code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_mid_copy_in_the_console_leaves_no_out(sig, code, tmp_path):
    """The console's handler ends the process at once, without unwinding: the stage is removed all the same."""
    d = _broken_draft(tmp_path)
    out = tmp_path / "fixed"
    prog = (
        "import os, signal, sys\n"
        "import eagle3_doctor.io.outputs as o\n"
        "real = o._write_all\n"
        "def write(f, data):\n"
        "    real(f, data[: len(data) // 2])\n"
        f"    if f.name.endswith('.safetensors'): os.kill(os.getpid(), signal.{sig})\n"
        "    real(f, data[len(data) // 2 :])\n"
        "o._write_all = write\n"
        f"sys.argv = ['eagle3-doctor', *{_fix_args(d, out)!r}]\n"
        "from eagle3_doctor.cli import run\n"
        "run()\n"
    )
    r = _console(prog)
    assert r.returncode == code, r.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["draft"], "a partial copy, or its stage, was left"


def test_a_copy_killed_outright_is_never_taken_for_output_and_is_cleaned_next_time(tmp_path):
    """SIGKILL runs no handler: what it leaves has a hidden name that is not --out, and the next fix removes it."""
    from eagle3_doctor.analyses.fixing import write_copy
    from eagle3_doctor.core.findings import DRAFT_CONFIG, Fix

    d = _broken_draft(tmp_path)
    out = tmp_path / "fixed"
    prog = (
        "import os, signal\n"
        "import eagle3_doctor.io.outputs as o\n"
        "from eagle3_doctor.analyses.fixing import write_copy\n"
        "from eagle3_doctor.core.findings import DRAFT_CONFIG, Fix\n"
        "real = o._write_all\n"
        "def write(f, data):\n"
        "    real(f, data[: len(data) // 2])\n"
        "    if f.name.endswith('.safetensors'): os.kill(os.getpid(), signal.SIGKILL)\n"
        "o._write_all = write\n"
        "fx = Fix('set the ids', file=DRAFT_CONFIG, key='eagle_config.eagle_aux_hidden_state_layer_ids', value=[1, 3, 4])\n"
        f"write_copy({str(d)!r}, {str(out)!r}, [('CAP002', fx)])\n"
    )
    r = _console(prog)
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    assert not out.exists()
    left = [p for p in tmp_path.iterdir() if p.name != "draft"]
    assert len(left) == 1 and left[0].name.startswith(".fixed.partial-"), left
    # a stage whose process still runs (this one's) is another run's work in progress: never touched
    live = tmp_path / f"{outputs.stage_prefix('fixed')}live"
    live.mkdir()
    fx = Fix("set the ids", file=DRAFT_CONFIG, key="eagle_config.eagle_aux_hidden_state_layer_ids", value=FIXED_IDS)
    write_copy(str(d), str(out), [("CAP002", fx)])
    _assert_fixed(out, d)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["draft", "fixed", live.name])


def test_a_file_size_limit_mid_copy_is_one_line_and_no_out(tmp_path):
    """`ulimit -f` as a shell sets it (SIGXFSZ at its default): EFBIG in one line, exit 2, not a silent kill."""
    import resource

    d = _broken_draft(tmp_path)
    out = tmp_path / "fixed"
    limit = 256 << 10  # the config and the JSON fit; the 1.2 MB weights do not

    def pre() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    prog = f"import sys; sys.argv = ['eagle3-doctor', *{_fix_args(d, out)!r}]; from eagle3_doctor.cli import run; run()"
    r = _console(prog, preexec_fn=pre)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    line = _one_error_line(r.stderr)
    assert f"cannot write --out {out}: the file is over the size limit (ulimit -f) (EFBIG)" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["draft"]


@pytest.mark.parametrize(
    "link, to, words",
    [
        ("zero", "/dev/zero", "(a link to /dev/zero) is a device, not a regular file"),
        ("gone", "nowhere", "is a link to nothing (nowhere)"),
        ("a", "b", "cannot be followed"),  # a -> b -> a
    ],
)
def test_a_link_to_no_regular_file_is_refused_before_the_models_load(link, to, words, tmp_path, monkeypatch):
    import eagle3_doctor.model.setup as setup

    d = _broken_draft(tmp_path)
    os.symlink(to, d / link)
    if link == "a":
        os.symlink("a", d / "b")

    def loaded(*a, **k):
        raise AssertionError("the models were loaded before the draft's links were checked")

    monkeypatch.setattr(setup, "assemble", loaded)
    out = tmp_path / "fixed"
    r = invoke(*_fix_args(d, out))
    assert r.exit_code == 2, r.output
    line = _one_error_line(r.stderr)
    assert f"--draft: {d / link} " in line and words in line, line
    assert not out.exists()


def test_the_copy_holds_the_top_levels_regular_files_and_follows_no_directory_link(tmp_path):
    """`loop -> .` would recurse until the disk is full; a link to a file (a hub cache snapshot) is its bytes."""
    from eagle3_doctor.io.copies import copy_regular_files

    d = _broken_draft(tmp_path)
    (tmp_path / "blob").write_bytes(b"tokenizer bytes")
    os.symlink(tmp_path / "blob", d / "tokenizer.json")
    os.symlink(".", d / "loop")
    (d / "runs").mkdir()
    (d / "runs" / "big.bin").write_bytes(b"x" * 1000)
    dst = tmp_path / "dst"
    dst.mkdir()
    assert copy_regular_files(d, dst, "--draft") == ["config.json", "model.safetensors", "tokenizer.json"]
    assert sorted(p.name for p in dst.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json"]
    assert not (dst / "tokenizer.json").is_symlink() and (dst / "tokenizer.json").read_bytes() == b"tokenizer bytes"


def test_a_directory_that_appears_meanwhile_is_never_written_over(tmp_path):
    """rename(2) replaces an empty directory without a word: new_directory looks again just before it."""
    out = tmp_path / "fixed"
    with pytest.raises(BadInput, match="appeared while the copy was written"):
        with new_directory(out) as stage:
            (stage / "config.json").write_text("{}")
            out.mkdir()
    assert list(out.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["fixed"]


def _exit_and_torch(argv: list[str]) -> tuple[int, bool, str]:
    code = f"import sys; sys.argv = ['eagle3-doctor', *{argv!r}]\n"
    code += "from eagle3_doctor.cli.app import run\ntry:\n    run()\nexcept SystemExit as e:\n"
    code += "    print(e.code, 'torch' in sys.modules)\n"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    out = r.stdout.split()
    return int(out[-2]), out[-1] == "True", r.stderr


@pytest.mark.parametrize("where", ["existing", "existing-link", "read-only-parent", "under-a-file"])
def test_an_out_that_cannot_be_made_is_refused_before_torch(where, tmp_path):
    """--out EXISTING was refused only after torch was imported, and a parent fix cannot write in only after the whole
    measurement had run (and not at all when there was nothing to fix)."""
    d = _broken_draft(tmp_path)
    out = {
        "existing": tmp_path / "there",
        "existing-link": tmp_path / "link",
        "read-only-parent": Path("/proc/eagle3-doctor-fixed"),  # not writable even by root
        "under-a-file": tmp_path / "file" / "fixed",
    }[where]
    (tmp_path / "there").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    (tmp_path / "file").write_text("x")
    words = {"existing": "already exists", "existing-link": "already exists", "read-only-parent": "cannot write in /proc",
             "under-a-file": "is a file, not a directory"}[where]  # fmt: skip
    code, torch_imported, err = _exit_and_torch(_fix_args(d, out))
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert (code, torch_imported) == (2, False), (code, torch_imported, err[-2000:])
    named = "--out:" if where == "read-only-parent" else f"--out {out}"  # the probe names the directory it tried
    assert len(lines) == 1 and named in lines[0] and words in lines[0], lines
    assert not os.path.lexists("/proc/eagle3-doctor-fixed")


# where SIGKILL lands, as a share of the bytes the copy writes (configs and weights, the edited config last);
# "rename": after the last byte, just before the copy is renamed into place; "renamed": just after
KILL_AT = [0.0, 0.0004, 0.1, 0.5, 0.9, 0.9995, "rename", "renamed"]


@pytest.mark.parametrize("at", KILL_AT, ids=[str(a) for a in KILL_AT])
def test_sigkill_at_any_byte_leaves_no_out_or_a_complete_corrected_copy(at, tmp_path):
    d = _broken_draft(tmp_path)
    out = tmp_path / "fixed"
    total = sum(f.stat().st_size for f in d.iterdir()) + (d / "config.json").stat().st_size  # + the edited config
    prog = (
        "import os, signal\n"
        "import eagle3_doctor.io.outputs as o, eagle3_doctor.io.copies as c\n"
        "from eagle3_doctor.analyses.fixing import write_copy\n"
        "from eagle3_doctor.core.findings import DRAFT_CONFIG, Fix\n"
        f"at = {at!r}; limit = int(at * {total}) if isinstance(at, float) else None; done = [0]\n"
        "real_write, real_rename = o._write_all, os.rename\n"
        "def write(f, data):\n"
        "    if limit is not None and done[0] + len(data) > limit:\n"
        "        real_write(f, data[: limit - done[0]]); f.flush(); os.kill(os.getpid(), signal.SIGKILL)\n"
        "    real_write(f, data); done[0] += len(data)\n"
        "def rename(a, b):\n"
        "    if at == 'rename': os.kill(os.getpid(), signal.SIGKILL)\n"
        "    real_rename(a, b)\n"
        "    if at == 'renamed': os.kill(os.getpid(), signal.SIGKILL)\n"
        "o._write_all = write; c.os.rename = rename\n"
        "fx = Fix('set the ids', file=DRAFT_CONFIG, key='eagle_config.eagle_aux_hidden_state_layer_ids', value=[1, 3, 4])\n"
        f"write_copy({str(d)!r}, {str(out)!r}, [('CAP002', fx)])\n"
    )
    r = _console(prog)
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    if at == "renamed":
        _assert_fixed(out, d)  # renamed only once complete and corrected
    else:
        assert not os.path.lexists(out), sorted(p.name for p in tmp_path.iterdir())
    # what is left has a hidden stage name, and the next fix removes it and writes the copy
    left = [p.name for p in tmp_path.iterdir() if p.name not in ("draft", "fixed")]
    assert all(n.startswith(".fixed.partial-") for n in left), left
    if at != "renamed":
        from eagle3_doctor.analyses.fixing import write_copy
        from eagle3_doctor.core.findings import DRAFT_CONFIG, Fix

        fx = Fix("set the ids", file=DRAFT_CONFIG, key="eagle_config.eagle_aux_hidden_state_layer_ids", value=FIXED_IDS)
        write_copy(str(d), str(out), [("CAP002", fx)])
        _assert_fixed(out, d)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["draft", "fixed"]
