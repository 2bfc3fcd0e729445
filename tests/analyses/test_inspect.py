"""inspect: each planted fault yields its own finding code and fix; the clean fixtures yield none."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import DRAFTS, TARGET
from safetensors.torch import load_file, save_file

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


def _edit_weights(d, fn):
    f = d / "model.safetensors"
    sd = load_file(f)
    fn(sd)
    save_file(sd, f)


def _edit_config(d, fn):
    f = d / "config.json"
    c = json.loads(f.read_text())
    fn(c)
    f.write_text(json.dumps(c))


def test_missing_lm_head(tmp_copy):
    d = tmp_copy(DRAFTS["sglang"])
    _edit_weights(d, lambda sd: sd.pop("lm_head.weight"))
    res = inspect(str(TARGET), str(d))
    assert codes(res) == ["DRF001"]
    assert "sgl#27908" in res.findings[0].fix


def test_d2t_removed(tmp_copy):
    d = tmp_copy(DRAFTS["sglang"])
    _edit_weights(d, lambda sd: (sd.pop("d2t"), sd.pop("t2d")))
    assert codes(inspect(str(TARGET), str(d))) == ["DRF002"]


def test_t2d_inconsistent_with_d2t(tmp_copy):
    d = tmp_copy(DRAFTS["sglang"])

    def flip(sd):
        t2d = sd["t2d"].clone()
        on = t2d.nonzero().flatten()[:3]
        off = (~t2d).nonzero().flatten()[:3]
        t2d[on] = False
        t2d[off] = True
        sd["t2d"] = t2d

    _edit_weights(d, flip)
    res = inspect(str(TARGET), str(d))
    assert codes(res) == ["DRF004"]


def test_d2t_out_of_range(tmp_copy):
    d = tmp_copy(DRAFTS["sglang"])

    def bad(sd):
        sd["d2t"] = sd["d2t"].clone()
        sd["d2t"][-1] = 10**6

    _edit_weights(d, bad)
    assert codes(inspect(str(TARGET), str(d))) == ["DRF003"]


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


def test_rope_theta_changed(tmp_copy):
    d = tmp_copy(DRAFTS["sglang"])
    _edit_config(d, lambda c: c.update(rope_theta=500000.0))
    res = inspect(str(TARGET), str(d))
    assert codes(res) == ["CFG003"]
    assert '"rope_theta": 10000.0' in res.findings[0].fix


def test_fc_width_wrong(tmp_copy):
    d = tmp_copy(DRAFTS["sglang"])
    _edit_weights(d, lambda sd: sd.update({"fc.weight": sd["fc.weight"][:, :256].contiguous()}))
    _edit_config(d, lambda c: c.update(target_hidden_size=128))
    res = inspect(str(TARGET), str(d))
    assert "DRF005" in codes(res)


def test_untrained_head(tmp_copy):
    d = tmp_copy(DRAFTS["sglang"])
    torch.manual_seed(0)
    _edit_weights(d, lambda sd: sd.update({"lm_head.weight": torch.randn_like(sd["lm_head.weight"]) * 0.02}))
    assert codes(inspect(str(TARGET), str(d))) == ["DRF006"]


def test_unsorted_ids(tmp_copy):
    d = tmp_copy(DRAFTS["sglang"])
    _edit_config(d, lambda c: c["eagle_config"].update(eagle_aux_hidden_state_layer_ids=[4, 1, 3]))
    # SGLang captures in layer order (srt/models/llama.py: membership test inside the layer loop, executed
    # in conformance/table.json), as ModelOpt's hooks do: the training spec read through the draft's own
    # convention is in layer order too, so only the unsorted list itself is reported
    assert codes(inspect(str(TARGET), str(d), engine="sglang")) == ["CFG002"]
    res = inspect(str(TARGET), str(d), engine="modelopt")
    assert "CFG002" in codes(res) and "CAP004" not in codes(res)


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


def test_undetermined_engine_says_which_file_to_read(tmp_copy):
    t = _quant_target(tmp_copy, FP8_BLOCK)
    res = inspect(str(t), str(DRAFTS["eagle"]), engine="eagle")
    (f,) = [f for f in res.findings if f.code == "QNT005"]
    assert "ea_model.py" in f.fix


def test_draft_config_quantized_but_weights_16_bit(tmp_copy):
    d = tmp_copy(DRAFTS["sglang"])
    _edit_config(d, lambda c: c.__setitem__("quantization_config", FP8_BLOCK))
    res = inspect(str(TARGET), str(d), engine="vllm")
    (f,) = [f for f in res.findings if f.code == "QNT002"]
    assert f.edit is not None and f.edit.key == "quantization_config" and f.edit.op == "delete"
    # vLLM builds the draft with the draft's own (here: fp8) scheme
    assert [g.code for g in res.findings if g.code == "QNT004"] == ["QNT004"]


def test_quantized_draft_tensors_without_config(tmp_copy):
    d = tmp_copy(DRAFTS["sglang"])
    _edit_weights(d, lambda sd: sd.__setitem__("midlayer.mlp.down_proj.weight_scale", torch.ones(1)))
    res = inspect(str(TARGET), str(d), engine="vllm")
    (f,) = [f for f in res.findings if f.code == "QNT002"]
    assert "midlayer.mlp.down_proj.weight_scale" in f.evidence[0]


def test_sglang_quantized_draft_gets_its_own_method_flag(tmp_copy):
    d = tmp_copy(DRAFTS["sglang"])
    _edit_config(d, lambda c: c.__setitem__("quantization_config", FP8_BLOCK))
    res = inspect(str(TARGET), str(d), engine="sglang")
    (f,) = [f for f in res.findings if f.code == "QNT001"]
    assert f.edit.key == "--speculative-draft-model-quantization" and f.edit.value == "fp8"
