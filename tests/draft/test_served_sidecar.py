"""FWD016: a tensor of the draft kept in a safetensors file beside the checkpoint that the index does not name, which
every SGLang and vLLM release drops (their own filter_duplicate_safetensors_files, executed by
conformance/weightfiles_exec.py). Each case is a temporary copy of a fixture; the fixtures are never edited."""

from __future__ import annotations

import json

import pytest
from conftest import DRAFTS, FIX, TARGET, invoke

from eagle3_doctor.engines.draft_files import table, weight_rule

INDEX = "model.safetensors.index.json"


def _sidecar(tmp_copy, name: str, moved=("d2t", "t2d"), index: bool = True):
    """The SGLang fixture draft with ``moved`` saved into extra.safetensors, the rest listed by an index."""
    from safetensors.torch import load_file, save_file

    d = tmp_copy(DRAFTS["sglang"], name)
    sd = load_file(d / "model.safetensors")
    side = {k: sd.pop(k) for k in moved}
    save_file(sd, d / "model.safetensors")
    save_file(side, d / "extra.safetensors")
    if index:
        (d / INDEX).write_text(json.dumps({"metadata": {}, "weight_map": dict.fromkeys(sd, "model.safetensors")}))
    return d


def _fwd016(d, engine, version, tmp_path):
    out = tmp_path / "i.json"
    r = invoke("inspect", "-t", TARGET, "-d", d, "-e", engine, "--engine-version", version, "--json", out)
    assert r.exit_code in (0, 1), r.output
    return r.output, [f for f in json.loads(out.read_text())["findings"] if f["code"] == "FWD016"]


@pytest.mark.parametrize(("engine", "version"), [("sglang", "0.5.23"), ("vllm", "0.8.5"), ("vllm", "0.33.0")])
def test_a_sidecar_the_index_does_not_name_is_dropped_then_loaded_once_listed(tmp_copy, tmp_path, engine, version):
    d = _sidecar(tmp_copy, f"side-{engine}-{version}")
    text, (f,) = _fwd016(d, engine, version, tmp_path)
    assert "error[FWD016]" in text and f["data"]["file"] == "extra.safetensors" and f["data"]["tensors"] == ["d2t", "t2d"]
    assert "filter_duplicate_safetensors_files, executed" in " ".join(f["evidence"])
    assert f["location"]["path"].endswith("extra.safetensors")
    assert f["fix"].startswith(f'add each to {INDEX}\'s weight_map: "d2t": "extra.safetensors", "t2d": "extra.safetensors"')
    # the printed entries added: the release loads the file, and so does the doctor (its reader follows the index)
    idx = json.loads((d / INDEX).read_text())
    idx["weight_map"] |= {"d2t": "extra.safetensors", "t2d": "extra.safetensors"}
    (d / INDEX).write_text(json.dumps(idx))
    text, got = _fwd016(d, engine, version, tmp_path)
    assert got == [] and "DRF002" not in text


def test_without_an_index_every_safetensors_file_is_loaded(tmp_copy, tmp_path):
    d = _sidecar(tmp_copy, "side-noindex", index=False)
    assert _fwd016(d, "vllm", "0.33.0", tmp_path)[1] == []


def test_a_sidecar_repeating_loaded_tensors_is_quiet(tmp_copy, tmp_path):
    """A second copy of tensors the named files hold (a consolidated file beside the shards) loses nothing."""
    from safetensors.torch import load_file, save_file

    d = _sidecar(tmp_copy, "side-dup", moved=())
    save_file({"norm.weight": load_file(d / "model.safetensors")["norm.weight"]}, d / "extra.safetensors")
    assert _fwd016(d, "sglang", "0.5.23", tmp_path)[1] == []


def test_the_fixture_drafts_are_quiet(tmp_path):
    for fmt, engine in (("sglang", "sglang"), ("speculators", "vllm"), ("eagle", "vllm")):
        assert _fwd016(DRAFTS[fmt], engine, "0.33.0" if engine == "vllm" else "0.5.23", tmp_path)[1] == []


def test_every_release_with_a_draft_model_drops_an_unindexed_file():
    """As executed: the same rule in every release (so no release is the fix)."""
    for engine in ("sglang", "vllm"):
        for v in table()["release_rows"][engine]:
            rule = weight_rule(engine, v)
            assert rule is not None and rule.index_filters and rule.all_without_index, (engine, v)


def test_every_release_with_a_draft_model_has_a_weight_file_row():
    from eagle3_doctor.engines.draft_table import table as draft_table

    d = draft_table()
    for engine in ("sglang", "vllm"):
        with_draft = {v for v, i in d["release_rows"][engine].items() if "absent" not in d["rows"][i]["behaviour"]}
        assert sorted(table()["release_rows"][engine]) == sorted(with_draft)


def test_a_p_eagle_mask_embedding_in_a_sidecar_is_named_whatever_the_drafter_kind(tmp_copy, tmp_path):
    """The loader's rule is not the kind's: a P-EAGLE draft's mask embedding saved beside the shards is dropped alike,
    and the engine then refuses the draft (PEA002); the printed index entry applied, both go."""
    from safetensors.torch import load_file, save_file

    d = tmp_copy(FIX / "peagle-draft", "pe-side")
    sd = load_file(d / "model.safetensors")
    side = {"mask_hidden": sd.pop("mask_hidden")}
    save_file(sd, d / "model.safetensors")
    save_file(side, d / "mask_hidden.safetensors")
    (d / INDEX).write_text(json.dumps({"metadata": {}, "weight_map": dict.fromkeys(sd, "model.safetensors")}))
    out = tmp_path / "pe.json"

    def codes() -> list[str]:
        r = invoke("inspect", "-t", TARGET, "-d", d, "-e", "vllm", "--json", out)
        assert r.exit_code in (0, 1), r.output
        return [f["code"] for f in json.loads(out.read_text())["findings"]]

    found = codes()
    assert "FWD016" in found and "PEA002" in found, found
    (f,) = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "FWD016"]
    assert f["data"]["tensors"] == ["mask_hidden"] and '"mask_hidden": "mask_hidden.safetensors"' in f["fix"]
    # the refusal's fix is the same index entry, not an export of a tensor the checkpoint already holds
    (g,) = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "PEA002"]
    assert g["fix"].startswith('add "mask_hidden": "mask_hidden.safetensors" to model.safetensors.index.json'), g["fix"]
    assert "export" not in g["fix"] and any("mask_hidden.safetensors beside the checkpoint" in e for e in g["evidence"])
    wm = json.loads((d / INDEX).read_text())
    wm["weight_map"]["mask_hidden"] = "mask_hidden.safetensors"
    (d / INDEX).write_text(json.dumps(wm))
    found = codes()
    assert "FWD016" not in found and "PEA002" not in found, found
