"""inspect examines every tensor, dimension and config key: planted faults on copies of the fixtures,
each through the CLI as a user types it, and the clean fixtures quiet in all three formats.

The faults that are one finding with its fix (a config dimension off, a NaN, a duplicated tensor, an
unknown key) are rows of tests/test_finding_cases.py."""

from __future__ import annotations

import hashlib
import json
import math

import pytest
import torch
from conftest import DRAFTS, ROOT, TARGET, invoke
from safetensors.torch import load_file, save_file

ENGINE = {"sglang": "sglang", "speculators": "vllm", "eagle": "eagle"}
LAYER = {"sglang": "midlayer", "speculators": "layers.0", "eagle": "midlayer"}


def run_inspect(d, fmt, tmp_path):
    """inspect as typed, with --json; (exit code, document, terminal output)."""
    out = tmp_path / f"inspect-{d.name}.json"
    r = invoke("inspect", "-t", TARGET, "-d", d, "--engine", ENGINE[fmt], "--json", out)
    assert r.exit_code in (0, 1), r.output
    return r.exit_code, json.loads(out.read_text()), r.output


def digest(d):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir())}


def edit_weights(d, fn):
    f = d / "model.safetensors"
    sd = load_file(f)
    fn(sd)
    save_file(sd, f, metadata={"format": "pt"})


def edit_config(d, fn):
    f = d / "config.json"
    c = json.loads(f.read_text())
    fn(c)
    f.write_text(json.dumps(c, indent=2))


def by_code(doc, code):
    return [f for f in doc["findings"] if f["code"] == code]


@pytest.mark.parametrize("fmt", ["sglang", "speculators", "eagle"])
def test_clean_fixtures_are_quiet_and_fully_examined(fmt, tmp_path):
    before = digest(DRAFTS[fmt])
    code, doc, _ = run_inspect(DRAFTS[fmt], fmt, tmp_path)
    assert code == 0 and doc["findings"] == [], doc["findings"]  # not even an info
    fx = doc["forensics"]
    assert {t["name"] for t in fx["tensors"]} == set(load_file(DRAFTS[fmt] / "model.safetensors"))
    assert all(m["verdict"].startswith(("trained", "map")) for m in fx["modules"]), fx["modules"]
    matrices = [t for t in fx["tensors"] if t["kind"] == "matrix"]
    assert len(matrices) == 9 and min(t["spectral_ratio"] for t in matrices) > 1.2  # trained: 1.27 .. 3.33
    assert all(g["agrees"] for g in fx["geometry"]), fx["geometry"]
    assert [k for k in fx["keys"] if k["status"] == "unknown"] == []
    assert digest(DRAFTS[fmt]) == before


@pytest.mark.parametrize("fmt,init", [("sglang", "normal"), ("speculators", "kaiming"), ("eagle", "normal")])
def test_decoder_layer_left_at_init_is_named(fmt, init, tmp_copy, tmp_path):
    """A non-strict load under a renamed key: the layer saved as built, fc and lm_head trained."""
    d = tmp_copy(DRAFTS[fmt])
    layer = LAYER[fmt]
    gen = torch.Generator().manual_seed(0)

    def reinit(sd):
        for k, v in sd.items():
            if not k.startswith(layer + "."):
                continue
            if v.dim() == 1:
                sd[k] = torch.ones_like(v)
            elif init == "normal":  # transformers' _init_weights: normal(0, initializer_range)
                sd[k] = torch.randn(v.shape, generator=gen) * 0.02
            else:  # torch's nn.Linear default: kaiming-uniform, U(-1/sqrt(fan_in), 1/sqrt(fan_in))
                b = 1 / math.sqrt(v.shape[1])
                sd[k] = (torch.rand(v.shape, generator=gen) * 2 - 1) * b

    edit_weights(d, reinit)
    before = digest(d)
    code, doc, out = run_inspect(d, fmt, tmp_path)
    assert code == 1
    (f,) = by_code(doc, "DRF011")
    assert f["severity"] == "error" and f["data"]["module"] == layer and layer in f["title"]
    assert f["location"]["file"] == "draft/*.safetensors" and f["location"]["key"].startswith(layer + ".")
    assert "non-strict load" in " ".join(f["evidence"]) and "(trained: fc, lm_head, norm)" in " ".join(f["evidence"])
    assert "strict=True" in f["fix"] and f"{layer}.self_attn.q_proj.weight" in f["fix"]
    signature = "initializer_range 0.02" if init == "normal" else "torch's default Linear init"
    assert sum(signature in e for e in f["evidence"]) == 7, f["evidence"]  # every matrix of the layer
    assert "100% of entries exactly 1.0" in " ".join(f["evidence"])
    assert f"error[DRF011]: draft module {layer} is left at its initialisation" in out
    assert {m["name"]: m["verdict"] for m in doc["forensics"]["modules"]}["fc"].startswith("trained")
    assert digest(d) == before


def test_norms_set_to_exactly_one_are_named(tmp_copy, tmp_path):
    d = tmp_copy(DRAFTS["sglang"])
    edit_weights(d, lambda sd: sd.update({"midlayer.hidden_norm.weight": torch.ones(128), "norm.weight": torch.ones(128)}))
    code, doc, _ = run_inspect(d, "sglang", tmp_path)
    assert code == 1
    named = sorted(f["data"]["module"] for f in by_code(doc, "DRF011"))
    assert named == ["midlayer.hidden_norm", "norm"]  # the trained matrices beside them are not
    assert all("[128]: 100% of entries exactly 1.0" in f["evidence"][0] for f in by_code(doc, "DRF011"))


def test_a_norm_the_trained_forward_never_ran_may_stay_at_one(tmp_copy, tmp_path):
    """SpecForge's norm_output=false runs no norm before lm_head: its weight is saved at init, rightly."""
    d = tmp_copy(DRAFTS["sglang"])
    edit_weights(d, lambda sd: sd.update({"norm.weight": torch.ones(128)}))
    edit_config(d, lambda c: c.update(norm_output=False))
    _, doc, _ = run_inspect(d, "sglang", tmp_path)
    assert not by_code(doc, "DRF011")
    assert {m["name"]: m["verdict"] for m in doc["forensics"]["modules"]}["norm"].startswith("unused")
    edit_config(d, lambda c: c.pop("norm_output"))  # the norm runs again: at 1.0 it is a finding
    _, doc, _ = run_inspect(d, "sglang", tmp_path)
    assert [f["data"]["module"] for f in by_code(doc, "DRF011")] == ["norm"]


def test_a_lone_matrix_that_looks_iid_is_not_a_module_at_init(tmp_copy, tmp_path):
    """One weakly trained matrix (the target's layer-0 v_proj measures spectral 0.93) is no finding."""
    d = tmp_copy(DRAFTS["sglang"])
    gen = torch.Generator().manual_seed(1)
    edit_weights(d, lambda sd: sd.update({"midlayer.self_attn.v_proj.weight": torch.randn(64, 256, generator=gen) * 0.02}))
    code, doc, _ = run_inspect(d, "sglang", tmp_path)
    assert code == 0 and doc["findings"] == []
    v = next(t for t in doc["forensics"]["tensors"] if t["name"] == "midlayer.self_attn.v_proj.weight")
    assert v["verdict"] == "at init" and v["spectral_ratio"] < 1.15


def test_weights_that_contradict_each_other_still_exit_2(tmp_copy):
    d = tmp_copy(DRAFTS["sglang"])
    edit_weights(
        d, lambda sd: sd.update({"midlayer.self_attn.o_proj.weight": sd["midlayer.self_attn.o_proj.weight"][:, :96].clone()})
    )
    r = invoke("inspect", "-t", TARGET, "-d", d)
    assert r.exit_code == 2 and "o_proj" in r.output


def test_inspect_document_with_forensics_validates(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    _, doc, _ = run_inspect(DRAFTS["sglang"], "sglang", tmp_path)
    schema = json.loads((ROOT / "schemas" / "inspect.v1.schema.json").read_text())
    jsonschema.validate(doc, schema)
    assert "forensics" in schema["properties"]
    bad = {**doc, "forensics": {**doc["forensics"], "tensors": [{"name": 3}]}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_a_16_bit_matrix_read_as_its_bits_gets_the_verdicts_and_statistics_of_its_decoded_values():
    """inspect checks bf16/fp16 matrices on their bits (no GBs of float32 on an 8B draft): every verdict
    and statistic equals the decoded path's, on a trained-like matrix and on each planted defect."""
    import numpy as np

    from eagle3_doctor.analyses.inspect.tensors import TensorStat, _matrix_from_bits, _matrix_verdict
    from eagle3_doctor.io.arrays import StoredArray

    g = np.random.default_rng(0)
    low_rank = g.standard_normal((700, 8)) @ g.standard_normal((8, 600))  # structured: "trained"
    cases = {"trained": low_rank, "at init": g.standard_normal((700, 600)) * 0.02}
    cases["zero row"] = low_rank.copy()
    cases["zero row"][5] = 0.0
    cases["rows identical"] = np.tile(low_rank[:1], (700, 1))
    cases["all zero"] = np.zeros((4, 6))
    cases["non-finite"] = low_rank.copy()
    cases["non-finite"][3, 4] = np.inf
    for dtype in ("bfloat16", "float16"):
        for label, m in cases.items():
            f32 = m.astype(np.float32)
            raw = (f32.view(np.uint32) >> 16).astype(np.uint16) if dtype == "bfloat16" else f32.astype(np.float16)
            t = StoredArray(raw, dtype)
            bits, dec = (
                TensorStat("w", "w", list(raw.shape), dtype, "matrix"),
                TensorStat("w", "w", list(raw.shape), dtype, "matrix"),
            )
            _matrix_from_bits(bits, t)
            v = t.values()
            dec.finite = bool(np.isfinite(v).all())
            if dec.finite:
                _matrix_verdict(dec, v)
            else:
                dec.verdict = "non-finite"
            assert bits.to_dict() == dec.to_dict(), (dtype, label)
