"""Beyond Llama: hooks on Qwen2/Qwen3/Mistral/DeepSeek-V3/GPT-OSS, their engine rules, and the
seed case end to end on a 61-layer DeepSeek-V3-shaped target."""

from __future__ import annotations

import itertools
import json
import shutil

import pytest
import torch
from conftest import DRAFTS, TARGET, assert_hooks_match_hidden_states, invoke

from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.core.taps import TapRecorder, embed, layer_out
from eagle3_doctor.doctor import compare_hidden, load_setup
from eagle3_doctor.engines.families import arch_family

V = 320  # the fixture tokenizer's vocabulary, so saved models load with it


def tiny(name: str, layers: int = 4):
    from transformers import DeepseekV3Config, GptOssConfig, MistralConfig, Qwen2Config, Qwen3Config

    common = dict(vocab_size=V, hidden_size=64, num_hidden_layers=layers, num_attention_heads=4, max_position_embeddings=256)
    cfg = {
        "qwen2": lambda: Qwen2Config(intermediate_size=128, num_key_value_heads=2, **common),
        "qwen3": lambda: Qwen3Config(intermediate_size=128, num_key_value_heads=2, head_dim=16, **common),
        "mistral": lambda: MistralConfig(intermediate_size=128, num_key_value_heads=2, **common),
        "deepseek_v3": lambda: DeepseekV3Config(
            intermediate_size=128,
            moe_intermediate_size=32,
            num_key_value_heads=4,
            n_routed_experts=4,
            num_experts_per_tok=2,
            n_shared_experts=1,
            first_k_dense_replace=3,
            q_lora_rank=32,
            kv_lora_rank=16,
            qk_rope_head_dim=8,
            qk_nope_head_dim=8,
            v_head_dim=16,
            n_group=1,
            topk_group=1,
            **common,
        ),
        "gpt_oss": lambda: GptOssConfig(
            intermediate_size=64,
            num_key_value_heads=2,
            head_dim=16,
            num_local_experts=4,
            num_experts_per_tok=2,
            sliding_window=8,
            **common,
        ),
    }[name]()
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(cfg).eval()


@pytest.mark.parametrize("name", ["qwen2", "qwen3", "mistral", "deepseek_v3", "gpt_oss"])
def test_hooks_match_output_hidden_states(name):
    ids = torch.randint(0, V, (2, 10), generator=torch.Generator().manual_seed(1))
    assert_hooks_match_hidden_states(tiny(name), ids)


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


_copies = itertools.count()
QWEN3_MOE = {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"]}


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
    qwen2 = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"]}
    code, out = _inspect_with_target(tmp_copy, qwen2, None, "--engine", engine)
    codes = [f["code"] for f in out["findings"]]
    assert "ENG004" in codes and not {"ENG001", "ENG002", "CAP001", "CAP002"} & set(codes), codes
    f = next(f for f in out["findings"] if f["code"] == "ENG004")
    assert f["severity"] == "warning" and "qwen2" in f["title"] and engine in f["title"]
    # trtllm's capture does not depend on the target's model file: it stays predicted
    _, out = _inspect_with_target(tmp_copy, qwen2, None, "--engine", "trtllm")
    assert "ENG004" not in [f["code"] for f in out["findings"]]


@pytest.fixture(scope="module")
def deepseek61(tmp_path_factory):
    d = tmp_path_factory.mktemp("deepseek61")
    tiny("deepseek_v3", layers=61).save_pretrained(d)
    for f in TARGET.iterdir():
        if f.name.startswith(("tokenizer", "chat_template")):
            shutil.copy(f, d / f.name)
    return d


def run61(path, ids, version):
    setup = load_setup(
        target=str(path),
        draft=None,
        engine="sglang",
        engine_version=version,
        layer_ids=ids,
        train_recipe="hf-hidden-states:3,31,59",
        dtype="float32",
        device="cpu",
    )
    return compare_hidden(setup, limit=2, max_tokens=24)


def test_seed_case_on_a_61_layer_deepseek_target(deepseek61):
    trained = (layer_out(2), layer_out(30), layer_out(58))
    # sglang 0.5.10 srt/models/deepseek_v2.py adds +1 to every id (executed: conformance/table.json)
    ok = run61(deepseek61, [2, 30, 58], "0.5.10")
    assert ok.train_spec == trained and ok.serving.spec == trained
    assert [f.code for f in ok.findings if f.severity in ("error", "warning")] == []
    # sglang 0.5.2 has no EAGLE-3 for DeepSeek at all: the engine refuses to start
    none = run61(deepseek61, [2, 30, 58], "0.5.2")
    assert [f.code for f in none.findings if f.severity == "error"] == ["ENG001"]
    # stock 0.5.10 crashes on -1 (residual None before layer 0); a build patched to map -1 to the
    # embeddings feeds them quietly in slot 0
    bad = run61(deepseek61, [-1, 2, 30], "0.5.10+minus-one-embed")
    f = next(f for f in bad.findings if f.severity == "error")
    assert f.code == "CAP002" and "slot 0 is fed the embeddings" in f.title and "1, 2" in f.title
    assert f.data["fix_ids"] == [2, 30, 58]
    # numerically too (a random tiny model: early layers stay close to the embeddings, yet clearly apart)
    assert bad.slots[0].rel_mean > 0.2 and ok.slots[0].rel_mean == 0
    # SGLang 0.5.23's DeepSeek rule uses ids raw unless the first is 1: the same list lands one layer early
    new = run61(deepseek61, [2, 30, 58], "0.5.23")
    assert new.serving.spec == (layer_out(1), layer_out(29), layer_out(57))
    cap = next(f for f in new.findings if f.code == "CAP001")
    assert cap.data["fix_ids"] == [3, 31, 59]
    assert any(f.code == "CAP011" for f in new.findings)


def test_draft_with_its_own_hidden_size_and_a_large_vocabulary(tmp_path):
    from eagle3_doctor.draft.config import DraftConfig
    from eagle3_doctor.draft.formats import read_draft
    from eagle3_doctor.draft.model import Eagle3Draft
    from eagle3_doctor.draft.writing import write_draft

    cfg = DraftConfig(
        hidden_size=32,
        intermediate_size=64,
        num_attention_heads=2,
        num_key_value_heads=1,
        vocab_size=151936,
        draft_vocab_size=2048,
        target_hidden_size=64,
    )
    torch.manual_seed(0)
    d = Eagle3Draft(cfg)
    d.d2t.copy_(torch.arange(2048) * 70 - torch.arange(2048))
    d.t2d[torch.arange(2048) * 70] = True
    d.set_embeddings(torch.randn(151936, 32), own=True)
    spec = (layer_out(1), layer_out(14), layer_out(27))
    write_draft(d, tmp_path / "spec", "speculators", spec, 32)
    back, info = read_draft(tmp_path / "spec")
    assert back.config.target_hidden_size == 64 and back.config.fc_in_features == 192
    assert info.has_embed and info.has_d2t and int(back.to_target_ids(torch.tensor([2047]))) == 2047 * 70
    with torch.no_grad():
        outs = [back.logits(h) for h in back.unroll(torch.randn(1, 6, 192), torch.randint(0, 151936, (1, 6)), 2)]
    assert outs[0].shape == (1, 6, 2048)
    # without its own embeddings it cannot borrow a 64-wide target embedding
    write_draft(d, tmp_path / "sgl", "sglang", spec, 32)
    with pytest.raises(BadInput, match="no embed_tokens"):
        read_draft(tmp_path / "sgl", target_embed=torch.zeros(151936, 64))


def test_unknown_decoder_layout_names_the_architecture():
    class Odd(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([torch.nn.Linear(2, 2)])

    with pytest.raises(BadInput, match="cannot find the decoder layers and final norm of Odd"):
        TapRecorder(Odd(), [embed()])
