"""CMD009: the models the options name against the ones the launch serves (engines/launch_models.py), through the
CLI as a user runs it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import DRAFTS, TARGET, invoke


def _launch(draft: object) -> str:
    return (
        f"python -m sglang.launch_server --model-path {TARGET} --speculative-algorithm EAGLE3 "
        f"--speculative-draft-model-path {draft} --speculative-num-steps 3 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 4"
    )


def _inspect(tmp_path: Path, draft: Path, launch: str) -> tuple[int, dict]:
    out = tmp_path / "o.json"
    r = invoke("inspect", "-d", draft, "--serve-cmd", launch, "--json", out)
    return r.exit_code, json.loads(out.read_text())


def test_a_draft_option_naming_another_checkpoint_than_the_launch_serves(tmp_path: Path) -> None:
    code, doc = _inspect(tmp_path, DRAFTS["sglang"], _launch(DRAFTS["eagle"]))
    (f,) = [f for f in doc["findings"] if f["code"] == "CMD009"]
    assert f["severity"] == "warning" and code == 1, doc["findings"]
    assert (f["edit"]["key"], f["edit"]["value"]) == ("--speculative-draft-model-path", str(DRAFTS["sglang"]))
    assert "their config.json differ" in f["evidence"]
    assert f["data"] == {"role": "draft", "measured": str(DRAFTS["sglang"]), "served": str(DRAFTS["eagle"])}


def test_a_copy_of_the_launch_s_draft_is_the_same_model_and_a_hub_id_is_not_compared(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(DRAFTS["sglang"], copy)
    code, doc = _inspect(tmp_path, copy, _launch(DRAFTS["sglang"]))
    assert "CMD009" not in [f["code"] for f in doc["findings"]] and code == 0, doc["findings"]
    (copy / "config.json").write_text((copy / "config.json").read_text().replace('"hidden_act"', '"hidden_act_x"', 1))
    _code, doc = _inspect(tmp_path, copy, _launch(DRAFTS["sglang"]))
    assert "CMD009" in [f["code"] for f in doc["findings"]]
    _code, doc = _inspect(tmp_path, DRAFTS["sglang"], _launch("org/some-eagle3-draft"))
    assert "CMD009" not in [f["code"] for f in doc["findings"]]
    assert any("not compared" in n for n in doc["serve"]["notes"]), doc["serve"]["notes"]


def test_the_same_names_and_sizes_with_other_weights_are_another_checkpoint(tmp_path: Path) -> None:
    """Two trainings of one architecture: config.json and the files' names and sizes agree, the bytes do not."""
    from safetensors.torch import load_file, save_file

    other = tmp_path / "other"
    shutil.copytree(DRAFTS["sglang"], other)
    weights = load_file(other / "model.safetensors")
    save_file({k: v + 1 if v.is_floating_point() else v for k, v in weights.items()}, other / "model.safetensors",
              metadata={"format": "pt"})  # fmt: skip
    assert (other / "model.safetensors").stat().st_size == (DRAFTS["sglang"] / "model.safetensors").stat().st_size
    _code, doc = _inspect(tmp_path, other, _launch(DRAFTS["sglang"]))
    (f,) = [f for f in doc["findings"] if f["code"] == "CMD009"]
    assert any("their weights differ: model.safetensors" in e for e in f["evidence"]), f["evidence"]
