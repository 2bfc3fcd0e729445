"""The capture vocabulary and its hooks, pinned to transformers' output_hidden_states."""

from __future__ import annotations

import pytest
import torch
from conftest import assert_hooks_match_hidden_states

from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.core.taps import (
    TapRecorder,
    all_points,
    embed,
    final_norm,
    from_hs_index,
    layer_out,
    parse_point,
    parse_spec,
    to_hs_index,
)


def test_hooks_match_output_hidden_states(target):
    """hs[0]==embed, hs[i]==layer_out[i-1], hs[L]==final_norm (post-norm), on the installed transformers."""
    model, L = target.model, target.num_layers
    ids = target.tokenizer("def f(x):\n    return x + 1\n", return_tensors="pt")["input_ids"]
    got, hs = assert_hooks_match_hidden_states(model, ids)
    # the pre-norm output of the last layer is a different tensor and is never in the tuple
    assert not torch.allclose(got[layer_out(L - 1)], hs[L])
    torch.testing.assert_close(model.model.norm(got[layer_out(L - 1)]), hs[L])


def test_recorder_keeps_only_requested_points(target):
    ids = torch.tensor([[5, 6, 7, 8]])

    def hooks():  # transformers may keep hooks of its own; ours must all be gone on exit
        return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in target.model.modules())

    before = hooks()
    with torch.no_grad(), TapRecorder(target.model, [layer_out(2), layer_out(0)]) as rec:
        assert hooks() == before + 2
        target.model(input_ids=ids)
        got = rec.take()
    assert set(got) == {layer_out(2), layer_out(0)}
    assert hooks() == before


def test_hs_index_mapping_both_ways():
    L = 8
    assert from_hs_index(0, L) == embed()
    assert from_hs_index(3, L) == layer_out(2)
    assert from_hs_index(8, L) == final_norm()
    assert from_hs_index(-1, L) == final_norm()
    assert from_hs_index(-2, L) == layer_out(6)
    for p in all_points(L):
        i = to_hs_index(p, L)
        if p == layer_out(L - 1):
            assert i is None
        else:
            assert from_hs_index(i, L) == p
    with pytest.raises(BadInput):
        from_hs_index(9, L)


def test_parse_and_print_round_trip():
    spec = parse_spec("embed, layer_out[3],final_norm")
    assert spec == (embed(), layer_out(3), final_norm())
    assert parse_point(str(layer_out(11))) == layer_out(11)
    with pytest.raises(ValueError):  # no index aliases the embeddings: that is an engine rule, not the vocabulary
        layer_out(-1)
    with pytest.raises(BadInput, match="embed"):
        parse_point("layer_out[-1]")
    with pytest.raises(BadInput):
        parse_point("layer[3]")


def test_out_of_range_point_is_bad_input(target):
    with pytest.raises(BadInput, match="does not exist"):
        TapRecorder(target.model, [layer_out(target.num_layers)])
