"""Draft checkpoint formats: detection, read-write-read identity, and identical logits; a draft of its own
hidden size with a large vocabulary written and read back."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import DRAFTS

from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.core.taps import embed, layer_out
from eagle3_doctor.draft.formats import detect_format, read_draft, spec_from_info
from eagle3_doctor.draft.writing import write_draft

TRAINED = (layer_out(1), layer_out(3), layer_out(4))


def _load(fmt, target, path=None):
    return read_draft(path or DRAFTS[fmt], device="cpu", dtype=torch.float32, target_embed=target.embed_weight())


@pytest.mark.parametrize("fmt", ["eagle", "sglang", "speculators"])
def test_detects_format_and_layer_ids(fmt, target):
    draft, info = _load(fmt, target)
    assert info.format == fmt
    assert info.has_lm_head and info.has_d2t and info.has_t2d
    spec, where = spec_from_info(info, target.num_layers)
    assert spec == TRAINED, where
    key = {
        "eagle": None,
        "sglang": "eagle_config.eagle_aux_hidden_state_layer_ids",
        "speculators": "eagle_aux_hidden_state_layer_ids",
    }[fmt]
    assert info.layer_ids_key == key
    if fmt == "sglang":
        assert info.layer_ids == [1, 3, 4]  # SGLang ids: layer_out[k]
    if fmt == "speculators":
        assert info.layer_ids == [2, 4, 5]  # vLLM ids: layer_out[k-1]
    assert draft.config.draft_vocab_size < draft.config.vocab_size


@pytest.mark.parametrize("fmt", ["eagle", "sglang", "speculators"])
def test_read_write_read_is_identity(fmt, target, tmp_path):
    draft, info = _load(fmt, target)
    write_draft(draft, tmp_path / "rt", fmt, None, config=info.config)
    again, info2 = _load(fmt, target, tmp_path / "rt")
    assert info2.config == info.config
    assert info2.format == fmt
    sd1, sd2 = draft.state_dict(), again.state_dict()
    assert sd1.keys() == sd2.keys()
    for k in sd1:
        assert torch.equal(sd1[k], sd2[k]), k
    # the files themselves hold the same tensors under the same names
    from safetensors.torch import load_file

    a, b = load_file(DRAFTS[fmt] / "model.safetensors"), load_file(tmp_path / "rt" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_same_weights_same_logits_through_all_formats(target):
    torch.manual_seed(0)
    H = target.hidden_size
    aux = torch.randn(2, 12, 3 * H)
    ids = torch.randint(0, target.vocab_size, (2, 12))
    outs = {}
    for fmt in ("eagle", "sglang", "speculators"):
        d, _ = _load(fmt, target)
        with torch.no_grad():
            outs[fmt] = [d.logits(h) for h in d.unroll(aux, ids, 3)]
    for fmt in ("sglang", "speculators"):
        for a, b in zip(outs["eagle"], outs[fmt]):
            assert torch.equal(a, b), fmt


def test_convert_between_formats_keeps_the_capture_points(target, tmp_path):
    draft, _ = _load("sglang", target)
    write_draft(draft, tmp_path / "spec", "speculators", TRAINED, target.num_layers)
    _, info = _load("speculators", target, tmp_path / "spec")
    assert info.layer_ids == [2, 4, 5]
    assert spec_from_info(info, target.num_layers)[0] == TRAINED
    # EAGLE's format has nowhere to record a non-default spec: refuse rather than lose it
    with pytest.raises(BadInput, match="cannot record"):
        write_draft(draft, tmp_path / "e", "eagle", (embed(), layer_out(1), layer_out(3)), target.num_layers)


def test_detect_format_reasons():
    assert detect_format({"architectures": ["Eagle3Speculator"]}, [])[0] == "speculators"
    assert detect_format({"architectures": ["LlamaForCausalLMEagle3"]}, ["layers.0.x"])[0] == "sglang"
    assert detect_format({"architectures": ["LlamaForCausalLM"]}, ["midlayer.x", "fc.weight"])[0] == "eagle"
    with pytest.raises(BadInput, match="--draft-format"):
        detect_format({"architectures": ["LlamaForCausalLM"]}, ["model.layers.0.x"])


def test_forced_format_and_unknown_format(target):
    _, info = read_draft(DRAFTS["sglang"], fmt="eagle", target_embed=target.embed_weight())
    assert info.format == "eagle" and info.format_reason == "forced by --draft-format"
    with pytest.raises(BadInput, match="unknown draft format"):
        read_draft(DRAFTS["sglang"], fmt="medusa")


def test_config_records_ids_in_each_formats_own_key():
    eagle = json.loads((DRAFTS["eagle"] / "config.json").read_text())
    sgl = json.loads((DRAFTS["sglang"] / "config.json").read_text())
    spc = json.loads((DRAFTS["speculators"] / "config.json").read_text())
    assert "eagle_aux_hidden_state_layer_ids" not in json.dumps(eagle)
    assert sgl["architectures"] == ["LlamaForCausalLMEagle3"] and "eagle_aux_hidden_state_layer_ids" not in sgl
    assert sgl["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 4]
    assert spc["architectures"] == ["Eagle3Speculator"] and spc["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]
    assert spc["speculators_config"]["algorithm"] == "eagle3"


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
