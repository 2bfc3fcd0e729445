"""acceptance with the draft as the engine runs it: where inspect reports a FWD finding,
the serving features also go through the engine's draft forward and the finding carries the measured
cost, with intervals over prompts; where the trained RoPE layout is undetermined, both layouts are
measured and the one the weights fit is named."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import DRAFTS, PROMPTS, TARGET
from safetensors.torch import load_file, save_file

from eagle3_doctor.doctor import acceptance, load_setup

ARGS = dict(prompts_path=str(PROMPTS), num_steps=2, max_new_tokens=24, limit=4)


def _draft(tmp_path_factory, name, *, gptj: bool, cfg: dict, drop: tuple = ()):
    """A copy of the SGLang fixture; gptj=True makes it the same function trained under GPT-J RoPE
    (q/k rows permuted per head into GPT-J order)."""
    import shutil

    d = tmp_path_factory.mktemp("drafts") / name
    shutil.copytree(DRAFTS["sglang"], d)
    if gptj:
        sd = load_file(d / "model.safetensors")
        for k in list(sd):
            if ".q_proj." in k or ".k_proj." in k:
                x = sd[k].reshape(4 if ".q_proj." in k else 2, 32, -1)
                sd[k] = torch.stack([x[:, :16], x[:, 16:]], dim=2).reshape(sd[k].shape)
        save_file(sd, d / "model.safetensors")
    c = json.loads((d / "config.json").read_text())
    c.update(cfg)
    for k in drop:
        c.pop(k, None)
    (d / "config.json").write_text(json.dumps(c))
    return d


def _run(d, engine):
    return acceptance(load_setup(target=str(TARGET), draft=str(d), engine=engine, dtype="float32", device="cpu"), **ARGS)


@pytest.fixture(scope="module")
def gptj_vllm(tmp_path_factory):
    return _run(_draft(tmp_path_factory, "gptj", gptj=True, cfg={"rope_is_neox_style": False}), "vllm")


def test_fwd_finding_carries_the_measured_cost(gptj_vllm):
    run = gptj_vllm
    assert list(run.paths) == ["serving", "as_served"]
    (f,) = [f for f in run.findings if f.code.startswith("FWD")]
    assert f.code == "FWD006"
    s, a = run.paths["serving"], run.paths["as_served"]
    assert a.acc_k[0] < s.acc_k[0] - 0.2  # rotating the wrong pairs costs most of step 1
    pt, lo, hi = f.data["measured_step1_difference"]
    assert hi < 0 and pt == pytest.approx(a.acc_k[0] - s.acc_k[0])
    assert "as trained ->" in f.evidence[-1] and "paired over prompts" in f.evidence[-1]
    assert a.intervals.acc_k[0].hi < s.intervals.acc_k[0].lo
    # the finding that names the as-served cost is the verdict: never "undetermined" or "healthy" beside it
    assert not [f for f in run.findings if f.code in ("HLT002", "HLT003")]


def test_as_served_is_what_the_engine_would_run(gptj_vllm, tmp_path_factory):
    # independently: the same GPT-J weights read as NeoX (the key dropped, which is how vLLM runs
    # them) give exactly the as_served path's per-prompt accepted lengths
    neox = _run(_draft(tmp_path_factory, "gptj-as-neox", gptj=True, cfg={}), "sglang")
    assert list(neox.paths) == ["serving"] and not [f for f in neox.findings if f.code.startswith("FWD")]
    assert neox.paths["serving"].accepted_lengths == gptj_vllm.paths["as_served"].accepted_lengths


def test_clean_counterpart_measures_one_path(tmp_path_factory):
    run = _run(_draft(tmp_path_factory, "gptj-sglang", gptj=True, cfg={"rope_is_neox_style": False}), "sglang")
    assert list(run.paths) == ["serving"] and not [f for f in run.findings if f.code.startswith("FWD")]


@pytest.mark.parametrize("gptj,fit", [(False, "NeoX"), (True, "GPT-J")])
def test_undetermined_layout_is_measured(tmp_path_factory, gptj, fit):
    # a Llama 4 draft that names no layout: inspect says undetermined (FWD007); acceptance runs both
    # layouts and names the one the weights fit
    run = _run(_draft(tmp_path_factory, f"llama4-{fit}", gptj=gptj, cfg={"model_type": "llama4_text"}), "sglang")
    assert list(run.paths) == ["serving", "gptj_rope"]
    (f,) = [f for f in run.findings if f.code.startswith("FWD")]
    assert f.code == "FWD007" and f.data["measured_fit"] == fit
    assert f"the weights fit {fit} RoPE" in f.evidence[-1]
    assert ("false" if fit == "GPT-J" else "true") in f.evidence[-1]


def test_norm_output_costs_nothing_at_step_1(tmp_path_factory):
    # vLLM 0.10.2 never reads norm_output: the served copy feeds back the pre-norm state, which
    # only steps >= 2 see
    import shutil

    d = tmp_path_factory.mktemp("drafts") / "spec-norm-output"
    shutil.copytree(DRAFTS["speculators"], d)
    c = json.loads((d / "config.json").read_text())
    c["norm_output"] = True
    (d / "config.json").write_text(json.dumps(c))
    run = acceptance(
        load_setup(target=str(TARGET), draft=str(d), engine="vllm", engine_version="0.10.2", dtype="float32", device="cpu"),
        **ARGS,
    )
    (f,) = [f for f in run.findings if f.code.startswith("FWD")]
    assert f.code == "FWD001" and f.data["flag"] == "norm_output"
    s, a = run.paths["serving"], run.paths["as_served"]
    assert a.acc_k[0] == s.acc_k[0] and f.data["measured_step1_difference"] == [0.0, 0.0, 0.0]
    assert a.acc_k[1] != s.acc_k[1]


def test_dropped_qk_norms_are_measured(tmp_path_factory):
    # SGLang runs a Qwen3 draft layer without its q/k norms: the served copy drops them
    import shutil

    d = tmp_path_factory.mktemp("drafts") / "spec-qwen3"
    shutil.copytree(DRAFTS["speculators"], d)
    g = torch.Generator().manual_seed(0)
    sd = load_file(d / "model.safetensors")
    sd.update({f"layers.0.self_attn.{n}_norm.weight": 1 + 0.3 * torch.randn(32, generator=g) for n in "qk"})
    save_file(sd, d / "model.safetensors")
    c = json.loads((d / "config.json").read_text())
    c["transformer_layer_config"]["model_type"] = "qwen3"
    (d / "config.json").write_text(json.dumps(c))
    run = acceptance(load_setup(target=str(TARGET), draft=str(d), engine="sglang", dtype="float32", device="cpu"), **ARGS)
    (f,) = [f for f in run.findings if f.code.startswith("FWD")]
    assert f.code == "FWD008" and list(run.paths) == ["serving", "as_served"]
    assert run.paths["as_served"].acc_k[0] != run.paths["serving"].acc_k[0]
    assert len(f.data["measured_step1_difference"]) == 3 and "as served" in " ".join(f.evidence)


def test_served_copy_shares_the_embeddings_and_runs_eager(setup_sglang):
    from eagle3_doctor.analyses.as_served import _eager_copy

    d = setup_sglang.draft
    c = _eager_copy(d)
    assert c.embed_tokens.weight is d.embed_tokens.weight  # no second [vocab, hidden] table
    assert c.config is not d.config and c.midlayer.self_attn.cfg is c.config  # flags flip on the copy only
    assert c.fc.weight is not d.fc.weight
