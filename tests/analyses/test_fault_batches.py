"""Live profiles at several batch sizes (`diagnose --server-metrics FILE@N`), through the CLI: a wrong-sequence gather
planted in the doctor's own reference loop with the prompts decoded N to a batch (each request fed the next request's
target rows, the batch's last its own: test_fault_signatures' plant, its partner chosen within the batch) falls with
the batch size and is named hidden-rows-other-sequence; a clean profile, flat over the batch sizes, is as trained.
The plants never run analyses/faults; fixtures/serving/make_fault_scrapes.py writes the scrapes the docs show."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import DRAFTS, PROMPTS, SERVING, TARGET, invoke
from test_fault_signatures import _pair, _reference, vllm_scrape

K = 5
# 8 prompts decoded 8 to a batch: 7 of them read another's rows; 48 new tokens keep the diagnose runs to seconds
LIMIT, NEW = 8, 48
BATCHES = (1, 8)
CLI = ["diagnose", "-t", TARGET, "-d", DRAFTS["speculators"], "--engine", "vllm", "--prompts", PROMPTS, "--limit",
       str(LIMIT), "--num-steps", str(K), "--max-new-tokens", str(NEW)]  # fmt: skip


def plant_batched(setup, rep, k: int, batch: int) -> list[list[int]]:
    """Draft tokens accepted per pass, per prompt, the prompts decoded ``batch`` to a batch in their order, each
    request's draft fed the target rows of the next request of its batch (the batch's last, and a request alone, its
    own): the reference loop with its target step's rows swapped."""
    n = len(rep.seqs)

    def step_for(base, i):
        j = i + 1
        if j >= n or j // batch != i // batch:
            return base
        other = base(rep.seqs[j])[0]

        def step(tokens):
            _, amax = base(tokens)
            idx = torch.arange(len(tokens)).clamp(max=other.shape[1] - 1)
            return other[:, idx], amax

        return step

    return _reference(setup, rep, k, step=step_for)


@pytest.fixture(scope="module")
def scrapes(tmp_path_factory):
    """The planted scrapes at each batch size, written as vLLM's counters; the shipped ones are these, byte for byte."""
    setup, rep = _pair(LIMIT, NEW)
    out = tmp_path_factory.mktemp("scrapes")
    files = {}
    for b in BATCHES:
        files[b] = out / f"vllm-after-other-sequence-b{b}.prom"
        files[b].write_text(vllm_scrape(plant_batched(setup, rep, K, b), K))
        assert files[b].read_text() == (SERVING / files[b].name).read_text()
    return files


def _diagnose(tmp_path, *scrapes: str):
    out = tmp_path / "d.json"
    r = invoke(*CLI, *[a for s in scrapes for a in ("--server-metrics", s)], "--json", out)
    return r, json.loads(out.read_text())["runtime_faults"]


def test_acceptance_falling_with_batch_size_is_the_batched_gather(scrapes, tmp_path):
    r, doc = _diagnose(tmp_path, f"{scrapes[1]}@1", f"{scrapes[8]}@8")
    assert r.exit_code == 1, r.output  # RTF001 is an error
    assert "error[RTF001]: a runtime fault explains the live profile: the draft is fed another request's" in r.output
    rk = doc["ranking"]
    assert rk["verdict"] == "hidden-rows-other-sequence" and rk["batch_sizes"] == [1, 8]
    assert [p["batch_size"] for p in doc["measured"]["per_batch"]] == [1, 8]
    live = [p["mean_acceptance_length"] for p in doc["measured"]["per_batch"]]
    assert live[1] < live[0]  # the planted fall
    best, second = rk["ranking"][:2]
    assert best["name"] == "hidden-rows-other-sequence" and best["fits"]
    assert second["chi2"] - best["chi2"] >= 3.84
    assert [p["batch_size"] for p in best["per_batch"]] == [1, 8]
    assert best["dof"] == sum(p["dof"] for p in best["per_batch"])
    # at batch 1 the class is the fault-free prediction: the two agree there
    clean = next(f for f in rk["ranking"] if f["name"] == "as trained")
    assert best["per_batch"][0]["mean_acceptance_length"] == clean["per_batch"][0]["mean_acceptance_length"]


def test_a_flat_clean_profile_is_as_trained(scrapes, tmp_path):
    r, doc = _diagnose(tmp_path, f"{scrapes[1]}@1", f"{scrapes[1]}@8")
    assert r.exit_code == 0, r.output
    assert doc["ranking"]["verdict"] == "as trained"
    assert "info[RTF003]" in r.output
    other = next(f for f in doc["ranking"]["ranking"] if f["name"] == "hidden-rows-other-sequence")
    assert not other["fits"]
