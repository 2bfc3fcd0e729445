"""The doctor's draft forward against speculators' and specforge's own Eagle3 draft modules.

Every flag combination each package can write, random weights, float32, steps 1..3: logits agree
to 1e-5 relative. On CI both packages are installed (Makefile, --no-deps); a test skips only where
one cannot be imported, with the reason.
"""

from __future__ import annotations

import itertools
import json
import os

import oracles
import pytest
import torch
from conftest import DRAFTS

TOL = 1e-5
STEPS = 3


def _speculators():
    try:
        return oracles.speculators_eagle3()
    except ImportError as e:  # pragma: no cover - CI installs it
        if os.environ.get("EAGLE3_DOCTOR_ORACLES") == "required":  # make test / CI: never skip silently
            raise
        pytest.skip(f"speculators {oracles.SPECULATORS_VERSION} not importable: {e}")


def _specforge():
    try:
        return oracles.specforge_eagle3()
    except ImportError as e:  # pragma: no cover - CI installs it
        if os.environ.get("EAGLE3_DOCTOR_ORACLES") == "required":  # make test / CI: never skip silently
            raise
        pytest.skip(f"specforge {oracles.SPECFORGE_VERSION} not importable: {e}")


def _inputs(seed, H, V, T=24):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, T, 3 * H, generator=g) * 2, torch.randint(0, V, (1, T), generator=g)


def _speculators_model(sp, flags, layer=None):
    raw = json.loads((DRAFTS["speculators"] / "config.json").read_text())
    raw.pop("speculators_version", None)
    raw.update(flags)
    raw["transformer_layer_config"].update(layer or {})
    cfg = sp.Config(**raw)
    cfg.transformer_layer_config._attn_implementation = "sdpa"
    return sp.Model(cfg).float().eval()


# speculators 0.9.0 can write: norm_before_residual x norm_output x {no fc norm, norm_before_fc, fc_norm}
SPECULATORS_FLAGS = [
    dict(norm_before_residual=r, norm_output=o, norm_before_fc=fc == "input_norm", fc_norm=fc == "fc_norm")
    for r, o, fc in itertools.product([False, True], [False, True], ["none", "input_norm", "fc_norm"])
]


@pytest.mark.parametrize("flags", SPECULATORS_FLAGS, ids=lambda f: ",".join(k for k, v in f.items() if v) or "plain")
def test_matches_speculators_for_every_flag_combination(flags, tmp_path):
    sp = _speculators()
    model = _speculators_model(sp, flags)
    V, Vd, H = model.verifier_vocab_size, model.draft_vocab_size, model.hidden_size
    oracles.randomize(model, seed=sum(1 << i for i, v in enumerate(flags.values()) if v), vocab=V, draft_vocab=Vd)
    model.save_pretrained(tmp_path / "d")  # speculators writes the checkpoint, the doctor reads it
    aux, ids = _inputs(1, H, V)
    ref = oracles.speculators_logits(model, aux, ids, STEPS)
    ours = oracles.doctor_logits(tmp_path / "d", aux, ids, STEPS, first_position=1)  # speculators counts from 1
    errs = oracles.max_rel_err(ours, ref)
    assert max(errs) < TOL, errs
    # the case is not vacuous: the flags change the logits against the plain draft
    if any(flags.values()):
        for flag in (k for k, v in flags.items() if v):
            other = oracles.doctor_logits(tmp_path / "d", aux, ids, STEPS, first_position=1, override={flag: False})
            assert max(oracles.max_rel_err(other, ref)) > 1e-3, flag


# speculators 0.9.0 also drafts with a Qwen3 decoder layer (q_norm/k_norm before RoPE) when the
# layer config's model_type is qwen3 (models/eagle3/model_definitions.py:136-143)
QWEN3 = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]}


@pytest.mark.parametrize(
    "flags", [SPECULATORS_FLAGS[0], dict(SPECULATORS_FLAGS[-1])], ids=lambda f: ",".join(k for k, v in f.items() if v) or "plain"
)
def test_matches_speculators_qwen3_draft_layer(flags, tmp_path):
    sp = _speculators()
    model = _speculators_model(sp, flags, QWEN3)
    assert any(k.endswith("q_norm.weight") for k in model.state_dict())
    V, Vd, H = model.verifier_vocab_size, model.draft_vocab_size, model.hidden_size
    oracles.randomize(model, seed=11, vocab=V, draft_vocab=Vd)
    model.save_pretrained(tmp_path / "d")
    aux, ids = _inputs(5, H, V)
    ref = oracles.speculators_logits(model, aux, ids, STEPS)
    ours = oracles.doctor_logits(tmp_path / "d", aux, ids, STEPS, first_position=1)
    assert max(oracles.max_rel_err(ours, ref)) < TOL
    # the q/k norms matter: without them the logits move
    other = oracles.doctor_logits(tmp_path / "d", aux, ids, STEPS, first_position=1, override={"qk_norm": False})
    assert max(oracles.max_rel_err(other, ref)) > 1e-3


def test_speculators_rejects_both_fc_norms():
    sp = _speculators()
    with pytest.raises(Exception, match="mutually exclusive"):
        _speculators_model(sp, dict(norm_before_fc=True, fc_norm=True))


def test_matches_speculators_on_the_fixture(target):
    sp = _speculators()
    model = _speculators_model(sp, {})
    from safetensors.torch import load_file

    sd = load_file(DRAFTS["speculators"] / "model.safetensors")
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected and set(missing) <= {"embed_tokens.weight", "verifier_lm_head.weight", "verifier_norm.weight"}
    with torch.no_grad():
        model.embed_tokens.weight.copy_(target.embed_weight())
    aux, ids = _inputs(2, model.hidden_size, model.verifier_vocab_size)
    ref = oracles.speculators_logits(model, aux, ids, STEPS)
    ours = oracles.doctor_logits(DRAFTS["speculators"], aux, ids, STEPS, first_position=1, target_embed=target.embed_weight())
    assert max(oracles.max_rel_err(ours, ref)) < TOL


def _specforge_model(cls, flags):
    from transformers import LlamaConfig

    raw = json.loads((DRAFTS["sglang"] / "config.json").read_text())
    raw.update(flags)
    cfg = LlamaConfig(**raw)
    return cls(cfg, attention_backend="sdpa").float().eval()


# specforge 0.2.0 can write: fc_norm x norm_output (its "norm before lm_head", default True)
SPECFORGE_FLAGS = [dict(fc_norm=f, norm_output=o) for f, o in itertools.product([False, True], [False, True])]


@pytest.mark.parametrize("flags", SPECFORGE_FLAGS, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()))
def test_matches_specforge_for_every_flag_combination(flags, tmp_path):
    cls = _specforge()
    model = _specforge_model(cls, flags)
    V, Vd, H = model.vocab_size, model.draft_vocab_size, model.config.hidden_size
    oracles.randomize(model, seed=3 + 2 * flags["fc_norm"] + flags["norm_output"], vocab=V, draft_vocab=Vd)
    # SpecForge's export drops every key containing "embed": the doctor gets the target's embeddings
    sd = {k: v for k, v in model.state_dict().items() if "embed" not in k}
    model.save_pretrained(tmp_path / "d", state_dict=sd)
    aux, ids = _inputs(4, H, V)
    ref = oracles.specforge_logits(model, aux, ids, STEPS)
    ours = oracles.doctor_logits(
        tmp_path / "d", aux, ids, STEPS, first_position=0, target_embed=model.embed_tokens.weight.detach()
    )
    errs = oracles.max_rel_err(ours, ref)
    assert max(errs) < TOL, errs
    for flag, field, value in (("fc_norm", "fc_norm", False), ("norm_output", "norm_before_lm_head", True)):
        if flags[flag] != (flag == "norm_output"):  # the non-default setting must matter
            other = oracles.doctor_logits(
                tmp_path / "d",
                aux,
                ids,
                STEPS,
                first_position=0,
                target_embed=model.embed_tokens.weight.detach(),
                override={field: value},
            )
            assert max(oracles.max_rel_err(other, ref)) > 1e-3, flag


def test_matches_specforge_on_the_fixture(target):
    cls = _specforge()
    model = _specforge_model(cls, {})
    from safetensors.torch import load_file

    sd = load_file(DRAFTS["sglang"] / "model.safetensors")
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected and set(missing) <= {"embed_tokens.weight"}
    with torch.no_grad():
        model.embed_tokens.weight.copy_(target.embed_weight())
    aux, ids = _inputs(5, model.config.hidden_size, model.vocab_size)
    ref = oracles.specforge_logits(model, aux, ids, STEPS)
    ours = oracles.doctor_logits(DRAFTS["sglang"], aux, ids, STEPS, first_position=0, target_embed=target.embed_weight())
    assert max(oracles.max_rel_err(ours, ref)) < TOL


# speculators 0.9.0 builds num_hidden_layers decoder layers: the EAGLE-3 first layer, then the verifier's
# own decoder layer class over the first layer's output (models/eagle3/core.py:80-94, forward 286-298)
MULTI = [dict(SPECULATORS_FLAGS[0]), dict(norm_before_residual=True, norm_output=True, norm_before_fc=False, fc_norm=True)]


@pytest.mark.parametrize("layers", [2, 3])
@pytest.mark.parametrize("flags", MULTI, ids=lambda f: ",".join(k for k, v in f.items() if v) or "plain")
def test_matches_speculators_multi_layer_draft(flags, layers, tmp_path):
    from safetensors.torch import load_file, save_file

    sp = _speculators()
    model = _speculators_model(sp, flags, {"num_hidden_layers": layers})
    assert len(model.layers) == layers
    V, Vd, H = model.verifier_vocab_size, model.draft_vocab_size, model.hidden_size
    oracles.randomize(model, seed=20 + layers, vocab=V, draft_vocab=Vd)
    model.save_pretrained(tmp_path / "d")
    aux, ids = _inputs(7, H, V)
    ref = oracles.speculators_logits(model, aux, ids, STEPS)
    ours = oracles.doctor_logits(tmp_path / "d", aux, ids, STEPS, first_position=1)
    assert max(oracles.max_rel_err(ours, ref)) < TOL
    # the later layers matter: the same checkpoint cut to its first layer misses the reference
    sd = load_file(tmp_path / "d" / "model.safetensors")
    save_file(
        {k: v for k, v in sd.items() if not k.startswith(tuple(f"layers.{i}." for i in range(1, layers)))},
        tmp_path / "d" / "model.safetensors",
    )
    cut = oracles.doctor_logits(tmp_path / "d", aux, ids, STEPS, first_position=1)
    assert max(oracles.max_rel_err(cut, ref)) > 1e-3


def test_multi_layer_unroll_equals_sequential_extend(tmp_path):
    """Teacher-forced unroll and the KV-cache forward agree step by step for a 2-layer draft."""
    from eagle3_doctor.draft.formats import read_draft
    from eagle3_doctor.draft.model import DraftCache

    sp = _speculators()
    model = _speculators_model(sp, dict(SPECULATORS_FLAGS[0]), {"num_hidden_layers": 2})
    oracles.randomize(model, seed=3, vocab=model.verifier_vocab_size, draft_vocab=model.draft_vocab_size)
    model.save_pretrained(tmp_path / "d")
    d, _ = read_draft(tmp_path / "d", device="cpu", dtype=torch.float32)
    assert d.config.num_hidden_layers == 2
    aux, ids = _inputs(9, model.hidden_size, model.verifier_vocab_size, T=10)
    pos = torch.arange(10)[None]
    with torch.no_grad():
        h1, h2 = list(d.unroll(aux, ids, 2, positions=pos))
        cache = DraftCache()
        s1 = d.extend(aux, ids, pos, cache, from_aux=True)  # step 1 over every position at once
        assert len(cache.later) == 1 and cache.later[0].length == 10
        t = 4  # step 2 at position t: the fed-back state of t with token x_{t+2}, at position t+1
        s2 = d.extend(s1[:, t : t + 1], ids[:, t + 1 : t + 2], pos[:, t : t + 1] + 1, _prefix(cache, t + 1), from_aux=False)
    torch.testing.assert_close(s1, h1, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(s2[:, 0], h2[:, t], rtol=1e-5, atol=1e-5)


def _prefix(cache, n):
    """The cache of the first n positions, every layer."""
    from eagle3_doctor.draft.model import DraftCache

    return DraftCache(cache.k[:, :, :n], cache.v[:, :, :n], [_prefix(c, n) for c in cache.later])


@pytest.mark.parametrize("head_dim", [32, 64, 80, 128])
@pytest.mark.parametrize("theta", [10000.0, 500000.0, 1e6])
@pytest.mark.parametrize("partial", [None, 0.5])
def test_the_default_rope_equals_transformers_bit_for_bit(head_dim, theta, partial):
    """rope_tables computes the default type itself (no transformers import in inspect); transformers'
    own function gives the same frequencies and scale, to the bit."""
    from eagle3_doctor.draft.config import DraftConfig
    from eagle3_doctor.draft.rope import rope_tables, rope_tables_transformers

    cfg = DraftConfig(
        hidden_size=4 * head_dim,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=head_dim,
        intermediate_size=8,
        vocab_size=16,
        draft_vocab_size=16,
        rope_theta=theta,
        extra={"partial_rotary_factor": partial} if partial else {},
    )
    fast, ref = rope_tables(cfg), rope_tables_transformers(cfg)
    assert fast[1] == ref[1] and fast[0].dtype == ref[0].dtype
    assert torch.equal(fast[0], ref[0])
