"""The CI gate and the shipped examples/ci script, run as a CI job would run them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from conftest import DRAFTS, PROMPTS, ROOT, TARGET
from safetensors.torch import load_file, save_file


def gate_sh(draft, tmp_path, baseline=None, summary_env=None):
    env = dict(
        os.environ,
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        PROMPTS=str(PROMPTS),
        PYTHONPATH=str(ROOT),
        COLUMNS="200",
    )
    if summary_env:
        env["GITHUB_STEP_SUMMARY"] = str(summary_env)
    args = ["bash", str(ROOT / "examples/ci/gate.sh"), str(TARGET), str(draft)] + ([str(baseline)] if baseline else [])
    return subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)


def test_shipped_ci_script_passes_clean_and_fails_broken(tmp_path, tmp_copy):
    summary = tmp_path / "step-summary.md"
    r = gate_sh(DRAFTS["sglang"], tmp_path, summary_env=summary)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    data = json.loads((tmp_path / "gate.json").read_text())
    assert data["passed"] is True and data["schema"] == "eagle3-doctor/gate/1"
    assert "eagle3-doctor gate: PASS" in summary.read_text()
    assert (tmp_path / "gate-summary.md").read_text().startswith("## eagle3-doctor gate: PASS")
    assert "95% intervals over 8 prompts" in summary.read_text() and "fingerprint: **layer_out[1]" in summary.read_text()

    # its own JSON as the baseline: the change is paired over the same prompts, exactly zero, so it passes
    (tmp_path / "again").mkdir()
    r = gate_sh(DRAFTS["sglang"], tmp_path / "again", baseline=tmp_path / "gate.json")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    checks = json.loads((tmp_path / "again" / "gate.json").read_text())["checks"]
    base = [c for c in checks if c["name"].endswith("vs baseline")]
    assert len(base) == 3 and all(c["passed"] and "paired over prompts" in c["detail"] for c in base)

    broken = tmp_copy(DRAFTS["sglang"], "broken")
    sd = load_file(broken / "model.safetensors")
    sd.pop("lm_head.weight")
    save_file(sd, broken / "model.safetensors")
    (tmp_path / "b").mkdir()
    r = gate_sh(broken, tmp_path / "b")
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    data = json.loads((tmp_path / "b" / "gate.json").read_text())
    assert data["passed"] is False and "DRF001" in {f["code"] for f in data["findings"]}


def test_regression_against_baseline(tmp_path):
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"metrics": {"step1_accuracy": 0.99, "tau": 9.0, "mean_acceptance_length": 9.0}}))
    r = gate_sh(DRAFTS["sglang"], tmp_path, baseline=base)
    assert r.returncode == 1
    data = json.loads((tmp_path / "gate.json").read_text())
    assert "GATE001" in {f["code"] for f in data["findings"]}


def test_bad_policy_is_bad_input(tmp_path):
    p = tmp_path / "p.toml"
    p.write_text("[gate]\nmin_cosin = 0.9\n")
    r = gate_cli("--target", str(TARGET), "--draft", str(DRAFTS["sglang"]), "--policy", str(p))
    assert r.returncode == 2 and "unknown key(s) min_cosin" in r.stderr and "Traceback" not in r.stderr


# --------------------------------------------------------------------------- an independent training side

SHIPPED_POLICY = ROOT / "examples/ci/policy.toml"


def gate_cli(*args: str) -> subprocess.CompletedProcess:
    """`eagle3-doctor gate ARGS` in a fresh interpreter, as CI runs it."""
    cmd = [sys.executable, "-m", "eagle3_doctor.cli.app", "gate", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))


def gate_on(draft, policy):
    """The gate's library call on the fixture target and prompts, float32 on the CPU, no baseline."""
    from eagle3_doctor.cli.gate import run_gate

    return run_gate(
        target=str(TARGET), draft=str(draft), policy=policy, prompts=str(PROMPTS), baseline=None, dtype="float32", device="cpu"
    )


def draft_with_ids(tmp_copy, ids, name):
    d = tmp_copy(DRAFTS["sglang"], name)
    cfg = json.loads((d / "config.json").read_text())
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = ids
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def test_incident_fails_the_shipped_gate_with_the_trained_ids_as_fix(tmp_path, tmp_copy):
    """The seed's mistake ([-1, 1, 3] for a draft trained on [1, 3, 4]) through examples/ci as shipped."""
    inc = draft_with_ids(tmp_copy, [-1, 1, 3], "incident")
    r = gate_sh(inc, tmp_path)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    data = json.loads((tmp_path / "gate.json").read_text())
    assert data["passed"] is False
    cap = [f for f in data["findings"] if f["code"] == "CAP002"]
    assert cap and '"eagle_aux_hidden_state_layer_ids": [1, 3, 4]' in cap[0]["fix"]
    assert "GATE002" not in {f["code"] for f in data["findings"]}  # the shipped policy names the training side


def test_the_weights_fit_is_one_diagnostic_in_the_gate(tmp_path, tmp_copy):
    """The seed incident written into the config: the fingerprint (log-likelihood) and acceptance's step-1 fit
    both find that the weights fit [1, 3, 4]; the gate reports it once, as FPR001."""
    from conftest import invoke

    inc = draft_with_ids(tmp_copy, [-1, 1, 3], "incident-fit")
    r = invoke("gate", "-t", TARGET, "-d", inc, "--engine", "sglang", "--prompts", PROMPTS, "--limit", "8",
               "--json", tmp_path / "g.json")  # fmt: skip
    codes = [f["code"] for f in json.loads((tmp_path / "g.json").read_text())["findings"]]
    assert r.exit_code == 1 and "FPR001" in codes and "ACC004" not in codes, (codes, r.output)


# every one-layer move of one slot, and of all slots at once (duplicates are not a valid id list)
ONE_LAYER_SHIFTS = [[0, 3, 4], [2, 3, 4], [1, 2, 4], [1, 3, 5], [0, 2, 3], [2, 4, 5]]


def test_each_one_layer_shift_fails_the_shipped_policy(tmp_copy):
    from eagle3_doctor.cli.gate_policy import Policy

    pol = Policy.load(str(SHIPPED_POLICY), {})
    for ids in ONE_LAYER_SHIFTS:
        d = draft_with_ids(tmp_copy, ids, "shift" + "_".join(map(str, ids)))
        res = gate_on(str(d), pol)
        codes = {f.code for f in res.findings if f.severity == "error"}
        assert not res.passed and codes & {"CAP001", "CAP006"}, (ids, codes)
        fix = next(f.fix for f in res.findings if f.code in ("CAP001", "CAP006"))
        assert "[1, 3, 4]" in fix, (ids, fix)


def test_without_a_training_table_the_fingerprint_catches_the_incident(tmp_path, tmp_copy):
    """The shipped policy minus its [training] table: the draft's own weights name what it was trained on."""
    from eagle3_doctor.cli.gate_policy import Policy
    from eagle3_doctor.cli.gate_report import github_annotations

    inc = draft_with_ids(tmp_copy, [-1, 1, 3], "incident")
    p = tmp_path / "p.toml"
    p.write_text(SHIPPED_POLICY.read_text().split("[training]")[0])
    res = gate_on(str(inc), Policy.load(str(p), {}))
    fpr = [f for f in res.findings if f.code == "FPR001"]
    assert not res.passed and fpr and '"eagle_aux_hidden_state_layer_ids": [1, 3, 4]' in fpr[0].fix
    assert "GATE002" not in {f.code for f in res.findings}  # the fingerprint is an independent training side
    ann = [a for a in github_annotations(res, str(inc)) if "FPR001" in a]
    line = next(
        i + 1 for i, t in enumerate((inc / "config.json").read_text().splitlines()) if "eagle_aux_hidden_state_layer_ids" in t
    )
    assert ann and ann[0].startswith(f"::error file={inc / 'config.json'},line={line},title=eagle3-doctor FPR001::")
    # once placed (the command does it after locating), the annotation carries the key's column too
    from eagle3_doctor.core.findings import locate
    from eagle3_doctor.io.positions import place

    locate(res.findings, {"draft/config.json": str(inc / "config.json")})
    place(res.findings)
    col = (inc / "config.json").read_text().splitlines()[line - 1].index('"eagle_aux_hidden_state_layer_ids"') + 1
    ann = [a for a in github_annotations(res, str(inc)) if "FPR001" in a]
    assert ann[0].startswith(f"::error file={inc / 'config.json'},line={line},col={col},title=eagle3-doctor FPR001::")


def test_config_as_only_training_truth_is_a_warning_and_policy_can_make_it_an_error(tmp_path, tmp_copy):
    from eagle3_doctor.cli.gate_policy import Policy

    inc = draft_with_ids(tmp_copy, [-1, 1, 3], "incident")
    p = tmp_path / "p.toml"
    p.write_text("[gate]\nmin_cosine = 0.999\nlimit = 4\nmax_new_tokens = 16\nfingerprint = false\n")
    res = gate_on(str(inc), Policy.load(str(p), {}))
    g = [f for f in res.findings if f.code == "GATE002"]
    assert g and g[0].severity == "warning" and "invisible to this gate" in g[0].title
    assert "CAP002" not in {f.code for f in res.findings}  # exactly the blind spot GATE002 warns about
    p.write_text('[gate]\nlimit = 4\nmax_new_tokens = 16\nfingerprint = false\ntraining_from_config = "error"\n')
    res = gate_on(str(DRAFTS["sglang"]), Policy.load(str(p), {}))
    assert not res.passed and any(f.code == "GATE002" and f.severity == "error" for f in res.findings)


def test_thresholds_decide_on_the_interval_and_say_so(tmp_path):
    from eagle3_doctor.cli.gate_policy import Policy

    p = tmp_path / "p.toml"
    p.write_text("[gate]\nlimit = 6\nmax_new_tokens = 24\nfingerprint = false\nmin_step1_accuracy = 0.2\n")
    pol = Policy.load(str(p), {})
    res = gate_on(str(DRAFTS["sglang"]), pol)
    iv = res.metrics["intervals"]["step1_accuracy"]
    assert iv["lo"] < res.metrics["step1_accuracy"] < iv["hi"]
    c = next(c for c in res.checks if c.name == "step-1 accuracy")
    assert c.value == iv["lo"] and "lower bound of the 95% interval" in c.detail
    # a threshold between the lower bound and the point: fails on the interval, passes on the point
    thr = (iv["lo"] + res.metrics["step1_accuracy"]) / 2
    for decide, passed in (("lower_bound", False), ("point", True)):
        res2 = gate_on(str(DRAFTS["sglang"]), Policy.load(str(p), {"min_step1_accuracy": thr, "decide_on": decide}))
        c = next(c for c in res2.checks if c.name == "step-1 accuracy")
        assert c.passed is passed, (decide, c)
        if not passed:
            acc3 = [f for f in res2.findings if f.code == "ACC003"]
            assert acc3 and "lower bound" in acc3[0].title


def test_train_dump_flag_is_an_independent_training_side(tmp_path, tmp_copy):
    inc = draft_with_ids(tmp_copy, [-1, 1, 3], "incident")
    p = tmp_path / "p.toml"
    p.write_text("[gate]\nlimit = 4\nmax_new_tokens = 16\n")
    r = gate_cli(
        "--target",
        str(TARGET),
        "--draft",
        str(inc),
        "--policy",
        str(p),
        "--train-dump",
        str(ROOT / "fixtures/specforge-dump"),
        "--json",
        str(tmp_path / "g.json"),
    )
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    codes = {f["code"] for f in json.loads((tmp_path / "g.json").read_text())["findings"]}
    assert "CAP002" in codes and "GATE002" not in codes


def test_bad_training_table_is_bad_input(tmp_path):
    p = tmp_path / "p.toml"
    for body, needle in [
        ("[training]\nids = [1, 3, 4]\n", "ids without a recipe"),
        ('[training]\nrecipe = "specforge"\nids = "1,3,4"\n', "not a list of integers"),
        ('[training]\nrecipe = "specforge"\nlayers = [1]\n', "unknown key(s) layers in [training]"),
        ('[gate]\ntraining_from_config = "fatal"\n', "training_from_config"),
    ]:
        p.write_text(body)
        r = gate_cli("--target", str(TARGET), "--draft", str(DRAFTS["sglang"]), "--policy", str(p))
        assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, (body, r.stderr)


def test_annotations_point_at_the_file_and_key_each_finding_names(tmp_path, monkeypatch):
    """A finding located in the target's config.json is annotated there, at its key's line; one with no
    file on disk falls back to the draft's config.json (at the layer-id key for capture-point codes)."""
    from eagle3_doctor.cli.gate import GateResult
    from eagle3_doctor.cli.gate_policy import Policy
    from eagle3_doctor.cli.gate_report import github_annotations
    from eagle3_doctor.core.findings import Finding, Location

    target, draft = tmp_path / "target", tmp_path / "draft"
    target.mkdir()
    draft.mkdir()
    (target / "config.json").write_text('{\n  "hidden_size": 64,\n  "rope_theta": 10000.0\n}\n')
    (draft / "config.json").write_text('{\n  "eagle_config": {\n    "eagle_aux_hidden_state_layer_ids": [1, 3, 4]\n  }\n}\n')
    rope = Finding("CFG004", "rope differs", [], "set rope_theta", location=Location("target/config.json", "rope_theta"))
    rope.location = Location("target/config.json", "rope_theta", path=str(target / "config.json"))  # as locate() fills it
    cap = Finding("CAP002", "slot shift", [], "set ids")
    compare = SimpleNamespace(draft={"layer_ids_key": "eagle_config.eagle_aux_hidden_state_layer_ids"})
    res = GateResult(Policy(), [], [rope, cap], {}, compare=compare)  # type: ignore[arg-type]
    monkeypatch.chdir(tmp_path)
    ann = github_annotations(res, str(draft))
    assert any(a.startswith("::warning file=target/config.json,line=3,title=eagle3-doctor CFG004::") for a in ann), ann
    assert any(a.startswith(f"::error file={draft / 'config.json'},line=3,title=eagle3-doctor CAP002::") for a in ann), ann
