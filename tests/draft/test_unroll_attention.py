"""The teacher-forced unroll's attention (causal flash call + own-position keys merged by
log-sum-exp) against the explicit [T, K*T] mask it replaced."""

from __future__ import annotations

import pytest
import torch
from conftest import random_draft

from eagle3_doctor.draft.lse import attention_lse
from eagle3_doctor.draft.model import Eagle3Draft


def masked_unroll(draft: Eagle3Draft, aux, ids, num_steps, key_mask=None):
    """The former implementation: every step attends over all earlier steps' keys through one mask."""
    B, T = ids.shape
    pos = torch.arange(T).expand(B, T)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    if key_mask is not None:
        causal = causal[None] & key_mask[:, None, :]
    eye = torch.eye(T, dtype=torch.bool)
    attn = draft.midlayer.self_attn
    h = draft.project_aux(aux)
    keys, values, outs = [], [], []
    for k in range(num_steps):
        x, residual = draft._layer_in(h, ids if k == 0 else torch.roll(ids, -k, dims=1))
        q, kk, vv = attn.qkv(x, pos + k, draft.inv_freq)
        keys.append(kk)
        values.append(vv)
        mask = torch.cat([causal] + [eye.expand_as(causal)] * k, dim=-1)
        if mask.dim() == 3:
            mask = mask[:, None]
        h = draft._fed_back(draft._first_out(attn.attend(q, torch.cat(keys, 2), torch.cat(values, 2), mask), residual))
        outs.append(h)
    return outs


def make(nh, nkv, seed=0):
    return random_draft(seed, heads=nh, kv_heads=nkv)


@pytest.mark.parametrize("nh,nkv", [(4, 4), (4, 2), (8, 1)])
@pytest.mark.parametrize("padded", [False, True])
def test_unroll_equals_the_masked_form(nh, nkv, padded):
    d = make(nh, nkv)
    g = torch.Generator().manual_seed(nh + nkv)
    B, T, K = 3, 23, 7
    aux = torch.randn(B, T, 192, generator=g)
    ids = torch.randint(0, 100, (B, T), generator=g)
    km = None
    if padded:  # right padding, as make_batch does, plus one left-padded row (a query with no visible key)
        km = torch.ones(B, T, dtype=torch.bool)
        km[0, 17:] = False
        km[2, :4] = False
    with torch.no_grad():
        new = list(d.unroll(aux, ids, K, key_mask=km))
        old = masked_unroll(d, aux, ids, K, key_mask=km)
    for k, (a, b) in enumerate(zip(new, old)):
        if padded and k == 0:  # rows that see no key at all: the mask form gives NaN, the new form zeros
            a, b = a[:, 4:], b[:, 4:]
            assert torch.isfinite(new[0]).all()
        assert torch.allclose(a, b, atol=2e-5, rtol=1e-5), (k, (a - b).abs().max())


def test_causal_lse_matches_the_explicit_softmax():
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 4, 9, 16, generator=g) for _ in range(3))
    out, lse = attention_lse(q, k[:, :2], v[:, :2], 0.25, True)
    kk, vv = k[:, :2].repeat_interleave(2, 1), v[:, :2].repeat_interleave(2, 1)
    s = (q @ kk.transpose(-1, -2) * 0.25).masked_fill(~torch.ones(9, 9, dtype=torch.bool).tril(), float("-inf"))
    assert torch.allclose(lse, torch.logsumexp(s, -1), atol=1e-5)
    assert torch.allclose(out, torch.softmax(s, -1) @ vv, atol=1e-5)
    # the explicit path (taken with a key mask) gives the same on an all-true mask
    out2, lse2 = attention_lse(q, k[:, :2], v[:, :2], 0.25, True, torch.ones(2, 9, dtype=torch.bool))
    assert torch.allclose(out2, out, atol=1e-5) and torch.allclose(lse2, lse, atol=1e-5)


def test_compiled_draft_pieces_keep_float32_parity():
    """compile_draft (what the GPU floor run times) traces the same arithmetic: outputs equal eager's.
    The 'eager' backend checks the capture itself without a C++ toolchain on the CI machine."""
    from eagle3_doctor.draft.fast import compile_draft

    d = make(4, 2)
    g = torch.Generator().manual_seed(5)
    aux, ids = torch.randn(2, 11, 192, generator=g), torch.randint(0, 100, (2, 11), generator=g)
    with torch.no_grad():
        ref = [d.logits(h) for h in d.unroll(aux, ids, 4)]
        compile_draft(d, backend="eager", dynamic=False)
        got = [d.logits(h) for h in d.unroll(aux, ids, 4)]
    for a, b in zip(got, ref):
        assert torch.equal(a, b)


def test_acceptance_compile_flag_runs_the_compiled_draft_with_identical_results(tmp_path, monkeypatch):
    """`acceptance --compile` reaches Setup.compile_draft; on the CPU it is skipped with a note (a minute of
    compilation for no gain), and with a backend forced (as a GPU run compiles) the figures are eager's."""
    import json

    from conftest import DRAFTS, PROMPTS, TARGET
    from typer.testing import CliRunner

    from eagle3_doctor import doctor
    from eagle3_doctor.cli.app import app

    args = [
        "acceptance",
        "-t",
        str(TARGET),
        "-d",
        str(DRAFTS["sglang"]),
        "--prompts",
        str(PROMPTS),
        "--limit",
        "2",
        "-k",
        "3",
        "--max-new-tokens",
        "12",
        "-q",
        "--json",
    ]
    docs = {}
    for name, extra in (("eager", []), ("cpu-skip", ["--compile"])):
        r = CliRunner().invoke(app, [*args, str(tmp_path / f"{name}.json"), *extra])
        assert r.exit_code in (0, 1), r.output
        docs[name] = json.loads((tmp_path / f"{name}.json").read_text())
    assert docs["cpu-skip"]["settings"]["compiled"] is False
    assert any("--compile skipped" in n for n in docs["cpu-skip"]["notes"])
    real = doctor.Setup.compile_draft
    monkeypatch.setattr(doctor.Setup, "compile_draft", lambda self: real(self, backend="eager", dynamic=False))
    r = CliRunner().invoke(app, [*args, str(tmp_path / "compiled.json"), "--compile"])
    assert r.exit_code in (0, 1), r.output
    docs["compiled"] = json.loads((tmp_path / "compiled.json").read_text())
    assert docs["compiled"]["settings"]["compiled"] is True
    for name in ("cpu-skip", "compiled"):
        assert docs[name]["paths"] == docs["eager"]["paths"]


@pytest.mark.parametrize("nh,nkv", [(4, 4), (8, 2)])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("from_base", [1, 9, 22])
def test_later_steps_from_a_base_compute_what_the_whole_unroll_does_there(nh, nkv, padded, from_base):
    """Steps 2..K run at the bases from ``from_base`` on (the prompts' bases are not scored past step 1): each of
    theirs with a real input is what the unroll over every base gives there, step 1 unchanged, with and without a
    key mask."""
    d = make(nh, nkv, seed=1)
    g = torch.Generator().manual_seed(7)
    B, T, K = 3, 23, 5
    aux, ids = torch.randn(B, T, 192, generator=g), torch.randint(0, 100, (B, T), generator=g)
    km = None
    if padded:
        km = torch.ones(B, T, dtype=torch.bool)
        km[0, 17:] = False
        km[2, :4] = False
    with torch.no_grad():
        whole = list(d.unroll(aux, ids, K, key_mask=km))
        cut = list(d.unroll(aux, ids, K, key_mask=km, from_base=from_base))
    assert torch.equal(cut[0], whole[0])
    for k in range(1, K):
        assert cut[k].shape == (B, T - from_base, 64)
        a, b = cut[k][:, : T - k - from_base], whole[k][:, from_base : T - k]  # later bases read a wrapped token
        if padded:  # row 2's first bases see no key at step 1: zeros on both routes, compared past them
            a, b = a[:, max(0, 4 - from_base) :], b[:, max(0, 4 - from_base) :]
        assert torch.allclose(a, b, atol=2e-5, rtol=1e-5), (k, (a - b).abs().max())


def test_outcomes_from_a_base_equal_the_whole_unrolls_there_and_hold_no_label_before_it():
    from eagle3_doctor.analyses.acceptance.estimator import unroll_outcomes

    d = make(4, 2, seed=2)
    g = torch.Generator().manual_seed(11)
    B, T, K, t0 = 2, 19, 4, 6
    aux, tokens = torch.randn(B, T, 192, generator=g), torch.randint(0, 100, (B, T), generator=g)
    with torch.no_grad():
        proposals = [d.to_target_ids(d.logits(h).argmax(-1)) for h in d.unroll(aux, torch.roll(tokens, -1, 1), K)]

    def labels(k: int) -> torch.Tensor:  # the draft's own proposals as labels where k is odd: matches to count
        return proposals[k - 1] if k % 2 else torch.roll(tokens, -(1 + k), dims=1)

    lens = [T, T - 3]
    with torch.no_grad():
        whole = unroll_outcomes(d, aux, tokens, labels, lens, K, topk=3, rank_width=4)
        cut = unroll_outcomes(d, aux, tokens, labels, lens, K, topk=3, rank_width=4, from_base=t0)
    assert whole.match[:, 0].any() and whole.match[:, 2, t0:].any()
    v = whole.valid
    for name in ("match", "valid", "topk_hit", "ranks"):  # ranks read where a label is (a tree's walk stops there)
        a, b = (x if name != "ranks" else x.where(v, -1) for x in (getattr(cut, name), getattr(whole, name)))
        assert torch.equal(a[:, :, t0:], b[:, :, t0:]) and torch.equal(a[:, 0], b[:, 0]), name
    assert not cut.valid[:, 1:, :t0].any() and whole.valid[:, 1:, :t0].any()
