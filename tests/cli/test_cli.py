"""The command line as a user meets it: help, exit codes, JSON, reports and plots, the engine checked once.

Bad input through the same commands (one clear line, exit 2) is in tests/hostile/test_cli_bad_input.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import DRAFTS, PROMPTS, ROOT, TARGET, invoke

from eagle3_doctor.core.findings import DRAFT_CONFIG

CLI = [sys.executable, "-m", "eagle3_doctor.cli.app"]


def cli(*args, cwd=None):
    env = dict(os.environ, COLUMNS="200", PYTHONPATH=str(ROOT))
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


def test_help_and_version():
    r = cli("--help")
    assert r.returncode == 0 and "compare-hidden" in r.stdout and "acceptance" in r.stdout
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.startswith("eagle3-doctor ")


def test_help_does_not_import_torch():
    code = "import sys, eagle3_doctor.cli.app as c; c.app(['--help'], standalone_mode=False); print('torch' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.stdout.strip().splitlines()[-1] == "False"


def test_compare_hidden_consistent_exit_0_and_json(tmp_path):
    out = tmp_path / "r.json"
    r = cli(
        "compare-hidden", "--target", TARGET, "--draft", DRAFTS["sglang"], "--prompts", PROMPTS, "--limit", 3, "--json", out, "-q"
    )
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert data["schema"] == "eagle3-doctor/compare-hidden/1" and data["consistent"] is True
    assert data["serving"]["spec"] == data["training"]["spec"] == ["layer_out[1]", "layer_out[3]", "layer_out[4]"]


def test_compare_hidden_seed_case_exit_1_with_fix():
    r = cli("compare-hidden", "--target", TARGET, "--draft", DRAFTS["sglang"], "--layer-ids=-1,1,3", "--limit", 2, "-q")
    assert r.returncode == 1
    assert "error[CAP002]" in r.stdout
    assert 'fix: set "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}' in r.stdout


def test_acceptance_gate_thresholds(tmp_path):
    r = cli(
        "acceptance",
        "--target",
        TARGET,
        "--draft",
        DRAFTS["speculators"],
        "--engine",
        "vllm",
        "--prompts",
        PROMPTS,
        "--limit",
        2,
        "--max-new-tokens",
        16,
        "-k",
        3,
        "--min-tau",
        99,
        "--json",
        tmp_path / "a.json",
        "-q",
    )
    assert r.returncode == 1 and "ACC003" in r.stdout
    data = json.loads((tmp_path / "a.json").read_text())
    assert data["schema"] == "eagle3-doctor/acceptance/1"
    # the healthy fixture has skill, but a failed gate is never reported beside "nothing to fix"
    assert "HLT002" not in r.stdout and [f["code"] for f in data["findings"]] == ["ACC003"]


def test_reports_and_plots(tmp_path):
    r = cli(
        "compare-hidden",
        "--target",
        TARGET,
        "--draft",
        DRAFTS["sglang"],
        "--layer-ids=-1,1,3",
        "--limit",
        2,
        "--report",
        tmp_path / "rep",
        "-q",
    )
    assert r.returncode == 1, r.stderr
    md = (tmp_path / "rep" / "compare-hidden.md").read_text()
    assert "CAP002" in md and (tmp_path / "rep" / "heatmap.png").read_bytes()[:4] == b"\x89PNG"
    r = cli(
        "acceptance",
        "--target",
        TARGET,
        "--draft",
        DRAFTS["sglang"],
        "--prompts",
        PROMPTS,
        "--limit",
        2,
        "--max-new-tokens",
        16,
        "-k",
        3,
        "--plot",
        tmp_path / "acc.png",
        "--report",
        tmp_path / "rep2",
        "-q",
    )
    assert r.returncode in (0, 1), r.stderr
    assert (tmp_path / "acc.png").read_bytes()[:4] == b"\x89PNG"
    assert "## Triage hints" in (tmp_path / "rep2" / "acceptance.md").read_text()
    r = cli("inspect", "--target", TARGET, "--draft", DRAFTS["sglang"], "--report", tmp_path / "rep3")
    assert r.returncode == 0 and "No findings" in (tmp_path / "rep3" / "inspect.md").read_text()


@pytest.mark.parametrize("command", ["inspect", "compare-hidden", "acceptance"])
def test_engine_is_checked_once_on_the_resolved_value_before_any_load(monkeypatch, command):
    """--engine VLLM with --serve-cmd's release: one check, of (vllm, that release), before the models load;
    a bad --engine is still refused before any load."""
    import eagle3_doctor.analyses.inspect.inspection as inspection
    import eagle3_doctor.engines.releases as engines
    import eagle3_doctor.model.setup as doctor  # where load_models finds load_setup

    class Loaded(BaseException):
        pass

    calls = []
    real = engines.check_engine
    monkeypatch.setattr(engines, "check_engine", lambda e, v: calls.append((e, v)) or real(e, v))

    def loader(*a, **kw):
        raise Loaded(list(calls))

    monkeypatch.setattr(doctor, "load_setup", loader)
    monkeypatch.setattr(inspection, "inspect", loader)
    serve = f'vllm serve {TARGET} --speculative-config \'{{"method": "eagle3", "model": "{DRAFTS["speculators"]}"}}\''
    args = [command, "--serve-cmd", serve, "--engine", "VLLM", "--engine-version", "0.33.0-v1"]
    with pytest.raises(Loaded) as e:
        invoke(*args, catch_exceptions=False)
    assert e.value.args[0] == [("vllm", "0.33.0-v1")]
    calls.clear()
    r = invoke(*args[:-3], "tgi")
    assert r.exit_code == 2 and "unknown --engine 'tgi'" in r.stderr and calls == [("tgi", None)], (r.exit_code, r.stderr)


def test_gate_checks_the_engine_once_on_the_merged_policy(monkeypatch):
    """The gate's --engine is merged into its policy and checked there, once, before anything loads."""
    import eagle3_doctor.cli.gate as gate
    import eagle3_doctor.engines.releases as engines

    class Loaded(BaseException):
        pass

    calls = []
    real = engines.check_engine
    monkeypatch.setattr(engines, "check_engine", lambda e, v: calls.append((e, v)) or real(e, v))
    monkeypatch.setattr(gate, "run_gate", lambda **kw: (_ for _ in ()).throw(Loaded(list(calls))))
    args = ["gate", "--target", TARGET, "--draft", DRAFTS["sglang"], "--engine", "VLLM", "--engine-version", "0.33.0-v1"]
    with pytest.raises(Loaded) as e:
        invoke(*args, catch_exceptions=False)
    assert e.value.args[0] == [("vllm", "0.33.0-v1")]
    calls.clear()
    r = invoke(*args[:-3], "tgi")
    assert r.exit_code == 2 and "tgi" in r.stderr and calls == [("tgi", None)], (r.exit_code, r.stderr, calls)


# ----------------------------------------------------------------------------- where a finding points


def test_locations_name_the_files_this_run_used(tmp_copy, tmp_path):
    """` --> ` names the --draft directory's own config.json; JSON keeps the role in `file`, the file in `path`."""
    d = tmp_copy(DRAFTS["sglang"])
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "rope_theta": 500000.0}))
    out = tmp_path / "inspect.json"
    r = invoke("inspect", "-t", TARGET, "-d", d, "--json", out)
    assert r.exit_code == 1, r.output
    text = (d / "config.json").read_text()
    cfg, col = os.path.abspath(d / "config.json"), text.index('"rope_theta"') + 1  # one line: json.dumps wrote it
    assert f" --> {cfg}:1:{col}: rope_theta\n" in r.output, r.output  # path:line:col, as rustc and ruff give it
    f = next(x for x in json.loads(out.read_text())["findings"] if x["code"] == "CFG003")
    assert f["location"] == {"file": DRAFT_CONFIG, "key": "rope_theta", "path": cfg, "line": 1, "col": col}
    assert (f["edit"]["file"], f["edit"]["path"]) == (DRAFT_CONFIG, cfg)


def test_a_reference_loop_that_disagrees_is_one_warning_naming_the_16_bit_cause_and_the_float32_rerun(capsys):
    """The tail every kind's command ends in: a disagreement says why it happens in 16 bits and what decides it."""
    from types import SimpleNamespace

    from eagle3_doctor.cli.drive import finish
    from eagle3_doctor.drafters.kind import Outcome

    run = SimpleNamespace(opt=lambda name, default=None: default, locate=lambda findings: None, release=None)
    assert finish(run, Outcome([], dict, lambda con: None, agrees=False)) == 0
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and "reference loop disagree" in err and "--dtype float32" in err, err
    assert finish(run, Outcome([], dict, lambda con: None)) == 0 and "warning" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("environ", "platform", "want"),
    [
        ({}, "linux", "expandable_segments:True"),
        ({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64"}, "linux", "max_split_size_mb:64"),  # the user's wins
        ({"PYTORCH_ALLOC_CONF": "expandable_segments:False"}, "linux", None),  # torch's newer name counts as set
        ({}, "win32", None),  # torch supports the segments on Linux alone
    ],
)
def test_the_allocator_grows_its_segments_unless_the_user_configured_it(environ, platform, want):
    from eagle3_doctor.cli.app import allocator_default

    env = dict(environ)
    allocator_default(env, platform)
    assert env.get("PYTORCH_CUDA_ALLOC_CONF") == want
    assert {k: v for k, v in env.items() if k != "PYTORCH_CUDA_ALLOC_CONF"} == {
        k: v for k, v in environ.items() if k != "PYTORCH_CUDA_ALLOC_CONF"
    }


def test_the_console_sets_the_allocator_before_the_command_runs(monkeypatch):
    """The console script's run() configures it before the app (and so torch) starts: its process's environment."""
    import eagle3_doctor.cli.app as app_mod

    seen = {}
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "TOKENIZERS_PARALLELISM"):
        monkeypatch.setenv(name, "")  # restored as it was (unset or not) after the test, whatever run() writes
        monkeypatch.delenv(name)
    monkeypatch.setattr(app_mod, "sys", type("S", (), {"platform": "linux"}))
    monkeypatch.setattr(app_mod, "app", lambda prog_name: seen.update(conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF")))
    monkeypatch.setattr(app_mod, "_owns_process", False)
    app_mod.run()
    assert seen == {"conf": "expandable_segments:True"}
