"""One matrix multiply over a layer's q, k and v rows (and gate and up's) where a decode step's few rows leave the
separate ones short of the FLOP rate (model.native.decoder, the ``joined`` family): the read lays each group's
tensors side by side, the decoder takes the joined route only where it may, and the features and tokens are the
separate route's."""

from __future__ import annotations

import torch
from conftest import TARGET

from eagle3_doctor.draft.gpu import kernels
from eagle3_doctor.model.native import decoder
from eagle3_doctor.model.native.plan import joined_groups, native_plan
from eagle3_doctor.model.native.read import joined_rows, read_tensors


def _plan():
    import json

    cfg = json.loads((TARGET / "config.json").read_text())
    return native_plan(str(TARGET), cfg, trust_remote_code=False, device_map=None)


def test_each_group_is_read_side_by_side_with_the_values_read_apart():
    plan = _plan()
    groups = joined_groups(plan.spec)
    assert groups[0] == tuple(f"model.layers.0.self_attn.{p}_proj.weight" for p in "qkv")
    assert groups[1] == ("model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight")
    apart = read_tensors(plan.files, torch.float32, torch.device("cpu"))
    for threaded in (False, True):
        side = read_tensors(plan.files, torch.float32, torch.device("cpu"), threaded=threaded, groups=groups)
        assert side.keys() == apart.keys()
        assert all(torch.equal(side[n], apart[n]) for n in apart)
        for g in groups:
            assert joined_rows([side[n] for n in g]) is not None
    # a group naming a tensor the files lack is read apart, as asked of no group
    odd = read_tensors(plan.files, torch.float32, torch.device("cpu"), groups=[(*groups[0], "model.layers.0.nothing")])
    assert joined_rows([odd[n] for n in groups[0]]) is None


def test_rows_joined_only_where_they_lie_one_after_another():
    buf = torch.arange(24.0)
    a, b = buf[:8].view(2, 4), buf[8:20].view(3, 4)
    assert torch.equal(joined_rows([a, b]), buf[:20].view(5, 4))
    assert joined_rows([b, a]) is None  # out of order
    assert joined_rows([a, buf[12:20].view(2, 4)]) is None  # a gap
    assert joined_rows([a, buf[8:20].view(4, 3)]) is None  # another row width
    assert joined_rows([a.clone(), b]) is None  # another storage


def _route(monkeypatch, on: bool):
    monkeypatch.setattr(kernels, "wanted", lambda family, device, dtype: on and family == "joined")


def test_the_decoder_over_joined_projections_gives_the_separate_ones_features_and_tokens(target, monkeypatch):
    from eagle3_doctor.model.static import greedy_static

    ids = target.tokenizer("def calendar module fractions import return")["input_ids"]
    batch, prompts = torch.tensor([ids, ids[::-1]]), [ids, ids[:3]]
    layer = target.model.model.layers[0]
    taken = []
    real = decoder._joined
    monkeypatch.setattr(decoder, "_joined", lambda x, *m: (lambda got: (taken.append(got is not None), got)[1])(real(x, *m)))
    _route(monkeypatch, True)
    joined_out = target.model.model(input_ids=batch, output_hidden_states=True)
    got = greedy_static(target, prompts, 6)
    assert taken and all(taken)  # every projection of every forward took the joined route
    assert decoder._joined(torch.zeros(1, 1, layer.mlp.gate_proj.in_features), layer.mlp.gate_proj, layer.mlp.up_proj)
    _route(monkeypatch, False)
    taken.clear()
    plain_out = target.model.model(input_ids=batch, output_hidden_states=True)
    assert taken and not any(taken)
    for a, b in zip(joined_out.hidden_states, plain_out.hidden_states):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    assert greedy_static(target, prompts, 6) == got


def test_no_joined_route_past_its_rows_over_a_hooked_module_or_weights_apart(target, monkeypatch):
    _route(monkeypatch, True)
    mlp = target.model.model.layers[0].mlp
    H = mlp.gate_proj.in_features
    assert decoder._joined(torch.zeros(decoder.JOINED_ROWS, H), mlp.gate_proj, mlp.up_proj) is not None
    assert decoder._joined(torch.zeros(decoder.JOINED_ROWS + 1, H), mlp.gate_proj, mlp.up_proj) is None
    handle = mlp.up_proj.register_forward_pre_hook(lambda m, a: a)  # a quantization's fake-quant hook, say
    try:
        assert decoder._joined(torch.zeros(4, H), mlp.gate_proj, mlp.up_proj) is None
    finally:
        handle.remove()
    assert decoder._joined(torch.zeros(4, H), mlp.up_proj, mlp.gate_proj) is None  # not in the order read
    assert decoder._joined(torch.zeros(4, H, dtype=torch.float64), mlp.gate_proj, mlp.up_proj) is None
