"""TensorRT-LLM release by release: the capture rule against every executed outcome of conformance/trtllm_exec.py
(data/trtllm_capture.json), the releases --engine-version takes, and the missing capture as a user meets it."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from test_families import _inspect_with_target

from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.core.taps import final_norm, layer_out
from eagle3_doctor.engines.families import arch_family
from eagle3_doctor.engines.releases import TRTLLM_RELEASES, check_engine
from eagle3_doctor.engines.serving import resolve_serving
from eagle3_doctor.engines.trtllm_table import trtllm_row, trtllm_table

QWEN3_MOE = {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"]}
QWEN3 = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]}
CONFORMANCE = Path(__file__).resolve().parents[2] / "conformance"


def _point(text: str):
    return final_norm() if text == "final_norm" else layer_out(int(text[len("layer_out[") : -1]))


def _outcomes() -> dict:
    return json.loads((CONFORMANCE / "trtllm_table.json").read_text())


def _cases():
    for case, outcome in _outcomes()["outcomes"].items():
        fam, first, mode, L, ids = case.split("|")
        yield case, fam, first, mode, int(L), None if ids == "default" else [int(i) for i in ids.split(",")], outcome


def test_every_executed_outcome_is_what_the_doctor_predicts():
    seen = 0
    for case, fam, first, mode, L, ids, outcome in _cases():
        version = first + ("-two-model" if mode == "two-model" else "")
        s = resolve_serving("trtllm", version, fam, L, {}, ids)
        if isinstance(outcome, str):  # the engine's own error from __post_init__
            assert s.failure is not None and s.failure.when == "start-up", case
            assert outcome.split(": ", 1)[1] == s.failure.message, case
        elif "<uninitialized>" in outcome:  # a slot no layer writes: the draft reads torch.empty memory
            assert s.failure is not None and s.failure.when == "serving", (case, s.spec)
        else:
            assert s.failure is None, (case, s.failure)
            assert s.spec == tuple(_point(t) for t in outcome), case
        seen += 1
    assert seen == len(_outcomes()["outcomes"]) > 300
    assert {k: v for k, v in _outcomes().items() if k != "outcomes"} == trtllm_table()  # the rows the doctor reads


def test_qwen3_moe_captures_from_0_21_and_0_20_names_the_release_that_adds_it():
    # modeling_qwen3_moe.py gained its capture in PR #5206 (2025-06-17, "Added EAGLE3 support for Qwen-3" in
    # 0.21.0's notes), before main was bumped to 1.0.0rc1: 1.0 captures, 0.20 does not
    fam = arch_family(QWEN3_MOE)  # as the CLI derives it
    assert fam == "qwen3_moe"
    for v in ("1.0", "1.0.0", "1.0-two-model", "0.21.0", "1.1", "1.2"):
        assert resolve_serving("trtllm", v, fam, 32, {}, None).spec == (layer_out(1), layer_out(15), layer_out(28)), v
    s = resolve_serving("trtllm", "0.20.0", fam, 32, {}, None)
    assert s.failure is not None and s.failure.when == "serving" and s.spec == ()
    assert "never calls maybe_capture_hidden_states" in s.failure.message
    assert "0.21 is the first release whose Qwen3MoEDecoderLayer captures" in s.failure.message
    assert trtllm_row("0.20", fam).executed  # executed from the stored pre-capture file, not read off a diff


def test_qwen3_dense_captures_from_1_0():
    fam = arch_family(QWEN3)
    assert fam == "qwen"
    s = resolve_serving("trtllm", "0.21.0", fam, 32, {}, None)
    assert s.failure is not None and "1.0 is the first release" in s.failure.message
    assert resolve_serving("trtllm", "1.0", fam, 32, {}, None).spec == (layer_out(1), layer_out(15), layer_out(28))


def test_the_1_2_llama_rows_are_unchanged():
    def spec(v, ids):
        return resolve_serving("trtllm", v, "llama", 32, {}, ids).spec

    assert spec("1.2", None) == (layer_out(1), layer_out(15), layer_out(28))
    assert spec("1.2", [28, 1, 15]) == (layer_out(1), layer_out(15), layer_out(28))
    assert spec("1.2", [-1, 1, 15]) == (final_norm(), layer_out(1), layer_out(15))
    assert spec("1.2-two-model", [-1, 1, 15]) == (layer_out(1), layer_out(15), final_norm())
    assert trtllm_row("1.2", "llama") is None  # no family row: the layer captures like every other


def test_a_family_without_rows_is_undetermined_before_the_release_the_rule_was_read_on():
    # DeepSeek's and GPT-OSS's decoder layers were not executed per release: before 1.2 the doctor does not guess
    for fam in ("deepseek", "gpt_oss"):
        s = resolve_serving("trtllm", "1.0", fam, 32, {}, None)
        assert s.failure is not None and s.failure.when == "undetermined", fam
        assert resolve_serving("trtllm", "1.2", fam, 32, {}, None).spec == (layer_out(1), layer_out(15), layer_out(28))
    # LlamaModel's layer captures in every stored version: Llama and Mistral are answered from 0.20
    for fam in ("llama", "mistral"):
        assert resolve_serving("trtllm", "0.20", fam, 32, {}, None).failure is None, fam


def test_engine_version_takes_any_release_from_0_20():
    assert TRTLLM_RELEASES == ("0.20", "0.21", "1.0", "1.1", "1.2")
    want = {
        "1.0": "1.0",
        "1.0.0": "1.0",
        "1.0.1": "1.0",
        "1.0.0rc4": "1.0",
        "1.1.0rc2": "1.1",
        "1.1.0": "1.1",
        "1.2.1": "1.2",
        "1.2.0rc6-two-model": "1.2-two-model",
        "1.0-two-model": "1.0-two-model",
        "0.21.0": "0.21",
        "0.20.0": "0.20",
    }
    for given, row in want.items():
        assert check_engine("trtllm", given) == row, given
    with pytest.raises(BadInput, match="use 0.20 or newer"):
        check_engine("trtllm", "0.19.0")


def test_the_cli_names_the_missing_capture_and_the_release_that_adds_it(tmp_copy):
    code, out = _inspect_with_target(tmp_copy, QWEN3_MOE, None, "--engine", "trtllm", "--engine-version", "0.20.0")
    eng = [f for f in out["findings"] if f["code"] == "ENG003"]
    assert code == 1 and eng, [f["code"] for f in out["findings"]]
    assert "never calls maybe_capture_hidden_states" in eng[0]["title"]
    assert "TensorRT-LLM 0.21 or newer" in eng[0]["fix"]
    # 1.0 serves the same target with its capture: no engine finding
    _, out = _inspect_with_target(tmp_copy, QWEN3_MOE, None, "--engine", "trtllm", "--engine-version", "1.0")
    assert not {"ENG001", "ENG002", "ENG003", "ENG004"} & {f["code"] for f in out["findings"]}


def _harness():
    sys.path.insert(0, str(CONFORMANCE))
    spec = importlib.util.spec_from_file_location("trtllm_exec", CONFORMANCE / "trtllm_exec.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_without_the_excerpts_the_committed_tables_stay(tmp_path, monkeypatch, capsys):
    mod = _harness()
    monkeypatch.setattr(mod, "CACHE", tmp_path / "empty")
    out, rows = tmp_path / "cases.json", tmp_path / "rows.json"
    assert mod.main(["trtllm_exec.py", str(out), str(rows)]) == 0
    assert not out.exists() and not rows.exists() and "kept as committed" in capsys.readouterr().out


def test_a_changed_excerpt_is_refused(tmp_path, monkeypatch):
    mod = _harness()
    manifest = json.loads(mod.MANIFEST.read_text())
    key, src = next(iter(manifest["sources"].items()))
    (tmp_path / key).mkdir()
    (tmp_path / key / src["file"]).write_text("class A:\n    def forward(self):\n        pass\n")
    monkeypatch.setattr(mod, "CACHE", tmp_path)
    with pytest.raises(mod.CodeMoved, match="sha256"):
        mod.load_methods(key, src)


def test_re_executing_the_cached_excerpts_gives_the_committed_table():
    mod = _harness()
    manifest = json.loads(mod.MANIFEST.read_text())
    if any(not (mod.CACHE / k / s["file"]).exists() for k, s in manifest["sources"].items()):
        pytest.skip("the TensorRT-LLM excerpts are not in conformance/.cache (read from the search index; not committed)")
    assert mod.execute(manifest) == _outcomes()
