"""Broken MTP checkpoints through the commands: one clear line naming the fix, exit 2, no traceback; the
input never written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import TARGET
from test_cli_bad_input import assert_bad_input, cli

MTP = Path(__file__).resolve().parents[2] / "fixtures" / "mtp-speculators"


@pytest.fixture()
def mtp_copy(tmp_path):
    d = tmp_path / "mtp"
    shutil.copytree(MTP, d)
    return d


def _edit(d: Path, **kv) -> None:
    c = json.loads((d / "config.json").read_text())
    for k, v in kv.items():
        if v is None:
            c.pop(k, None)
        else:
            c[k] = v
    (d / "config.json").write_text(json.dumps(c))


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        ({"mtp_trained_hidden": "layer_out[3]"}, "mtp_trained_hidden"),
        ({"transformer_layer_config": None}, "transformer_layer_config"),
        (
            {
                "transformer_layer_config": {
                    "hidden_size": 64,
                    "intermediate_size": 384,
                    "num_attention_heads": 4,
                    "vocab_size": 320,
                }
            },
            "hidden_size = 64 but the weights",
        ),  # fmt: skip
    ],
)
def test_a_broken_mtp_config_is_one_line(mtp_copy, edit, needle):
    _edit(mtp_copy, **edit)
    before = (mtp_copy / "config.json").read_bytes()
    assert_bad_input(cli("inspect", "-t", TARGET, "-d", mtp_copy, "--engine", "vllm"), needle)
    assert (mtp_copy / "config.json").read_bytes() == before


def test_an_mtp_head_for_another_target_is_one_line(mtp_copy, tmp_path):
    t = tmp_path / "target"
    t.mkdir()
    (t / "config.json").write_text(json.dumps({**json.loads((TARGET / "config.json").read_text()), "hidden_size": 256}))
    assert_bad_input(cli("inspect", "-t", t, "-d", mtp_copy, "--engine", "vllm"), "hidden_size")


@pytest.mark.parametrize(
    ("command", "flag"), [("inspect", ["--report", "r"]), ("acceptance", ["--train-recipe", "eagle-default"])]
)
def test_an_option_the_mtp_branch_does_not_honour_is_refused_not_ignored(command, flag, tmp_path):
    assert_bad_input(cli(command, "-t", TARGET, "-d", MTP, "--engine", "vllm", *flag), "not supported for MTP heads")
