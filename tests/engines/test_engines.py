"""Engine and recipe rules on the symbolic path (docs/engine-sources.md quotes the source of each)."""

from __future__ import annotations

import functools
import itertools

import pytest
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.core.taps import embed, final_norm, layer_out
from eagle3_doctor.engines.capture import default_spec_llama
from eagle3_doctor.engines.fixes import ids_to_serve
from eagle3_doctor.engines.keys import IDS, NESTED, id_range
from eagle3_doctor.engines.recipes import training_spec
from eagle3_doctor.engines.releases import ENGINE_VERSIONS
from eagle3_doctor.engines.serving import resolve_serving

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
    # v1/worker/gpu_model_runner.py reads top-level then eagle_config (0.22+); Model Runner V2's
    # gpu/spec_decode/eagle/eagle3_utils.py reads the top level only, and a stock 0.33 launch runs V2
    assert resolve_serving("vllm", "0.33.0-v1", "llama", L, nested).spec == (layer_out(2), layer_out(3), layer_out(4))
    assert resolve_serving("vllm", "0.33.0-v2", "llama", L, nested).spec == default_spec_llama(L)
    assert resolve_serving("vllm", "0.33", "llama", L, nested).spec == default_spec_llama(L)
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
    # class 7, hand-read tensorrt_llm/_torch/speculative/eagle3.py: one-model (default) only sorts,
    # so -1 (final state) takes slot 0; the two-model Eagle3SpecMetadata moves it last
    assert serve("trtllm", override=[28, 1, 15]).spec == (layer_out(1), layer_out(15), layer_out(28))
    assert serve("trtllm", override=[-1, 1, 15]).spec == (final_norm(), layer_out(1), layer_out(15))
    assert serve("trtllm", override=[-1, 1, 15], version="1.2-two-model").spec == (layer_out(1), layer_out(15), final_norm())
    assert serve("trtllm", override=[2, 2, 15]).spec == (layer_out(2), layer_out(15))


def test_sglang_052_cuda_graph_note():
    s = serve("sglang", [0, 14, 27], version="0.5.2")
    assert any("CUDA graphs" in n for n in s.notes)
    assert not serve("sglang", [1, 15, 28], version="0.5.2").notes


def test_unknown_engine_and_version_are_bad_input():
    with pytest.raises(BadInput):
        serve("tgi")
    with pytest.raises(BadInput, match="not a release number"):
        serve("vllm", version="banana")
    with pytest.raises(BadInput, match="not modelled"):
        serve("trtllm", version="0.1")


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
@given(
    spec=st.lists(points, min_size=1, max_size=4, unique=True),
    engine=st.sampled_from(["sglang", "vllm", "trtllm", "modelopt"]),
    family=st.sampled_from(["llama", "deepseek", "gpt_oss"]),
)
def test_fix_is_the_inverse_of_the_rule(spec, engine, family):
    """Whatever ids the doctor prints, the engine's own rule maps them back onto the trained spec
    (that a fix is found whenever one exists: test_a_fix_is_found_whenever_one_exists)."""
    for version in ENGINE_VERSIONS[engine]:
        ids = ids_to_serve(engine, version, family, L, tuple(spec))
        if ids is not None:
            assert resolve_serving(engine, version, family, L, {}, ids).spec == tuple(spec)


SMALL = 8  # a depth small enough to enumerate every id list
SMALL_POINTS = [embed(), *(layer_out(i) for i in range(SMALL)), final_norm()]


@functools.cache
def _reachable(engine: str, version: str, family: str) -> frozenset:
    """Every spec that some list of 1..3 ids (each in the engine's id range) makes the engine feed."""
    lo, hi = id_range(engine, SMALL)
    out = set()
    for n in (1, 2, 3):
        for ids in itertools.product(range(lo, hi + 1), repeat=n):
            try:
                s = resolve_serving(engine, version, family, SMALL, {}, list(ids))
            except BadInput:
                continue
            if s.failure is None:  # ids the engine refuses or crashes on are no fix
                out.add(tuple(s.spec))
    return frozenset(out)


@pytest.mark.parametrize("engine", ["sglang", "vllm", "trtllm", "modelopt"])
def test_a_fix_is_found_whenever_one_exists(engine):
    """Exhaustive on an 8-layer target: for every spec of 1..3 distinct capture points, the doctor prints
    ids exactly when some id list serves the spec, and those ids serve it. The count of fixes is asserted,
    so a fix finder that returned nothing fails."""
    fixes = 0
    for version in ENGINE_VERSIONS[engine]:
        for family in ("llama", "deepseek", "gpt_oss"):
            reach = _reachable(engine, version, family)
            for n in (1, 2, 3):
                for spec in itertools.permutations(SMALL_POINTS, n):
                    ids = ids_to_serve(engine, version, family, SMALL, spec)
                    assert (ids is not None) == (spec in reach), (engine, version, family, spec, ids)
                    if ids is not None:
                        assert resolve_serving(engine, version, family, SMALL, {}, ids).spec == spec
                        fixes += 1
    assert fixes == sum(
        len({s for s in _reachable(engine, v, f) if s and len(set(s)) == len(s)})
        for v in ENGINE_VERSIONS[engine]
        for f in ("llama", "deepseek", "gpt_oss")
    )
    assert fixes > 0


# --------------------------------------------------------------------------- engine truth: the executed table
# Each test names the upstream file it models; the SGLang/vLLM rows are also checked case by case
# against the executed table in tests/engines/test_conformance.py.


def test_sglang_052_has_no_eagle3_for_deepseek():
    # sglang 0.5.2 srt/models/deepseek_v2.py defines no set_eagle3_layers_to_capture; model_runner.py calls it
    s = serve("sglang", [2, 30, 58], version="0.5.2", family="deepseek", n=61)
    assert s.failure and s.failure.when == "start-up" and "set_eagle3_layers_to_capture" in s.failure.message
    from eagle3_doctor.analyses.compare.symbolic import diagnose_specs

    f = diagnose_specs((layer_out(2), layer_out(30), layer_out(58)), "t", s)
    assert [x.code for x in f] == ["ENG001"] and "0.5.4.post2" in f[0].fix


@pytest.mark.parametrize("family", ["mistral", "deepseek", "gpt_oss"])
def test_vllm_0102_refuses_targets_outside_llama_qwen(family):
    # vllm 0.10.2 config/__init__.py: eagle3_target_supported = ["llama", "qwen"]
    s = serve("vllm", version="0.10.2", family=family)
    assert s.failure and "only supported for ['llama', 'qwen']" in s.failure.message


def test_vllm_0102_qwen3_moe_has_no_supportseagle3():
    # vllm 0.10.2 model_executor/models/qwen3_moe.py: no SupportsEagle3 -> gpu_model_runner.py raises at load
    s = serve("vllm", version="0.10.2", family="qwen3_moe")
    assert s.failure and "does not support EAGLE3" in s.failure.message


def test_seed_minus_one_is_a_first_forward_failure_on_sglang_0523():
    # sglang 0.5.23 srt/models/deepseek_v2.py sizes AuxHiddenStatePacker by the id count;
    # srt/layers/aux_hidden_states.py asserts "captured 2 of 3 aux hidden states"
    s = serve("sglang", [-1, 2, 30], family="deepseek", n=61)
    assert s.failure and s.failure.when == "first forward" and "captured 2 of 3" in s.failure.message
    from eagle3_doctor.analyses.compare.symbolic import diagnose_specs

    f = diagnose_specs((layer_out(2), layer_out(30), layer_out(58)), "t", s)
    assert f[0].code == "ENG002" and "[3, 31, 59]" in f[0].fix
    # a build patched to map -1 to the embeddings: the quiet mismatch, CAP002
    p = serve("sglang", [-1, 2, 30], family="deepseek", n=61, version="0.5.23+minus-one-embed")
    assert p.failure is None and p.spec[0] == embed()
    assert "CAP002" in [x.code for x in diagnose_specs((layer_out(2), layer_out(30), layer_out(58)), "t", p)]


def test_sglang_qwen3_moe_id_past_the_last_layer_raises():
    # sglang srt/models/qwen2_moe.py Qwen2MoeModel.set_eagle3_layers_to_capture indexes self.layers[id + 1]
    s = serve("sglang", [1, 15, L - 1], family="qwen3_moe")
    assert s.failure and s.failure.when == "start-up" and "IndexError" in s.failure.message
    assert serve("sglang", [1, 15, L - 1], family="llama").failure is None  # llama.py just drops it


def test_sglang_052_minus_one_crashes_llama_but_not_qwen():
    # sglang 0.5.2 srt/models/llama.py appends hidden_states + residual unguarded; qwen2.py guards it
    assert serve("sglang", [-1, 2, 16], version="0.5.2").failure.when == "first forward"
    assert serve("sglang", [-1, 2, 16], version="0.5.2", family="gpt_oss").failure is not None
    assert serve("sglang", [-1, 2, 16], version="0.5.2", family="qwen").spec[0] == embed()


def test_capture_is_in_layer_order_once_per_layer():
    # sglang srt/models/llama.py: `if i in self.layers_to_capture` inside the layer loop
    assert serve("sglang", [30, 2, 28]).spec == (layer_out(2), layer_out(28), layer_out(30))
    assert serve("sglang", [2, 2, 30]).spec == (layer_out(2), layer_out(30))
    # modelopt torch/speculative/plugins/hf_eagle.py: one forward hook per layer, in layer order; but its draft
    # fc takes len(ids) x hidden inputs (plugins/modeling_eagle.py), so a duplicate is a first-forward shape error
    # (executed from 0.35.0-0.47.0 by conformance/modelopt_exec.py)
    assert serve("modelopt", override=[9, 3, 5]).spec == (layer_out(3), layer_out(5), layer_out(9))
    s = serve("modelopt", override=[3, 3, 9])
    assert s.failure.when == "first forward" and "mat1 and mat2" in s.failure.message


def test_modelopt_default_collapses_below_seven_layers():
    # modelopt 0.47 plugins/hf_eagle.py default_eagle_aux_layer_ids: sorted({1, max(0, L//2-1), max(0, L-4)})
    from eagle3_doctor.engines.capture import modelopt_default_ids

    assert {n: modelopt_default_ids(n) for n in (4, 5, 6, 7)} == {4: [0, 1], 5: [1], 6: [1, 2], 7: [1, 2, 3]}
    assert serve("modelopt", n=5).spec == (layer_out(1),)
    assert serve("modelopt", n=6).spec == (layer_out(1), layer_out(2))
    # the recipe refuses ids ModelOpt training would crash on
    with pytest.raises(BadInput, match="modelopt 0.47.0 fails on these ids"):
        training_spec("modelopt:2,2,5", 8)
    # releases before the hook capture are not modelled; any covered release string maps to the executed rule
    with pytest.raises(BadInput, match="before 0.35.0"):
        serve("modelopt", version="0.33.1")
    assert serve("modelopt", [1, 4, 6], version="0.40.0", n=8).spec == (layer_out(1), layer_out(4), layer_out(6))


def test_vllm_deepseek_captures_before_each_layer():
    # vllm model_executor/models/deepseek_v2.py: `if idx in self.aux_hidden_state_layers` before the layer
    for v in ("0.18.0", "0.33.0"):
        assert serve("vllm", [0, 2, 16], version=v, family="deepseek").failure.when == "first forward"
    assert serve("vllm", [2, 16, L], version="0.18.0", family="deepseek").spec == (layer_out(1), layer_out(15))
    assert serve("vllm", [2, 16, L], version="0.33.0", family="deepseek").spec == (layer_out(1), layer_out(15), layer_out(L - 1))


def test_vllm_033_default_runner_ignores_the_nested_key():
    # vllm 0.33 v1/worker/gpu/spec_decode/eagle/eagle3_utils.py (Model Runner V2) reads the top level only
    s = resolve_serving("vllm", "0.33", "llama", L, {NESTED: [3, 16, 30]})
    assert s.spec == default_spec_llama(L) and NESTED in s.ignored


def test_sglang_use_aux_hidden_state_false_turns_capture_off():
    # sglang model_runner.py reads eagle_config.use_aux_hidden_state (0.5.8+)
    s = resolve_serving("sglang", "0.5.23", "llama", L, {NESTED: [1, 15, 28]}, use_aux_hidden_state=False)
    assert s.spec == ()
    assert resolve_serving("sglang", "0.5.2", "llama", L, {NESTED: [1, 15, 28]}, use_aux_hidden_state=False).spec != ()


def test_any_release_string_maps_to_its_row():
    for v in ("0.33", "0.33.1", "0.34.0", "0.28.0"):
        assert serve("vllm", [1, 15, 28], version=v).spec == (layer_out(0), layer_out(14), layer_out(27))
    assert serve("sglang", [2, 30, 58], version="0.5.99", family="deepseek", n=61).failure is None


def test_seed_is_consistent_on_plain_plus_one_deepseek_releases_and_one_layer_early_later():
    # sglang srt/models/deepseek_v2.py: plain +1 up to 0.5.12.post1, `ids[0] == 1` from 0.5.13
    trained = (layer_out(2), layer_out(30), layer_out(58))
    for v in ("0.5.5", "0.5.10", "0.5.12.post1"):
        assert serve("sglang", [2, 30, 58], version=v, family="deepseek", n=61).spec == trained
    for v in ("0.5.15", "0.5.23"):
        assert serve("sglang", [2, 30, 58], version=v, family="deepseek", n=61).spec == (
            layer_out(1),
            layer_out(29),
            layer_out(57),
        )


@pytest.mark.parametrize("engine", ["sglang", "vllm", "trtllm", "modelopt"])
def test_inspect_and_compare_hidden_take_the_same_ids(engine):
    from eagle3_doctor.analyses.inspect.config_checks import _ids_in_range

    for n in (8, 24, 61):
        for i in range(-3, n + 3):
            refused = False
            try:
                resolve_serving(engine, None, "gpt_oss", n, {}, [i])
            except BadInput:
                refused = True
            assert refused == bool(_ids_in_range([i], n, engine)), (engine, n, i)


def test_docs_engine_table_is_generated_from_the_engine_table():
    from eagle3_doctor.engines.table_markdown import engine_table_markdown

    doc = (ROOT / "docs" / "engine-table.md").read_text()
    inner = doc.split("<!-- engine-table:begin -->\n", 1)[1].split("<!-- engine-table:end -->", 1)[0]
    assert inner == engine_table_markdown(), "docs/engine-table.md is stale: regenerate it (see its header)"
    assert "docs/engine-table.md" in (ROOT / "README.md").read_text()


# --------------------------------------------------------------------------- SGLang families with their own setter
# Each row below was executed from the release by `make conformance` (conformance/sglang_exec.py FAMILIES);
# tests/engines/test_conformance.py checks every case, these pin the behaviour a user meets, file by file.


@pytest.mark.parametrize(
    "config,family",
    [
        ({"model_type": "glm4_moe_lite", "architectures": ["Glm4MoeLiteForCausalLM"]}, "glm4_moe_lite"),
        ({"model_type": "glm4_moe", "architectures": ["Glm4MoeForCausalLM"]}, "glm4_moe"),
        ({"model_type": "minimax_m2", "architectures": ["MiniMaxM2ForCausalLM"]}, "minimax_m2"),
        ({"model_type": "kimi_linear", "architectures": ["KimiLinearForCausalLM"]}, "kimi_linear"),
        ({"model_type": "kimi_k25", "architectures": ["KimiK25ForConditionalGeneration"]}, "kimi_k25"),
        ({"model_type": "kimi_k2", "architectures": ["DeepseekV3ForCausalLM"]}, "deepseek"),
        ({"model_type": "llama4", "architectures": ["Llama4ForConditionalGeneration"]}, "llama4"),
        ({"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"]}, "gemma3"),
        ({"model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"]}, "gemma3_text"),
        ({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}, "llama"),
    ],
)
def test_arch_family_names_the_sglang_file_that_decides(config, family):
    from eagle3_doctor.engines.families import arch_family

    assert arch_family(config) == family


def _codes(s, train):
    from eagle3_doctor.analyses.compare.symbolic import diagnose_specs

    return diagnose_specs(tuple(train), "t", s)


def test_glm4_moe_lite_uses_the_deepseek_rule():
    # sglang 0.5.23 srt/models/glm4_moe_lite.py Glm4MoeLiteForCausalLM.set_eagle3_layers_to_capture: +1 only when
    # ids[0] == 1; 0.5.8-0.5.12 the class inherits deepseek_v2.py's plain +1 setter
    n = 61
    assert serve("sglang", [2, 30, 58], family="glm4_moe_lite", n=n).spec == (layer_out(1), layer_out(29), layer_out(57))
    assert serve("sglang", [1, 29, 57], family="glm4_moe_lite", n=n).spec == (layer_out(1), layer_out(29), layer_out(57))
    assert serve("sglang", [2, 30, 58], version="0.5.10", family="glm4_moe_lite", n=n).spec == (
        layer_out(2),
        layer_out(30),
        layer_out(58),
    )
    # no packer in glm4_moe_lite.py: -1 matches no layer and the capture is quietly two slots
    assert serve("sglang", [-1, 2, 30], family="glm4_moe_lite", n=n).spec == (layer_out(1), layer_out(29))


def test_glm4_moe_and_minimax_m2_add_one_and_crash_on_minus_one_before_the_boundary_rewrite():
    # sglang srt/models/glm4_moe.py and minimax_m2.py: `[val + 1 for val in layer_ids]`; the decoder loop appends
    # `hidden_states + residual` with residual None before layer 0 until the layer-boundary capture
    for fam, crash, ok in (("glm4_moe", "0.5.20", "0.5.21"), ("minimax_m2", "0.5.10", "0.5.11")):
        assert serve("sglang", [1, 15, 28], family=fam).spec == (layer_out(1), layer_out(15), layer_out(28))
        s = serve("sglang", [-1, 2, 16], version=crash, family=fam)
        assert s.failure and s.failure.when == "first forward"
        assert [f.code for f in _codes(s, (embed(), layer_out(2), layer_out(16)))] == ["ENG002"]
        assert serve("sglang", [-1, 2, 16], version=ok, family=fam).spec == (embed(), layer_out(2), layer_out(16))
    # before the setter existed, the model runner's call raises at start-up
    s = serve("sglang", [1, 15, 28], version="0.5.4", family="glm4_moe")
    assert s.failure.when == "start-up" and "Glm4MoeForCausalLM" in s.failure.message


def test_kimi_linear_has_no_eagle3_in_any_sglang_release():
    # sglang srt/models/kimi_linear.py: KimiLinearForCausalLM never defines set_eagle3_layers_to_capture
    for v in ("0.5.5", "0.5.23"):
        s = serve("sglang", [1, 15, 28], version=v, family="kimi_linear")
        assert s.failure.when == "start-up" and "set_eagle3_layers_to_capture" in s.failure.message
        f = _codes(s, default_spec_llama(L))
        assert [x.code for x in f] == ["ENG001"] and "another engine" in f[0].fix
    # a release whose model registry does not know the architecture refuses even with capture off
    s = resolve_serving("sglang", "0.5.3", "kimi_linear", L, {NESTED: [1, 15, 28]}, use_aux_hidden_state=False)
    assert s.failure and "not supported for now" in s.failure.message


def test_kimi_k25_delegates_to_its_deepseek_language_model():
    # sglang srt/models/kimi_k25.py KimiK25ForConditionalGeneration.set_eagle3_layers_to_capture hands the ids to
    # self.language_model (deepseek_v2.py DeepseekV3ForCausalLM); 0.5.9 had no setter at all
    s = serve("sglang", [2, 30, 58], version="0.5.9", family="kimi_k25", n=61)
    f = _codes(s, (layer_out(2), layer_out(30), layer_out(58)))
    assert [x.code for x in f] == ["ENG001"] and "0.5.10" in f[0].fix
    assert serve("sglang", [2, 30, 58], version="0.5.10", family="kimi_k25", n=61).spec == (
        layer_out(2),
        layer_out(30),
        layer_out(58),
    )
    # from 0.5.17 the DeepSeek AuxHiddenStatePacker asserts the count: the seed's [-1, 2, 30] crashes
    s = serve("sglang", [-1, 2, 30], family="kimi_k25", n=61)
    assert s.failure.when == "first forward" and "captured 2 of 3" in s.failure.message


def test_llama4_delegates_to_llama4_causal_lm():
    # sglang srt/models/mllama4.py Llama4ForConditionalGeneration -> llama4.py Llama4ForCausalLM (llama.py setter, +1)
    assert serve("sglang", [1, 15, 28], family="llama4").spec == (layer_out(1), layer_out(15), layer_out(28))
    assert serve("sglang", [1, 15, 28], version="0.4.8", family="llama4").failure.when == "start-up"
    assert serve("sglang", [-1, 2, 16], version="0.5.20", family="llama4").failure.when == "first forward"


def test_gemma3_sglang_0517_captures_the_mlp_branch_not_the_residual_stream():
    # sglang srt/models/gemma3_causal.py Gemma3TextModel.forward appends the bare `hidden_states`; from 0.5.17
    # Gemma3DecoderLayer returns (mlp branch, residual) ("Keep the residual live across layers"), so the capture
    # is the branch. 0.5.12-0.5.16 returned the full stream; id L-1 (+1 = L) captures the last layer's output.
    for fam in ("gemma3", "gemma3_text"):
        assert serve("sglang", [1, 15, L - 1], version="0.5.16", family=fam).spec == (
            layer_out(1),
            layer_out(15),
            layer_out(L - 1),
        )
        s = serve("sglang", [1, 15, 28], family=fam)
        assert s.failure and s.failure.when == "serving" and "mlp_branch[1]" in s.failure.message
        f = _codes(s, (layer_out(1), layer_out(15), layer_out(28)))
        assert [x.code for x in f] == ["ENG003"] and ">= 0.5.12 and < 0.5.17" in f[0].fix
        assert serve("sglang", [1, 15, 28], version="0.5.11", family=fam).failure.when == "start-up"


def test_trtllm_slot_no_layer_writes_is_uninitialized_memory():
    # TensorRT-LLM tensorrt_llm/_torch/speculative/eagle3.py (@001e6700): maybe_capture_hidden_states writes slot i
    # only when layer layers_to_capture[i] runs; the buffer is torch.empty (Eagle3ResourceManager l.44-47, and
    # Eagle3OneModelSpecMetadata.__post_init__), so id L leaves its slot holding whatever memory it was given
    s = serve("trtllm", override=[1, 15, L])
    assert s.failure and s.failure.when == "serving" and "slot(s) 2 (id 32)" in s.failure.message
    f = _codes(s, (layer_out(1), layer_out(15), layer_out(28)))
    assert [x.code for x in f] == ["ENG003"] and "eagle3_layers_to_capture: [1, 15, 28]" in f[0].fix
    # ids past L stay refused as out of range, by inspect and compare-hidden alike
    with pytest.raises(BadInput):
        serve("trtllm", override=[1, 15, L + 1])


def test_trtllm_default_needs_six_layers_and_repeats_a_slot_at_six():
    # eagle3.py __post_init__ (l.109-111 @001e6700): no eagle3_layers_to_capture and num_layers <= 5 -> ValueError;
    # at 6 layers the default tuple (1, 2, 2) is no set: the second 2 matches the `break`-ed slot, never written
    s = serve("trtllm", n=5)
    assert s.failure.when == "start-up" and "Not enough hidden layers" in s.failure.message
    assert [x.code for x in _codes(s, (layer_out(1), layer_out(2), layer_out(3)))] == ["ENG001"]
    assert serve("trtllm", n=6).failure.when == "serving"
    assert serve("trtllm", n=7).spec == (layer_out(1), layer_out(2), layer_out(3))
    assert serve("trtllm", override=[1, 2, 3], n=5).spec == (layer_out(1), layer_out(2), layer_out(3))


def test_train_recipes_are_rows_of_the_engine_table():
    # one list: --train-recipe, its help and its error text read RECIPE_TABLE, whose recipes run the engine rules
    from eagle3_doctor.engines.recipes import RECIPE_TABLE, RECIPES
    from eagle3_doctor.engines.releases import MODELOPT_NEWEST, NEWEST

    assert (RECIPE_TABLE["specforge"].engine, RECIPE_TABLE["specforge"].version) == ("sglang", NEWEST["sglang"])
    assert (RECIPE_TABLE["speculators"].engine, RECIPE_TABLE["speculators"].version) == ("vllm", NEWEST["vllm"])
    assert (RECIPE_TABLE["modelopt"].engine, RECIPE_TABLE["modelopt"].version) == ("modelopt", MODELOPT_NEWEST)
    with pytest.raises(BadInput) as e:
        training_spec("nemo", L)
    assert all(r in e.value.fix for r in RECIPES)
    # no ids: the engine's own default, so ModelOpt's set default on a 5-layer target is one state
    assert training_spec("modelopt", 5)[0] == (layer_out(1),)
    assert training_spec("hf:2,16,29", L)[0] == default_spec_llama(L)
    from eagle3_doctor.cli.options import TRAIN_RECIPE

    assert all(r in str(TRAIN_RECIPE.annotation.__metadata__[0].help) for r in RECIPES if r != "draft-config")


def test_vllm_families_sglang_models_with_their_own_setter():
    # executed from every vllm release (conformance/vllm_exec.py FAMILIES); each names the vllm file it models
    # model_executor/models/glm4_moe.py, glm4_moe_lite.py, gemma3.py / gemma3_mm.py: never SupportsEagle3
    for fam in ("glm4_moe", "glm4_moe_lite", "gemma3", "gemma3_text"):
        for v in ("0.18.0", "0.33.0"):
            s = serve("vllm", [2, 16, 29], version=v, family=fam)
            assert s.failure and s.failure.when == "start-up", (fam, v)
    # minimax_m2.py: in the target check from 0.19.1 but SupportsEagle3 only from 0.20.0 (after-layer capture)
    assert "EAGLE3" in serve("vllm", [2, 16, 29], version="0.19.1", family="minimax_m2").failure.message
    assert serve("vllm", [0, 2, L], version="0.20.0", family="minimax_m2").spec == (embed(), layer_out(1), layer_out(L - 1))
    # kimi_k25.py builds a DeepseekV2ForCausalLM language model: the deepseek before-layer loop (id 0 crashes)
    assert serve("vllm", [0, 2, 16], version="0.18.0", family="kimi_k25").failure.when == "first forward"
    f = _codes(serve("vllm", [2, 16, 29], version="0.15.0", family="kimi_k25"), default_spec_llama(L))
    assert [x.code for x in f] == ["ENG001"] and "0.18.0" in f[0].fix
    # mllama4.py -> Llama4ForCausalLM (llama.py loop): SupportsEagle3 from 0.11.1
    assert serve("vllm", [2, 16, 29], version="0.10.2", family="llama4").failure.when == "start-up"
    assert serve("vllm", [2, 16, 29], version="0.33.0-v1", family="llama4").spec == (layer_out(1), layer_out(15), layer_out(28))
    # vllm/models/kimi_k3 (0.27+) serves Kimi-Linear with a capture the harness records but does not execute:
    # undetermined, never guessed
    s = serve("vllm", [2, 16, 29], version="0.33.0", family="kimi_linear")
    assert s.failure.when == "undetermined" and "kimi_k3" in s.failure.message and not s.spec
    assert serve("vllm", [2, 16, 29], version="0.26.0", family="kimi_linear").failure.when == "start-up"
