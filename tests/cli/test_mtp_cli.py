"""The CLI on the MTP fixture: the drafter kind is read from the checkpoint, inspect names the planted
mismatch (MTP001) and exits 1, and `fix`'s copy is quiet under the same command."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import TARGET, invoke

MTP = Path(__file__).resolve().parents[2] / "fixtures" / "mtp-speculators"
SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "mtp.v1.schema.json").read_text())


def valid(path: Path) -> dict:
    import jsonschema

    doc = json.loads(path.read_text())
    jsonschema.validate(doc, SCHEMA)
    return doc


def test_inspect_names_mtp001_and_the_folded_copy_is_quiet(tmp_path):
    r = invoke("inspect", "-t", TARGET, "-d", MTP, "--engine", "vllm", "--json", tmp_path / "a.json")
    assert r.exit_code == 1, r.output
    out = valid(tmp_path / "a.json")
    assert out["drafter"] == "mtp" and [f["code"] for f in out["findings"]] == ["MTP001"]
    assert out["trained_hidden"] == "layer_out[7]" and out["served_hidden"] == "final_norm"
    r = invoke("fix", "-t", TARGET, "-d", MTP, "--engine", "vllm", "--out", tmp_path / "fixed", "--dtype", "float32",
               "--device", "cpu", "--limit", "2", "--max-new-tokens", "16", "--num-steps", "2", "--json", tmp_path / "f.json")  # fmt: skip
    assert r.exit_code == 0, r.output
    fixed = valid(tmp_path / "f.json")
    assert fixed["command"] == "fix" and fixed["findings"] == [] and [f["code"] for f in fixed["findings_before"]] == ["MTP001"]
    r = invoke("inspect", "-t", TARGET, "-d", tmp_path / "fixed", "--engine", "vllm", "--json", tmp_path / "b.json")
    assert r.exit_code == 0, r.output
    assert valid(tmp_path / "b.json")["findings"] == []


def test_the_deepseek_layout_inside_a_target_is_read_and_its_recycling_checked(tmp_path):
    """The head written as DeepSeek-V3 ships it (model.layers.{L}.* in a copy of the target): under vLLM, whose
    deepseek_mtp.py recycles the pre-norm state, the head's post-norm training is MTP002 beside MTP001."""
    from safetensors.torch import load_file

    from eagle3_doctor.draft.mtp.formats import read_mtp
    from eagle3_doctor.draft.mtp.writing import write_mtp

    sd = load_file(TARGET / "model.safetensors")
    head, _ = read_mtp(MTP, target_embed=sd["model.embed_tokens.weight"], target_head=sd["lm_head.weight"])
    write_mtp(head, tmp_path / "ds", "deepseek", target_dir=str(TARGET))
    for engine, codes in (("vllm", ["MTP001", "MTP002"]), ("sglang", ["MTP001"])):
        r = invoke(
            "inspect", "-t", tmp_path / "ds", "-d", tmp_path / "ds", "--engine", engine, "--json", tmp_path / f"{engine}.json"
        )
        assert r.exit_code == 1, r.output
        out = valid(tmp_path / f"{engine}.json")
        assert out["layout"] == "deepseek" and sorted(f["code"] for f in out["findings"]) == codes, out
