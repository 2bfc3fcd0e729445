"""inspect: the clean fixtures yield no finding; ids in a nesting the engine does not read, a draft named for
another engine, and a quantized target or export, each with its findings per engine.

The one-finding planted faults (a tensor missing, a config value off, ...) are rows of tests/test_finding_cases.py."""

from __future__ import annotations

import json

import pytest
from conftest import DRAFTS, TARGET

from eagle3_doctor.analyses.inspect.inspection import inspect


def codes(res, at_least="warning"):
    keep = {"warning": ("warning", "error"), "info": ("info", "warning", "error")}[at_least]
    return sorted({f.code for f in res.findings if f.severity in keep})


@pytest.mark.parametrize(
    "fmt,engine", [("sglang", "sglang"), ("speculators", "vllm"), ("eagle", "eagle"), ("sglang", "modelopt")]
)
def test_clean_fixtures_have_no_findings(fmt, engine):
    res = inspect(str(TARGET), str(DRAFTS[fmt]), engine=engine)
    assert codes(res) == [], [f.to_dict() for f in res.findings]


def _edit_config(d, fn):
    f = d / "config.json"
    c = json.loads(f.read_text())
    fn(c)
    f.write_text(json.dumps(c))


def test_layer_ids_in_a_nesting_the_engine_does_not_read(tmp_copy):
    d = tmp_copy(DRAFTS["sglang"])

    def move(c):
        ids = c["eagle_config"].pop("eagle_aux_hidden_state_layer_ids")
        c["eagle_aux_hidden_state_layer_ids"] = [i + 1 for i in ids]  # written for vLLM, top level

    _edit_config(d, move)
    # vLLM 0.18 reads the top-level key: correct there
    assert codes(inspect(str(TARGET), str(d), engine="vllm", engine_version="0.18.0")) == []
    # SGLang reads only eagle_config: the ids are ignored (harmless here, since its default is what was trained)
    res = inspect(str(TARGET), str(d), engine="sglang")
    assert codes(res, "info") == ["CAP007"]
    # a draft declaring non-default layers in the top-level key: SGLang silently serves its default
    _edit_config(d, lambda c: c.update(eagle_aux_hidden_state_layer_ids=[3, 5, 6]))
    res = inspect(str(TARGET), str(d), engine="sglang")
    assert codes(res) == ["CAP001", "CAP007"]
    f = next(f for f in res.findings if f.code == "CAP007")
    assert '"eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 4, 5]}' in f.fix


def test_wrong_architecture_name_for_vllm(tmp_copy):
    d = tmp_copy(DRAFTS["eagle"])
    assert "CFG007" in codes(inspect(str(TARGET), str(d), engine="vllm"))


# quantization_config forms as the quantizers write them (fp8 block: DeepSeek/Qwen FP8 checkpoints;
# compressed-tensors: llm-compressor FP8_DYNAMIC)
FP8_BLOCK = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [128, 128]}
COMPRESSED = {
    "quant_method": "compressed-tensors",
    "format": "float-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "dynamic": False, "symmetric": True},
            "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True},
        }
    },
    "ignore": ["lm_head"],
}
# the engine each rule was read in, and the file its finding cites
QUANT_ENGINES = [
    ("sglang", "QNT001", "warning", "python/sglang/srt/server_args.py"),
    ("vllm", "QNT004", "info", "get_draft_quant_config"),
    ("trtllm", "QNT004", "info", "tensorrt_llm/_torch/models/modeling_speculative.py"),
]


def _quant_target(tmp_copy, qc):
    t = tmp_copy(TARGET, "target-quant")
    _edit_config(t, lambda c: c.__setitem__("quantization_config", qc))
    return t


@pytest.mark.parametrize("qc,scheme", [(FP8_BLOCK, "fp8 block [128, 128]"), (COMPRESSED, "compressed-tensors float-quantized")])
@pytest.mark.parametrize("engine,code,severity,cite", QUANT_ENGINES)
def test_quantized_target_bf16_draft_one_finding_per_engine(tmp_copy, tmp_path, qc, scheme, engine, code, severity, cite):
    from conftest import invoke

    t = _quant_target(tmp_copy, qc)
    out = tmp_path / "inspect.json"
    r = invoke("inspect", "--target", t, "--draft", DRAFTS["sglang"], "--engine", engine, "--json", out)
    assert r.exit_code == 1, r.output  # QNT003 (warning) is always raised for a quantized target
    found = json.loads(out.read_text())["findings"]
    engine_rule = [f for f in found if f["code"] in ("QNT001", "QNT004", "QNT005")]
    assert [(f["code"], f["severity"]) for f in engine_rule] == [(code, severity)], engine_rule
    assert any(cite in e for e in engine_rule[0]["evidence"]), engine_rule[0]["evidence"]
    assert any(scheme in e for f in found for e in f["evidence"])
    shift = [f for f in found if f["code"] == "QNT003"]
    assert len(shift) == 1 and "compare-hidden" in shift[0]["fix"]
    if engine == "sglang":  # the fix is the launch flag that keeps the draft in 16-bit
        assert engine_rule[0]["edit"]["key"] == "--speculative-draft-model-quantization"
        assert engine_rule[0]["edit"]["value"] == "unquant"


def test_modelopt_export_read_from_hf_quant_config(tmp_copy):
    t = tmp_copy(TARGET, "target-nvfp4")
    (t / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8"}}))
    res = inspect(str(t), str(DRAFTS["sglang"]), engine="vllm")
    q = [f for f in res.findings if f.code.startswith("QNT")]
    assert sorted(f.code for f in q) == ["QNT003", "QNT004"]
    assert any("modelopt NVFP4" in e for f in q for e in f.evidence)
    assert ("quantization", "target modelopt NVFP4; draft none (16-bit)") in res.facts


def test_qnt001_fix_within_the_named_releases_flags(tmp_copy, tmp_path):
    """--speculative-draft-model-quantization comes in SGLang 0.5.7: under 0.5.6 the fix that adds it would stop the
    server (CMD003), so QNT001 drops --quantization instead (each model's own config decides) or names the upgrade;
    under 0.5.7 it adds the flag."""
    from conftest import invoke

    t = _quant_target(tmp_copy, FP8_BLOCK)
    out = tmp_path / "inspect.json"
    for version, key, op in (("0.5.6", "--quantization", "delete"), ("0.5.7", "--speculative-draft-model-quantization", "set")):
        r = invoke("inspect", "--target", t, "--draft", DRAFTS["sglang"], "--engine", "sglang", "--engine-version", version,
                   "--json", out)  # fmt: skip
        assert r.exit_code == 1, r.output
        (f,) = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "QNT001"]
        assert (f["edit"]["key"], f["edit"]["op"]) == (key, op), (version, f)
        lacks = any("sglang 0.5.6 has no --speculative-draft-model-quantization (from 0.5.7)" in e for e in f["evidence"])
        assert lacks == (version == "0.5.6") and ("upgrade to sglang >= 0.5.7" in f["fix"]) == (version == "0.5.6")
