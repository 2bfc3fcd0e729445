"""compare-hidden on the fixtures: every verdict it gives (consistent; a shifted, permuted, missing or
substituted slot; numeric drift apart from a layer mismatch), each with its fix."""

from __future__ import annotations

import itertools
import shutil

import pytest
import torch
from conftest import DRAFTS, DUMP, PROMPTS, TARGET

from eagle3_doctor.analyses.compare.symbolic import diagnose_specs
from eagle3_doctor.analyses.weights_fit import candidates
from eagle3_doctor.core.findings import DRAFT_CONFIG
from eagle3_doctor.core.taps import TapRecorder, embed, final_norm, layer_out
from eagle3_doctor.doctor import compare_hidden, load_setup
from eagle3_doctor.engines.fixes import fix_snippet, ids_to_serve
from eagle3_doctor.engines.releases import ENGINE_VERSIONS
from eagle3_doctor.engines.serving import resolve_serving

TRAINED = (layer_out(1), layer_out(3), layer_out(4))


def run(draft="sglang", engine="sglang", version=None, layer_ids=None, recipe=None, dump=None, matrix=False, target=None):
    setup = load_setup(
        target=str(target or TARGET),
        draft=str(DRAFTS[draft]) if draft else None,
        engine=engine,
        engine_version=version,
        layer_ids=layer_ids,
        train_recipe=recipe,
        dtype="float32",
        device="cpu",
    )
    return compare_hidden(setup, prompts_path=str(PROMPTS), train_dump=dump, limit=6, matrix=matrix, max_tokens=128)


def codes(res):
    return [f.code for f in res.findings if f.severity in ("error", "warning")]


@pytest.mark.parametrize("fmt", ["eagle", "sglang", "speculators"])
@pytest.mark.parametrize("engine", ["sglang", "vllm", "trtllm", "modelopt", "eagle"])
def test_correct_configuration_is_consistent(fmt, engine):
    """The ids the doctor itself would print make every engine serve what every format says was trained."""
    for version in ENGINE_VERSIONS[engine][:2]:
        ids = ids_to_serve(engine, version, "llama", 8, TRAINED)
        res = run(fmt, engine, version, ids)
        assert res.consistent, (fmt, engine, version, [f.to_dict() for f in res.findings])
        assert all(s.rel_mean == 0 and s.cos_min > 0.9999 for s in res.slots)


@pytest.mark.parametrize("fmt,engine", [("sglang", "sglang"), ("speculators", "vllm"), ("eagle", "eagle")])
def test_native_format_and_engine_need_no_override(fmt, engine):
    assert run(fmt, engine).consistent


def test_seed_case_embeddings_in_slot_zero():
    res = run("sglang", "sglang", layer_ids=[-1, 1, 3])
    f = res.findings[0]
    assert f.code == "CAP002" and f.severity == "error"
    assert "slot 0 is fed the embeddings" in f.title and "1, 2" in f.title
    assert f.data["fix_ids"] == [1, 3, 4]
    assert '"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}' in f.fix
    assert res.serving.spec == (embed(), layer_out(1), layer_out(3))
    assert res.slots[0].rel_mean > 0.2  # numerically far, not just symbolically


def test_same_ids_mean_different_layers_in_sglang_and_vllm():
    s = run("sglang", "sglang", layer_ids=[1, 3, 4])
    v = run("sglang", "vllm", layer_ids=[1, 3, 4])
    assert s.serving.spec == TRAINED and s.consistent
    assert v.serving.spec == (layer_out(0), layer_out(2), layer_out(3))
    f = next(f for f in v.findings if f.code == "CAP001")
    assert f.data["shift"] == -1 and f.data["fix_ids"] == [2, 4, 5]
    assert f.fix.startswith('set "eagle_aux_hidden_state_layer_ids": [2, 4, 5]')


def test_specforge_draft_on_vllm_reads_the_nested_fallback():
    # vLLM 0.33 V1 falls back to eagle_config ids and reads them as vLLM ids: one layer early
    res = run("sglang", "vllm", "0.33.0-v1")
    assert "CAP001" in codes(res)
    # the V2 runner never looks there: default, which is what was trained, with an info note
    res2 = run("sglang", "vllm", "0.33.0-v2")
    assert res2.consistent and any(f.code == "CAP007" for f in res2.findings)
    # a stock 0.33 launch runs Model Runner V2 (hand-read, VLLM_V2_DEFAULT_FROM)
    assert run("sglang", "vllm", "0.33.0").consistent


def test_ids_in_a_key_sglang_does_not_read():
    res = run("speculators", "sglang")
    assert res.consistent  # SGLang's default happens to be what was trained
    assert [f.code for f in res.findings] == ["CAP007"] and res.findings[0].severity == "info"


def test_final_norm_substituted_for_the_last_layer():
    # the two-model path moves -1 last; one-model (the default) only sorts, so it lands in slot 0
    assert run("sglang", "trtllm", layer_ids=[1, 3, -1]).serving.spec[0] == final_norm()
    res = run("sglang", "trtllm", "1.2-two-model", layer_ids=[1, 3, -1])
    assert res.serving.spec == (layer_out(1), layer_out(3), final_norm())
    f = res.findings[0]
    assert f.code == "CAP003" and "slot 2 is fed final_norm" in f.title
    assert "eagle3_layers_to_capture: [1, 3, 4]" in f.fix


def test_permuted_slots():
    # SGLang captures in layer order (srt/models/llama.py membership loop): unsorted ids are served
    # sorted, so a draft trained on another order gets its slots permuted
    assert run("sglang", "sglang", layer_ids=[4, 1, 3]).serving.spec == TRAINED
    res = run("sglang", "sglang", recipe="hf-hidden-states:5,2,4")
    assert res.findings[0].code == "CAP004"


def test_fewer_slots_than_trained():
    res = run("sglang", "sglang", layer_ids=[1, 3, 7])  # SGLang Llama never captures past layer L-1
    assert res.findings[0].code == "CAP005" and len(res.serving.spec) == 2


def test_hf_hidden_states_recipe():
    res = run("sglang", "sglang", recipe="hf-hidden-states:2,4,5")
    assert res.consistent and res.train_spec == TRAINED
    res = run("sglang", "sglang", recipe="hf-hidden-states:2,4,-1")
    assert res.findings[0].code == "CAP003"


def test_training_dump_matches_the_fixture_target():
    res = run("sglang", "sglang", dump=str(DUMP))
    assert res.consistent, [f.to_dict() for f in res.findings]
    assert res.train_spec == TRAINED
    assert res.dump["hidden_state"]["rel_l2_to_final_norm"] < 1e-5
    assert all(s.rel_mean < 1e-5 for s in res.slots)


def _rewrite_dump(tmp_path, fn):
    out = tmp_path / "dump"
    shutil.copytree(DUMP, out)
    for f in sorted(out.rglob("*.ckpt")):
        d = torch.load(f, weights_only=True)
        fn(d)
        torch.save(d, f)
    return out


def test_dump_whose_last_slot_is_final_norm_is_caught(tmp_path, target):
    H = target.hidden_size

    def last_to_final_norm(d):
        with torch.no_grad(), TapRecorder(target.model, [final_norm()]) as rec:
            target.model(input_ids=d["input_ids"][None])
            fn = rec.take()[final_norm()]
        d["aux_hidden_state"][..., 2 * H :] = fn

    res = run("sglang", "sglang", dump=str(_rewrite_dump(tmp_path, last_to_final_norm)))
    assert res.train_spec == (layer_out(1), layer_out(3), final_norm())
    f = res.findings[0]
    assert f.code == "CAP003" and "slot 2" in f.title


def test_numeric_drift_is_told_apart_from_a_layer_mismatch(tmp_path, target):
    def to_bf16(d):
        d["aux_hidden_state"] = d["aux_hidden_state"].to(torch.bfloat16).float()

    res = run("sglang", "sglang", dump=str(_rewrite_dump(tmp_path / "a", to_bf16)))
    assert res.train_spec == TRAINED  # every slot still best-matches the right layer
    assert [(f.code, f.severity) for f in res.findings] == [("NUM001", "info")]  # bf16 rounding: noted, not failed
    assert res.consistent


def test_perturbed_target_weights_are_drift_not_mismatch(tmp_path, target):
    pert = tmp_path / "perturbed"
    shutil.copytree(TARGET, pert)
    from eagle3_doctor.model.target import load_target

    t2 = load_target(str(pert), dtype="float32", device="cpu", forward="transformers")  # it saves itself
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        w = t2.model.model.layers[0].mlp.down_proj.weight
        w.add_(torch.randn(w.shape, generator=g) * w.std() * 0.3)
    t2.model.save_pretrained(pert)

    # the training dump was made by the perturbed revision; serving runs the original
    def from_perturbed(d):
        with torch.no_grad(), TapRecorder(t2.model, list(TRAINED)) as rec:
            t2.model(input_ids=d["input_ids"][None])
            got = rec.take()
        d["aux_hidden_state"] = torch.cat([got[p] for p in TRAINED], -1)

    res = run("sglang", "sglang", dump=str(_rewrite_dump(tmp_path / "b", from_perturbed)))
    assert res.train_spec == TRAINED
    assert codes(res) == ["NUM001"], [f.to_dict() for f in res.findings]
    assert res.findings[0].severity == "warning" and not res.consistent


def test_matrix_identifies_every_slot_and_only_asks_for_what_it_needs(monkeypatch):
    seen = []
    orig = TapRecorder.__init__

    def spy(self, model, points, **kw):
        points = list(points)
        seen.append(len(set(points)))
        orig(self, model, points, **kw)

    monkeypatch.setattr(TapRecorder, "__init__", spy)
    run("sglang", "sglang", layer_ids=[-1, 1, 3])
    # embed, layer_out[1], layer_out[3] served, layer_out[4] trained, and the wirings the weights' fit scores around
    # the trained [1, 3, 4] (each slot +-1 layer, the embeddings in front, the final norm at the back): no more
    fit = {p for c in candidates((layer_out(1), layer_out(3), layer_out(4)), 8) for p in c}
    assert max(seen) == len(fit | {embed(), layer_out(1), layer_out(3)}) < 10
    seen.clear()
    res = run("sglang", "sglang", layer_ids=[-1, 1, 3], matrix=True)
    assert max(seen) == 10  # all L + 2 capture points, only with --matrix
    best = [str(b.best) for b in res.matrix.best]
    assert best == ["embed", "layer_out[1]", "layer_out[3]"]


def test_fix_snippets_name_key_and_nesting():
    assert fix_snippet("sglang", None, [1, 3, 4]).startswith('"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}')
    assert fix_snippet("vllm", "0.18.0", [2, 4, 5]).startswith('"eagle_aux_hidden_state_layer_ids": [2, 4, 5]')
    assert "eagle3_layers_to_capture: [1, 3, 4]" in fix_snippet("trtllm", None, [1, 3, 4])


def test_dump_hidden_state_taken_before_the_final_norm(tmp_path, target):
    L = target.num_layers

    def pre_norm(d):
        with torch.no_grad(), TapRecorder(target.model, [layer_out(L - 1)]) as rec:
            target.model(input_ids=d["input_ids"][None])
            d["hidden_state"] = rec.take()[layer_out(L - 1)].clone()

    res = run("sglang", "sglang", dump=str(_rewrite_dump(tmp_path, pre_norm)))
    f = next(f for f in res.findings if f.code == "NUM003")
    assert "best matches layer_out[7]" in f.title
    assert res.dump["hidden_state"]["best"] == "layer_out[7]"


# --------------------------------------------------------------------------- the id edit, applied by its key

POINTS = [embed(), *(layer_out(i) for i in range(8)), final_norm()]  # every capture point of a Llama of 8 layers


@pytest.mark.parametrize("engine", ["sglang", "vllm", "modelopt", "trtllm"])
def test_the_edit_applied_by_key_serves_what_was_trained(engine):
    """Write Fix.value under Fix.key -- all a tool applying it reads -- and the engine serves the trained spec.

    Every 3-point training spec (and its reverse) against a served [0, 1, 2]; the count of edits
    checked is asserted, so an empty fix finder fails."""
    L = 8
    checked = 0
    for version in ENGINE_VERSIONS[engine]:
        s = resolve_serving(engine, version, "llama", L, {}, [0, 1, 2])
        if s.failure is not None:
            continue
        for combo in itertools.combinations(POINTS, 3):
            for trained in (combo, combo[::-1]):
                if s.spec == trained:
                    continue
                for f in diagnose_specs(trained, "trained", s):
                    if not (f.code.startswith("CAP") and f.data.get("fix_ids")):
                        continue
                    e = f.edit
                    assert e is not None and f.location == e.location and e.op == "set" and e.value == f.data["fix_ids"]
                    if engine == "trtllm":  # the LLM API options file: the engine takes the list as given
                        assert (e.file, e.key) == ("extra_llm_api_options.yaml", "speculative_config.eagle3_layers_to_capture")
                        fixed = resolve_serving(engine, version, "llama", L, {}, e.value)
                    else:
                        assert e.file == DRAFT_CONFIG
                        fixed = resolve_serving(engine, version, "llama", L, {e.key: e.value})
                    assert fixed.spec == trained, (engine, version, e.to_dict())
                    checked += 1
    assert checked >= 40, (engine, checked)
