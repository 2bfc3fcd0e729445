"""The trainer table (conformance/trainers_exec.py, data/trainer_capture.json) and --trained-with on the CLI path.

The harness is re-executed on the trainers' files kept in conformance/testdata/trainers/ (as released) and held to
the committed cases; the package rows are re-derived from the committed cases; the CLI runs on the fixture pair
(a tiny 8-layer Llama; the speculators draft declares ids [2, 4, 5], served by vLLM as layer_out[1, 3, 4]).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import DRAFTS, DUMP, PROMPTS, ROOT, SERVING, TARGET, invoke

sys.path.insert(0, str(ROOT / "conformance"))
import trainers_exec  # noqa: E402
import trainers_rows  # noqa: E402

from eagle3_doctor.core.errors import BadInput  # noqa: E402
from eagle3_doctor.engines import trainers  # noqa: E402

TESTDATA = ROOT / "conformance" / "testdata" / "trainers"
CASES = json.loads((ROOT / "conformance" / "trainers_table.json").read_text())


@pytest.mark.parametrize(
    "release, run",
    [
        ("specforge==0.1.0", trainers_exec.specforge_010),
        ("specforge==0.2.0", trainers_exec.specforge_020),
        ("speculators==0.4.0", trainers_exec.speculators_worker),
        ("speculators==0.9.0", trainers_exec.speculators_vllm),
    ],
)
def test_harness_reexecuted_on_the_kept_files(release, run):
    got = run(TESTDATA / release.replace("==", "-"))
    want = CASES["releases"][release]
    assert got["cases"] == want["cases"]
    assert got.get("captured_layer_out") == want.get("captured_layer_out")
    assert got["source"] == want["source"] and got["capture_source"] == want["capture_source"]


def test_package_rows_derive_from_the_committed_cases():
    committed = json.loads((ROOT / "eagle3_doctor" / "data" / "trainer_capture.json").read_text())
    assert trainers_rows.rows(CASES["releases"], tuple(CASES["LS"])) == committed


def test_default_formula_reproduces_every_executed_case():
    for key, r in CASES["releases"].items():
        if not r["trains"]:
            continue
        project, version = key.split("==")
        row = trainers.trainer_table()["trainers"][project][version]
        for L, ids in r["cases"].items():
            assert trainers.default_ids(row, int(L)) == ids, key


def test_each_trainer_capture_on_a_32_layer_llama():
    def points(text):
        spec, _ = trainers.training_side(text, "llama", 32)
        return [str(p) for p in spec]

    # SpecForge 0.1.0: hidden_states[2, 16, 29] of HF's tuple, index 0 the embeddings
    assert points("specforge==0.1.0") == ["layer_out[1]", "layer_out[15]", "layer_out[28]"]
    # SpecForge 0.2.0: [1, 15, 28] through SGLang 0.5.14's setter (+1, before the layer)
    assert points("specforge==0.2.0") == ["layer_out[1]", "layer_out[15]", "layer_out[28]"]
    # speculators 0.4.0: its own loop captures after layers 2, 16, 29 (and 31, the verifier's, dropped)
    assert points("speculators==0.4.0") == ["layer_out[2]", "layer_out[16]", "layer_out[29]"]
    # speculators 0.9.0: [2, 16, 29] through vLLM (before the layer), every modelled release alike
    assert points("speculators==0.9.0") == ["layer_out[1]", "layer_out[15]", "layer_out[28]"]


def test_a_family_the_pinned_engine_refuses_names_the_releases_that_serve_it():
    with pytest.raises(BadInput) as e:
        trainers.training_side("specforge==0.2.0", "kimi_linear", 32)
    assert "sglang 0.5.14" in e.value.what and "0.1.0 (through transformers)" in (e.value.fix or "")


@pytest.mark.parametrize(
    "value, said",
    [
        ("foo==1.0", "unknown trainer 'foo'"),
        ("specforge==9.9", "specforge 9.9 is not a release the trainer table holds"),
        ("speculators==0.2.0", "trains no EAGLE-3 draft"),
        ("specforge", "is not TRAINER==VERSION"),
    ],
)
def test_bad_trained_with_is_one_line_exit_2(value, said):
    r = invoke("acceptance", "--target", TARGET, "--draft", DRAFTS["sglang"], "--trained-with", value)
    assert r.exit_code == 2 and said in r.output and len(r.output.strip().splitlines()) == 1
    assert "specforge 0.1.0, 0.2.0" in r.output or "first speculators release that does is 0.3.0" in r.output


def test_bad_trained_with_is_refused_before_torch():
    code = (
        "import sys, eagle3_doctor.cli.app as c\n"
        "try: c.app(['diagnose', '--target', 'fixtures/target', '--draft', 'fixtures/draft-sglang', '--trained-with', "
        "'specforge==0.0.9'], standalone_mode=False)\n"
        "except BaseException: pass\n"
        "print('torch' in sys.modules)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))  # fmt: skip
    assert r.stdout.strip().splitlines()[-1] == "False", r.stderr


def test_both_training_options_refused():
    r = invoke("compare-hidden", "--target", TARGET, "--draft", DRAFTS["sglang"], "--trained-with", "specforge==0.2.0",
               "--train-recipe", "specforge")  # fmt: skip
    assert r.exit_code == 2 and "--trained-with and --train-recipe both name the training side" in r.output


def test_compare_hidden_trained_with_speculators_worker_is_cap001(tmp_path):
    out = tmp_path / "r.json"
    r = invoke("compare-hidden", "--target", TARGET, "--draft", DRAFTS["speculators"], "--engine", "vllm", "--prompts", PROMPTS,
               "--limit", 2, "--trained-with", "speculators==0.4.0", "--json", out, "-q")  # fmt: skip
    assert r.exit_code == 1, r.output
    data = json.loads(out.read_text())
    assert data["training"]["spec"] == ["layer_out[2]", "layer_out[4]", "layer_out[5]"]
    assert data["serving"]["spec"] == ["layer_out[1]", "layer_out[3]", "layer_out[4]"]
    assert data["training"]["source"].startswith("speculators 0.4.0 (--trained-with) through its own vLLM worker loop")
    cap = [f for f in data["findings"] if f["code"] == "CAP001"]
    # the fix is on the serving side: the ids vLLM must read to capture what the worker captured
    assert cap and '"eagle_aux_hidden_state_layer_ids": [3, 5, 6]' in cap[0]["fix"]


def test_compare_hidden_trained_with_speculators_vllm_is_consistent(tmp_path):
    out = tmp_path / "r.json"
    r = invoke("compare-hidden", "--target", TARGET, "--draft", DRAFTS["speculators"], "--engine", "vllm", "--prompts", PROMPTS,
               "--limit", 2, "--trained-with", "speculators==0.9.0", "--json", out, "-q")  # fmt: skip
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    assert data["training"]["spec"] == data["serving"]["spec"] == ["layer_out[1]", "layer_out[3]", "layer_out[4]"]
    assert "speculators 0.9.0 pins no vllm release" in data["training"]["source"]


def test_checkpoint_version_of_a_training_release_is_said():
    assert trainers.checkpoint_note({"speculators_version": "0.2.0"}) is None  # a converter: the ids say all
    assert "vllm" in (trainers.checkpoint_note({"speculators_version": "0.9.0"}) or "")
    assert "--trained-with speculators==0.4.0" in (trainers.checkpoint_note({"speculators_version": "0.4.0"}) or "")


def test_dump_vs_dump_refuses_trained_with():
    r = invoke("compare-hidden", "--engine-dump", SERVING / "sglang-dump-correct", "--train-dump", DUMP, "--num-layers", 8,
               "--trained-with", "specforge==0.2.0")  # fmt: skip
    assert r.exit_code == 2 and "--trained-with needs the target's config" in r.output


def test_gate_takes_trained_with_as_its_training_side(tmp_path):
    out = tmp_path / "g.json"
    r = invoke("gate", "--target", TARGET, "--draft", DRAFTS["sglang"], "--prompts", PROMPTS, "--limit", 2,
               "--trained-with", "specforge==0.1.0", "--json", out)  # fmt: skip
    assert r.exit_code == 1, r.output
    data = json.loads(out.read_text())
    assert "specforge 0.1.0 (--trained-with) through transformers 4.54.0" in json.dumps(data)
    assert any(f["code"] == "CAP001" for f in data["findings"])


@pytest.mark.parametrize(
    "version, said",
    [("0.9.0", "written by speculators 0.9.0, whose training reads these ids as vllm does"),
     ("0.4.0", "undetermined which numbering: config.json was written by speculators 0.4.0")],
)  # fmt: skip
def test_the_checkpoint_says_which_speculators_wrote_it(tmp_path, version, said):
    import shutil

    draft = tmp_path / "draft"
    shutil.copytree(DRAFTS["speculators"], draft)
    cfg = json.loads((draft / "config.json").read_text())
    (draft / "config.json").write_text(json.dumps({**cfg, "speculators_version": version}))
    out = tmp_path / "r.json"
    r = invoke("compare-hidden", "--target", TARGET, "--draft", draft, "--engine", "vllm", "--prompts", PROMPTS,
               "--limit", 1, "--json", out, "-q")  # fmt: skip
    assert r.exit_code == 0, r.output
    source = json.loads(out.read_text())["training"]["source"]
    assert source.startswith("eagle_aux_hidden_state_layer_ids = [2, 4, 5]") and said in source
