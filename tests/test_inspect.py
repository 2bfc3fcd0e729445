"""inspect: each planted fault yields its own finding code and fix; the clean fixtures yield none."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import DRAFTS, TARGET
from safetensors.torch import load_file, save_file

from eagle3_doctor.analyses.inspect_draft import inspect


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
