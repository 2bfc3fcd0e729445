"""--device-map: the target sharded by accelerate (here half its layers offloaded to disk, the
CPU stand-in for a second GPU) gives the same features, findings and accepted lengths."""

from __future__ import annotations

import pytest
from conftest import DRAFTS, PROMPTS, TARGET

from eagle3_doctor.doctor import acceptance, compare_hidden, load_setup

pytest.importorskip("accelerate")

SPLIT = {
    "model.embed_tokens": "cpu",
    "model.rotary_emb": "cpu",
    "model.norm": "cpu",
    "lm_head": "cpu",
    **{f"model.layers.{i}": ("cpu" if i < 4 else "disk") for i in range(8)},
}


# the embeddings and final norm offloaded too: the draft then borrows embeddings that exist only
# while accelerate moves them in, and captures gather on the norm's execution device
SPLIT_ALL = {**SPLIT, "model.embed_tokens": "disk", "model.norm": "disk"}


def both(split, **kw):
    base = dict(target=str(TARGET), draft=str(DRAFTS["sglang"]), dtype="float32", device="cpu", layer_ids=[-1, 1, 3])
    return load_setup(**base), load_setup(device_map=split, **base)


@pytest.mark.parametrize("split", [SPLIT, SPLIT_ALL], ids=["layers-offloaded", "embed-and-norm-offloaded-too"])
def test_sharded_target_gives_identical_results(split):
    plain, sharded = both(split)
    params = dict(sharded.target.model.named_parameters())
    assert params["model.layers.6.mlp.up_proj.weight"].device.type == "meta"  # really offloaded
    a = compare_hidden(plain, prompts_path=str(PROMPTS), limit=3, matrix=True)
    b = compare_hidden(sharded, prompts_path=str(PROMPTS), limit=3, matrix=True)
    assert [f.code for f in a.findings] == [f.code for f in b.findings] == ["CAP002"]
    assert [s.rel_mean for s in a.slots] == [s.rel_mean for s in b.slots]
    assert a.matrix.rel_l2 == b.matrix.rel_l2
    ra = acceptance(plain, prompts_path=str(PROMPTS), limit=3, num_steps=4, max_new_tokens=24)
    rb = acceptance(sharded, prompts_path=str(PROMPTS), limit=3, num_steps=4, max_new_tokens=24)
    assert ra.paths["serving"].accepted_lengths == rb.paths["serving"].accepted_lengths
    assert ra.paths["training"].acc_k == rb.paths["training"].acc_k
