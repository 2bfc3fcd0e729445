"""Engine and recipe rules on the symbolic path (docs/engine-sources.md quotes the source of each)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eagle3_doctor.engines import (
    ENGINE_VERSIONS, NESTED, IDS, default_spec_llama, ids_to_serve, resolve_serving, training_spec,
)
from eagle3_doctor.errors import BadInput
from eagle3_doctor.taps import embed, final_norm, layer_out

L = 32


def serve(engine, ids=None, key=None, version=None, family="llama", n=L, override=None):
    cfg = {} if ids is None else {key or (NESTED if engine in ("sglang", "modelopt") else IDS): ids}
    return resolve_serving(engine, version, family, n, cfg, override)


def test_every_default_is_the_same_three_states():
    want = default_spec_llama(L)
    assert want == (layer_out(1), layer_out(15), layer_out(28))
    for engine in ("sglang", "vllm", "trtllm", "modelopt", "eagle"):
        assert serve(engine).spec == want, engine
    for recipe in ("eagle-default", "specforge", "speculators", "modelopt", "hf-hidden-states:2,16,29"):
        assert training_spec(recipe, L)[0] == want, recipe


def test_same_list_means_different_layers_in_sglang_and_vllm():
    # vLLM PR #43671 / SGLang PR #25454: [1, 15, 28] is layer_out[1,15,28] in SGLang, [0,14,27] in vLLM
    assert serve("sglang", [1, 15, 28]).spec == (layer_out(1), layer_out(15), layer_out(28))
    assert serve("vllm", [1, 15, 28]).spec == (layer_out(0), layer_out(14), layer_out(27))


def test_writing_the_sglang_default_out_explicitly_shifts_every_slot():
    assert serve("sglang", [2, 16, 29]).spec == (layer_out(2), layer_out(16), layer_out(29))


def test_seed_case_deepseek_61_layers():
    n = 61
    trained = (layer_out(2), layer_out(30), layer_out(58))
    assert serve("sglang", [2, 30, 58], family="deepseek", n=n).spec == (layer_out(1), layer_out(29), layer_out(57))
    # DeepSeek rule: +1 only when ids[0] == 1; the inverse finds ids that serve the training spec
    ids = ids_to_serve("sglang", None, "deepseek", n, trained)
    assert serve("sglang", ids, family="deepseek", n=n).spec == trained
    # Llama rule: [2, 30, 58] serves layer_out[2,30,58]; [-1, 2, 30] puts embed first
    assert serve("sglang", [2, 30, 58], n=n).spec == trained
    assert serve("sglang", [-1, 2, 30], n=n).spec == (embed(), layer_out(2), layer_out(30))


def test_sglang_reads_only_the_nested_key():
    s = serve("sglang", [1, 2, 3], key=IDS)
    assert s.spec == default_spec_llama(L) and s.ids is None
    assert s.ignored == {IDS: [1, 2, 3]}


def test_vllm_versions_read_different_keys():
    nested = {NESTED: [3, 4, 5]}
    assert resolve_serving("vllm", "0.33.0", "llama", L, nested).spec == (layer_out(2), layer_out(3), layer_out(4))
    assert resolve_serving("vllm", "0.33.0-v2", "llama", L, nested).spec == default_spec_llama(L)
    assert resolve_serving("vllm", "0.18.0", "llama", L, nested).ignored == nested
    top = {IDS: [3, 4, 5]}
    assert resolve_serving("vllm", "0.10.2", "llama", L, top).spec == default_spec_llama(L)


def test_vllm_sorts_and_reaches_the_pre_norm_last_layer():
    s = serve("vllm", [L, 2, 16])
    assert s.spec == (layer_out(1), layer_out(15), layer_out(L - 1))
    assert s.notes and "sorts" in s.notes[0]
    assert serve("vllm", [0, 2, 3]).spec[0] == embed()


def test_sglang_llama_never_captures_past_the_last_layer():
    s = serve("sglang", [1, 15, L - 1])
    assert len(s.spec) == 2 and s.dropped and s.dropped[0][0] == L


def test_gpt_oss_rule():
    n = 24
    assert serve("sglang", [2, 12, 24], family="gpt_oss", n=n).spec == (layer_out(1), layer_out(11), layer_out(23))
    assert serve("sglang", [1, 11, 20], family="gpt_oss", n=n).spec == (layer_out(1), layer_out(11), layer_out(20))


def test_trtllm_sorts_and_minus_one_is_the_final_state():
    assert serve("trtllm", override=[28, 1, 15]).spec == (layer_out(1), layer_out(15), layer_out(28))
    assert serve("trtllm", override=[-1, 1, 15]).spec == (layer_out(1), layer_out(15), final_norm())


def test_sglang_052_cuda_graph_note():
    s = serve("sglang", [0, 14, 27], version="0.5.2")
    assert any("CUDA graphs" in n for n in s.notes)
    assert not serve("sglang", [1, 15, 28], version="0.5.2").notes


def test_unknown_engine_and_version_are_bad_input():
    with pytest.raises(BadInput):
        serve("tgi")
    with pytest.raises(BadInput, match="not modelled"):
        serve("vllm", version="0.1")


def test_recipes():
    assert training_spec("hf-hidden-states:0,16,-1", L)[0] == (embed(), layer_out(15), final_norm())
    assert training_spec("specforge:1,3,4", 8)[0] == (layer_out(1), layer_out(3), layer_out(4))
    assert training_spec("speculators:2,4,5", 8)[0] == (layer_out(1), layer_out(3), layer_out(4))
    with pytest.raises(BadInput):
        training_spec("hf-hidden-states:1,x", L)
    with pytest.raises(BadInput):
        training_spec("nope", L)


points = st.one_of(st.just(embed()), st.integers(0, L - 1).map(layer_out), st.just(final_norm()))


@settings(max_examples=300, deadline=None)
@given(spec=st.lists(points, min_size=1, max_size=4, unique=True),
       engine=st.sampled_from(["sglang", "vllm", "trtllm", "modelopt"]),
       family=st.sampled_from(["llama", "deepseek", "gpt_oss"]))
def test_fix_is_the_inverse_of_the_rule(spec, engine, family):
    """Whatever ids the doctor prints, the engine's own rule maps them back onto the trained spec."""
    for version in ENGINE_VERSIONS[engine]:
        ids = ids_to_serve(engine, version, family, L, tuple(spec))
        if ids is not None:
            assert resolve_serving(engine, version, family, L, {}, ids).spec == tuple(spec)
