"""A target is loaded exactly or refused, and each model is the one its option names: a target with a tensor
removed is refused by the native decoder and by transformers' loader alike (transformers used to fill the gap at
random and measure another model), a RoPE type no loader computes or a scaling factor below 1 is one line from
the preflight, and a draft passed as --target (or a target as --draft) is named as such from config.json and the
tensor names, before torch is imported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DRAFTS, FIX, PROMPTS, ROOT, TARGET, invoke

from eagle3_doctor.core.errors import BadInput


def _target_without(tmp_path: Path, name: str) -> Path:
    from safetensors.torch import load_file, save_file

    d = tmp_path / "target"
    shutil.copytree(TARGET, d)
    sd = load_file(d / "model.safetensors")
    del sd[name]
    save_file(sd, d / "model.safetensors", metadata={"format": "pt"})
    return d


@pytest.mark.parametrize("forward", ["auto", "transformers"])
@pytest.mark.parametrize("name", ["model.layers.3.mlp.up_proj.weight", "lm_head.weight"])
def test_a_target_missing_a_tensor_is_refused_by_both_loaders(name, forward, tmp_path):
    """The fixture is untied: without lm_head (or one layer's up_proj) there is nothing exact to measure."""
    from eagle3_doctor.model.target import load_target

    d = _target_without(tmp_path, name)
    with pytest.raises(BadInput) as e:
        load_target(str(d), dtype="float32", device="cpu", forward=forward)
    assert f"lacks 1 tensor(s) its config's architecture needs ({name})" in str(e.value), str(e.value)


def test_the_command_refuses_a_target_missing_a_tensor_in_one_line(tmp_path):
    d = _target_without(tmp_path, "model.layers.3.mlp.up_proj.weight")
    r = invoke("acceptance", "-t", d, "-d", DRAFTS["sglang"], "--engine", "sglang", "--prompts", PROMPTS,
               "--limit", "2", "--max-new-tokens", "8", "-q")  # fmt: skip
    assert r.exit_code == 2, r.output  # was exit 0 at 1.40 mean acceptance length (the intact target gives ~2.6)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "model.layers.3.mlp.up_proj.weight" in lines[0], r.stderr


def _target_with(tmp_path: Path, rope: object, key: str = "rope_parameters") -> Path:
    d = tmp_path / "target"
    shutil.copytree(TARGET, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg.pop("rope_parameters", None)
    cfg[key] = rope
    cfg["rope_theta"] = 10000.0
    (d / "config.json").write_text(json.dumps(cfg))
    return d


ROPES = [
    ({"rope_type": "yarn", "factor": -2.0, "original_max_position_embeddings": 512}, "factor = -2.0 is out of range"),
    ({"rope_type": "yarn", "factor": 0.5}, "a yarn factor is at least 1"),
    ({"rope_type": "linear", "factor": float("nan")}, "factor = NaN is out of range"),
    ({"rope_type": "wibble"}, 'rope_type is "wibble", not a RoPE type transformers computes'),
    ({"type": "dynamic"}, "of rope_type 'dynamic' lacks factor"),
    ({"rope_type": "llama3", "factor": 8.0}, "of rope_type 'llama3' lacks low_freq_factor"),
    ({"rope_type": "longrope", "short_factor": [1.0, -1.0], "long_factor": [1.0]}, "short_factor is not a list"),
    ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": "512"}, "original_max_position_embeddings"),
]


@pytest.mark.parametrize(
    "rope, needle", ROPES, ids=[f"{r.get('rope_type', r.get('type'))}-{i}" for i, (r, _) in enumerate(ROPES)]
)
def test_a_rope_no_loader_computes_exactly_is_refused_by_the_preflight(rope, needle, tmp_path):
    from eagle3_doctor.io.checks import check_target

    d = _target_with(tmp_path, rope)
    with pytest.raises(BadInput) as e:
        check_target(str(d))
    assert needle in str(e.value), str(e.value)


def test_the_valid_rope_types_pass(tmp_path):
    from eagle3_doctor.io.checks import check_target

    for i, rope in enumerate(
        [
            {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256, "beta_fast": 32, "beta_slow": 1},
            {"type": "linear", "factor": 2.0},
            {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 256,
            },  # fmt: skip
            {"rope_type": "default"},
        ]
    ):
        check_target(str(_target_with(tmp_path / str(i), rope, "rope_scaling")))


def test_an_unknown_rope_type_is_one_line_not_a_crash(tmp_path):
    d = _target_with(tmp_path, {"rope_type": "wibble"})
    r = invoke("acceptance", "-t", d, "-d", DRAFTS["sglang"], "--engine", "sglang", "--prompts", PROMPTS, "-q")
    assert r.exit_code == 2, r.output  # was exit 3 from inside transformers
    assert "wibble" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def _console(argv: list[str]) -> tuple[int, bool, str]:
    """The command as a real process: (exit code, whether torch was imported, stderr)."""
    code = f"import sys; sys.argv = ['eagle3-doctor', *{argv!r}]\n"
    code += "from eagle3_doctor.cli.app import run\ntry:\n    run()\nexcept SystemExit as e:\n"
    code += "    print(e.code, 'torch' in sys.modules)\n"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    out = r.stdout.split()
    return int(out[-2]), out[-1] == "True", r.stderr


SWAPS = [
    (DRAFTS["sglang"], TARGET, "did you swap --target and --draft?"),
    (DRAFTS["eagle"], TARGET, "did you swap --target and --draft?"),  # a LlamaForCausalLM config: told by its fc
    (TARGET, TARGET, "is a LlamaForCausalLM with 8 decoder layers, not a draft"),
    (DRAFTS["sglang"], DRAFTS["sglang"], "is a draft (architectures LlamaForCausalLMEagle3), not the model it drafts for"),
    (FIX / "dflash-draft", FIX / "peagle-draft", "is a draft (architectures DFlashDraftModel)"),
]


@pytest.mark.parametrize("target, draft, needle", SWAPS, ids=["swapped", "swapped-eagle", "two-targets", "two-drafts", "kinds"])
def test_a_model_passed_as_the_other_is_named_before_torch(target, draft, needle):
    """The swapped pair used to exit 3 after 13 s (transformers' size mismatch), or say only that the draft's format
    was unknown."""
    argv = ["acceptance", "-t", str(target), "-d", str(draft), "--engine", "vllm", "--prompts", str(PROMPTS), "-q"]
    code, torch_imported, err = _console(argv)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and not torch_imported, (code, torch_imported, err[-2000:])
    assert len(lines) == 1 and needle in lines[0], lines
    if "swap" in needle:
        assert f"fix: pass --target {draft} --draft {target}" in lines[0], lines[0]


def test_device_mps_off_apple_is_refused_before_torch():
    if sys.platform == "darwin":
        pytest.skip("an Apple machine may have the GPU")
    argv = ["acceptance", "-t", str(TARGET), "-d", str(DRAFTS["sglang"]), "--device", "mps", "--prompts", str(PROMPTS), "-q"]
    code, torch_imported, err = _console(argv)
    assert code == 2 and not torch_imported, (code, err[-2000:])
    assert "--device mps" in err and "check the checkpoint files" not in err, err


@pytest.mark.parametrize("name", ["model.layers.3.mlp.up_proj.weight", "lm_head.weight"])
def test_inspect_refuses_a_target_missing_a_tensor_before_torch(name, tmp_path):
    """inspect loads no target, so it used to say OK about a target every measuring command refuses."""
    d = _target_without(tmp_path, name)
    code, torch_imported, err = _console(["inspect", "-t", str(d), "-d", str(DRAFTS["sglang"]), "--engine", "sglang"])
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert (code, torch_imported) == (2, False), (code, err[-2000:])
    assert len(lines) == 1 and f"lacks 1 tensor(s) its config's architecture needs ({name})" in lines[0], lines


@pytest.mark.parametrize(
    "edit, needle",
    [
        (
            {"vocab_size": 999},
            "vocab_size = 999 means model.embed_tokens.weight has 999 rows, but the weights hold shape [320, 128]",
        ),
        ({"head_dim": 16}, "head_dim = 16 means model.layers.0.self_attn.q_proj.weight has 64 rows"),
        ({"intermediate_size": 512}, "intermediate_size = 512 means model.layers.0.mlp.up_proj.weight has 512 rows"),
        ({"num_key_value_heads": 4}, "num_key_value_heads = 4 means model.layers.0.self_attn.k_proj.weight has 128 rows"),
    ],
    ids=["vocab", "head_dim", "intermediate", "kv_heads"],
)
def test_a_target_config_its_weights_contradict_is_refused_before_torch(edit, needle, tmp_path):
    """It was refused by the loader after torch, as "Error(s) in loading state_dict", naming neither the key nor
    the tensor."""
    d = tmp_path / "target"
    shutil.copytree(TARGET, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(edit)
    (d / "config.json").write_text(json.dumps(cfg))
    code, torch_imported, err = _console(["inspect", "-t", str(d), "-d", str(DRAFTS["sglang"]), "--engine", "sglang"])
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert (code, torch_imported) == (2, False), (code, err[-2000:])
    assert len(lines) == 1 and needle in lines[0], lines
