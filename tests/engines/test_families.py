"""Target families beyond Llama: the family read from a config, and each family's engine rules as a user
meets them through inspect on a copy of the fixture target whose config names that family."""

from __future__ import annotations

import itertools
import json

import pytest
from conftest import DRAFTS, TARGET, invoke

from eagle3_doctor.engines.families import arch_family

_copies = itertools.count()
QWEN3_MOE = {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"]}


def test_family_from_config():
    assert arch_family({"model_type": "deepseek_v3"}) == "deepseek"
    assert arch_family({"model_type": "kimi_k2"}) == "deepseek"
    assert arch_family({"model_type": "gpt_oss"}) == "gpt_oss"
    assert arch_family({"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]}) == "qwen"
    assert arch_family({"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"]}) == "qwen3_moe"
    assert arch_family({"model_type": "mistral", "architectures": ["MistralForCausalLM"]}) == "mistral"
    # vLLM's target check reads model_type: a Mistral checkpoint naming the Llama class is still mistral
    assert arch_family({"model_type": "mistral", "architectures": ["LlamaForCausalLM"]}) == "mistral"
    # the engines dispatch on the class: an unlisted model_type with a modelled class takes that class
    assert arch_family({"model_type": "internlm3", "architectures": ["LlamaForCausalLM"]}) == "llama"
    # nobody modelled these: their own name, never llama
    assert arch_family({"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"]}) == "qwen2"
    assert arch_family({"architectures": ["Qwen3_5ForConditionalGeneration"]}) == "qwen3_5forconditionalgeneration"
    assert arch_family({}) == "unknown"


def _inspect_with_target(tmp_copy, target_cfg: dict, ids: list[int] | None, *args: str) -> tuple[int, dict]:
    """inspect as a user runs it, on a copy of the fixture target whose config.json names another family."""
    n = next(_copies)
    t, d = tmp_copy(TARGET, f"target{n}"), tmp_copy(DRAFTS["sglang"], f"draft{n}")
    c = json.loads((t / "config.json").read_text())
    c.update(target_cfg)
    (t / "config.json").write_text(json.dumps(c))
    if ids is not None:
        dc = json.loads((d / "config.json").read_text())
        dc["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = ids
        (d / "config.json").write_text(json.dumps(dc))
    out = t.parent / f"inspect{n}.json"
    r = invoke("inspect", "--target", t, "--draft", d, "--json", out, *args)
    return r.exit_code, json.loads(out.read_text())


def test_sglang_qwen3_moe_with_an_id_at_the_last_layer_fails_at_start_up(tmp_copy):
    # sglang 0.5.23 srt/models/qwen2_moe.py Qwen2MoeModel.set_eagle3_layers_to_capture marks
    # self.layers[id + 1]: id 7 of an 8-layer target is layers[8], an IndexError at start-up
    code, out = _inspect_with_target(tmp_copy, QWEN3_MOE, [1, 3, 7], "--engine", "sglang", "--engine-version", "0.5.23")
    eng = [f for f in out["findings"] if f["code"] == "ENG001"]
    assert code == 1 and eng, [f["code"] for f in out["findings"]]
    assert "IndexError" in eng[0]["title"] and "qwen2_moe.py" in " ".join(eng[0]["evidence"])
    # the same ids on a Llama target are taken by llama.py (no index check): no start-up failure
    code, out = _inspect_with_target(tmp_copy, {}, [1, 3, 7], "--engine", "sglang", "--engine-version", "0.5.23")
    assert "ENG001" not in [f["code"] for f in out["findings"]]


@pytest.mark.parametrize(("version", "refused"), [("0.8.5", True), ("0.21.0", True), ("0.22.0", False)])
def test_vllm_refuses_mistral_targets_before_0_22(tmp_copy, version, refused):
    # vllm config/speculative.py: eagle3_target_supported lists model types, never "mistral"; 0.22 drops the
    # check and mistral.py (through llama.py) implements SupportsEagle3
    mistral = {"model_type": "mistral", "architectures": ["MistralForCausalLM"]}
    _, out = _inspect_with_target(tmp_copy, mistral, None, "--engine", "vllm", "--engine-version", version)
    eng = [f for f in out["findings"] if f["code"] == "ENG001"]
    assert bool(eng) == refused, [f["code"] for f in out["findings"]]
    if refused:
        assert "model_type='mistral'" in eng[0]["title"] and "config/speculative.py" in " ".join(eng[0]["evidence"])


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_a_family_nobody_modelled_is_undetermined_not_llama(tmp_copy, engine):
    # remote code: no Hugging Face model_type maps to the class, so the enumeration lists it as not modelled
    telechat = {"model_type": "telechat2", "architectures": ["TeleChat2ForCausalLM"]}
    code, out = _inspect_with_target(tmp_copy, telechat, None, "--engine", engine)
    codes = [f["code"] for f in out["findings"]]
    assert "ENG004" in codes and not {"ENG001", "ENG002", "CAP001", "CAP002"} & set(codes), codes
    f = next(f for f in out["findings"] if f["code"] == "ENG004")
    assert f["severity"] == "warning" and "telechat2" in f["title"] and engine in f["title"]
    # trtllm's capture does not depend on the target's model file: it stays predicted
    _, out = _inspect_with_target(tmp_copy, telechat, None, "--engine", "trtllm")
    assert "ENG004" not in [f["code"] for f in out["findings"]]


@pytest.mark.parametrize(
    ("engine", "version"), [("sglang", "0.5.2"), ("sglang", "0.5.23"), ("vllm", "0.10.2"), ("vllm", "0.33.0")]
)
def test_a_qwen2_target_gets_a_determined_capture(tmp_copy, engine, version):
    # every SGLang and vLLM release serves Qwen2ForCausalLM with an EAGLE-3 draft from the first release whose
    # qwen2.py takes it (enumerated and executed: data/engine_families.json); the fixture draft's ids fit
    qwen2 = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"]}
    code, out = _inspect_with_target(tmp_copy, qwen2, None, "--engine", engine, "--engine-version", version)
    codes = [f["code"] for f in out["findings"]]
    assert not {"ENG004", "ENG001"} & set(codes), codes
    assert "not modelled" not in json.dumps(out)
    # the release before the first that serves it refuses at start-up, in the engine's own words
    before = {"sglang": "0.5.1", "vllm": "0.10.1"}[engine]
    _, out = _inspect_with_target(tmp_copy, qwen2, None, "--engine", engine, "--engine-version", before)
    eng = [f for f in out["findings"] if f["code"] == "ENG001"]
    assert eng and "not modelled" not in json.dumps(out), [f["code"] for f in out["findings"]]
