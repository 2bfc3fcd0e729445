"""P-EAGLE drafts: the estimator that drafts every pass in one forward walks the same passes as the sequential loop,
whose tokens are greedy decoding's, run in parallel and as a chain; the parallel slots' mask is speculators' own,
executed; the fixture's planted mismatch (a converted config typed eagle3, which vLLM drafts as a chain) is named,
measured and, fixed on a copy by its key, quiet."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import torch
from conftest import FIX, PROMPTS, ROOT, TARGET, invoke

from eagle3_doctor.draft.peagle.model import _mask
from eagle3_doctor.drafters.peagle.analysis import peagle_acceptance
from eagle3_doctor.io.prompts import load_prompts

PEAGLE = FIX / "peagle-draft"
SCHEMAS = ROOT / "schemas"


def _copy(tmp_path: Path, name: str = "draft", **changes) -> Path:
    d = tmp_path / name
    shutil.copytree(PEAGLE, d)
    cfg = json.loads((d / "config.json").read_text())
    for k, v in changes.items():
        if k == "inner_mask_token_id":
            cfg["transformer_layer_config"]["mask_token_id"] = v
        else:
            cfg[k] = v
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def _as_eagle3(tmp_path: Path) -> Path:
    """The planted mismatch: the config a converter writes for an EAGLE-3 engine path; the weights keep mask_hidden."""
    return _copy(tmp_path, "as-eagle3", speculators_model_type="eagle3", architectures=["Eagle3Speculator"])


def test_the_parallel_mask_is_speculators_own():
    spec = importlib.util.spec_from_file_location(
        "peagle_attention", ROOT / "conformance/testdata/speculators/peagle_attention.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    T, k = 7, 4
    anchors = torch.tensor([0, 2, 5])
    depth = torch.arange(1, k).repeat(3)
    anchor = anchors.repeat_interleave(k - 1)
    a_all, d_all = torch.cat([torch.arange(T), anchor]), torch.cat([torch.zeros(T, dtype=torch.long), depth])
    mm = mod.create_peagle_mask_mod(a_all, d_all, torch.zeros(T + k, dtype=torch.long))
    n = a_all.shape[0]
    theirs = torch.tensor([[bool(mm(0, 0, torch.tensor(q), torch.tensor(kv))) for kv in range(n)] for q in range(n)])
    assert torch.equal(_mask(T, anchor, depth), theirs)


@pytest.mark.parametrize("case", ["as-trained", "as-eagle3", "inner-token"])
def test_the_estimator_walks_the_sequential_loops_passes(target, tmp_path, case):
    d = {"as-trained": lambda: PEAGLE, "as-eagle3": lambda: _as_eagle3(tmp_path),
         "inner-token": lambda: _copy(tmp_path, inner_mask_token_id=2)}[case]()  # fmt: skip
    prompts = [p.ids for p in load_prompts(target.tokenizer, PROMPTS, max_tokens=None, limit=4)]
    res = peagle_acceptance(target, str(d), "vllm", None, prompts, 32, lambda *a: None, reference_prompts=4)
    assert res.reference == {"path": "trained" if case == "as-trained" else "served", "prompts": 4,
                             "tokens_equal_greedy": True, "passes_equal_estimator": True}  # fmt: skip
    served = res.ways.get("served")
    assert (served is None) == (case == "as-trained")
    if served is not None:
        assert (served.mode, served.token) == (("chain", None) if case == "as-eagle3" else ("parallel", 2))
    assert 1.0 < res.figures["trained"].point <= 5.0 and sum(map(len, res.passes["trained"])) >= 4 * 32 / 5


def test_the_planted_mismatch_is_named_measured_and_fixed_on_a_copy(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    d = _as_eagle3(tmp_path)
    before = sorted((p.name, p.read_bytes()) for p in d.iterdir())
    args = ["-t", TARGET, "-d", d, "--engine", "vllm", "--prompts", PROMPTS, "--limit", "8", "--max-new-tokens", "48"]
    r = invoke("acceptance", *args, "--json", tmp_path / "a.json")
    assert r.exit_code == 1, r.output
    doc = json.loads((tmp_path / "a.json").read_text())
    jsonschema.validate(doc, json.loads((SCHEMAS / "peagle-acceptance.v1.schema.json").read_text()))
    codes = {f["code"]: f for f in doc["findings"]}
    # beside them, the chain's positions 3-4 are reached by under 1% of these 218 passes, too few to bound: HLT005
    assert set(codes) == {"PEA001", "PEA004", "HLT005"} and codes["PEA004"]["severity"] == "error", r.output
    assert doc["paths"]["served"]["mode"] == "chain" and doc["difference"]["hi"] < 0
    assert codes["PEA001"]["edit"]["key"] == "speculators_model_type" and codes["PEA001"]["edit"]["value"] == "peagle"
    out = tmp_path / "fixed"
    r = invoke("fix", *args, "--out", out, "--json", tmp_path / "f.json")
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "f.json").read_text())
    jsonschema.validate(doc, json.loads((SCHEMAS / "peagle-fix.v1.schema.json").read_text()))
    assert doc["applied"] == [
        {"code": "PEA001", "key": "speculators_model_type", "op": "set", "before": "eagle3", "after": "peagle"}
    ]
    # the copy runs in parallel: quiet, and judged healthy
    assert list(doc["after"]["paths"]) == ["trained"] and [f["code"] for f in doc["findings"]] == ["HLT002"]
    assert sorted((p.name, p.read_bytes()) for p in d.iterdir()) == before  # the input untouched


def test_diagnose_sets_each_difference_back_and_measures_the_slot_positions(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    d = _as_eagle3(tmp_path)
    r = invoke("diagnose", "-t", TARGET, "-d", d, "--engine", "vllm", "--prompts", PROMPTS, "--limit", "8",
               "--max-new-tokens", "48", "--json", tmp_path / "d.json")  # fmt: skip
    assert r.exit_code == 1 and "verdict: the gap lives in the pipeline" in r.output, r.output
    doc = json.loads((tmp_path / "d.json").read_text())
    jsonschema.validate(doc, json.loads((SCHEMAS / "peagle-diagnose.v1.schema.json").read_text()))
    assert doc["order"] == ["served", "parallel drafting as trained", "trained", "trained, slots at the anchor's position"]
    assert (
        "(the way the engine runs the draft: running it as trained gains" in doc["verdict"]
        and doc["paths"]["trained"]["gain_over_served"]["lo"] > 0
    )
    assert doc["paths"]["trained, slots at the anchor's position"]["positions"] == "anchor"
    assert {"PEA001", "PEA004"} <= {f["code"] for f in doc["findings"]}


@pytest.mark.parametrize(
    ("engine", "version", "changes", "code", "says"),
    [
        ("vllm", None, {}, None, "parallel, K 4"),
        ("vllm", "0.21.0", {}, "PEA002", "upgrade to vllm 0.22.0"),
        ("vllm", None, {"mask_token_id": None}, "PEA002", "mask_token_id"),
        ("vllm", "0.33.0", {"inner_mask_token_id": 2}, "PEA003", "transformer_layer_config.mask_token_id"),
        ("vllm", "0.27.1", {"inner_mask_token_id": 2}, None, "parallel, K 4"),
        ("sglang", None, {}, "PEA002", "SGLang has no P-EAGLE class"),
        ("vllm", None, {"mask_token_id": 0}, "DRF014", "all-zero embedding row"),
    ],
    ids=["vllm", "vllm-0.21", "no-mask-token", "inner-token", "inner-token-0.27", "sglang", "pad-mask"],
)
def test_inspect_says_how_each_engine_release_runs_the_draft(tmp_path, engine, version, changes, code, says):
    d = _copy(tmp_path, **changes)
    ver = ["--engine-version", version] if version else []
    r = invoke("inspect", "-t", TARGET, "-d", d, "--engine", engine, *ver, "--json", tmp_path / "i.json")
    doc = json.loads((tmp_path / "i.json").read_text())
    assert [f["code"] for f in doc["findings"]] == ([code] if code else []), r.output
    assert says in r.output and r.exit_code == (0 if code is None else 1), r.output


def test_a_mask_hidden_tensor_makes_an_eagle3_checkpoint_a_peagle_draft(tmp_path):
    d = _as_eagle3(tmp_path)
    r = invoke("fingerprint", "-t", TARGET, "-d", d)
    assert r.exit_code == 2 and "is a P-EAGLE draft (a P-EAGLE draft: a mask_hidden tensor" in r.output, r.output
    r = invoke("compare-hidden", "-t", TARGET, "-d", d, "--engine", "vllm", "--prompts", PROMPTS, "--limit", "2")
    assert r.exit_code == 0, r.output  # its taps are EAGLE-3's, and vLLM feeds the trained ones


def test_a_draft_trained_with_its_slots_at_the_anchor_is_told_apart_by_diagnose(target, monkeypatch):
    """A draft that learned every parallel slot at its anchor's position (a trainer that ignored position_ids) is
    what diagnose's anchor lever is for. Played here by swapping the two layouts inside the draft: the engine's
    a + d then runs what the draft did not learn, and PEA005 must say the anchor layout accepts more."""
    from eagle3_doctor.draft.peagle.model import PEagleDraft
    from eagle3_doctor.drafters.peagle.levers import ANCHOR, peagle_diagnose

    real = PEagleDraft.slot_logits
    swap = {"offset": "anchor", "anchor": "offset"}
    monkeypatch.setattr(
        PEagleDraft, "slot_logits", lambda self, a, i, s, k, positions="offset": real(self, a, i, s, k, swap[positions])
    )
    prompts = [p.ids for p in load_prompts(target.tokenizer, PROMPTS, max_tokens=None, limit=8)]
    d = peagle_diagnose(target, str(PEAGLE), "vllm", None, prompts, 48, lambda *a: None)
    # served as trained, so no lever: the layout only retraining changes is the checkpoint's (never "healthy")
    assert list(d.paths) == ["trained", ANCHOR] and d.verdict.startswith("the problem lives in the checkpoint")
    assert "(PEA005: " in d.verdict
    assert d.paths[ANCHOR]["gain_over_trained"]["lo"] > 0
    assert [f.code for f in d.findings] == ["PEA005"] and "retrain" in d.findings[0].fix


@pytest.mark.parametrize(
    ("tensor", "says"),
    [((1, 1, 128), "mask_hidden holds 128 values, the fc takes 384"), (None, "holds no mask_hidden tensor")],
    ids=["misshapen", "missing"],
)
def test_a_mask_hidden_the_draft_cannot_run_with_is_one_line(tmp_path, tensor, says):
    from safetensors.torch import load_file, save_file

    d = _copy(tmp_path)
    sd = load_file(d / "model.safetensors")
    sd.pop("mask_hidden")
    if tensor is not None:
        sd["mask_hidden"] = torch.zeros(tensor)
    save_file(sd, d / "model.safetensors")
    r = invoke("acceptance", "-t", TARGET, "-d", d, "--engine", "vllm", "--prompts", PROMPTS, "--limit", "1")
    assert r.exit_code == 2 and says in r.output and "Traceback" not in r.output, r.output


@pytest.mark.parametrize(("k", "codes"), [(2, {"PEA004", "PEA006"}), (6, {"PEA006", "HLT005"})], ids=["fewer", "more"])
def test_the_launch_lines_tokens_a_pass_are_the_served_k(tmp_path, k, codes):
    """Fewer slots than trained cap every pass (a measured cost); more add depths the draft never learned, which
    cost no acceptance but verify work: PEA006 either way, PEA004 only where the served way accepts less; the added
    depths are reached by under 1% of these 189 passes, too few to call them dead (HLT005)."""
    r = invoke("acceptance", "-t", TARGET, "-d", PEAGLE, "--engine", "vllm", "--prompts", PROMPTS, "--limit", "8",
               "--max-new-tokens", "48", "--num-steps", str(k), "--json", tmp_path / "a.json")  # fmt: skip
    doc = json.loads((tmp_path / "a.json").read_text())
    assert {f["code"] for f in doc["findings"]} == codes and doc["paths"]["served"]["k"] == k, r.output
    assert doc["difference"]["hi"] < 0 if k == 2 else doc["difference"]["lo"] >= 0


def test_each_finding_names_the_release_and_a_fix_that_needs_a_later_one_names_the_first(tmp_path):
    """An eagle3-typed copy on vLLM 0.20.0: setting the type alone would be refused there (the type is read from
    0.22.0), so PEA001's fix names the upgrade beside the config edit; on the newest release the edit alone does."""
    from eagle3_doctor.drafters.peagle.analysis import inspect_peagle

    d = _as_eagle3(tmp_path)
    (old,) = inspect_peagle(str(TARGET), str(d), "vllm", "0.20.0").findings
    (new,) = inspect_peagle(str(TARGET), str(d), "vllm", None).findings
    assert old.code == new.code == "PEA001"
    assert old.title.startswith("vllm 0.20.0 drafts") and new.title.startswith("vllm 0.33.0 drafts")
    assert "upgrade to vllm 0.22.0" in old.fix and "upgrade" not in new.fix
    assert old.edit is not None and (old.edit.key, old.edit.value) == ("speculators_model_type", "peagle")
    (refused,) = inspect_peagle(str(TARGET), str(PEAGLE), "vllm", "0.21.0").findings
    assert (
        refused.code == "PEA002" and refused.title.startswith("vllm 0.21.0 refuses") and "upgrade to vllm 0.22.0" in refused.fix
    )


def test_layer_ids_state_what_the_server_feeds_a_peagle_draft(tmp_path):
    """--layer-ids on a P-EAGLE draft: read as EAGLE-3 ids are (its taps are EAGLE-3's), so vLLM's [0, 2, 3] feed
    embed, layer_out[1], layer_out[2] where the draft was trained on layer_out[1, 3, 4]."""
    out = tmp_path / "a.json"
    r = invoke("acceptance", "--target", TARGET, "--draft", FIX / "peagle-draft", "--engine", "vllm", "--layer-ids", "0,2,3",
               "--prompts", PROMPTS, "--limit", "2", "--max-new-tokens", "16", "--json", out)  # fmt: skip
    assert r.exit_code in (0, 1), r.output
    doc = json.loads(out.read_text())
    served = json.dumps(doc["served"] if "served" in doc else doc)
    assert "--layer-ids [0, 2, 3]" in served and "embed" in served
