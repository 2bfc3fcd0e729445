"""The MTP head: its teacher-forced unroll against a plain KV-cache chain, the recycled state, the layouts'
round trip and the drafter-kind detection."""

from __future__ import annotations

import json

import pytest
import torch

from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.draft.config import DraftConfig
from eagle3_doctor.draft.model import DraftCache
from eagle3_doctor.draft.mtp.config import MTPConfig
from eagle3_doctor.draft.mtp.formats import read_mtp
from eagle3_doctor.draft.mtp.model import MTPHead
from eagle3_doctor.draft.mtp.writing import write_mtp
from eagle3_doctor.drafters.registry import kind_of


def make_head(recycle="post_norm", seed=0):
    layer = DraftConfig(
        hidden_size=32, intermediate_size=48, num_attention_heads=4, num_key_value_heads=2, vocab_size=40, draft_vocab_size=40
    )
    torch.manual_seed(seed)
    head = MTPHead(MTPConfig(layer, recycle=recycle))
    with torch.no_grad():
        for p in head.parameters():
            p.add_(0.3 * torch.randn_like(p))  # norms away from 1: a wrong norm placement shows
    head.set_embeddings(torch.randn(40, 32))
    return head.eval()


@pytest.mark.parametrize("recycle", ["pre_norm", "post_norm"])
def test_unroll_equals_a_kv_cache_chain(recycle):
    """Step k at base t of the unroll is what a decode loop computes: step 1 over positions 0..t from target
    states, then k-1 steps each over its own recycled state and the true next token."""
    head = make_head(recycle)
    T, K = 9, 3
    aux, ids = torch.randn(1, T, 32), torch.randint(0, 40, (1, T))
    with torch.no_grad():
        steps = list(head.unroll(aux, ids, K))
        for t in range(T - K):
            cache = DraftCache()
            h = head.extend(aux[:, : t + 1], ids[:, : t + 1], torch.arange(t + 1)[None], cache, from_aux=True)[:, -1:]
            torch.testing.assert_close(h, steps[0][:, t : t + 1], rtol=1e-4, atol=1e-4)
            for k in range(1, K):
                h = head.extend(h, ids[:, t + k : t + k + 1], torch.tensor([[t + k]]), cache, from_aux=False)
                torch.testing.assert_close(h, steps[k][:, t : t + 1], rtol=1e-4, atol=1e-4)


def test_the_recycled_state_is_the_chosen_one():
    """post_norm hands on shared_head.norm(out) and reads logits off it as is; pre_norm norms inside logits."""
    pre, post = make_head("pre_norm"), make_head("post_norm")
    aux, ids = torch.randn(1, 5, 32), torch.randint(0, 40, (1, 5))
    with torch.no_grad():
        h_pre = next(pre.unroll(aux, ids, 1))
        h_post = next(post.unroll(aux, ids, 1))
        torch.testing.assert_close(post.shared_head.norm(h_pre), h_post)
        torch.testing.assert_close(pre.logits(h_pre), post.logits(h_post))


@pytest.mark.parametrize("fmt", ["speculators", "deepseek", "nextn-export"])
def test_layouts_round_trip(tmp_path, fmt):
    """speculators' own directory, DeepSeek's layer inside the target (model.layers.{L}), and SGLang's NextN
    export (the layer alone as model.layers.0, num_nextn_predict_layers == num_hidden_layers)."""
    head = make_head()
    target = tmp_path / "target"
    target.mkdir()
    from safetensors.torch import save_file

    save_file({"model.embed_tokens.weight": head.embed_tokens.weight.clone(), "lm_head.weight": head.shared_head.head.weight.clone()},
              str(target / "model.safetensors"))  # fmt: skip
    export = fmt == "nextn-export"
    (target / "config.json").write_text(json.dumps({**_layer_json(head), "num_hidden_layers": 1 if export else 2,
                                                    **({"num_nextn_predict_layers": 1} if export else {})}))  # fmt: skip
    write_mtp(
        head,
        tmp_path / "out",
        "deepseek" if export else fmt,
        verifier=str(target),
        target_dir=str(target),
        layer=0 if export else None,
    )
    assert kind_of(tmp_path / "out")[0].name == "mtp"
    assert kind_of(target)[0].name == "eagle3"  # a target without the layer holds no head
    fmt = "deepseek" if export else fmt
    back, info = read_mtp(tmp_path / "out", target_embed=head.embed_tokens.weight, target_head=head.shared_head.head.weight)
    assert info.format == fmt and info.layer_index == (0 if export else 2 if fmt == "deepseek" else None)
    assert back.config.hidden == "layer_out_last" and back.config.recycle == "post_norm"
    aux, ids = torch.randn(1, 6, 32), torch.randint(0, 40, (1, 6))
    with torch.no_grad():
        torch.testing.assert_close(back.logits(next(back.unroll(aux, ids, 1))), head.logits(next(head.unroll(aux, ids, 1))))


def test_an_mla_layer_is_refused_in_one_line(tmp_path):
    from safetensors.torch import save_file

    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": 1, "num_nextn_predict_layers": 1, "hidden_size": 32,
                                                      "intermediate_size": 48, "num_attention_heads": 4, "vocab_size": 40}))  # fmt: skip
    save_file({"model.layers.1.eh_proj.weight": torch.zeros(32, 64), "model.layers.1.self_attn.kv_a_proj_with_mqa.weight": torch.zeros(8, 32)},
              str(tmp_path / "model.safetensors"))  # fmt: skip
    with pytest.raises(BadInput, match="MLA/MoE"):
        read_mtp(tmp_path, target_embed=torch.zeros(40, 32), target_head=torch.zeros(40, 32))


def _layer_json(head):
    c = head.config.layer
    return {"hidden_size": c.hidden_size, "intermediate_size": c.intermediate_size, "num_attention_heads": c.num_attention_heads,
            "num_key_value_heads": c.num_key_value_heads, "vocab_size": c.vocab_size}  # fmt: skip
