"""Bad input through the commands as a user types them, in a real process: one clear line on stderr naming
the fix, exit 2, no traceback; nothing executed from a pickle. And Ctrl-C mid-run leaves the old report."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DRAFTS, DUMP, ROOT, TARGET, invoke

CLI = [sys.executable, "-m", "eagle3_doctor.cli.app"]


def cli(*args, cwd=None):
    env = dict(os.environ, COLUMNS="200", PYTHONPATH=str(ROOT))
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


def assert_bad_input(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("eagle3-doctor: error: ") and "fix:" in lines[0]
    for n in needles:
        assert n in lines[0], lines[0]


def test_missing_target_dir(tmp_path):
    assert_bad_input(cli("compare-hidden", "--target", tmp_path / "nope", "--draft", DRAFTS["sglang"]), "does not exist")


def test_missing_draft_dir(tmp_path):
    assert_bad_input(cli("compare-hidden", "--target", TARGET, "--draft", tmp_path / "nope"), "draft directory")


def test_draft_config_not_json(tmp_copy):
    d = tmp_copy(DRAFTS["sglang"])
    (d / "config.json").write_text("{not json")
    assert_bad_input(cli("compare-hidden", "--target", TARGET, "--draft", d), "config.json is not valid JSON")


def test_a_tokenizer_json_of_the_wrong_shape_is_one_line(tmp_copy):
    """Valid JSON the tokenizers library cannot deserialize (its error is a bare Exception): exit 3 "a bug" before."""
    import json

    t = tmp_copy(TARGET)
    tj = json.loads((t / "tokenizer.json").read_text())
    tj["truncation"] = True
    (t / "tokenizer.json").write_text(json.dumps(tj))
    r = cli("compare-hidden", "--target", t, "--draft", DRAFTS["sglang"], "--device", "cpu")
    assert_bad_input(r, "cannot load the target tokenizer", "TruncationParams", "restore the tokenizer files")


def test_a_chat_template_that_does_not_compile_is_one_line_naming_the_prompt(tmp_copy, tmp_path):
    """The measuring commands render every conversation through the target's template: a template cut short was a
    Jinja TemplateSyntaxError, exit 3; it is the template-diff path's line now, naming the prompt."""
    t = tmp_copy(TARGET)
    (t / "chat_template.jinja").write_text("{% for m in messages %}{{ m.content }}")
    r = cli("acceptance", "--target", t, "--draft", DRAFTS["sglang"], "--prompts", ROOT / "fixtures" / "prompts.jsonl",
            "--max-new-tokens", "4", "--device", "cpu")  # fmt: skip
    assert_bad_input(r, "the target's chat template", "fails on prompt 1 of", "fix the template")


def test_truncated_safetensors(tmp_copy):
    d = tmp_copy(DRAFTS["sglang"])
    f = d / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-1000])
    assert_bad_input(cli("compare-hidden", "--target", TARGET, "--draft", d), "truncated")


def test_absurd_safetensors_header(tmp_copy):
    d = tmp_copy(DRAFTS["sglang"])
    f = d / "model.safetensors"
    f.write_bytes((2**62).to_bytes(8, "little") + f.read_bytes()[8:])
    assert_bad_input(cli("compare-hidden", "--target", TARGET, "--draft", d), "corrupt safetensors header")


def test_malformed_prompts_line_number(tmp_path):
    p = tmp_path / "p.jsonl"
    p.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n{"messages": [\n')
    assert_bad_input(cli("compare-hidden", "--target", TARGET, "--draft", DRAFTS["sglang"], "--prompts", p), "line 2")


def test_empty_prompts_file(tmp_path):
    p = tmp_path / "p.jsonl"
    p.write_text("\n\n")
    assert_bad_input(cli("compare-hidden", "--target", TARGET, "--draft", DRAFTS["sglang"], "--prompts", p), "empty")


def test_out_of_range_layer_ids():
    assert_bad_input(
        cli("compare-hidden", "--target", TARGET, "--draft", DRAFTS["sglang"], "--engine", "trtllm", "--layer-ids", "1,3,40"),
        "out of range for a 8-layer target under trtllm",
    )


def test_cuda_without_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert_bad_input(cli("compare-hidden", "--target", TARGET, "--draft", DRAFTS["sglang"], "--device", "cuda"), "no CUDA GPU")


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch /tmp/eagle3_doctor_pwned",))


def test_pickle_that_runs_code_is_refused(tmp_path):
    Path("/tmp/eagle3_doctor_pwned").unlink(missing_ok=True)
    d = tmp_path / "dump"
    d.mkdir()
    with open(d / "data_0.ckpt", "wb") as f:
        pickle.dump({"input_ids": _Evil()}, f)
    assert_bad_input(
        cli("compare-hidden", "--target", TARGET, "--draft", DRAFTS["sglang"], "--train-dump", d), "weights_only=True"
    )
    assert not Path("/tmp/eagle3_doctor_pwned").exists()


def test_dump_ids_outside_vocabulary(tmp_path):
    import shutil

    import torch

    d = tmp_path / "dump"
    shutil.copytree(DUMP, d)
    f = sorted(d.rglob("*.ckpt"))[0]
    data = torch.load(f, weights_only=True)
    data["input_ids"][3] = 10**6
    torch.save(data, f)
    assert_bad_input(cli("compare-hidden", "--target", TARGET, "--draft", DRAFTS["sglang"], "--train-dump", d), "vocabulary")


def test_nan_in_dump(tmp_path):
    import shutil

    import torch

    d = tmp_path / "dump"
    shutil.copytree(DUMP, d)
    f = sorted(d.rglob("*.ckpt"))[0]
    data = torch.load(f, weights_only=True)
    data["aux_hidden_state"][0, 2, 5] = float("nan")
    torch.save(data, f)
    assert_bad_input(cli("compare-hidden", "--target", TARGET, "--draft", DRAFTS["sglang"], "--train-dump", d), "NaN")


def test_ctrl_c_leaves_no_report_and_keeps_the_old_one(tmp_path, monkeypatch):
    import eagle3_doctor.analyses.compare.run as doctor  # where the EAGLE-3 kind finds compare_hidden

    out = tmp_path / "r.json"
    out.write_text('{"old": true}')

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(doctor, "compare_hidden", interrupted)
    r = invoke("compare-hidden", "--target", TARGET, "--draft", DRAFTS["sglang"], "--json", out, "-q")
    assert r.exit_code == 130
    assert out.read_text() == '{"old": true}'  # replaced only by a run that completes
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".r.json")]  # no temp file left behind
