"""The taps the greedy continuation's decode records are the replay's own forward's, and a run that has them runs no
second target forward.

Held against the independent reference, the replay's batched forward over the finished sequences
(``model.replay.iter_captures`` without a recording): every point and the final norm at every position of every
sequence, within float32's rounding (a decode step multiplies one position where the forward multiplied a batch).
"""

from __future__ import annotations

import json

import pytest
import torch
from conftest import DRAFTS, PROMPTS, SERVING, TARGET, invoke

from eagle3_doctor.core.graphs import slots
from eagle3_doctor.core.taps import EVERYWHERE, TapWindow, embed, final_norm, layer_out
from eagle3_doctor.model.continuation import greedy_continue
from eagle3_doctor.model.recorded import plan_recording, recording_bytes
from eagle3_doctor.model.replay import iter_captures, prompt_sequences

POINTS = {embed(), layer_out(0), layer_out(1)}


@pytest.fixture(scope="module")
def prompts(target):
    got, _ = prompt_sequences(target, str(PROMPTS), 512, 7)
    return [p.ids for p in got]


def _batches(target, seqs, recorded):
    return {
        i: (rb.tokens[r], {p: t[r] for p, t in rb.captured.items()}, rb.last[r], rb.mask[r])
        for rb in iter_captures(target, seqs, POINTS, batch_size=3, want_logits=True, recorded=recorded)
        for r, i in enumerate(rb.index)
    }


@pytest.mark.parametrize("eos_at", [None, 5])
def test_recorded_taps_are_the_replay_forwards(target, prompts, eos_at, monkeypatch):
    import eagle3_doctor.model.static as static

    want_seqs = greedy_continue(target, prompts, 24, 3)
    if eos_at is not None:  # a token one row generates early made the EOS: rows end at several lengths
        eos = want_seqs[0][len(prompts[0]) + eos_at]
        monkeypatch.setattr(static, "eos_and_pad", lambda tok: (eos, 0))
        want_seqs = greedy_continue(target, prompts, 24, 3)
        assert len({len(s) - len(p) for s, p in zip(want_seqs, prompts)}) > 1
    rec = plan_recording(target, POINTS | {final_norm()}, len(prompts), max(map(len, prompts)) + 24)
    assert rec is not None
    seqs = greedy_continue(target, prompts, 24, 3, record=rec)
    assert seqs == want_seqs and rec.covers(POINTS | {final_norm()})
    got, ref = _batches(target, seqs, rec), _batches(target, seqs, None)
    assert sorted(got) == list(range(len(seqs)))
    for i, (tok, taps, last, mask) in ref.items():
        g_tok, g_taps, g_last, g_mask = got[i]
        assert torch.equal(g_tok, tok) and torch.equal(g_mask, mask)
        n = len(seqs[i])
        for p in POINTS:
            torch.testing.assert_close(g_taps[p][:n], taps[p][:n], rtol=1e-4, atol=1e-5)
            assert not g_taps[p][n:].any() and not taps[p][n:].any()  # padding reads zero either way
        torch.testing.assert_close(g_last[:n], last[:n], rtol=1e-4, atol=1e-5)
        assert torch.equal(g_last.argmax(-1)[: n - 1], last.argmax(-1)[: n - 1])


@pytest.mark.parametrize("eos_at", [None, 2])
@pytest.mark.parametrize("grouped", [False, True])
def test_a_windowed_tap_is_recorded_where_it_is_read_and_nowhere_else(target, prompts, eos_at, grouped, monkeypatch):
    """A point read at a few sequences' first positions (the weights' fit's wirings) is kept there alone: read back it
    equals the forward's inside its window, comes back as wide as the window, whether or not a row ran that far (a
    reader cuts every point at one width; past it, it fails on the shape, never reads zeros as taps), and its other
    rows read zero; a reader wanting more of it than was kept gets the forward instead. ``grouped``: the prefill
    runs each row alone, in an order unlike the batch's, each forward's taps written straight into the recording."""
    import eagle3_doctor.model.static as static

    new, rows, after = 24, frozenset({0, 2, 5}), 4
    if eos_at is not None:  # one row ends inside the window: the batch's width is still the window's
        eos = greedy_continue(target, prompts, new, 3)[0][len(prompts[0]) + eos_at]
        monkeypatch.setattr(static, "eos_and_pad", lambda tok: (eos, 0))
    if grouped:
        monkeypatch.setattr(static, "prefill_groups", lambda lengths: [[i] for i in reversed(range(len(lengths)))])
    reads = {embed(): EVERYWHERE, layer_out(0): TapWindow(rows, after), final_norm(): TapWindow(after=0)}
    longest = max(map(len, prompts))
    rec = plan_recording(target, reads, len(prompts), longest + new, longest)
    assert rec is not None
    full = recording_bytes(target, set(reads), len(prompts), slots(longest + new))
    assert rec.nbytes < full  # two of the three points kept in their windows
    seqs = greedy_continue(target, prompts, new, 3, record=rec)
    held = sum(k.taps.numel() * k.taps.element_size() for b in rec.blocks for k in b.kept.values())
    assert held <= rec.nbytes  # what the plan counted bounds what the batches hold
    assert rec.covers(reads) and not rec.covers({layer_out(0): TapWindow(rows, after + 1)})
    assert not rec.covers({layer_out(0): EVERYWHERE}) and not rec.covers({layer_out(0): TapWindow(rows | {1}, after)})
    windows = {layer_out(0): TapWindow(rows, after), final_norm(): TapWindow(after=0)}
    kw = {"batch_size": len(seqs), "want_logits": True, "windows": windows}  # the early row beside longer ones
    ref = {i: (rb, r) for rb in iter_captures(target, seqs, [embed(), layer_out(0)], **kw) for r, i in enumerate(rb.index)}
    got = iter_captures(target, seqs, [embed(), layer_out(0)], recorded=rec, **kw)
    seen = 0
    for rb in got:
        plen = [len(prompts[i]) for i in rb.index]
        assert rb.captured[layer_out(0)].shape[1] == min(rb.tokens.shape[1], max(plen) + after)
        assert rb.last is not None and rb.last.shape[1] == max(plen)
        assert rb.captured[embed()].shape[1] == rb.tokens.shape[1]
        for r, i in enumerate(rb.index):
            want, wr = ref[i]
            n = len(seqs[i])
            torch.testing.assert_close(rb.captured[embed()][r, :n], want.captured[embed()][wr, :n])
            torch.testing.assert_close(rb.last[r, : plen[r]], want.last[wr, : plen[r]], rtol=1e-4, atol=1e-5)
            tap = rb.captured[layer_out(0)][r]
            if i in rows:
                m = plen[r] + after
                torch.testing.assert_close(tap[:m], want.captured[layer_out(0)][wr, :m], rtol=1e-4, atol=1e-5)
                assert not tap[m:].any()
            else:
                assert not tap.any()
            seen += 1
    assert seen == len(seqs)


def test_a_batch_through_generate_leaves_the_recording_unused(hf_target, prompts, monkeypatch):
    import eagle3_doctor.model.continuation as continuation

    monkeypatch.setattr(continuation, "greedy_static", lambda *a, **k: None)
    rec = plan_recording(hf_target, POINTS, len(prompts), 200)
    assert rec is not None
    seqs = greedy_continue(hf_target, prompts, 8, 3, record=rec)
    assert not rec.covers(POINTS)
    assert len(_batches(hf_target, seqs, rec)) == len(seqs)  # replayed through the target


def test_no_recording_past_its_share_of_memory(target, monkeypatch):
    import eagle3_doctor.model.recorded as recorded

    assert plan_recording(target, POINTS, 4, 64) is not None
    monkeypatch.setattr(recorded, "SHARE", 0.0)
    assert plan_recording(target, POINTS, 4, 64) is None


def _run(tmp_path, command, name, draft, *extra):
    out = tmp_path / f"{name}.json"
    r = invoke(command, "--target", TARGET, "--draft", draft, "--prompts", PROMPTS, "--max-new-tokens", "32", "--json", out, "-q",
               *extra)  # fmt: skip
    assert r.exit_code in (0, 1), r.output
    doc = json.loads(out.read_text())
    doc.pop("tool")
    return doc


SGLANG_FP8 = (
    f"python -m sglang.launch_server --model-path {TARGET} --speculative-algorithm EAGLE3 --speculative-draft-model-path "
    f"{DRAFTS['sglang']} --speculative-num-steps 3 --speculative-eagle-topk 1 --kv-cache-dtype fp8_e4m3"
)
# fmt: off
CASES = {
    "acceptance": ("acceptance", DRAFTS["sglang"], "--engine", "sglang", "--limit", "5"),
    # every wiring's step-1 counts (the --scan table), from taps kept in the fit's window: two prompts of five, their
    # first positions
    "scan": ("acceptance", DRAFTS["sglang"], "--engine", "sglang", "--limit", "5", "--scan"),
    "diagnose": ("diagnose", DRAFTS["sglang"], "--engine", "sglang", "--limit", "5"),
    # the measured cost of a served fp8 draft cache simulates the draft on the continuation's rows
    "fp8-draft-cache": ("acceptance", DRAFTS["sglang"], "--serve-cmd", SGLANG_FP8, "--engine-version", "0.5.9", "--limit", "8"),
    # the runtime-fault signatures simulate every fault class on them
    "fault-signatures": ("diagnose", DRAFTS["speculators"], "--engine", "vllm", "--limit", "4", "--num-steps", "5",
                         "--server-metrics", str(SERVING / "vllm-after-kv-layout-shift.prom")),
}
# fmt: on


@pytest.mark.parametrize("case", list(CASES))
def test_the_cli_measures_the_same_without_a_second_forward(tmp_path, monkeypatch, case):
    """acceptance and diagnose (their levers, the weights' fit, the fault signatures and the served fp8 draft cache's
    cost included) read every tap from the decode: the target's forward is never called after the continuation, and
    the document is the replayed run's. (The weights' own lever, which fires on a draft fitting other points, replays
    its wiring by a forward: the recording keeps the fit's wirings in the fit's window alone.)"""
    import eagle3_doctor.model.recorded as recorded
    import eagle3_doctor.model.replay as replay
    from eagle3_doctor.analyses import weights_fit

    command, draft, *extra = CASES[case]
    if case == "scan":
        monkeypatch.setattr(weights_fit, "FIT_PROMPTS", 2)  # every third prompt counted: the rows' window bites
        monkeypatch.setattr(weights_fit, "STEP1_POSITIONS", 5)  # and its positions' (32 new tokens a prompt)
    monkeypatch.setattr(recorded, "SHARE", 0.0)
    want = _run(tmp_path, command, "replayed", draft, *extra)
    monkeypatch.setattr(recorded, "SHARE", 0.5)

    def no_forward(*a, **k):
        raise AssertionError("the target ran a second forward")

    monkeypatch.setattr(replay, "capture", no_forward)
    assert _run(tmp_path, command, "recorded", draft, *extra) == want
    if case == "scan":
        assert len(want["scan"]) >= 8 and all(r["diff_to_configured"]["n"] == 2 for r in want["scan"]), want["scan"]
    if case == "fp8-draft-cache":
        (f,) = [f for f in want["findings"] if f["code"] == "FWD015"]
        assert "measured cost on this pair (8 prompts" in " ".join(f["evidence"])
    if case == "fault-signatures":
        assert want["runtime_faults"]["ranking"]["verdict"] == "kv-layout-shift"


def test_a_recording_beside_the_decode_leaves_its_batch_whole_where_both_fit(monkeypatch):
    """The continuation's plan on an 8B shape with 127 GB free (one H200 after the weights), for what acceptance and
    diagnose read (the paths' points everywhere, the weights' fit's wirings in its window): both record at 512 x 512
    and 1,024 x 1,024, the fit's eight other points (diagnose's final norm over the prompts among them) adding under
    35% to what the paths' three hold. 512 x 512 decodes in one batch; at 1,024 x 1,024, where the KV cache of every
    sequence passes the memory, the prompts run as equal batches, not a full one and a remainder. Before the windows, every wiring everywhere took 97 GB at 1,024 x
    1,024, the recording was dropped, and the replay ran a second forward over a million tokens."""
    from types import SimpleNamespace

    from eagle3_doctor.analyses.acceptance.measurement import logits_window, replay_taps
    from eagle3_doctor.analyses.acceptance.options import AcceptanceOptions
    from eagle3_doctor.analyses.acceptance.run import _plan
    from eagle3_doctor.analyses.weights_fit import candidates

    cfg = {"hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
           "num_hidden_layers": 32, "vocab_size": 128256}  # fmt: skip
    gpu = SimpleNamespace(config=cfg, device="cuda", dtype=torch.bfloat16, capture_device=None, hidden_size=4096)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (127 * 10**9, 143 * 10**9))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 0)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 0)
    wirings = [layer_out(i) for i in range(1, 11)]
    spec = (layer_out(1), layer_out(15), layer_out(28))
    setup = SimpleNamespace(train_spec=None, serving=SimpleNamespace(spec=spec), draft=object())  # what replay_taps reads
    for n, new in ((512, 512), (1024, 1024)):
        src = SimpleNamespace(prompts=[SimpleNamespace(ids=[1] * 81)] * n)
        opts = AcceptanceOptions(max_new_tokens=new, continuation_auto=True)
        paths_only = recording_bytes(gpu, spec, n, slots(81 + new))
        for prompt_choice in (False, True):  # acceptance's reads, diagnose's
            reads = replay_taps(setup, {"serving": spec}, candidates(spec, 32), n, logits_window(opts, prompt_choice))
            assert len(reads) == 11  # the final norm among the fit's wirings: diagnose's prompt choice adds none
            batch, recorded, label = _plan(gpu, src, opts, reads)
            assert recorded is not None and recorded.nbytes < 1.35 * paths_only, (n, label)
            nb = -(-n // batch)
            assert batch == -(-n // nb) and f"{n} sequences in {nb} batch" in label, (n, label)  # as equal as they divide
            assert nb == 1 if n == 512 else nb <= 3, label
    # long prompts: each batch's cache and its prefill at the transient measured at 4 x 32k (431 KB a token, the
    # taps included) fit the free memory; at 60% and the layer's activations alone, 64 x 8k planned 2 x 32, 147 GB
    from eagle3_doctor.model.static import kv_bytes_per_token

    for n, length in ((4, 32768), (64, 8192)):
        src = SimpleNamespace(prompts=[SimpleNamespace(ids=[1] * length)] * n)
        batch, recorded, _ = _plan(gpu, src, AcceptanceOptions(max_new_tokens=128, continuation_auto=True), set(wirings[:3]))
        held = batch * (kv_bytes_per_token(gpu) * (length + 128) + 431_000 * length)
        assert held + (recorded.nbytes if recorded else 0) <= 127 * 10**9, (n, length, batch)
        assert batch == n if n == 4 else 8 <= batch < 32, batch
