"""A refusal names what the user can type: the option a kind does not honour is named by its own flag (the
refusal used to say `--compile-draft`, an option that does not exist, for `--compile`), for every option of every
command, and an unhonoured option is refused before anything heavy is imported."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import typer
from conftest import FIX, PROMPTS, ROOT, TARGET, invoke


def _commands():
    from eagle3_doctor.cli.app import app

    group = typer.main.get_command(app)
    for info in app.registered_commands:
        name = info.name or info.callback.__name__
        yield name, info.callback, group.commands[name]  # type: ignore[attr-defined]


def test_every_option_is_named_by_a_flag_its_command_has():
    from eagle3_doctor.cli.drive import flag_of

    seen = 0
    for name, fn, cmd in _commands():
        for p in cmd.params:
            if p.name in (None, "help") or not p.opts[0].startswith("-"):
                continue
            assert flag_of(fn, p.name) in p.opts, (name, p.name, p.opts)
            seen += 1
    assert seen > 100, seen


def test_the_unhonoured_compile_option_is_refused_by_its_own_name():
    r = invoke(
        "acceptance", "-t", TARGET, "-d", FIX / "dflash-draft", "--engine", "vllm", "--prompts", PROMPTS, "--compile", "-q"
    )
    assert r.exit_code == 2, r.output
    assert "--compile is not supported for DFlash drafts" in r.stderr and "--compile-draft" not in r.stderr, r.stderr


@pytest.mark.parametrize(
    "draft, extra",
    [
        (FIX / "dflash-draft", ["--compile"]),
        (FIX / "mtp-speculators", ["--layer-ids", "1,2,3"]),
        (FIX / "peagle-draft", ["--device-map", "auto"]),
    ],
    ids=["dflash", "mtp", "peagle"],
)
def test_an_unhonoured_option_is_refused_before_torch(draft, extra):
    argv = ["acceptance", "-t", str(TARGET), "-d", str(draft), "--engine", "vllm", "--prompts", str(PROMPTS), *extra]
    code = f"import sys; sys.argv = ['eagle3-doctor', *{argv!r}]\n"
    code += "from eagle3_doctor.cli.app import run\ntry:\n    run()\nexcept SystemExit as e:\n"
    code += "    print(e.code, 'torch' in sys.modules)\n"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert r.stdout.split() == ["2", "False"], (r.stdout, r.stderr[-2000:])
    assert f"{extra[0]} is not supported" in r.stderr, r.stderr
