"""An engine the doctor does not model, described by what it feeds the draft (engines/declared.py), is measured
exactly as a modelled release is: a description that says what a modelled release does gives that release's
figures to the last prompt, and a planted tap or norm difference costs what the modelled path measures."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import DRAFTS, PROMPTS, TARGET, invoke

from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.core.taps import format_spec
from eagle3_doctor.doctor import acceptance, load_setup

ARGS = dict(prompts_path=str(PROMPTS), num_steps=3, max_new_tokens=24, limit=4)


def _describe(tmp_path, name: str, **body) -> str:
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps(body))
    return str(p)


def _run(draft, engine, version=None, layer_ids=None):
    setup = load_setup(
        target=str(TARGET), draft=str(draft), engine=engine, engine_version=version, layer_ids=layer_ids,
        dtype="float32", device="cpu",
    )  # fmt: skip
    return acceptance(setup, **ARGS)


def _codes(run) -> list[str]:
    return sorted(f.code for f in run.findings)


def test_a_description_of_what_sglang_does_measures_what_sglang_measures(tmp_path):
    desc = _describe(
        tmp_path, "like-sglang", engine="like-sglang", release="1", source="the modelled release, written down",
        capture={"from_config": "eagle_config.eagle_aux_hidden_state_layer_ids", "convention": "output"},
        draft={"norm_before_fc": False, "norm_before_residual": False, "fc_norm": False, "norm_output": False,
               "embed": "target", "tie_word_embeddings": True, "rope": "neox"},
    )  # fmt: skip
    want, got = _run(DRAFTS["sglang"], "sglang"), _run(DRAFTS["sglang"], "declared", desc)
    assert got.settings.engine == "like-sglang 1 (declared)"
    for name in want.paths:
        assert got.paths[name].accepted_lengths == want.paths[name].accepted_lengths
        assert got.paths[name].acc_k == want.paths[name].acc_k
    assert _codes(got) == _codes(want)


def test_a_llama_cpp_style_tap_convention_costs_what_the_same_capture_costs_on_sglang(tmp_path):
    """llama.cpp-style: ids counted as the layer whose input is taken. The trained ids [1, 3, 4] read that way
    capture one layer early (layer_out 0, 2, 3); SGLang given the ids that capture those points measures the
    same cost, and the finding names the capture points either way."""
    desc = _describe(
        tmp_path, "llama-cpp", engine="llama.cpp", release="b7210", source="ids name the layer whose input is taken",
        capture={"layer_ids": [1, 3, 4], "convention": "input"},
    )  # fmt: skip
    got = _run(DRAFTS["sglang"], "declared", desc)
    want = _run(DRAFTS["sglang"], "sglang", layer_ids=[0, 2, 3])
    assert (
        format_spec(got.settings.serving_spec)
        == format_spec(want.settings.serving_spec)
        == ("layer_out[0], layer_out[2], layer_out[3]")
    )
    assert list(got.paths) == list(want.paths) == ["serving", "training"]
    for name in want.paths:
        assert got.paths[name].accepted_lengths == want.paths[name].accepted_lengths
    s, t = got.paths["serving"], got.paths["training"]
    assert s.acc_k[0] < t.acc_k[0]  # the planted difference costs acceptance
    assert _codes(got) == _codes(want) and _codes(got)


def test_an_mlx_style_norm_difference_costs_what_vllm_measures_for_it(tmp_path):
    """MLX-style: the draft's forward described (norm_output not applied). On a speculators draft trained with
    norm_output true this is what vLLM 0.10.2 runs (it never reads the key): the as-served copy measures the
    same cost, step 1 untouched and step 2 changed, and the finding's fix names the description."""
    d = tmp_path / "spec-norm-output"
    shutil.copytree(DRAFTS["speculators"], d)
    c = json.loads((d / "config.json").read_text())
    c["norm_output"] = True
    (d / "config.json").write_text(json.dumps(c))
    want = _run(d, "vllm", "0.10.2")
    desc = _describe(
        tmp_path, "mlx", engine="mlx-lm", release="0.29", source="its draft forward never applies the output norm",
        capture={"points": [str(p) for p in want.settings.serving_spec]}, draft={"norm_output": False},
    )  # fmt: skip
    got = _run(d, "declared", desc)
    assert list(got.paths) == list(want.paths) == ["serving", "as_served"]
    for name in want.paths:
        assert got.paths[name].accepted_lengths == want.paths[name].accepted_lengths
    (f,) = [f for f in got.findings if f.code.startswith("FWD")]
    assert f.code == "FWD001" and f.data["flag"] == "norm_output"
    (w,) = [f for f in want.findings if f.code.startswith("FWD")]
    assert f.data["measured_step1_difference"] == w.data["measured_step1_difference"]
    assert "mlx-lm 0.29 (declared)" in f.title and desc in str(f.fix)


@pytest.mark.parametrize(
    "body,says",
    [
        ({"capture": {"layer_ids": [1]}}, "name the engine"),
        ({"engine": "x", "capture": {"layer_ids": [1], "convention": "sideways"}}, "capture.convention"),
        ({"engine": "x", "capture": {"layer_ids": [1], "points": ["embed"]}}, "exactly one of"),
        ({"engine": "x", "capture": {"points": ["layer_out[1]"]}, "drfat": {}}, "unknown key(s) drfat"),
        ({"engine": "x", "capture": {"points": ["layer_out[1]"]}, "draft": {"norm_before_fc": "yes"}}, "true or false"),
        ({"engine": "x", "capture": {"points": ["layer_out[1]"]}, "draft": {"rope": "yarn"}}, "draft.rope"),
    ],
)
def test_a_wrong_description_is_refused_by_name(tmp_path, body, says):
    from eagle3_doctor.engines.declared import read_declared

    with pytest.raises(BadInput, match=None) as e:
        read_declared(_describe(tmp_path, "bad", **body))
    assert says in str(e.value)


def test_the_cli_takes_a_description_and_refuses_a_bad_one_in_one_line(tmp_path):
    desc = _describe(
        tmp_path, "llama-cpp", engine="llama.cpp", release="b7210",
        capture={"layer_ids": [1, 3, 4], "convention": "input"},
    )  # fmt: skip
    out = tmp_path / "a.json"
    common = ["--target", str(TARGET), "--draft", str(DRAFTS["sglang"]), "--prompts", str(PROMPTS), "--limit", "2",
              "--max-new-tokens", "8", "--num-steps", "2"]  # fmt: skip
    r = invoke("acceptance", *common, "--serving-description", desc, "--json", str(out))
    doc = json.loads(out.read_text())
    assert doc["settings"]["engine"] == "llama.cpp b7210 (declared)" and doc["engine_release"] == desc
    assert "layer_out[0], layer_out[2], layer_out[3]" in r.output
    bad = _describe(tmp_path, "bad", engine="x", capture={"layer_ids": [1]})
    r = invoke("acceptance", *common, "--serving-description", bad)
    assert r.exit_code == 2 and "capture.convention" in r.output and "Traceback" not in r.output
    r = invoke("acceptance", *common, "--serving-description", desc, "--engine", "vllm")
    assert r.exit_code == 2 and "pass one of the two" in r.output
