"""The MTP serving rules (draft/mtp/served.py mtp_serving) against the engines' own MTP code, executed:
eagle3_doctor/draft/mtp/serving.json (written by `make conformance`, conformance/mtp_exec.py) and a re-execution,
here, of the release files kept in conformance/testdata/. No download."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "conformance"))
import mtp_exec  # noqa: E402
from releases import RELEASES  # noqa: E402

from eagle3_doctor.draft.mtp.served import mtp_serving  # noqa: E402

TABLE = json.loads((ROOT / mtp_exec.PACKAGE_TABLE).read_text())
ROWS = {r["id"]: r for r in TABLE["rows"]}
TESTDATA = ROOT / "conformance" / "testdata"
FIXTURE = json.loads((ROOT / mtp_exec.FIXTURE).read_text())
READ_OFF = ("recycle", "recycle_norms", "logits_norms", "concat", "sides", "recycled_expr", "logits_expr")


def behaviour(engine: str, version: str, family: str) -> dict:
    return ROWS[TABLE["release_rows"][engine][version][family]]["behaviour"]


def test_every_listed_release_has_an_mtp_row_per_family():
    for engine in ("sglang", "vllm"):
        assert TABLE["releases"][engine] == RELEASES[engine], "releases.py changed: run `make conformance`"
        for v in RELEASES[engine]:
            assert set(TABLE["release_rows"][engine][v]) == set(mtp_exec.FAMILIES[engine])
            for rid in TABLE["release_rows"][engine][v].values():
                assert v in ROWS[rid]["releases"]
            assert v in TABLE["speculators"][engine]


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_mtp_serving_is_the_executed_row_of_every_release(engine):
    """served.py answers from the table: per release and family the recycled state is the executed one, and with
    no release named it is the newest release's."""
    for v in RELEASES[engine]:
        for fam in mtp_exec.FAMILIES[engine]:
            b = behaviour(engine, v, fam)
            if "absent" in b:
                continue
            s = mtp_serving(engine, "deepseek", v, fam)
            assert (s.release, s.family, s.recycle) == (v, fam, b["recycle"]), (engine, v, fam)
            assert b["executed"][0] in s.recycle_source and "executed" in s.recycle_source
            assert s.hidden_source.endswith(("(pattern, not executed)", f"runner {b['step1'].get('runner')}"))
    newest = RELEASES[engine][-1]
    assert mtp_serving(engine, "deepseek").release == newest
    assert mtp_serving(engine, "deepseek").recycle == behaviour(engine, newest, "deepseek_v3")["recycle"]


def test_the_reported_recycling_bugs_are_told_apart_per_release():
    # vLLM's deepseek_mtp.py recycled residual + hidden_states without shared_head.norm up to 0.23.0
    assert behaviour("vllm", "0.23.0", "deepseek_v3")["recycle"] == "pre_norm"
    assert behaviour("vllm", "0.24.0", "deepseek_v3")["recycle_norms"] == ["shared_head.norm"]
    # GLM-4-MoE's MTP layer still recycles the pre-norm state in the newest release; its logits read shared_head.norm
    glm = behaviour("vllm", "0.33.0", "glm4_moe")
    assert glm["recycle"] == "pre_norm" and glm["logits_norms"] == ["shared_head.norm"]
    # Qwen3-Next / Qwen3.5: the MTP model's own norm, post-norm, in both engines and every release that has them
    for engine in ("sglang", "vllm"):
        for fam in ("qwen3_next", "qwen3_5"):
            for v in RELEASES[engine]:
                b = behaviour(engine, v, fam)
                assert "absent" in b or (b["recycle"] == "post_norm" and b["recycle_norms"][0].startswith("norm")), (engine, v)
    # SGLang: shared_head.norm's output, every release
    assert all(behaviour("sglang", v, "deepseek_v3")["recycle"] == "post_norm" for v in RELEASES["sglang"])
    # the inputs: the embedding first; vLLM zeroes it at position 0, SGLang does not
    for engine, zeroed in (("vllm", True), ("sglang", False)):
        b = behaviour(engine, RELEASES[engine][-1], "deepseek_v3")
        assert b["concat"] == ["embed", "hidden"] and [s["norms"] for s in b["sides"]] == [["enorm"], ["hnorm"]]
        assert b["sides"][0]["zeroed_at_position_0"] is zeroed


def test_vllm_refuses_a_speculators_mtp_head_in_its_own_words():
    spec = TABLE["speculators"]["vllm"]
    newest = spec[RELEASES["vllm"][-1]]
    assert "mtp" not in newest["registered"] and newest["extract_vllm_speculative_config"]["method"] == "mtp"
    assert newest["extract_transformers_pre_trained_config"].startswith("!ValueError: Expected one of: {'eagle3'")
    assert spec["0.14.0"]["extract_vllm_speculative_config"].startswith("!ValueError: Expected one of")
    assert spec["0.8.4"]["reader"] is None and spec["0.10.1"]["from_pretrained"].startswith("!ValueError: Expected one of")
    assert all(mtp_serving("vllm", "speculators", v).refusal for v in RELEASES["vllm"])  # no release reads it
    s = mtp_serving("vllm", "speculators")
    assert s.refusal is not None and "extract_transformers_pre_trained_config raises ValueError" in s.refusal
    assert s.recycle == "post_norm" and s.hidden_source.startswith("as vllm serves the layout it does load")
    assert "deepseek_v3" in s.served_targets and "llama" not in s.served_targets
    assert TABLE["speculators"]["sglang"][RELEASES["sglang"][-1]]["reader"] is None
    assert mtp_serving("sglang", "speculators").refusal is not None


@pytest.mark.parametrize(
    ("engine", "version", "family"),
    [
        ("vllm", "0.33.0", "deepseek_v3"),
        ("vllm", "0.33.0", "glm4_moe"),
        ("vllm", "0.23.0", "deepseek_v3"),
        ("sglang", "0.5.23", "deepseek_v3"),
    ],
)
def test_the_release_files_in_testdata_reexecute_to_their_committed_rows(engine, version, family):
    """The model files as released, executed here: the same recycled and logits states as the committed row
    (vLLM: the proposer's split as the row executed it; SGLang: the state the model hands its logits processor)."""
    rel = mtp_exec.Release(engine, TESTDATA / engine / version, version)
    b = behaviour(engine, version, family)
    if engine == "vllm":
        got, _ = mtp_exec.vllm_model(rel, mtp_exec.FAMILIES["vllm"][family], b["class"], b["split"]["tuple"])
    else:
        got = mtp_exec.run_sglang(rel, family)
    assert {k: got[k] for k in READ_OFF} == {k: b[k] for k in READ_OFF}
    row = ROWS[TABLE["release_rows"][engine][version][family]]
    if row["executed_from"] == version:  # the row's file:line are this release's
        assert got["executed"] == b["executed"][: len(got["executed"])]


def test_the_speculators_reader_in_testdata_reexecutes_to_its_refusal():
    got = mtp_exec.speculators(TESTDATA / "vllm" / "0.33.0", FIXTURE)
    want = TABLE["speculators"]["vllm"]["0.33.0"]
    for k in ("registered", "extract_vllm_speculative_config", "extract_transformers_pre_trained_config"):
        assert got[k] == want[k], k
