"""DFlash taps: the index semantics (id i is layer_out[i]), each engine's reading of the config, SGLang's
guess when target_layer_ids is missing, and the findings inspect draws from them."""

from __future__ import annotations

from eagle3_doctor.core.taps import layer_out
from eagle3_doctor.draft.dflash.taps import build_target_layer_ids, served_taps, trained_taps
from eagle3_doctor.drafters.dflash.analysis import dflash_findings


def test_the_guess_is_sglangs_formula():
    # Qwen3-4B (36 layers) with a 5-layer draft: the taps DFlash/DSpark recipes publish for it
    assert build_target_layer_ids(36, 5) == [1, 9, 17, 25, 33]
    assert build_target_layer_ids(8, 1) == [4]
    assert build_target_layer_ids(8, 2) == [1, 5]


def test_dflash_ids_are_after_the_layer_and_both_engines_agree():
    cfg = {"num_hidden_layers": 2, "dflash_config": {"target_layer_ids": [1, 4]}}
    t = trained_taps(cfg, 8)
    assert t.spec == (layer_out(1), layer_out(4)) and not t.guessed
    for engine in ("sglang", "vllm"):
        s = served_taps(engine, cfg, 8)
        assert s is not None and s.spec == t.spec, engine
        assert dflash_findings(t, s, 2) == []


def test_eagle_ids_copied_without_the_offset_shift_every_tap_in_vllm_only():
    """vLLM reads a top-level eagle_aux_hidden_state_layer_ids first, as vLLM ids (k is layer_out[k-1])."""
    cfg = {"num_hidden_layers": 2, "dflash_config": {"target_layer_ids": [1, 4]}, "eagle_aux_hidden_state_layer_ids": [1, 4]}
    t = trained_taps(cfg, 8)
    vllm = served_taps("vllm", cfg, 8)
    assert vllm is not None and vllm.spec == (layer_out(0), layer_out(3))
    (f,) = dflash_findings(t, vllm, 2)
    assert f.code == "DFL001" and f.edit is not None
    assert (f.edit.key, f.edit.value) == ("eagle_aux_hidden_state_layer_ids", [2, 5])
    sglang = served_taps("sglang", cfg, 8)
    assert sglang is not None and dflash_findings(t, sglang, 2) == []


def test_no_ids_is_a_guess_and_vllms_default_does_not_fit_the_fc():
    cfg = {"num_hidden_layers": 5}
    t = trained_taps(cfg, 36)
    assert t.guessed and t.ids == [1, 9, 17, 25, 33]
    sglang, vllm = served_taps("sglang", cfg, 36), served_taps("vllm", cfg, 36)
    assert sglang is not None and vllm is not None
    assert [f.code for f in dflash_findings(t, sglang, 5)] == ["DFL003"]
    assert [f.code for f in dflash_findings(t, vllm, 5)] == ["DFL002", "DFL003"]  # 3 EAGLE-3 default taps, fc takes 5
