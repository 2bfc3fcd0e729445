"""`acceptance --engine-dump` (and `diagnose --engine-dump`) as typed: the draft alone on an engine's capture gives the loaded run's JSON figures, with
no --target at all, and every option that needs the target is one line, exit 2."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import DRAFTS, FIX, PROMPTS, ROOT, TARGET, draft_with_embeddings, engine_capture, invoke

from eagle3_doctor.analyses.acceptance.options import AcceptanceOptions
from eagle3_doctor.doctor import load_setup

sys.path.insert(0, str(ROOT / "conformance"))
from dump_writers import write_sglang_dump, write_vllm_dump  # noqa: E402

LIMIT, NEW, K = 4, 24, 4


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """Both engines' dumps of the fixture target's greedy continuations (two ranks each), the prompts as ids, and
    the JSON of the run with the target loaded."""
    tmp = tmp_path_factory.mktemp("dumps")
    setup = load_setup(target=str(TARGET), draft=str(DRAFTS["sglang"]), engine="sglang", dtype="float32", device="cpu")
    prompts, seqs, aux = engine_capture(setup, AcceptanceOptions(max_new_tokens=NEW, limit=LIMIT))
    (tmp / "prompts.jsonl").write_text("".join(json.dumps({"input_ids": p}) + "\n" for p in prompts))
    write_sglang_dump(tmp / "sglang", seqs, aux, ranks=2)
    write_vllm_dump(tmp / "vllm" / "dp0", seqs[:2], aux[:2])
    write_vllm_dump(tmp / "vllm" / "dp1", seqs[2:], aux[2:], first_id=2)
    r = invoke("acceptance", "--target", TARGET, "--draft", DRAFTS["sglang"], "--prompts", PROMPTS, "--limit", LIMIT,
               "--max-new-tokens", NEW, "--num-steps", K, "--dtype", "float32", "--json", tmp / "loaded.json")  # fmt: skip
    assert r.exit_code == 0, r.output
    draft = draft_with_embeddings(DRAFTS["sglang"], tmp / "draft-own-embed")
    return tmp, draft, json.loads((tmp / "loaded.json").read_text())


@pytest.mark.parametrize("layout", ["sglang", "vllm"])
def test_no_target_gives_the_loaded_runs_figures(dumps, layout):
    tmp, draft, loaded = dumps
    out = tmp / f"{layout}.json"
    r = invoke("acceptance", "--draft", draft, "--engine-dump", tmp / layout, "--prompts", tmp / "prompts.jsonl",
               "--num-steps", K, "--json", out)  # fmt: skip
    assert r.exit_code == 0, r.output
    got, want = json.loads(out.read_text())["paths"]["serving"], loaded["paths"]["serving"]
    for key in ("acc_k", "chain", "intervals", "accepted_lengths", "tau", "step1_by_position"):
        assert got[key] == want[key], key
    doc = json.loads(out.read_text())
    assert doc["settings"]["target"].startswith("(not loaded")
    assert any("assumed" in n and "greedy" in n for n in doc["notes"])


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--train-dump", str(FIX / "specforge-dump")], "--train-dump needs the target loaded"),
        (["--continuation", "text"], "--continuation text"),
        (["--continuation", "speculative"], "--continuation speculative runs the target"),
        (["--temperature", "0.7"], "temperature > 0"),
    ],
)
def test_what_needs_the_target_is_refused(dumps, extra, words):
    tmp, draft, _ = dumps
    r = invoke("acceptance", "--draft", draft, "--engine-dump", tmp / "sglang", "--prompts", tmp / "prompts.jsonl", *extra)
    assert r.exit_code == 2 and words in r.output, r.output


def test_a_draft_without_embeddings_needs_the_targets_tensor(dumps):
    tmp, _, _ = dumps
    r = invoke("acceptance", "--draft", DRAFTS["sglang"], "--engine-dump", tmp / "sglang", "--prompts", tmp / "prompts.jsonl")
    assert r.exit_code == 2 and "ships no embed_tokens" in r.output, r.output


def test_text_prompts_need_a_tokenizer(dumps):
    tmp, draft, _ = dumps
    r = invoke("acceptance", "--draft", draft, "--engine-dump", tmp / "sglang", "--prompts", PROMPTS)
    assert r.exit_code == 2 and "text prompts need the target's tokenizer" in r.output, r.output


def test_other_kinds_refuse_it(dumps):
    tmp, _, _ = dumps
    r = invoke("acceptance", "--target", TARGET, "--draft", FIX / "mtp-speculators", "--engine-dump", tmp / "sglang")
    assert r.exit_code == 2 and "--engine-dump is not supported" in r.output, r.output


def test_diagnose_runs_on_the_dump_alone(dumps):
    tmp, draft, _ = dumps
    out = tmp / "diagnose.json"
    r = invoke("diagnose", "--draft", draft, "--engine-dump", tmp / "vllm", "--prompts", tmp / "prompts.jsonl",
               "--num-steps", K, "--json", out)  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    # the verdict itself is held to the loaded run's in tests/analyses/test_dump_diagnose.py (this run is 4 prompts)
    assert doc["schema"].startswith("eagle3-doctor/diagnose") and len(doc["modules"]) == 3
    assert any("assumed" in n and "greedy" in n for n in doc["notes"])
    r = invoke("diagnose", "--draft", draft, "--engine-dump", tmp / "vllm", "--prompts", tmp / "prompts.jsonl",
               "--train-data", FIX / "conversations" / "openai.jsonl")  # fmt: skip
    assert r.exit_code == 2 and "--train-data needs the target loaded" in r.output, r.output


def test_a_hub_target_is_not_downloaded_for_one_tensor(dumps):
    tmp, draft, _ = dumps
    r = invoke("acceptance", "--draft", draft, "--engine-dump", tmp / "vllm", "--prompts", tmp / "prompts.jsonl",
               "--target", "meta-llama/Llama-3.1-8B-Instruct")  # fmt: skip
    assert r.exit_code == 2 and "is a hub id" in r.output, r.output


def test_a_dump_only_run_names_positions_drafted_for_nothing(tmp_path):
    """HLT004 reads the chain as served from a dump-only run too (no release is named there): drafting 16 a pass on
    the fixture draft, the same finding as the run with the target loaded, on the calibration corpus's case."""
    n, new, k = 16, 128, 16
    setup = load_setup(target=str(TARGET), draft=str(DRAFTS["sglang"]), engine="sglang", dtype="float32", device="cpu")
    prompts, seqs, aux = engine_capture(setup, AcceptanceOptions(max_new_tokens=new, limit=n))
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps({"input_ids": p}) + "\n" for p in prompts))
    write_sglang_dump(tmp_path / "dump", seqs, aux, ranks=1)
    draft = draft_with_embeddings(DRAFTS["sglang"], tmp_path / "draft")
    common = ("--num-steps", k, "--quiet")
    r = invoke("acceptance", "--target", TARGET, "--draft", DRAFTS["sglang"], "--prompts", PROMPTS, "--limit", n,
               "--max-new-tokens", new, "--dtype", "float32", "--json", tmp_path / "loaded.json", *common)  # fmt: skip
    assert r.exit_code == 0, r.output  # a warning fails nothing
    r = invoke("acceptance", "--draft", draft, "--engine-dump", tmp_path / "dump", "--prompts", tmp_path / "prompts.jsonl",
               "--json", tmp_path / "dump.json", *common)  # fmt: skip
    assert r.exit_code == 0, r.output  # a warning fails nothing

    def hlt004(name: str) -> dict:
        (f,) = [f for f in json.loads((tmp_path / name).read_text())["findings"] if f["code"] == "HLT004"]
        return f

    got, want = hlt004("dump.json"), hlt004("loaded.json")
    assert (got["title"], got["evidence"], got["fix"]) == (want["title"], want["evidence"], want["fix"])
