"""acceptance on the fixtures: the parallel estimator equals the sequential loop, and wiring
mistakes cost what fixtures/README.md recorded."""

from __future__ import annotations

import re

import pytest
from conftest import DRAFTS, DUMP, FIX, PROMPTS, TARGET

from eagle3_doctor.core.taps import format_spec
from eagle3_doctor.doctor import acceptance, load_setup


def setup_for(layer_ids=None, engine="sglang", draft="sglang"):
    return load_setup(
        target=str(TARGET), draft=str(DRAFTS[draft]), engine=engine, layer_ids=layer_ids, dtype="float32", device="cpu"
    )


@pytest.fixture(scope="module")
def shifted_run():
    return acceptance(
        setup_for([-1, 1, 3]), prompts_path=str(PROMPTS), num_steps=5, max_new_tokens=48, limit=8, reference=True, batch_size=4
    )


def test_estimator_equals_reference_loop_on_every_prompt(shifted_run):
    ref = shifted_run.reference
    assert ref.same_tokens, "the loop's greedy tokens must equal the continuation the estimator used"
    assert ref.agrees_with_estimator
    assert ref.accepted_lengths == shifted_run.paths["serving"].accepted_lengths
    assert sum(len(a) for a in ref.accepted_lengths) == shifted_run.paths["serving"].chain.passes


def test_estimator_equals_reference_loop_with_correct_features():
    run = acceptance(
        setup_for(), prompts_path=str(PROMPTS), num_steps=7, max_new_tokens=64, limit=6, reference=True, batch_size=3
    )
    assert run.reference.agrees_with_estimator and run.reference.same_tokens
    lengths = [a for r in run.reference.accepted_lengths for a in r]
    assert max(lengths) >= 3, "a trained draft should get several tokens accepted somewhere"


def _recorded_margin(name: str) -> float:
    text = (FIX / "README.md").read_text()
    row = next(ln for ln in text.splitlines() if ln.startswith(f"| {name} |"))
    return float(re.findall(r"\| ([+-]?\d+\.\d+) \|$", row)[0])


def test_correct_features_beat_the_seed_shift_by_the_recorded_margin(shifted_run):
    s, t = shifted_run.paths["serving"], shifted_run.paths["training"]
    drop = 100 * (t.acc_k[0] - s.acc_k[0])
    recorded = -_recorded_margin("seed-style slot shift (embed first)")
    assert recorded >= 15
    assert drop >= 0.5 * recorded, (drop, recorded)
    assert t.chain.mean_acceptance_length > s.chain.mean_acceptance_length
    assert any(f.code == "ACC001" for f in shifted_run.findings)


def test_every_convention_comes_from_the_same_counts(shifted_run):
    c = shifted_run.paths["training"].chain
    acc = [a for r in shifted_run.paths["training"].accepted_lengths for a in r]
    assert c.passes == len(acc)
    assert c.mean_acceptance_length == pytest.approx(1 + sum(acc) / len(acc))
    assert c.per_position_rate[0] == pytest.approx(sum(a >= 1 for a in acc) / len(acc))


def test_tree_temperature_and_text_modes():
    run = acceptance(
        setup_for(), prompts_path=str(PROMPTS), num_steps=4, max_new_tokens=32, limit=4, topk=3, temperature=0.8, batch_size=4
    )
    p = run.paths["serving"]
    assert p.tree.mean_acceptance_length >= p.chain.mean_acceptance_length
    e = p.temperature.expected_mean_acceptance_length
    assert 1.0 <= e <= 5.0
    rates = p.temperature.expected_per_position_rate
    assert all(a >= b for a, b in zip(rates, rates[1:]))
    text = acceptance(setup_for(), prompts_path=str(PROMPTS), num_steps=3, continuation="text", limit=4)
    assert text.paths["serving"].chain.passes > 0


def test_scan_recovers_the_trained_capture_points():
    run = acceptance(setup_for([-1, 1, 3]), prompts_path=str(PROMPTS), num_steps=1, max_new_tokens=48, limit=8, scan=True)
    assert format_spec(run.scan[0].spec) == "layer_out[1], layer_out[3], layer_out[4]"
    # the configured (trained) capture points are the best: no ACC004, their paired difference is 0
    assert run.scan[0].configured and run.scan[0].diff_to_configured.point == 0
    assert not any(f.code == "ACC004" for f in run.findings)
    lo, hi = run.scan[0].step1_acc_ci
    assert lo < run.scan[0].step1_acc < hi


def test_the_weights_fit_reads_a_measured_paths_step_one_instead_of_running_it_again(monkeypatch):
    """Every wiring a path was measured on with the draft as trained (the serving and the training path here) is
    counted from that path's own step 1: the same ranking to the last count, with those unrolls not run twice."""
    from eagle3_doctor.analyses import weights_fit
    from eagle3_doctor.analyses.acceptance import estimator

    wrong = "spec:layer_out[2],layer_out[4],layer_out[5]"
    s = load_setup(
        target=str(TARGET), draft=str(DRAFTS["sglang"]), engine="sglang", train_recipe=wrong, dtype="float32", device="cpu"
    )
    calls: list[int] = []
    real_unroll, real_add = estimator.unroll_outcomes, weights_fit.WeightsFit.add

    def counted(d, aux, *a, **k):  # the fit's own unrolls: it imports the function at each call
        calls.append(aux.shape[-1])
        return real_unroll(d, aux, *a, **k)

    monkeypatch.setattr(estimator, "unroll_outcomes", counted)

    def measure():
        calls.clear()
        run = acceptance(s, prompts_path=str(PROMPTS), num_steps=2, max_new_tokens=16, limit=6, scan=True, batch_size=3)
        return run, len(calls)

    reused, n_reused = measure()
    monkeypatch.setattr(
        weights_fit.WeightsFit, "add", lambda self, rb, labels, starts, known=None: real_add(self, rb, labels, starts)
    )
    rerun, n_rerun = measure()
    assert {"serving", "training"} <= set(reused.paths)
    assert n_rerun - n_reused == 2 * 2  # two wirings read off the paths, in each of the two batches
    key = [(r.spec, r.step1_acc, r.n, r.step1_acc_ci, r.diff_to_configured) for r in rerun.scan]
    assert [(r.spec, r.step1_acc, r.n, r.step1_acc_ci, r.diff_to_configured) for r in reused.scan] == key


@pytest.mark.parametrize("fit_prompts", [128, 2])
def test_the_weights_fit_counts_the_first_positions_of_each_sequence_exactly(monkeypatch, fit_prompts):
    """The fit runs each wiring's draft on the batch cut after its last counted position: the counts equal the
    whole batch's step 1 restricted to the first STEP1_POSITIONS positions from each sequence's start, on the
    greedy continuation (starts past the prompt) and with the cap biting; known paths masked the same way. With
    more prompts than FIT_PROMPTS it counts every n-th prompt of the run (here 0 and 3 of 6), those rows exactly."""
    import torch

    from eagle3_doctor.analyses import weights_fit
    from eagle3_doctor.analyses.acceptance.estimator import unroll_outcomes
    from eagle3_doctor.model import recorded

    monkeypatch.setattr(weights_fit, "STEP1_POSITIONS", 5)
    monkeypatch.setattr(weights_fit, "FIT_PROMPTS", fit_prompts)
    rows_counted: list[int] = []
    real_add = weights_fit.WeightsFit.add
    checked: list[int] = []

    def add_and_check(self, rb, labels, starts, known=None):
        before = {c: len(v) for c, v in self.hits.items()}
        real_add(self, rb, labels, starts, known)
        pos = torch.arange(rb.tokens.shape[1])
        region = torch.stack([(pos >= s) & (pos < s + 5) for s in starts])
        rows = self.window.sequences
        keep = [j for j, i in enumerate(rb.index) if rows is None or i in rows]
        rows_counted.extend(rb.index[j] for j in keep)
        for c in self.cands:
            aux = torch.cat([rb.captured[p] for p in c], dim=-1)
            out = unroll_outcomes(self.draft, aux, rb.tokens, labels, rb.batch.lengths, 1)
            want = list(zip((out.match[:, 0] & region).sum(1).tolist(), (out.valid[:, 0] & region).sum(1).tolist()))
            assert self.hits[c][before[c] :] == [want[j] for j in keep], c
            assert max(v for _, v in want) == 5  # the cap bit: every row has more than 5 scored positions
            checked.append(1)

    monkeypatch.setattr(weights_fit.WeightsFit, "add", add_and_check)
    # the whole batch's taps for the reference: no recording, which keeps the wirings' only where the fit reads them
    # (the recorded run's fit is the replayed one's: tests/model/test_recorded.py)
    monkeypatch.setattr(recorded, "SHARE", 0.0)
    s = load_setup(
        target=str(TARGET), draft=str(DRAFTS["sglang"]), engine="sglang",
        train_recipe="spec:layer_out[2],layer_out[4],layer_out[5]", dtype="float32", device="cpu",
    )  # fmt: skip
    acceptance(s, prompts_path=str(PROMPTS), num_steps=2, max_new_tokens=16, limit=6, scan=True, batch_size=3)
    assert len(checked) >= 2 * 8
    assert sorted(rows_counted) == ([0, 3] if fit_prompts == 2 else list(range(6)))


def test_scan_finding_decides_on_the_paired_interval():
    """A training recipe one layer late: the scan finds the trained points, and ACC004 says so with
    the paired interval of the difference; on fewer than stats.MIN_PROMPTS prompts it is not called."""
    wrong = "spec:layer_out[2],layer_out[4],layer_out[5]"

    def run(limit):
        s = load_setup(
            target=str(TARGET), draft=str(DRAFTS["sglang"]), engine="sglang", train_recipe=wrong, dtype="float32", device="cpu"
        )
        return acceptance(s, prompts_path=str(PROMPTS), num_steps=1, max_new_tokens=24, limit=limit, scan=True)

    eight = run(8)
    f = next(f for f in eight.findings if f.code == "ACC004")
    assert (
        f.title
        == f"the draft's weights fit {format_spec(eight.scan[0].spec)}, not the configured layer_out[2], layer_out[4], layer_out[5]"
    )
    # the engine feeds [1, 3, 4], which the weights fit as well as any: the recipe is wrong, the ids are not
    assert f.severity == "warning" and "the declared training side is wrong" in str(f.fix) and f.edit is None
    assert not eight.scan[0].configured
    d = eight.scan[0].diff_to_configured
    assert d.lo > 0 and "paired bootstrap over 8 prompts" in f.evidence[0]
    configured = next(r for r in eight.scan if r.configured)
    assert format_spec(configured.spec) == "layer_out[2], layer_out[4], layer_out[5]"
    # the capture points the draft was trained on are never ruled out: the best, or tied with it
    trained = next(r for r in eight.scan if format_spec(r.spec) == "layer_out[1], layer_out[3], layer_out[4]")
    assert trained is eight.scan[0] or trained.tied_with_best
    tied = [r for r in eight.scan[1:] if r.tied_with_best and not r.configured]
    assert bool(tied) == (len(f.evidence) == 2) and all(format_spec(r.spec) in f.evidence[-1] for r in tied)
    few = run(4)
    assert few.scan[0].diff_to_configured.n == 4 and not any(f.code == "ACC004" for f in few.findings)


def test_dump_path_measures_along_the_dump_text():
    run = acceptance(setup_for(), train_dump=str(DUMP), num_steps=3, limit=2)
    assert run.settings.continuation == "text"
    # the dump holds exactly the trained features, so both paths agree
    assert run.paths["training"].acc_k == pytest.approx(run.paths["serving"].acc_k, abs=1e-6)


def test_per_prompt_lists_line_up_across_paths(shifted_run):
    """Both paths walk the same continuation of prompt i: their passes cover the same tokens."""
    s = shifted_run.paths["serving"].accepted_lengths
    t = shifted_run.paths["training"].accepted_lengths
    assert len(s) == len(t) == 8
    for a, b in zip(s, t):
        assert abs(sum(x + 1 for x in a) - sum(x + 1 for x in b)) <= 1


def test_temperature_acceptance_in_chunks_of_positions_equals_the_whole_logits(setup_sglang):
    """--temperature > 0 takes the target's logits a chunk of positions at a time (never [B, T, V] whole):
    the expected acceptance is the one computed from the whole tensor."""
    import torch

    from eagle3_doctor.analyses.acceptance.estimator import unroll_outcomes
    from eagle3_doctor.model.target import capture, head_chunks, make_batch

    tgt, draft, spec = setup_sglang.target, setup_sglang.draft, setup_sglang.serving.spec
    batch = make_batch([list(range(5, 45)), list(range(100, 131))], 0, tgt.device)

    def labels(k):
        return torch.roll(batch.input_ids, -(1 + k), dims=1)

    with torch.inference_mode():  # as the acceptance run itself
        got, last = capture(tgt, batch, spec, want_logits=True)
        aux = torch.cat([got[p] for p in spec], dim=-1)
        full = torch.cat([lg for _, lg in head_chunks(tgt, last)]).view(*last.shape[:-1], -1)  # [B, T, V]

        def whole(k):
            return [(slice(None), torch.roll(full, -k, dims=1).reshape(-1, full.shape[-1]))]

        def chunked(k):
            return head_chunks(tgt, torch.roll(last, -k, dims=1), chunk=7)

        a = unroll_outcomes(draft, aux, batch.input_ids, labels, batch.lengths, 3, temperature=0.7, target_logits=whole)
        b = unroll_outcomes(draft, aux, batch.input_ids, labels, batch.lengths, 3, temperature=0.7, target_logits=chunked)
    assert float(a.alpha.sum()) > 1.0  # something is accepted: the comparison below is not of zeros
    torch.testing.assert_close(b.alpha, a.alpha, rtol=1e-5, atol=1e-6)


def test_a_continuation_shorter_than_the_chain_leaves_the_later_steps_unmeasured_not_nan():
    """acc_k past the last position any prompt reached has nothing to measure: "n/a" in the report, null in
    strict JSON (NaN is not JSON: jq refuses the document), tau over the measured steps, no numpy warning."""
    import json
    import subprocess
    import sys

    from conftest import DRAFTS, PROMPTS, ROOT, TARGET

    args = ["acceptance", "--target", TARGET, "--draft", DRAFTS["sglang"], "--prompts", PROMPTS, "--max-new-tokens", "4"]
    r = subprocess.run(
        [sys.executable, "-m", "eagle3_doctor", *map(str, args), "--limit", "2", "--json", "-"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode in (0, 1) and "Warning" not in r.stderr, r.stderr[-800:]
    doc = json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    acc = doc["paths"]["serving"]["acc_k"]
    assert acc[:3] == [pytest.approx(a) for a in acc[:3]] and all(a is not None for a in acc[:3])
    assert acc[3:] == [None] * 4  # four new tokens: no position reached step 4 of 7
    assert doc["paths"]["serving"]["tau"] == pytest.approx(1 + acc[0] + acc[0] * acc[1] + acc[0] * acc[1] * acc[2])
    text = subprocess.run(
        [sys.executable, "-m", "eagle3_doctor", *map(str, args), "--limit", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    assert "nan" not in text and "acc_4 (SpecForge)" in text and "| n/a" in text


def test_later_steps_past_the_prompts_alone_give_the_figures_of_every_base(monkeypatch):
    """The estimator runs steps 2..K from the batch's first scored base on (the prompts' bases are counted at step 1
    alone): a whole run's figures, per prompt and per step, are those of the unroll over every base."""
    from eagle3_doctor.analyses.acceptance import measurement

    def run():
        return acceptance(setup_for([-1, 1, 3]), prompts_path=str(PROMPTS), num_steps=5, max_new_tokens=24, limit=6, batch_size=3)

    seen: list[int] = []
    real = measurement.unroll_outcomes

    def every_base(*a, from_base=0, **k):
        seen.append(from_base)
        return real(*a, **k)

    cut = run()
    monkeypatch.setattr(measurement, "unroll_outcomes", every_base)
    whole = run()
    assert min(seen) > 0, "the fixture prompts' scoring starts past their first token"
    for name, p in whole.paths.items():
        q = cut.paths[name]
        assert (q.accepted_lengths, q.acc_k, q.acc_k_positions, q.step1_counts) == (
            p.accepted_lengths,
            p.acc_k,
            p.acc_k_positions,
            p.step1_counts,
        ), name
