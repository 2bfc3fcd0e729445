"""The CLI on the MTP fixture: the drafter kind is read from the checkpoint, inspect names the planted
mismatch (MTP001) and exits 1, and `fix`'s copy is quiet under the same command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIX, PROMPTS, TARGET, invoke

MTP = Path(__file__).resolve().parents[2] / "fixtures" / "mtp-speculators"
SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "mtp.v1.schema.json").read_text())


def valid(path: Path) -> dict:
    import jsonschema

    doc = json.loads(path.read_text())
    jsonschema.validate(doc, SCHEMA)
    return doc


def test_inspect_names_mtp001_and_the_folded_copy_leaves_only_the_refusal(tmp_path):
    """vLLM refuses a speculators MTP head (MTP003, its own error): fix takes MTP001 away, not the refusal."""
    r = invoke("inspect", "-t", TARGET, "-d", MTP, "--engine", "vllm", "--json", tmp_path / "a.json")
    assert r.exit_code == 1, r.output
    out = valid(tmp_path / "a.json")
    assert out["drafter"] == "mtp" and [f["code"] for f in out["findings"]] == ["MTP003", "MTP001"]
    assert "ValueError: Expected one of" in out["findings"][0]["evidence"][0] and out["served_release"] == "0.33.0"
    assert out["trained_hidden"] == "layer_out[7]" and out["served_hidden"] == "final_norm"
    r = invoke("fix", "-t", TARGET, "-d", MTP, "--engine", "vllm", "--out", tmp_path / "fixed", "--dtype", "float32",
               "--device", "cpu", "--limit", "2", "--max-new-tokens", "16", "--num-steps", "2", "--json", tmp_path / "f.json")  # fmt: skip
    assert r.exit_code == 1, r.output
    fixed = valid(tmp_path / "f.json")
    assert fixed["command"] == "fix" and [f["code"] for f in fixed["findings"]] == ["MTP003"]
    assert [f["code"] for f in fixed["findings_before"]] == ["MTP003", "MTP001"]
    r = invoke("inspect", "-t", TARGET, "-d", tmp_path / "fixed", "--engine", "vllm", "--json", tmp_path / "b.json")
    assert r.exit_code == 1, r.output
    assert [f["code"] for f in valid(tmp_path / "b.json")["findings"]] == ["MTP003"]


def test_the_deepseek_layout_inside_a_target_is_read_and_its_recycling_checked(tmp_path):
    """The head written as DeepSeek-V3 ships it (model.layers.{L}.* in a copy of the target): vLLM's deepseek_mtp.py
    recycles the pre-norm state up to 0.23.0 (the head's post-norm training is MTP002 beside MTP001) and
    shared_head.norm's output from 0.24.0, as SGLang does."""
    from safetensors.torch import load_file

    from eagle3_doctor.draft.mtp.formats import read_mtp
    from eagle3_doctor.draft.mtp.writing import write_mtp

    sd = load_file(TARGET / "model.safetensors")
    head, _ = read_mtp(MTP, target_embed=sd["model.embed_tokens.weight"], target_head=sd["lm_head.weight"])
    write_mtp(head, tmp_path / "ds", "deepseek", target_dir=str(TARGET))
    for engine, version, codes in (
        ("vllm", "0.23.0", ["MTP001", "MTP002"]),
        ("vllm", "0.24.0", ["MTP001"]),
        ("sglang", None, ["MTP001"]),
    ):
        pin = ["--engine-version", version] if version else []
        r = invoke(
            "inspect",
            "-t",
            tmp_path / "ds",
            "-d",
            tmp_path / "ds",
            "--engine",
            engine,
            *pin,
            "--json",
            tmp_path / f"{engine}.json",
        )
        assert r.exit_code == 1, r.output
        out = valid(tmp_path / f"{engine}.json")
        assert out["layout"] == "deepseek" and sorted(f["code"] for f in out["findings"]) == codes, out
        # vLLM turns no llama target into an MTP draft (hf_config_override): said beside the rows, not hidden
        assert any("llama is not among them" in n for n in out["notes"]) == (engine == "vllm"), out["notes"]


def test_in_a_layout_an_engine_loads_the_folded_copy_makes_the_run_quiet(tmp_path):
    """The planted mismatch (a head trained on layer_out[L-1], fed final_norm) in DeepSeek's own layout, which
    SGLang loads: fix folds the final norm into hnorm in a copy, and the copy's run has no finding left (in the
    speculators layout MTP003 stays: no engine release loads it)."""
    from safetensors.torch import load_file

    from eagle3_doctor.draft.mtp.formats import read_mtp
    from eagle3_doctor.draft.mtp.writing import write_mtp

    sd = load_file(TARGET / "model.safetensors")
    head, _ = read_mtp(MTP, target_embed=sd["model.embed_tokens.weight"], target_head=sd["lm_head.weight"])
    write_mtp(head, tmp_path / "ds", "deepseek", target_dir=str(TARGET))
    ds = tmp_path / "ds"
    common = ["--engine", "sglang", "--prompts", PROMPTS, "--limit", "4", "--max-new-tokens", "32", "--num-steps", "3"]
    r = invoke("fix", "-t", ds, "-d", ds, *common, "--out", tmp_path / "fixed", "--json", tmp_path / "f.json")
    assert r.exit_code == 0 and "MTP001: hnorm.weight folded" in r.output, r.output
    r = invoke("acceptance", "-t", ds, "-d", tmp_path / "fixed", *common, "--json", tmp_path / "a.json")
    codes = [f["code"] for f in json.loads((tmp_path / "a.json").read_text())["findings"]]
    assert r.exit_code == 0 and codes == ["HLT002"], r.output


def test_a_dflash_draft_is_inspected_and_a_broken_one_refused_in_one_line(tmp_path):
    import torch
    from safetensors.torch import save_file

    d = tmp_path / "dflash"
    d.mkdir()
    cfg = {"architectures": ["DFlashDraftModel"], "num_hidden_layers": 2, "hidden_size": 128,
           "dflash_config": {"target_layer_ids": [1, 4]}, "eagle_aux_hidden_state_layer_ids": [1, 4]}  # fmt: skip
    (d / "config.json").write_text(json.dumps(cfg))
    save_file({"fc.weight": torch.zeros(128, 256)}, str(d / "model.safetensors"))
    r = invoke("inspect", "-t", TARGET, "-d", d, "--engine", "vllm", "--json", tmp_path / "v.json")
    assert r.exit_code == 1, r.output
    import jsonschema

    doc = json.loads((tmp_path / "v.json").read_text())
    jsonschema.validate(doc, json.loads((Path(__file__).resolve().parents[2] / "schemas" / "dflash.v1.schema.json").read_text()))
    assert [f["code"] for f in doc["findings"]] == ["DFL001"] and doc["fc_taps"] == 2
    edit = doc["findings"][0]["edit"]
    (d / "config.json").write_text(json.dumps({**cfg, edit["key"]: edit["value"]}))  # the fix, applied to the copy by its key
    r = invoke("inspect", "-t", TARGET, "-d", d, "--engine", "vllm")
    assert r.exit_code == 0, r.output
    (d / "config.json").write_text(json.dumps(cfg))
    r = invoke("inspect", "-t", TARGET, "-d", d, "--engine", "sglang")
    assert r.exit_code == 0, r.output
    for cmd in ("acceptance", "diagnose", "compare-hidden", "fix"):  # they run DFlash drafts: this one has no block
        r = invoke(cmd, "-t", TARGET, "-d", d, "--engine", "vllm", *(["--out", tmp_path / "fixed"] if cmd == "fix" else []))
        assert r.exit_code == 2 and "block_size" in r.output and "Traceback" not in r.output, (cmd, r.output)


def test_the_launch_command_names_the_mtp_head(tmp_path):
    """`vllm serve <speculators mtp checkpoint>` serves its verifier with the head; `--speculative-config
    {"method": "mtp"}` drafts with the target's own layer: both reach the MTP checks with the command's steps."""
    r = invoke("inspect", "--serve-cmd", f"vllm serve {MTP}", "--json", tmp_path / "a.json")
    assert r.exit_code == 1, r.output
    assert [f["code"] for f in valid(tmp_path / "a.json")["findings"]] == ["MTP003", "MTP001"]
    from eagle3_doctor.engines.launch import load

    sc = load('vllm serve fixtures/target --speculative-config \'{"method": "mtp", "num_speculative_tokens": 2}\'', None)
    assert sc is not None and sc.draft == sc.target == "fixtures/target" and sc.num_steps == 2


def test_acceptance_on_the_mtp_head_writes_the_acceptance_document(tmp_path):
    """The acceptance document, valid against its own schema, with the MTP checks under "mtp" and the reference loop's
    agreement; MTP001 weighed by the measurement (a warning where the paired difference reaches 0)."""
    import jsonschema

    r = invoke("acceptance", "-t", TARGET, "-d", MTP, "--engine", "vllm", "--dtype", "float32", "--device", "cpu", "--limit", "2",
               "--max-new-tokens", "24", "--num-steps", "3", "--reference-loop", "-q", "--json", tmp_path / "a.json")  # fmt: skip
    assert r.exit_code in (0, 1), r.output
    doc = json.loads((tmp_path / "a.json").read_text())
    jsonschema.validate(
        doc, json.loads((Path(__file__).resolve().parents[2] / "schemas" / "acceptance.v1.schema.json").read_text())
    )
    jsonschema.validate({**doc["mtp"], "tool": doc["tool"]}, SCHEMA)
    assert doc["reference"]["agrees_with_estimator"] and doc["reference"]["same_tokens"]
    f = next(f for f in doc["findings"] if f["code"] == "MTP001")
    assert (f["severity"] == "warning") == (f["data"]["recovered"]["lo"] <= 0)
    # vLLM refuses the speculators layout (MTP003, an error): the figures are those of the layout it loads
    assert doc["findings"][0]["code"] == "MTP003" and r.exit_code == 1


def test_compare_hidden_and_diagnose_write_mtp_documents(tmp_path):
    common = ["-t", TARGET, "-d", MTP, "--engine", "vllm", "--dtype", "float32", "--device", "cpu", "--limit", "2", "-q"]
    r = invoke("compare-hidden", *common, "--json", tmp_path / "c.json")
    assert r.exit_code == 1, r.output
    c = valid(tmp_path / "c.json")
    assert c["command"] == "compare-hidden" and c["tokens"] > 0 and 0 < c["rel_l2"] and c["cosine"] <= 1
    r = invoke("diagnose", *common, "--max-new-tokens", "24", "--num-steps", "3", "--json", tmp_path / "d.json")
    assert r.exit_code in (0, 1), r.output
    d = valid(tmp_path / "d.json")
    assert d["command"] == "diagnose" and d["verdict"] and d["recovered"] is not None


@pytest.mark.parametrize("draft", [MTP, FIX / "dflash-draft"], ids=["mtp", "dflash"])
def test_an_eagle3_command_on_another_drafter_names_the_commands_that_run_it(draft):
    """fingerprint, speedup and gate read EAGLE-3 drafts: another drafter is one line naming what it is, not the EAGLE-3
    reader's list of keys the other layout does not have."""
    for cmd in ("fingerprint", "speedup", "gate"):
        r = invoke(cmd, "-t", TARGET, "-d", draft, "--prompts", PROMPTS, *(["--limit", "2"] if cmd != "gate" else []))
        assert r.exit_code == 2 and "this command runs EAGLE-3 drafts" in r.output and "Traceback" not in r.output, r.output
        assert "run inspect, compare-hidden, acceptance, diagnose or fix on it" in r.output


@pytest.mark.parametrize("draft", [MTP, FIX / "dflash-draft"], ids=["mtp", "dflash"])
@pytest.mark.parametrize("flag", [["--device-map", "auto"], ["--stream-layers"]], ids=["device-map", "stream-layers"])
def test_a_loading_option_the_other_drafters_do_not_honour_is_refused_not_dropped(draft, flag):
    """Their target loads whole on one device: --device-map or --stream-layers would be silently ignored."""
    r = invoke("compare-hidden", "-t", TARGET, "-d", draft, "--prompts", PROMPTS, "--limit", "2", *flag)
    assert r.exit_code == 2 and f"{flag[0]} is not supported for" in r.output and "Traceback" not in r.output, r.output
