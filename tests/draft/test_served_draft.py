"""The draft as each engine runs it vs as it was trained: every case names its cause, its
printed fix, applied to the fixture copy, makes the finding go away, and each clean twin stays quiet.

The cases of one FWD finding on one engine, fixed by a config edit or named with a fix, are rows of
tests/test_finding_cases.py; here are those across releases, RoPE, the layout and multi-layer drafts."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from conftest import DRAFTS, TARGET, paste_printed_fix, two_layer_draft
from safetensors.torch import load_file, save_file

from eagle3_doctor.analyses.inspect.inspection import inspect


def fwd(res, code=None):
    return [f for f in res.findings if f.code.startswith("FWD") and (code is None or f.code == code)]


def _edit(d, cfg=None, weights=None):
    if cfg:
        c = json.loads((d / "config.json").read_text())
        cfg(c)
        (d / "config.json").write_text(json.dumps(c))
    if weights:
        sd = load_file(d / "model.safetensors")
        weights(sd)
        save_file(sd, d / "model.safetensors")


def apply_fix(d, fix: str) -> None:
    """Apply a printed config fix exactly as written to the draft directory's config.json."""
    c = json.loads((d / "config.json").read_text())
    assert paste_printed_fix(c, fix), f"not a config fix: {fix}"
    (d / "config.json").write_text(json.dumps(c))


def _eagle_with_input_norm(tmp_copy, name, where):
    """The EAGLE-format fixture trained with input_norm, the flag written nested or at the top level."""
    d = tmp_copy(DRAFTS["eagle"], name)

    def cfg(c):
        c.pop("norm_before_fc", None)
        if where == "nested":
            c.setdefault("eagle_config", {})["norm_before_fc"] = True
        else:
            c["norm_before_fc"] = True

    _edit(d, cfg=cfg, weights=lambda sd: sd.update({"input_norm.weight": 1.5 * torch.ones(384)}))
    return d


def test_vllm_0_18_reads_norm_before_fc_at_the_top_level_only(tmp_copy):
    """Executed (conformance/draft_exec.py): vLLM 0.18.0's draft reads getattr(config, "norm_before_fc"),
    and eagle_config first only from 0.22.0; the nested form is a determined finding, the top level quiet."""
    nested = _eagle_with_input_norm(tmp_copy, "nested", "nested")
    (f,) = fwd(inspect(str(TARGET), str(nested), engine="vllm", engine_version="0.18.0"))
    assert f.code == "FWD001" and f.data == {"flag": "norm_before_fc", "trained": True, "served": False}
    assert "never reads eagle_config.norm_before_fc" in " ".join(f.evidence)
    assert "vllm 0.18.0-0.18.1 vllm/model_executor/models/llama_eagle3.py, executed" in " ".join(f.evidence)
    assert f.fix == 'set "norm_before_fc": true in the draft\'s config.json'
    apply_fix(nested, f.fix)
    assert fwd(inspect(str(TARGET), str(nested), engine="vllm", engine_version="0.18.0")) == []
    top = _eagle_with_input_norm(tmp_copy, "top", "top")
    assert fwd(inspect(str(TARGET), str(top), engine="vllm", engine_version="0.18.0")) == []
    fresh = _eagle_with_input_norm(tmp_copy, "nested-again", "nested")
    assert fwd(inspect(str(TARGET), str(fresh), engine="vllm", engine_version="0.22.0")) == []


def test_norm_output_not_read_by_an_old_vllm(tmp_copy):
    d = tmp_copy(DRAFTS["speculators"])
    _edit(d, cfg=lambda c: c.update(norm_output=True))
    res = inspect(str(TARGET), str(d), engine="vllm", engine_version="0.10.2")
    (f,) = fwd(res)
    assert f.data == {"flag": "norm_output", "trained": True, "served": False}
    # the executed draft table: vLLM's speculators translation passes norm_output on from 0.25.0
    assert "upgrade to vLLM >= 0.25.0, which reads it" in f.fix and "conformance/draft_exec.py" in " ".join(f.evidence)
    assert fwd(inspect(str(TARGET), str(d), engine="vllm", engine_version="0.25.0")) == []
    assert fwd(inspect(str(TARGET), str(d), engine="vllm", engine_version="0.24.0"))
    # the fix: a release that reads it
    assert fwd(inspect(str(TARGET), str(d), engine="vllm", engine_version="0.33.0")) == []
    # clean twin: the fixture itself under the same old version
    assert fwd(inspect(str(TARGET), str(DRAFTS["speculators"]), engine="vllm", engine_version="0.10.2")) == []


def _same_vocab_draft(d):
    """A speculators draft whose vocabulary is the target's, with its own (trained) head."""

    def w(sd):
        g = torch.Generator().manual_seed(0)
        sd["lm_head.weight"] = torch.randn(320, 128, generator=g) * 0.05
        sd["d2t"] = torch.zeros(320, dtype=torch.long)
        sd["t2d"] = torch.ones(320, dtype=torch.bool)

    _edit(d, cfg=lambda c: c.update(draft_vocab_size=320), weights=w)


def test_overwritten_head(tmp_copy):
    d = tmp_copy(DRAFTS["speculators"])
    _same_vocab_draft(d)
    (f,) = fwd(inspect(str(TARGET), str(d), engine="vllm", engine_version="0.10.2"))
    assert f.code == "FWD003" and f.data["weight"] == "lm_head" and "PR #28549" in f.fix
    assert "--engine-version 0.33.0" in f.fix
    assert fwd(inspect(str(TARGET), str(d), engine="vllm", engine_version="0.33.0")) == []


@pytest.mark.parametrize("fmt,engine", [("sglang", "sglang"), ("speculators", "vllm"), ("sglang", "vllm")])
def test_clean_fixtures_run_as_trained(fmt, engine):
    assert fwd(inspect(str(TARGET), str(DRAFTS[fmt]), engine=engine)) == []


# ---------------------------------------------------------------------------- vocabulary and RoPE


def test_absolute_d2t_named_and_fixed(tmp_copy):
    d = tmp_copy(DRAFTS["sglang"])
    _edit(d, weights=lambda sd: sd.update(d2t=sd["d2t"] + torch.arange(sd["d2t"].numel())))  # absolute ids
    res = inspect(str(TARGET), str(d), engine="sglang")
    (f,) = [f for f in res.findings if f.code == "DRF003"]
    assert "absolute target ids" in f.title and "exactly the ids t2d marks" in " ".join(f.evidence)
    assert "d2t - arange" in f.fix
    # the fix, as printed
    _edit(d, weights=lambda sd: sd.update(d2t=sd["d2t"] - torch.arange(sd["d2t"].numel())))
    assert [f for f in inspect(str(TARGET), str(d), engine="sglang").findings if f.code.startswith("DRF")] == []


def _rope(res):
    return [f for f in res.findings if f.code in ("CFG003", "CFG004")]


YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256}


def _target_with(tmp_copy, **kw):
    t = tmp_copy(TARGET, "target")
    _edit(t, cfg=lambda c: c.update(kw))
    return t


@pytest.mark.parametrize("fmt", ["sglang", "speculators"])
def test_same_rope_in_two_layouts_is_quiet(tmp_copy, fmt):
    # target in the transformers-5 layout, draft in the transformers-4 layout: the same RoPE
    t = _target_with(tmp_copy, rope_parameters={"rope_theta": 10000.0, **YARN})
    d = tmp_copy(DRAFTS[fmt])
    layer = (lambda c: c["transformer_layer_config"]) if fmt == "speculators" else (lambda c: c)
    _edit(d, cfg=lambda c: layer(c).update(rope_theta=10000.0, rope_scaling=dict(YARN)))
    assert _rope(inspect(str(t), str(d), engine="sglang")) == []


@pytest.mark.parametrize("fmt", ["sglang", "speculators"])
def test_dropped_rope_scaling_gets_a_fix_in_the_drafts_layout(tmp_copy, fmt):
    t = _target_with(tmp_copy, rope_parameters={"rope_theta": 10000.0, **YARN})
    d = tmp_copy(DRAFTS[fmt])  # the draft's converter dropped the yarn scaling
    (f,) = _rope(inspect(str(t), str(d), engine="sglang"))
    assert f.code == "CFG004" and "rope_type" in f.title
    assert "rope_theta" not in f.fix  # never copies rope_theta into rope_scaling
    apply_fix(d, f.fix)
    assert _rope(inspect(str(t), str(d), engine="sglang")) == []


def test_partial_rotary_factor_compared_across_layouts(tmp_copy):
    t = _target_with(tmp_copy, rope_parameters={"rope_theta": 10000.0, "rope_type": "default", "partial_rotary_factor": 0.5})
    d = tmp_copy(DRAFTS["sglang"])
    (f,) = _rope(inspect(str(t), str(d), engine="sglang"))
    assert "partial_rotary_factor" in f.title
    apply_fix(d, f.fix)
    assert _rope(inspect(str(t), str(d), engine="sglang")) == []


def test_yarn_draft_loads_and_rotates_as_transformers_does(tmp_copy):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    from eagle3_doctor.draft.formats import read_draft
    from eagle3_doctor.draft.rope import apply_rope

    d = tmp_copy(DRAFTS["sglang"])
    _edit(d, cfg=lambda c: c.update(rope_scaling=dict(YARN)))
    draft, _ = read_draft(d)
    attn = draft.midlayer.self_attn
    assert attn.rope_scale > 1  # yarn's attention factor
    hf = LlamaConfig(
        hidden_size=128,
        num_attention_heads=4,
        head_dim=32,
        max_position_embeddings=1024,
        rope_parameters={"rope_theta": 10000.0, **YARN},
    )
    x, pos = torch.randn(1, 4, 40, 32), torch.arange(40)[None]
    cos, sin = LlamaRotaryEmbedding(hf)(x, pos)
    ref, _ = apply_rotary_pos_emb(x, x, cos, sin)
    torch.testing.assert_close(apply_rope(x, pos, draft.inv_freq, attn.rope_scale), ref, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "rope",
    [
        None,
        {"rope_type": "linear", "factor": 2.0},
        {"type": "dynamic", "factor": 2.0},
        {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 256,
        },
        {"rope_type": "longrope", "short_factor": [1.0] * 16, "long_factor": [2.0] * 16, "original_max_position_embeddings": 256},
    ],
)
def test_every_rope_type_matches_transformers(rope):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    from eagle3_doctor.draft.config import DraftConfig
    from eagle3_doctor.draft.rope import rope_tables

    cfg = DraftConfig(
        hidden_size=128,
        intermediate_size=256,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=8,
        draft_vocab_size=8,
        head_dim=32,
        rope_theta=5e4,
        rope_scaling=rope,
        max_position_embeddings=1024,
    )
    inv, scale = rope_tables(cfg)
    rp = {**(rope or {}), "rope_theta": 5e4}
    if "type" in rp:
        rp["rope_type"] = rp.pop("type")
    rp.setdefault("rope_type", "default")
    emb = LlamaRotaryEmbedding(
        LlamaConfig(hidden_size=128, num_attention_heads=4, head_dim=32, max_position_embeddings=1024, rope_parameters=rp)
    )
    torch.testing.assert_close(inv, emb.inv_freq.float(), rtol=0, atol=0)
    assert scale == pytest.approx(emb.attention_scaling)


# ---------------------------------------------------------------------------- RoPE layout (GPT-J vs NeoX)


def _gptj_rows(w: torch.Tensor, n: int, d: int) -> torch.Tensor:
    """NeoX-ordered q/k rows -> the GPT-J order a draft trained interleaved holds (the inverse of
    the doctor's printed fix): row 2j <- j, row 2j+1 <- j + d/2, per head."""
    x = w.reshape(n, d, -1)
    return torch.stack([x[:, : d // 2], x[:, d // 2 :]], dim=2).reshape(w.shape)


def _interleaved_draft(tmp_copy, fmt="sglang", key=True):
    """The fixture draft turned into the same function trained under GPT-J RoPE: q/k rows permuted,
    and (key=True) the layout declared with SGLang's key."""
    d = tmp_copy(DRAFTS[fmt], f"{fmt}-gptj")

    def w(sd):
        for k in list(sd):
            if ".q_proj." in k or ".k_proj." in k:
                sd[k] = _gptj_rows(sd[k], 4 if ".q_proj." in k else 2, 32)

    _edit(d, cfg=(lambda c: c.update(rope_is_neox_style=False)) if key else None, weights=w)
    return d


def _logits(path, steps=3):
    from eagle3_doctor.draft.formats import read_draft

    g = torch.Generator().manual_seed(3)
    aux, ids = torch.randn(1, 40, 384, generator=g), torch.randint(0, 320, (1, 40), generator=g)
    temb = load_file(TARGET / "model.safetensors")["model.embed_tokens.weight"]
    d, _ = read_draft(path, device="cpu", dtype=torch.float32, target_embed=temb)
    with torch.no_grad():
        return torch.stack([d.logits(h) for h in d.unroll(aux, ids, steps)])


@pytest.mark.parametrize("partial", [1.0, 0.5])
def test_interleaved_rope_is_transformers_gptj_rotation(partial):
    # the doctor's GPT-J layout (a permutation of q and k before its NeoX rotation) gives the same
    # attention scores as transformers' own interleaved RoPE (GLM's apply_rotary_pos_emb)
    from transformers import LlamaConfig
    from transformers.models.glm.modeling_glm import apply_rotary_pos_emb
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    from eagle3_doctor.draft.config import DraftConfig
    from eagle3_doctor.draft.rope import apply_rope, neox_order, rope_tables

    cfg = DraftConfig(
        hidden_size=128,
        intermediate_size=256,
        num_attention_heads=4,
        num_key_value_heads=4,
        vocab_size=8,
        draft_vocab_size=8,
        head_dim=32,
        rope_interleaved=True,
        extra={"partial_rotary_factor": partial} if partial < 1 else {},
    )
    inv, scale = rope_tables(cfg)
    rot = 2 * inv.numel()
    g = torch.Generator().manual_seed(0)
    q, k, pos = torch.randn(1, 4, 24, 32, generator=g), torch.randn(1, 4, 24, 32, generator=g), torch.arange(24)[None]
    ours = apply_rope(neox_order(q, rot), pos, inv, scale) @ apply_rope(neox_order(k, rot), pos, inv, scale).transpose(-1, -2)
    # transformers' own cos/sin layout over the rotary dims ([freqs, freqs], as LlamaRotaryEmbedding
    # returns them; checked against it for the full head), handed to GLM's interleaved application
    emb = torch.cat([pos[..., None].float() * inv, pos[..., None].float() * inv], dim=-1)
    cos, sin = emb.cos() * scale, emb.sin() * scale
    if partial == 1.0:
        hf = LlamaConfig(hidden_size=128, num_attention_heads=4, head_dim=32, rope_parameters={"rope_theta": 10000.0})
        torch.testing.assert_close((cos, sin), LlamaRotaryEmbedding(hf)(q, pos))
    rq, rk = apply_rotary_pos_emb(q, k, cos, sin)
    torch.testing.assert_close(ours, rq @ rk.transpose(-1, -2), rtol=1e-5, atol=1e-5)
    # and it is not NeoX: the plain rotation of the same q, k differs
    neox = apply_rope(q, pos, inv, scale) @ apply_rope(k, pos, inv, scale).transpose(-1, -2)
    assert (neox - ours).abs().max() > 1e-2


def test_interleaved_draft_runs_as_trained(tmp_copy):
    # a GPT-J-trained draft (the fixture's function with its q/k rows in GPT-J order) declared with
    # rope_is_neox_style=false: the doctor runs it exactly as the NeoX original
    d = _interleaved_draft(tmp_copy)
    torch.testing.assert_close(_logits(d), _logits(DRAFTS["sglang"]), rtol=1e-5, atol=1e-5)
    # SGLang reads the key: quiet
    assert fwd(inspect(str(TARGET), str(d), engine="sglang")) == []


def test_interleaved_draft_under_vllm_is_named_and_fixed(tmp_copy):
    d = _interleaved_draft(tmp_copy)
    (f,) = fwd(inspect(str(TARGET), str(d), engine="vllm"))
    assert f.code == "FWD006" and f.data == {"trained_interleaved": True, "served_interleaved": False}
    assert "rope_is_neox_style = false" in f.evidence[0] and "llama.py:241" in f.evidence[1]
    before = _logits(d)
    # the printed fix, as printed: the python rewrite, then the config key
    code = f.fix.split("(python, for each *.safetensors file p: ", 1)[1].rsplit(")", 1)[0]
    exec(code, {"p": str(d / "model.safetensors")})
    apply_fix(d, 'set "rope_is_neox_style": true in the draft\'s config.json')
    assert '"rope_is_neox_style": true' in f.fix
    assert fwd(inspect(str(TARGET), str(d), engine="vllm")) == []
    assert fwd(inspect(str(TARGET), str(d), engine="sglang")) == []
    # the rewrite keeps the trained function: same logits, now under NeoX
    torch.testing.assert_close(_logits(d), before, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("where", ["draft", "target"])
def test_llama4_layout_undetermined_until_written(tmp_copy, where):
    d = tmp_copy(DRAFTS["sglang"])
    t = TARGET
    if where == "draft":
        _edit(d, cfg=lambda c: c.update(model_type="llama4_text"))
    else:
        t = _target_with(tmp_copy, model_type="llama4_text")
    (f,) = fwd(inspect(str(t), str(d), engine="sglang"))
    assert f.code == "FWD007" and "Llama 4" in f.evidence[0] and f.data["trained"] is None
    apply_fix(d, 'set "rope_is_neox_style": true in the draft\'s config.json')  # the fix's NeoX branch
    assert fwd(inspect(str(t), str(d), engine="sglang")) == []


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_neox_fixtures_stay_quiet_about_rope(engine):
    for fmt in ("sglang", "speculators", "eagle"):
        assert [f for f in fwd(inspect(str(TARGET), str(DRAFTS[fmt]), engine=engine)) if f.code in ("FWD006", "FWD007")] == []


# ---------------------------------------------------------------------------- Qwen3 draft layers (q/k norms)


def _qwen3_draft(tmp_copy, fmt="speculators"):
    """The fixture with a Qwen3 draft layer: q_norm/k_norm weights (not all ones, so they matter)
    and, in the speculators format, transformer_layer_config.model_type qwen3."""
    d = tmp_copy(DRAFTS[fmt], f"{fmt}-qwen3")
    pre = "layers.0.self_attn." if fmt == "speculators" else "midlayer.self_attn."
    g = torch.Generator().manual_seed(0)
    _edit(
        d,
        cfg=(lambda c: c["transformer_layer_config"].update(model_type="qwen3")) if fmt == "speculators" else None,
        weights=lambda sd: sd.update(
            {
                pre + "q_norm.weight": 1 + 0.3 * torch.randn(32, generator=g),
                pre + "k_norm.weight": 1 + 0.3 * torch.randn(32, generator=g),
            }
        ),
    )
    return d


def test_qwen3_layer_served_by_vllm_033_is_quiet(tmp_copy):
    d = _qwen3_draft(tmp_copy)
    res = inspect(str(TARGET), str(d), engine="vllm")
    assert fwd(res) == [] and not [f for f in res.findings if f.code == "DRF010"]  # the norms are used, not unexpected


def test_qwen3_layer_in_sglang_format_needs_the_qwen3_architecture_in_vllm(tmp_copy):
    d = _qwen3_draft(tmp_copy, "sglang")
    res = inspect(str(TARGET), str(d), engine="vllm")
    (f,) = fwd(res)
    assert f.code == "FWD008" and "weights hold self_attn.q_norm.weight" in f.evidence[0]
    apply_fix(d, f.fix)
    res = inspect(str(TARGET), str(d), engine="vllm")
    assert fwd(res) == [] and not [f for f in res.findings if f.code == "CFG007"]


# --------------------------------------------------------------------------- multi-layer drafts, per release
# Each row below is the release's own llama_eagle3.py constructed for num_hidden_layers = 2 and its
# decoder layers run on symbols (conformance/draft_exec.py -> eagle3_doctor/data/draft_serving.json).


@pytest.mark.parametrize(
    ("engine", "version", "first"),
    [("sglang", "0.5.11", "SGLang >= 0.5.12"), ("vllm", "0.10.2", "vLLM >= 0.11.1")],
)
def test_a_release_that_cannot_serve_two_layers_says_so(tmp_path, engine, version, first):
    d = two_layer_draft(tmp_path / "d2")
    (f,) = [x for x in fwd(inspect(str(TARGET), str(d), engine=engine, engine_version=version)) if x.code == "FWD010"]
    assert f.data["layers"] == 2 and f.fix.startswith(f"upgrade to {first}")
    ev = " ".join(f.evidence)
    assert "executed (conformance/draft_exec.py)" in ev
    assert ("EAGLE3 currently only supports 1 layer" in ev) if engine == "sglang" else ("built 1" in ev)


def test_sglang_normalises_later_layers_with_hidden_norm_and_the_rename_fixes_it(tmp_path):
    d = two_layer_draft(tmp_path / "d2")
    (f,) = [x for x in fwd(inspect(str(TARGET), str(d), engine="sglang", engine_version="0.5.23")) if x.code == "FWD009"]
    assert f.data == {"layers": 2, "served_norm": "hidden_norm", "trained_norm": "input_layernorm"}
    assert f.edit.op == "rewrite" and "vLLM >= 0.11.1" in f.fix
    # vLLM applies the trained input_layernorm: quiet there, and no FWD010 from 0.11.1 on
    assert not [
        x for x in fwd(inspect(str(TARGET), str(d), engine="vllm", engine_version="0.33.0")) if x.code in ("FWD009", "FWD010")
    ]
    assert not [
        x for x in fwd(inspect(str(TARGET), str(d), engine="vllm", engine_version="0.11.1")) if x.code in ("FWD009", "FWD010")
    ]
    # the fix's own code, applied to a copy: quiet under SGLang, and now vLLM is the one that misses its norm
    fixed = tmp_path / "fixed"
    shutil.copytree(d, fixed)
    exec(f.edit.snippet, {"p": str(fixed / "model.safetensors")})
    assert not [x for x in fwd(inspect(str(TARGET), str(fixed), engine="sglang", engine_version="0.5.23")) if x.code == "FWD009"]
    (g,) = [x for x in fwd(inspect(str(TARGET), str(fixed), engine="vllm", engine_version="0.33.0")) if x.code == "FWD009"]
    assert g.data["served_norm"] == "input_layernorm" and "SGLang >= 0.5.12" in g.fix
    assert "DRF012" not in {x.code for x in inspect(str(TARGET), str(fixed), engine="sglang").findings}


# --------------------------------------------------------------------------- the attention window, per release
# Each release's draft is built on its own llama.py LlamaDecoderLayer/LlamaAttention from a config declaring a
# sliding layer, and the window its attention backend gets is read back (conformance/draft_exec.py probe_window).


def _sliding_draft(tmp_copy, name: str, window: int = 64):
    d = tmp_copy(DRAFTS["sglang"], name)
    _edit(d, cfg=lambda c: c.update({"sliding_window": window, "layer_types": ["sliding_attention"]}))
    return d


@pytest.mark.parametrize(
    ("engine", "version", "fix"),
    [
        ("vllm", "0.10.0", "upgrade to vLLM >= 0.10.2"),
        ("sglang", "0.5.11", "upgrade to SGLang >= 0.5.12 and launch with --speculative-draft-window-size 64"),
        ("sglang", "0.5.23", "launch with --speculative-draft-window-size 64"),
    ],
)
def test_a_release_that_drops_the_draft_s_window_says_so(tmp_copy, engine, version, fix):
    d = _sliding_draft(tmp_copy, f"swa-{engine}-{version}")
    (f,) = fwd(inspect(str(TARGET), str(d), engine=engine, engine_version=version), "FWD011")
    assert f.severity == "error" and f.fix.startswith(fix), f.fix
    assert f.data["window"] == 64 and f.data["applied"] is False
    ev = " ".join(f.evidence)
    assert "layer_types [0] sliding_attention" in ev and "executed (conformance/draft_exec.py)" in ev
    assert "builds the attention with no window" in ev


def test_vllm_0_10_1_fails_at_start_up_on_the_draft_s_layer_types(tmp_copy):
    # llama.py indexes layer_types with the draft layer's own id (target layers + i) before 0.10.2 subtracts them
    d = _sliding_draft(tmp_copy, "swa-vllm-0101")
    (f,) = fwd(inspect(str(TARGET), str(d), engine="vllm", engine_version="0.10.1"), "FWD011")
    assert "fails at start-up" in f.title and "IndexError" in " ".join(f.evidence)
    assert f.fix.startswith("upgrade to vLLM >= 0.10.2")


@pytest.mark.parametrize("version", ["0.10.2", "0.33.0"])
def test_a_release_that_applies_the_window_is_quiet(tmp_copy, version):
    d = _sliding_draft(tmp_copy, f"swa-ok-{version}")
    assert not fwd(inspect(str(TARGET), str(d), engine="vllm", engine_version=version), "FWD011")
    # and a draft without a sliding layer is quiet on a release that drops windows
    plain = tmp_copy(DRAFTS["sglang"], f"swa-plain-{version}")
    _edit(plain, cfg=lambda c: c.update({"sliding_window": 64, "layer_types": ["full_attention"]}))
    assert not fwd(inspect(str(TARGET), str(plain), engine="sglang", engine_version="0.5.23"), "FWD011")


def test_the_sglang_window_fix_is_the_server_argument_as_an_edit(tmp_copy):
    d = _sliding_draft(tmp_copy, "swa-edit", window=32)
    (f,) = fwd(inspect(str(TARGET), str(d), engine="sglang", engine_version="0.5.17"), "FWD011")
    assert (f.edit.file, f.edit.key, f.edit.value, f.edit.op) == (
        "server launch command",
        "--speculative-draft-window-size",
        32,
        "set",
    )
    assert f.edit.snippet == "--speculative-draft-window-size 32" and f.data["server_argument"] is True
