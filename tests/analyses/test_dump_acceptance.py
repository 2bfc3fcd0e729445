"""acceptance from an engine's own capture with only the draft loaded equals the run with the target loaded.

The dumps are written by the engines' own writer code (SGLang 0.5.23's dumper hooks, vLLM 0.33.0's hidden-states
connector), executed from the release source by conformance/dump_writers.py on the fixture target's features along
its own greedy continuation, over two ranks."""

from __future__ import annotations

import shutil
import sys

import pytest
from conftest import DRAFTS, PROMPTS, ROOT, TARGET, draft_with_embeddings, engine_capture

from eagle3_doctor.analyses.acceptance.from_dump import acceptance_from_dump
from eagle3_doctor.analyses.acceptance.options import AcceptanceOptions
from eagle3_doctor.analyses.acceptance.run import measure_acceptance
from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.doctor import load_setup

sys.path.insert(0, str(ROOT / "conformance"))
from dump_writers import write_sglang_dump, write_vllm_dump  # noqa: E402

OPTS = AcceptanceOptions(num_steps=4, max_new_tokens=24, limit=6, batch_size=6)


@pytest.fixture(scope="module")
def loaded():
    """The run with the target loaded, and what an engine serving it would capture: prompts, sequences, aux rows."""
    setup = load_setup(target=str(TARGET), draft=str(DRAFTS["sglang"]), engine="sglang", dtype="float32", device="cpu")
    run = measure_acceptance(setup, OPTS, prompts_path=str(PROMPTS))
    return (run, *engine_capture(setup, OPTS))


def _same(dump_run, run):
    a, b = dump_run.paths["serving"], run.paths["serving"]
    assert a.acc_k == b.acc_k
    assert a.chain.per_position_rate == b.chain.per_position_rate
    assert a.accepted_lengths == b.accepted_lengths
    ia, ib = a.intervals.mean_acceptance_length, b.intervals.mean_acceptance_length
    assert (ia.point, ia.lo, ia.hi) == (ib.point, ib.lo, ib.hi)


def test_vllm_dump_over_two_ranks_equals_the_loaded_target(loaded, tmp_path):
    run, prompts, seqs, aux = loaded
    # two data-parallel workers, each writing its own requests; tensor-parallel rank 1 runs the same code and writes nothing
    half = len(seqs) // 2
    assert write_vllm_dump(tmp_path / "dp0", seqs[:half], aux[:half])
    assert write_vllm_dump(tmp_path / "dp1", seqs[half:], aux[half:], first_id=half)
    assert write_vllm_dump(tmp_path / "tp1", seqs, aux, tp_rank=1) == []
    dump_run, _ = acceptance_from_dump(str(DRAFTS["sglang"]), str(tmp_path), OPTS, prompt_ids=prompts, target=str(TARGET))
    assert dump_run.paths["serving"].chain.passes > 0
    _same(dump_run, run)  # request ids in prompt order: req-0 .. req-5 across both workers


@pytest.mark.parametrize("shard", [False, True], ids=["replicated", "sharded"])
def test_sglang_dump_over_two_ranks_equals_the_loaded_target(loaded, tmp_path, shard):
    run, prompts, seqs, aux = loaded
    write_sglang_dump(tmp_path, seqs, aux, ranks=2, shard=shard)
    dump_run, _ = acceptance_from_dump(str(DRAFTS["sglang"]), str(tmp_path), OPTS, prompt_ids=prompts, target=str(TARGET))
    _same(dump_run, run)
    assert any("ranks 0, 1" in n for n in dump_run.notes)
    assert any("assumed" in n and "greedy" in n for n in dump_run.notes)


def test_needs_no_target_weights(loaded, tmp_path):
    """A draft that ships its embeddings runs with the target directory absent: nothing of the target is read."""
    run, prompts, seqs, aux = loaded
    draft = draft_with_embeddings(DRAFTS["sglang"], tmp_path / "draft")
    write_sglang_dump(tmp_path / "dump", seqs, aux, ranks=2)
    dump_run, _ = acceptance_from_dump(
        str(draft), str(tmp_path / "dump"), OPTS, prompt_ids=prompts, target=str(tmp_path / "absent")
    )
    _same(dump_run, run)


def test_refusals_are_one_line(loaded, tmp_path):
    run, prompts, seqs, aux = loaded
    write_sglang_dump(tmp_path, seqs, aux, ranks=1)
    with pytest.raises(BadInput, match="ships no embed_tokens"):
        acceptance_from_dump(str(DRAFTS["sglang"]), str(tmp_path), OPTS, prompt_ids=prompts, target=None)
    with pytest.raises(BadInput, match="prompts the dump was made from"):
        acceptance_from_dump(str(DRAFTS["sglang"]), str(tmp_path), OPTS, prompt_ids=[], target=str(TARGET))
    with pytest.raises(BadInput, match="temperature"):
        acceptance_from_dump(str(DRAFTS["sglang"]), str(tmp_path), AcceptanceOptions(temperature=0.7), prompt_ids=prompts,
                             target=str(TARGET))  # fmt: skip


def test_ranks_that_disagree_are_refused(loaded, tmp_path):
    _, prompts, seqs, aux = loaded
    write_sglang_dump(tmp_path, seqs[:1], aux[:1], ranks=1)
    other = tmp_path / "r1"
    write_sglang_dump(other, seqs[:1], [a + 1 for a in aux[:1]], ranks=2)
    for f in (other / "dump_doctor").glob("*rank=1*"):
        f.rename(tmp_path / "dump_doctor" / f.name)
    shutil.rmtree(other)
    with pytest.raises(BadInput, match="rank 1 holds other aux states"):
        acceptance_from_dump(str(DRAFTS["sglang"]), str(tmp_path), OPTS, prompt_ids=prompts, target=str(TARGET))


def test_a_live_decodes_other_extends_are_skipped(loaded, tmp_path):
    """A dumper left on during a live decode also writes the prefill's extend (the prompt and one sampled token) and
    the extends after each verify (a few continuation rows): none is a prompt with a continuation, so none is scored."""
    run, prompts, seqs, aux = loaded
    prefill = [list(s[: len(p) + 1]) for s, p in zip(seqs, prompts)]
    verify = [list(s[len(p) + 3 : len(p) + 7]) for s, p in zip(seqs, prompts)]
    extra_aux = [a[: len(p) + 1] for a, p in zip(aux, prompts)] + [a[len(p) + 3 : len(p) + 7] for a, p in zip(aux, prompts)]
    write_sglang_dump(tmp_path, [*seqs, *prefill, *verify], [*aux, *extra_aux], ranks=2)
    dump_run, _ = acceptance_from_dump(str(DRAFTS["sglang"]), str(tmp_path), OPTS, prompt_ids=prompts, target=str(TARGET))
    _same(dump_run, run)
    assert any(f"{2 * len(seqs)} dump sequence(s) are no prompt with a continuation, skipped" in n for n in dump_run.notes)
    with pytest.raises(BadInput, match="no sequence is one of --prompts"):
        acceptance_from_dump(str(DRAFTS["sglang"]), str(tmp_path), OPTS, prompt_ids=[[7, 7, 7]], target=str(TARGET))
