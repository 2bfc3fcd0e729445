"""acceptance on a DFlash draft: the estimator that drafts every anchor in one forward walks the same passes as
the sequential loop, whose tokens are greedy decoding's; the planted mismatch of the fixture (the DFlash ids
copied into the key vLLM reads first, as vLLM ids) is named and measured, and its fix, applied to a copy by
its key, makes the run quiet."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FIX, PROMPTS, ROOT, TARGET, invoke

from eagle3_doctor.analyses.passes import walk
from eagle3_doctor.drafters.dflash.measure import dflash_acceptance
from eagle3_doctor.io.prompts import load_prompts

DFLASH = FIX / "dflash-draft"


def _copied(tmp_path: Path) -> tuple[Path, dict]:
    """A copy of the fixture whose config also carries its DFlash ids as eagle_aux_hidden_state_layer_ids (a
    copy-paste between recipes), which vLLM reads first, as vLLM ids; and the fixture's own config."""
    d = tmp_path / "copied"
    shutil.copytree(DFLASH, d)
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(
        json.dumps({**cfg, "eagle_aux_hidden_state_layer_ids": cfg["dflash_config"]["target_layer_ids"]})
    )
    return d, cfg


def test_passes_walk_from_anchor_to_anchor_and_stop_at_the_end():
    assert walk([2, 0, 3, 1, 3, 0, 0], 10, 17) == [2, 1, 0, 0]  # anchors 10 -> 13 -> 15 -> 16
    assert walk([3, 3, 3], 0, 3) == [2]  # capped at the continuation's last token


@pytest.mark.parametrize("engine, copied", [("sglang", False), ("vllm", True)], ids=["as-trained", "copied-ids"])
def test_the_estimator_walks_the_sequential_loops_passes(target, tmp_path, engine, copied):
    d = tmp_path / "draft"
    shutil.copytree(DFLASH, d)
    if copied:
        cfg = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps({**cfg, "eagle_aux_hidden_state_layer_ids": [1, 3, 5]}))
    prompts = [p.ids for p in load_prompts(target.tokenizer, PROMPTS, max_tokens=None, limit=4)]
    res = dflash_acceptance(target, str(d), engine, prompts, 32, lambda *a: None, reference_prompts=4)
    assert res.reference == {"path": "served" if copied else "trained", "prompts": 4,
                             "tokens_equal_greedy": True, "passes_equal_estimator": True}  # fmt: skip
    assert (res.served is not None) == copied and res.trained.passes > 4 * 32 / 4  # blocks of 4: at least a pass per 4 tokens
    assert 1.0 < res.trained.mean_acceptance_length.point <= 4.0


def test_the_planted_mismatch_is_named_measured_and_its_fix_makes_the_run_quiet(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    d, cfg = _copied(tmp_path)
    args = ["acceptance", "-t", TARGET, "-d", d, "--engine", "vllm", "--prompts", PROMPTS, "--max-new-tokens", "48"]
    r = invoke(*args, "--json", tmp_path / "a.json")
    assert r.exit_code == 1, r.output
    doc = json.loads((tmp_path / "a.json").read_text())
    jsonschema.validate(doc, json.loads((ROOT / "schemas" / "dflash-acceptance.v1.schema.json").read_text()))
    codes = {f["code"]: f for f in doc["findings"]}
    # the copied ids cost 0.098 [0.039, 0.162] tokens per pass here: clear of 0 but under the practical 0.1, so the
    # measured cost is a lead (info) and DFL001, the config as read, is the error that names the fault
    assert set(codes) == {"DFL001", "DFL004"} and codes["DFL004"]["severity"] == "info", r.output
    assert codes["DFL001"]["severity"] == "error" and "a lead, not the verdict" in codes["DFL004"]["evidence"][-1]
    assert doc["served"]["spec"] == ["layer_out[0]", "layer_out[2]", "layer_out[4]"] and doc["difference"]["hi"] < 0
    edit = codes["DFL004"]["edit"]
    (d / "config.json").write_text(json.dumps({**cfg, edit["key"]: edit["value"]}))
    r = invoke(*args)
    assert r.exit_code == 0 and "one path measured" in r.output, r.output


def test_compare_hidden_and_diagnose_on_the_planted_mismatch_name_every_slot_and_the_lever(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    d, cfg = _copied(tmp_path)
    common = ["-t", TARGET, "-d", d, "--engine", "vllm", "--prompts", PROMPTS]
    r = invoke("compare-hidden", *common, "--limit", "4", "--json", tmp_path / "c.json")
    assert r.exit_code == 1, r.output
    doc = json.loads((tmp_path / "c.json").read_text())
    jsonschema.validate(doc, json.loads((ROOT / "schemas" / "dflash-compare.v1.schema.json").read_text()))
    assert [(s["served"], s["trained"]) for s in doc["slots"]] == [(f"layer_out[{i - 1}]", f"layer_out[{i}]") for i in (1, 3, 5)]
    assert all(0 < s["rel_l2"] and s["cosine"] < 1 for s in doc["slots"]) and [f["code"] for f in doc["findings"]] == ["DFL001"]
    r = invoke("diagnose", *common, "--max-new-tokens", "48", "--json", tmp_path / "d.json")
    assert r.exit_code == 1, r.output
    doc = json.loads((tmp_path / "d.json").read_text())
    jsonschema.validate(doc, json.loads((ROOT / "schemas" / "dflash-diagnose.v1.schema.json").read_text()))
    assert list(doc["paths"])[0] == "served" and list(doc["paths"])[-1] == "trained" and len(doc["paths"]) == 5
    gain = doc["paths"]["trained"]["gain_over_served"]
    # the taps recover 0.10 [0.04, ...] here: the rule's DFL001 leads the pipeline verdict, the lever beside it measured
    assert doc["verdict"].startswith("the gap lives in the pipeline") and gain["lo"] > 0
    assert {f["code"] for f in doc["findings"]} == {"DFL001", "DFL004"}
    (d / "config.json").write_text(json.dumps(cfg))  # as trained: no lever to pull
    r = invoke("diagnose", *common, "--max-new-tokens", "16", "--limit", "2")
    assert r.exit_code == 0 and "verdict: healthy offline" in r.output and "info[HLT002]" in r.output, r.output


def test_fix_writes_the_key_the_engine_reads_and_the_copy_is_fed_the_trained_taps(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    d, cfg = _copied(tmp_path)
    before = sorted((p.name, p.read_bytes()) for p in d.iterdir())
    out = tmp_path / "fixed"
    r = invoke("fix", "-t", TARGET, "-d", d, "--engine", "vllm", "--prompts", PROMPTS, "--limit", "8",
               "--max-new-tokens", "32", "--out", out, "--json", tmp_path / "f.json")  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "f.json").read_text())
    jsonschema.validate(doc, json.loads((ROOT / "schemas" / "dflash-fix.v1.schema.json").read_text()))
    assert doc["applied"] == [
        {"code": "DFL001", "key": "eagle_aux_hidden_state_layer_ids", "op": "set", "before": [1, 3, 5], "after": [2, 4, 6]}
    ]
    # the copy is served its trained taps: quiet, and judged healthy
    assert doc["after"]["served"] is None and [f["code"] for f in doc["findings"]] == ["HLT002"]
    assert json.loads((out / "config.json").read_text())["eagle_aux_hidden_state_layer_ids"] == [2, 4, 6]
    assert sorted((p.name, p.read_bytes()) for p in d.iterdir()) == before  # the input untouched


def test_vllm_0_20_feeds_the_fixture_one_layer_early_and_the_fix_names_the_upgrade(target, tmp_path):
    """The release's own reading reaches the measurement: vLLM 0.20-0.21 (V1) took dflash_config.target_layer_ids
    as vLLM ids; the newest release adds 1. The finding names the release, its fix the key that release reads
    first and the first release that feeds the config as trained; applied, the copy is fed as trained there."""
    from eagle3_doctor.core.errors import BadInput
    from eagle3_doctor.core.findings import Fix
    from eagle3_doctor.core.taps import layer_out
    from eagle3_doctor.drafters.dflash.analysis import inspect_dflash
    from eagle3_doctor.drafters.dflash.levers import dflash_compare, dflash_diagnose, dflash_fix

    prompts = [p.ids for p in load_prompts(target.tokenizer, PROMPTS, max_tokens=None, limit=4)]
    quiet = lambda *a: None  # noqa: E731
    newest = dflash_acceptance(target, str(DFLASH), "vllm", prompts, 32, quiet)
    old = dflash_acceptance(target, str(DFLASH), "vllm", prompts, 32, quiet, engine_version="0.20.0")
    assert newest.served is None and newest.findings[0].code == "HLT002"  # fed as trained: one path
    assert old.served is not None and old.served.spec == (layer_out(0), layer_out(2), layer_out(4))
    assert old.trained.spec == (layer_out(1), layer_out(3), layer_out(5))
    codes = {f.code: f for f in old.findings}
    f = codes["DFL001"]
    assert "by vllm 0.20.0" in f.title and f.data["release"] == "vllm 0.20.0"
    assert isinstance(f.fix, Fix) and (f.fix.key, f.fix.value) == ("eagle_aux_hidden_state_layer_ids", [2, 4, 6])
    assert "upgrade to vllm 0.22.0" in f.fix
    # on 4 prompts the one-layer-early taps cost 0.046 [0.000, 0.163] tokens per pass: neither of practical size nor
    # clear of 0, so no measured cost is claimed beside DFL001
    assert "DFL004" not in codes and old.difference is not None and old.difference.hi >= 0
    # the same release through every measuring function
    assert [f.code for f in inspect_dflash(str(TARGET), str(DFLASH), "vllm", "0.21.0").findings if f.code == "DFL001"] == [
        "DFL001"
    ]
    assert not [f for f in inspect_dflash(str(TARGET), str(DFLASH), "vllm").findings if f.code == "DFL001"]
    cmp = dflash_compare(target, str(DFLASH), "vllm", prompts, engine_version="0.20.0")
    assert [s["served"] for s in cmp.slots] == ["layer_out[0]", "layer_out[2]", "layer_out[4]"]
    assert [s["served"] for s in dflash_compare(target, str(DFLASH), "vllm", prompts).slots] == [
        "layer_out[1]", "layer_out[3]", "layer_out[5]"]  # fmt: skip
    diag = dflash_diagnose(target, str(DFLASH), "vllm", prompts, 32, quiet, engine_version="0.20.0")
    assert "served" in diag.paths and any(f.code == "DFL001" and "0.20.0" in f.title for f in diag.findings)
    fixed = dflash_fix(target, str(DFLASH), "vllm", prompts, 32, str(tmp_path / "fixed"), quiet, engine_version="0.20.0")
    assert fixed.after is not None and fixed.after.served is None  # 0.20.0 now feeds the trained taps
    assert json.loads((DFLASH / "config.json").read_text()).get("eagle_aux_hidden_state_layer_ids") is None  # input untouched
    with pytest.raises(BadInput, match="vllm 0.19.1 does not serve DFlash drafts"):
        dflash_acceptance(target, str(DFLASH), "vllm", prompts, 32, quiet, engine_version="0.19.1")


def test_layer_ids_state_what_the_server_feeds_a_dflash_draft(tmp_path):
    """--layer-ids on a DFlash draft: the ids as the key the release reads would hold them, read through that
    release (vLLM's V2 runner adds one to DFlash ids), the files untouched; the fix is the edit from there."""
    draft = FIX / "dflash-draft"
    before = (draft / "config.json").read_text()
    out = tmp_path / "c.json"
    args = ["compare-hidden", "--target", TARGET, "--draft", draft, "--engine", "vllm", "--prompts", PROMPTS, "--limit", "2"]
    r = invoke(*args, "--layer-ids", "0,2,4", "--json", out)
    doc = json.loads(out.read_text())
    (f,) = [f for f in doc["findings"] if f["code"] == "DFL001"]
    assert r.exit_code == 1 and "--layer-ids [0, 2, 4]" in " ".join(f["evidence"])
    assert '"target_layer_ids": [1, 3, 5]' in f["fix"]  # what the draft was trained on, in the key vLLM reads
    r = invoke(*args, "--json", out)  # the draft's own ids: served as trained
    assert r.exit_code == 0 and not [f for f in json.loads(out.read_text())["findings"] if f["code"] == "DFL001"]
    assert (draft / "config.json").read_text() == before


@pytest.mark.parametrize("block", [2, 6])
def test_the_served_block_is_what_the_estimator_and_the_sequential_loop_draft(target, block):
    """A launch that serves blocks of another size: the served path drafts that block (each pass proposes at most
    block - 1 tokens), the estimator walks the sequential loop's passes at that block, and DFL005 names the block
    the draft was trained on, fix and all, with the measured cost beside it where there is one."""
    from eagle3_doctor.core.findings import Fix
    from eagle3_doctor.drafters.dflash.analysis import ServedBlock

    prompts = [p.ids for p in load_prompts(target.tokenizer, PROMPTS, max_tokens=None, limit=4)]
    served = ServedBlock(block, f"--speculative-num-draft-tokens {block}", "--speculative-num-draft-tokens")
    res = dflash_acceptance(target, str(DFLASH), "sglang", prompts, 32, lambda *a: None, reference_prompts=4, block=served)
    assert res.reference == {"path": "served", "prompts": 4, "tokens_equal_greedy": True, "passes_equal_estimator": True}
    assert res.served is not None and (res.served.block, res.trained.block, res.block_size) == (block, 4, 4)
    assert res.served.spec == res.trained.spec  # the taps as trained: the block alone differs
    assert max(a for per in res.served.accepted for a in per) <= block - 1
    if block == 2:  # one proposal a pass: at most 2 tokens a pass, under the 3 proposals trained
        assert max(a for per in res.served.accepted for a in per) == 1 and res.difference.hi < 0
    codes = {f.code: f for f in res.findings}
    f = codes["DFL005"]
    assert f.severity == "warning" and (f.data["served"], f.data["trained"]) == (block, 4)
    assert isinstance(f.fix, Fix) and (f.fix.key, f.fix.value) == ("--speculative-num-draft-tokens", 4)
    if block == 2:  # the measured cost, decided, carries the block's fix
        assert codes["DFL004"].severity == "error" and codes["DFL004"].fix is f.fix
    else:  # the slots past the trained block accept nothing more here: no cost to claim, DFL005 alone
        assert "DFL004" not in codes and res.difference is not None and res.difference.point == 0


def _launch(block_flag: str) -> str:
    return (f"python -m sglang.launch_server --model-path {TARGET} --speculative-algorithm DFLASH "
            f"--speculative-draft-model-path {DFLASH} {block_flag}")  # fmt: skip


def test_every_dflash_command_reads_the_launchs_block(tmp_path):
    """The user's own path: the block comes from --serve-cmd (SGLang's --speculative-num-draft-tokens, vLLM's
    num_speculative_tokens masks after the anchor) in inspect, compare-hidden, acceptance and diagnose alike; the trained block
    launched is quiet; --num-draft-tokens states it without a launch; a block that drafts nothing is refused."""
    common = ["--prompts", PROMPTS, "--max-new-tokens", "24", "--limit", "6"]
    for cmd in ("inspect", "compare-hidden"):
        more = [] if cmd == "inspect" else ["--prompts", PROMPTS, "--limit", "2"]
        r = invoke(cmd, "--serve-cmd", _launch("--speculative-num-draft-tokens 2"), *more, "--json", tmp_path / "i.json")
        doc = json.loads((tmp_path / "i.json").read_text())
        assert r.exit_code == 1 and [f["code"] for f in doc["findings"]] == ["DFL005"], r.output
    r = invoke("acceptance", "--serve-cmd", _launch("--speculative-dflash-block-size 2"), *common, "--json", tmp_path / "a.json")
    doc = json.loads((tmp_path / "a.json").read_text())
    codes = {f["code"]: f for f in doc["findings"]}
    assert r.exit_code == 1 and doc["served"]["block_size"] == 2 and codes["DFL004"]["severity"] == "error", r.output
    assert (codes["DFL005"]["edit"]["key"], codes["DFL005"]["edit"]["value"]) == ("--speculative-dflash-block-size", 4)
    r = invoke("diagnose", "--serve-cmd", _launch("--speculative-num-draft-tokens 2"), *common, "--json", tmp_path / "d.json")
    doc = json.loads((tmp_path / "d.json").read_text())
    assert set(doc["paths"]) == {"served", "block as trained (2 -> 4)", "trained"}, r.output
    assert doc["verdict"].startswith("the gap lives in the pipeline") and "the block (2 served, 4 trained)" in doc["verdict"]
    spec = json.dumps({"method": "dflash", "model": str(DFLASH), "num_speculative_tokens": 5})
    vllm = f"vllm serve {TARGET} --speculative-config '{spec}'"
    r = invoke("acceptance", "--serve-cmd", vllm, *common, "--json", tmp_path / "v.json")
    doc = json.loads((tmp_path / "v.json").read_text())
    edit = next(f["edit"] for f in doc["findings"] if f["code"] == "DFL005")
    assert doc["served"]["block_size"] == 6 and (edit["key"], edit["value"]) == ("--speculative-config.num_speculative_tokens", 3)
    r = invoke("acceptance", "--serve-cmd", _launch("--speculative-num-draft-tokens 4"), *common)
    assert r.exit_code == 0 and "one path measured" in r.output, r.output
    # an EAGLE-3 launch line copied for a DFlash draft: its draft-token budget is no block, and the algorithm is wrong
    eagle = _launch("--speculative-num-steps 1 --speculative-eagle-topk 1 --speculative-num-draft-tokens 2")
    r = invoke("inspect", "--serve-cmd", eagle.replace("DFLASH", "EAGLE3"), "--json", tmp_path / "e.json")
    codes = {f["code"]: f for f in json.loads((tmp_path / "e.json").read_text())["findings"]}
    assert "DFL005" not in codes and r.exit_code == 1, r.output
    assert (codes["CMD008"]["edit"]["key"], codes["CMD008"]["edit"]["value"]) == ("--speculative-algorithm", "DFLASH")
    spec = json.dumps({"method": "eagle3", "model": str(DFLASH), "num_speculative_tokens": 3})
    r = invoke(
        "acceptance", "--serve-cmd", f"vllm serve {TARGET} --speculative-config '{spec}'", *common, "--json", tmp_path / "v3.json"
    )
    edits = {f["code"]: f.get("edit") for f in json.loads((tmp_path / "v3.json").read_text())["findings"]}
    assert edits["CMD008"]["value"] == "dflash" and "DFL005" not in edits, r.output
    own = ["-t", TARGET, "-d", DFLASH, "--engine", "sglang", *common]
    r = invoke("acceptance", *own, "--num-draft-tokens", "3", "--json", tmp_path / "n.json")
    assert json.loads((tmp_path / "n.json").read_text())["served"]["block_size"] == 3, r.output
    r = invoke("acceptance", *own, "--num-draft-tokens", "1")
    assert r.exit_code == 2 and "a DFlash block of 1 (--num-draft-tokens 1) drafts nothing" in r.output, r.output
    assert "Traceback" not in r.output
