"""`diagnose --server-metrics`: a live profile with a runtime fault planted (fixtures/serving/make_fault_scrapes.py,
the fault run through the doctor's own reference loop) is named as that fault, in the terminal and the JSON; a kind
that does not simulate runtime faults refuses the option."""

from __future__ import annotations

import json

import pytest
from conftest import DRAFTS, FIX, PROMPTS, ROOT, SERVING, TARGET, invoke


def test_diagnose_names_the_planted_runtime_fault(tmp_path):
    out = tmp_path / "d.json"
    r = invoke("diagnose", "-t", TARGET, "-d", DRAFTS["speculators"], "--engine", "vllm", "--prompts", PROMPTS, "--limit", "4",
               "--num-steps", "5", "--max-new-tokens", "48", "--server-metrics", SERVING / "vllm-after-kv-layout-shift.prom",
               "--json", out)  # fmt: skip
    assert r.exit_code == 1, r.output  # RTF001 is an error
    assert (
        "error[RTF001]: a runtime fault explains the live profile: the draft's KV cache is read through another layout"
        in r.output
    )
    assert "runtime-fault signatures against the live profile" in r.output
    doc = json.loads(out.read_text())
    ranking = doc["runtime_faults"]["ranking"]
    assert ranking["verdict"] == "kv-layout-shift"
    best, second = ranking["ranking"][:2]
    assert best["name"] == "kv-layout-shift" and best["fits"]
    assert second["chi2"] - best["chi2"] >= 3.84 and not second["fits"]
    assert [f["code"] for f in doc["findings"]].count("RTF001") == 1
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(doc, json.loads((ROOT / "schemas" / "diagnose.v1.schema.json").read_text()))


def test_a_kind_without_fault_signatures_refuses_server_metrics():
    r = invoke("diagnose", "-t", TARGET, "-d", FIX / "mtp-speculators", "--engine", "vllm", "--prompts", PROMPTS,
               "--server-metrics", SERVING / "vllm-after-healthy.prom")  # fmt: skip
    assert r.exit_code == 2
    assert "--server-metrics is not supported for" in r.output


def test_the_server_temperature_predicts_the_sampled_classes(tmp_path):
    """The argmax proposal planted with the target sampling at 1 (fixtures/serving/make_fault_scrapes.py): named where
    --server-temperature states the workload's temperature; at the default 0 the greedy classes are ranked instead."""
    live = SERVING / "vllm-responses-argmax-proposal-t1.jsonl"
    base = ["diagnose", "-t", TARGET, "-d", DRAFTS["speculators"], "--engine", "vllm", "--prompts", PROMPTS, "--limit", "6",
            "--max-tokens", "40", "--num-steps", "5", "--max-new-tokens", "48", "--server-metrics", live]  # fmt: skip
    out = tmp_path / "d.json"
    r = invoke(*base, "--server-temperature", "1", "--json", out)
    assert r.exit_code == 1, r.output
    assert "error[RTF001]: a runtime fault explains the live profile: the draft proposes its argmax" in r.output
    doc = json.loads(out.read_text())["runtime_faults"]
    assert doc["measured"]["temperature"] == 1.0
    assert doc["ranking"]["verdict"] == "argmax-proposal"
    assert [f["name"] for f in doc["ranking"]["ranking"]] == ["argmax-proposal", "as trained"]
    greedy = tmp_path / "g.json"
    invoke(*base, "--json", greedy)
    ranked = {f["name"] for f in json.loads(greedy.read_text())["runtime_faults"]["ranking"]["ranking"]}
    assert "argmax-proposal" not in ranked and "kv-layout-shift" in ranked


@pytest.mark.parametrize(
    "extra,says",
    [
        (["--server-temperature", "1"], "--server-temperature states the live workload's temperature: it needs --server-metrics"),
        (["--server-temperature", "-1", "--server-metrics", SERVING / "vllm-after-healthy.prom"], "--server-temperature"),
    ],
)
def test_a_server_temperature_without_figures_or_out_of_range_is_refused(extra, says):
    r = invoke("diagnose", "-t", TARGET, "-d", DRAFTS["speculators"], "--engine", "vllm", "--prompts", PROMPTS, *extra)
    assert r.exit_code == 2, r.output
    assert r.output.startswith("eagle3-doctor: error:") and r.output.count("\n") == 1 and says in r.output, r.output
