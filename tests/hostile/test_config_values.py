"""Degenerate values in a draft's config.json, for every drafter kind: NaN, 0 or a word where rope_theta is a
number, null where a size is read, sizes the weights contradict (where no finding of the kind's covers them:
EAGLE-3's and P-EAGLE's are DRF012, with the edit fix writes), counts that would size an allocation in the
terabytes, a mask token outside the vocabulary. Each is one line and exit 2 from the preflight, before torch
builds anything; the readers a library caller reaches refuse the same values in the same words."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FIX, PROMPTS, TARGET, invoke

from eagle3_doctor.core.errors import BadInput

KINDS = {"eagle3": "draft-sglang", "dflash": "dflash-draft", "mtp": "mtp-speculators", "peagle": "peagle-draft"}


def _planted(tmp_path: Path, kind: str, edit: dict) -> Path:
    """A copy of the kind's fixture with ``edit`` written where that kind keeps its decoder layer's values."""
    d = tmp_path / kind
    shutil.copytree(FIX / KINDS[kind], d)
    cfg = json.loads((d / "config.json").read_text())
    for key, v in edit.items():
        holder = cfg
        if key.startswith("layer."):
            key = key.removeprefix("layer.")
            holder = cfg.get("transformer_layer_config", cfg)
        elif key == "speculative_tokens":
            holder = cfg["speculators_config"]["proposal_methods"][0]
        holder[key] = v
    (d / "config.json").write_text(json.dumps(cfg))
    return d


CASES = [
    *[(k, {"layer.rope_theta": float("nan")}, "rope_theta = nan is out of range") for k in KINDS],
    *[(k, {"layer.rope_theta": 0}, "rope_theta = 0 is out of range") for k in KINDS],
    ("dflash", {"rope_theta": float("inf")}, "rope_theta = inf is out of range"),
    ("dflash", {"rope_theta": "fast"}, 'rope_theta is "fast", expected a number'),
    ("dflash", {"max_position_embeddings": None}, "max_position_embeddings is null"),
    ("dflash", {"block_size": 2**40}, "block_size = 1099511627776 is out of range (2..65)"),
    ("dflash", {"hidden_size": 256}, "hidden_size = 256 but the weights' layers.0.input_layernorm.weight has shape [128]"),
    ("dflash", {"intermediate_size": 4096}, "intermediate_size = 4096 but the weights' "),
    ("mtp", {"layer.hidden_size": 64}, "hidden_size = 64 but the weights' "),
    ("peagle", {"speculative_tokens": 10**6}, "speculative_tokens is 1000000, expected an integer in 1..64"),
    ("peagle", {"mask_token_id": 10**9}, "mask_token_id is 1000000000, not a token of the 320-token vocabulary"),
    ("peagle", {"mask_token_id": -1}, "mask_token_id is -1, not a token"),
    ("dflash", {"dflash_config": {"mask_token_id": "pad", "target_layer_ids": [1, 3, 5]}}, 'mask_token_id is "pad"'),
]


@pytest.mark.parametrize(
    "kind, edit, needle", CASES, ids=[f"{k}-{next(iter(e))}-{str(next(iter(e.values())))[:8]}" for k, e, _ in CASES]
)
def test_a_degenerate_config_value_is_refused_by_the_preflight(kind, edit, needle, tmp_path):
    """The preflight's own check (no torch, no model): what every command runs first."""
    from eagle3_doctor.cli.validate_files import check_draft

    d = _planted(tmp_path, kind, edit)
    before = (d / "config.json").read_bytes()
    with pytest.raises(BadInput) as e:
        check_draft(str(d))
    assert needle in str(e.value) and str(d / "config.json") in str(e.value), str(e.value)
    assert (d / "config.json").read_bytes() == before


@pytest.mark.parametrize(
    "kind, edit, command",
    [
        ("dflash", {"rope_theta": float("nan")}, "acceptance"),  # used to run to the end on NaN frequencies
        ("dflash", {"max_position_embeddings": None}, "acceptance"),  # used to be int(None): exit 3
        ("dflash", {"block_size": 2**40}, "acceptance"),  # used to be the allocator's 70 TB: exit 3
        ("peagle", {"mask_token_id": 10**9}, "acceptance"),  # used to be an IndexError: exit 3
        ("peagle", {"speculative_tokens": 10**6}, "acceptance"),
        ("mtp", {"layer.rope_theta": 0}, "inspect"),
    ],
)
def test_the_command_says_it_in_one_line_with_exit_2(kind, edit, command, tmp_path):
    d = _planted(tmp_path, kind, edit)
    extra = ["--prompts", PROMPTS, "--limit", "2", "--max-new-tokens", "8", "-q"] if command == "acceptance" else []
    r = invoke(command, "-t", TARGET, "-d", d, "--engine", "vllm", *extra)
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("eagle3-doctor: error: ") and " -- fix: " in lines[0], r.stderr


def test_the_readers_refuse_what_the_preflight_refuses(tmp_path):
    """doctor.py's callers skip the CLI's preflight: the DFlash, MTP and P-EAGLE readers check the same values."""
    from eagle3_doctor.draft.dflash.formats import read_dflash
    from eagle3_doctor.draft.mtp.formats import read_mtp_checkpoint
    from eagle3_doctor.draft.peagle.formats import peagle_info

    with pytest.raises(BadInput, match=r"block_size = 1099511627776 is out of range"):
        read_dflash(str(_planted(tmp_path / "a", "dflash", {"block_size": 2**40})), 128, 320, "cpu", None)
    with pytest.raises(BadInput, match=r"rope_theta = nan is out of range"):
        read_mtp_checkpoint(_planted(tmp_path / "b", "mtp", {"layer.rope_theta": float("nan")}))
    with pytest.raises(BadInput, match=r"speculative_tokens is 1000000"):
        peagle_info(_planted(tmp_path / "c", "peagle", {"speculative_tokens": 10**6}))


def test_an_mtp_heads_nan_and_inf_tensors_are_named_by_inspect(tmp_path):
    """DRF009 reads every drafter kind's tensors as stored: an MTP head's NaN and Inf are named, not averaged away."""
    from safetensors.torch import load_file, save_file

    d = tmp_path / "mtp"
    shutil.copytree(FIX / KINDS["mtp"], d)
    sd = load_file(d / "model.safetensors")
    nan_name, inf_name = sorted(n for n in sd if sd[n].is_floating_point())[:2]
    sd[nan_name].view(-1)[0] = float("nan")
    sd[inf_name].view(-1)[-1] = float("inf")
    save_file(sd, d / "model.safetensors")
    js = tmp_path / "i.json"
    r = invoke("inspect", "-t", TARGET, "-d", d, "--engine", "vllm", "--json", js)
    assert r.exit_code == 1, r.output
    found = [f for f in json.loads(js.read_text())["findings"] if f["code"] == "DRF009"]
    assert len(found) == 1, found
    text = json.dumps(found[0])
    assert nan_name in text and inf_name in text, text
