"""Beyond Llama: hooks on Qwen2/Qwen3/Mistral/DeepSeek-V3/GPT-OSS, a decoder layout nobody modelled named,
and the seed case end to end on a 61-layer DeepSeek-V3-shaped target.

Each family's engine rules through inspect are in tests/engines/test_families.py."""

from __future__ import annotations

import shutil

import pytest
import torch
from conftest import TARGET, assert_hooks_match_hidden_states

from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.core.taps import TapRecorder, embed, layer_out
from eagle3_doctor.doctor import compare_hidden, load_setup

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


def test_unknown_decoder_layout_names_the_architecture():
    class Odd(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([torch.nn.Linear(2, 2)])

    with pytest.raises(BadInput, match="cannot find the decoder layers and final norm of Odd"):
        TapRecorder(Odd(), [embed()])
