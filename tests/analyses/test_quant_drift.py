"""FP8 targets: a block-FP8 copy of the fixture target (quantized here, as DeepSeek-V3 ships it) loads and
runs on the CPU with the W8A8 rounding emulated; --reference-target measures its drift and acceptance both ways."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from conftest import DRAFTS, PROMPTS, TARGET, invoke
from safetensors.torch import load_file, save_file

from eagle3_doctor.model.quantized import block_fp8_config, fake_quant_e4m3, quantize_block_e4m3

B = 128


def quantize_fp8(dst, scale_mult: float = 1.0):
    """fixtures/target with every decoder linear stored as float8_e4m3fn + a weight_scale_inv per 128x128 block.
    ``scale_mult`` > 1 plants a badly calibrated scale (values pushed into e4m3's subnormals)."""
    shutil.copytree(TARGET, dst)
    out = {}
    for k, w in load_file(str(TARGET / "model.safetensors")).items():
        if ".layers." in k and k.endswith("_proj.weight"):
            out[k], out[k + "_scale_inv"] = quantize_block_e4m3(w, B, scale_mult)
        else:
            out[k] = w
    save_file(out, str(dst / "model.safetensors"))
    cfg = json.loads((dst / "config.json").read_text())
    cfg["quantization_config"] = block_fp8_config(B)
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def test_fake_quant_is_per_token_and_group_e4m3():
    torch.manual_seed(0)
    x = torch.randn(3, 5, 300)
    y = fake_quant_e4m3(x, 128)
    assert y.shape == x.shape and torch.equal(fake_quant_e4m3(y, 128), y)  # quantized values stay put
    g = x[1, 2, 128:256]
    s = g.abs().max() / 448.0
    assert torch.equal(y[1, 2, 128:256], (g / s).to(torch.float8_e4m3fn).float() * s)
    rel = ((y - x).norm() / x.norm()).item()
    assert 0.005 < rel < 0.07  # e4m3: 3 mantissa bits


def test_fp8_target_runs_emulated_on_the_cpu(tmp_path):
    from eagle3_doctor.model.target import load_target

    t = load_target(str(quantize_fp8(tmp_path / "fp8")), dtype="float32", device="cpu")
    assert t.quant_note is not None and "on the CPU" in t.quant_note and "e4m3" in t.quant_note
    lin = t.model.model.layers[2].mlp.down_proj
    sd = load_file(str(tmp_path / "fp8" / "model.safetensors"))
    q, s = sd["model.layers.2.mlp.down_proj.weight"].float(), sd["model.layers.2.mlp.down_proj.weight_scale_inv"]
    w = (q.reshape(1, B, 3, B) * s[:, None, :, None]).reshape(B, 3 * B)
    assert torch.equal(lin.weight, w)  # dequantized by transformers, block by block
    x = torch.randn(2, 3 * B)
    assert torch.equal(lin(x), torch.nn.functional.linear(fake_quant_e4m3(x, B), w))  # the input quantized too
    assert t.model.lm_head.weight.dtype == torch.float32 and not t.model.lm_head._forward_pre_hooks  # not quantized


def test_reference_target_drift_and_both_ways(tmp_path):
    fp8 = quantize_fp8(tmp_path / "fp8")
    common = ["--target", fp8, "--draft", DRAFTS["sglang"], "--device", "cpu", "-q", "--prompts", PROMPTS, "--dtype", "float32"]
    r = invoke("compare-hidden", *common, "--limit", 8, "--reference-target", TARGET, "--json", tmp_path / "c.json")
    assert r.exit_code == 0, r.output
    d = json.loads((tmp_path / "c.json").read_text())["reference_target"]
    pts = {p["point"]: p for p in d["points"]}
    assert pts["embed"]["rel_l2_mean"] == 0.0  # the embeddings are not quantized
    assert 0.005 < pts["layer_out[4]"]["rel_l2_mean"] < 0.2 and pts["layer_out[4]"]["served"]
    assert "e4m3" in d["scheme"]
    r = invoke(
        "acceptance", *common, "--continuation", "text", "-k", 3, "--reference-target", TARGET, "--json", tmp_path / "a.json"
    )
    assert r.exit_code in (0, 1) and "acceptance both ways" in r.output
    both = json.loads((tmp_path / "a.json").read_text())["reference_target"]
    assert both["quantized"]["target"] == str(fp8) and both["reference"]["target"] == str(TARGET)
    diff = both["difference"]
    q, ref = both["quantized"]["mean_acceptance_length"], both["reference"]["mean_acceptance_length"]
    assert diff["method"] == "paired over prompts" and diff["point"] == pytest.approx(q - ref)


def test_qnt006_fires_when_one_side_accepts_less(setup_sglang):
    """The finding's rule on two real runs over the same prompts: one with features that lose acceptance."""
    import dataclasses

    from eagle3_doctor.analyses.quant_drift import acceptance_both_ways
    from eagle3_doctor.doctor import acceptance
    from eagle3_doctor.engines.serving import resolve_serving

    kw = dict(prompts_path=str(PROMPTS), num_steps=3, continuation="text")
    good = acceptance(setup_sglang, **kw)
    L = setup_sglang.target.num_layers
    shifted = dataclasses.replace(setup_sglang, serving=resolve_serving("sglang", None, "llama", L, {}, [-1, 1, 3]))
    worse = acceptance(shifted, **kw)
    both, found = acceptance_both_ways(worse, good, 3)
    assert both.difference["hi"] < 0 and [f.code for f in found] == ["QNT006"]
    assert "fine-tune the draft" in found[0].fix
    _, none = acceptance_both_ways(good, good, 3)
    assert none == []  # no difference, no finding


def test_schemes_that_cannot_run_say_so_in_one_line(tmp_copy):
    for q, words in [
        ({"quant_method": "compressed-tensors", "format": "float-quantized"}, "compressed-tensors"),
        ({"quant_method": "fp8", "activation_scheme": "static", "weight_block_size": [128, 128]}, "static activation"),
        ({"quant_method": "fp8", "activation_scheme": "dynamic"}, "per-tensor FP8"),
    ]:
        d = tmp_copy(TARGET, f"q{len(words)}")
        cfg = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps({**cfg, "quantization_config": q}))
        r = invoke("compare-hidden", "--target", d, "--draft", DRAFTS["sglang"], "--device", "cpu", "-q", "--limit", 1)
        if words == "compressed-tensors" and pytest.importorskip is not None:
            import importlib.util

            if importlib.util.find_spec("compressed_tensors") is not None:
                continue  # installed: transformers loads it
        assert r.exit_code == 2 and words in r.output and "Traceback" not in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1
        shutil.rmtree(d)
