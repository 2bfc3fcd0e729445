"""Sampled verification: a live profile planted by the project's reference loop with the target *sampling* (seeded)
is attributed to the argmax proposal; one planted by a plain speculative-sampling loop in this file (the draft
samples, min(1, p/q) accepts, the residual resamples) to "as trained". Neither plant runs analyses/faults."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import DRAFTS, PROMPTS, TARGET

K = 5
# prompts cut to 40 tokens keep the loops (a target forward a pass) to seconds; measured at this size, the two plants'
# fits lie 14-24 apart in chi-square (seeds 1234 and 7), the decisive margin 3.84
LIMIT, NEW, PROMPT = 6, 48, 40
T = 1.0
PLANT_SEED = 1234  # not the signature's seed: the plant's trajectory is its own sample


@pytest.fixture(scope="module")
def pair():
    from eagle3_doctor.analyses.acceptance.options import AcceptanceOptions, _no_progress
    from eagle3_doctor.analyses.acceptance.run import acceptance_sequences
    from eagle3_doctor.doctor import load_setup
    from eagle3_doctor.model.replay import load_sources

    setup = load_setup(target=str(TARGET), draft=str(DRAFTS["speculators"]), engine="vllm", dtype="float32", device="cpu")
    opts = AcceptanceOptions(num_steps=K, max_new_tokens=NEW, limit=LIMIT, max_tokens=PROMPT)
    src = load_sources(setup.target, str(PROMPTS), None, opts.max_tokens, opts.limit, None)
    return setup, acceptance_sequences(setup, src, opts, _no_progress)


@pytest.fixture(scope="module")
def cands(pair):
    from eagle3_doctor.analyses.faults.run import sampled_candidates

    setup, rep = pair
    return sampled_candidates(setup.target, rep.seqs, rep.starts, (setup.serving.spec, setup.draft), K, T)


def _probs(setup, tokens):
    """The target's features of every position and its distributions at T, from one plain forward."""
    from eagle3_doctor.model.target import capture, make_batch

    tgt = setup.target
    got, last = capture(tgt, make_batch([tokens], 0, tgt.device), setup.serving.spec, want_logits=True)
    logits = tgt.model.get_output_embeddings()(last[0]).float()
    return torch.cat([got[p] for p in setup.serving.spec], dim=-1), torch.softmax(logits / T, dim=-1)


@torch.inference_mode()
def plant_argmax(setup, rep, gen):
    """The reference loop unchanged, its target's "choice" a sample from p: a one-hot proposal d is then accepted
    exactly when the sample equals it (probability p(d)), and a rejection's token is the sample, distributed as p
    without d: rejection sampling of an argmax proposal, as vLLM verifies one without draft probabilities."""
    from eagle3_doctor.analyses.acceptance.reference import reference_loop

    def step(tokens):
        aux, p = _probs(setup, tokens)
        return aux, torch.multinomial(p, 1, generator=gen)[:, 0]

    return [reference_loop(step, setup.draft, s[: rep.starts[i] + 1], len(s), K)[1] for i, s in enumerate(rep.seqs)]


def _draft_q(draft, h, vocab):
    qd = torch.softmax(draft.logits(h)[0, 0].float() / T, dim=-1)
    ids = torch.arange(qd.shape[0]) + draft.d2t
    return torch.zeros(vocab).index_add_(0, ids, qd)


def _sampled_loop(setup, prompt, total, gen):
    from eagle3_doctor.draft.model import DraftCache

    d, seq = setup.draft, list(prompt)
    aux, p = _probs(setup, seq)
    seq.append(int(torch.multinomial(p[-1], 1, generator=gen)))
    acc = []
    while (k := min(K, total - len(seq))) > 0:
        t = len(seq) - 2
        cache = DraftCache()
        h = d.extend(aux[:, : t + 1], torch.tensor([seq[1:]]), torch.arange(t + 1)[None], cache, from_aux=True)[:, -1:]
        props, qs = [], []
        for j in range(k):
            qs.append(_draft_q(d, h, p.shape[-1]))
            props.append(int(torch.multinomial(qs[-1], 1, generator=gen)))
            h = d.extend(h, torch.tensor([[props[-1]]]), torch.tensor([[t + 1 + j]]), cache, from_aux=False)
        aux, p = _probs(setup, seq + props)
        a = 0
        while a < k and float(torch.rand((), generator=gen)) < min(1.0, float(p[t + 1 + a, props[a]] / qs[a][props[a]])):
            a += 1
        acc.append(a)
        seq += props[:a]
        nxt = (p[t + 1 + a] - qs[a]).clamp(min=0) if a < k else p[t + 1 + a]
        seq.append(int(torch.multinomial(nxt / nxt.sum(), 1, generator=gen)))
        aux = aux[:, : len(seq)]
    return acc


@torch.inference_mode()
def plant_sampled(setup, rep, gen):
    return [_sampled_loop(setup, s[: rep.starts[i] + 1], len(s), gen) for i, s in enumerate(rep.seqs)]


def _rank(tmp_path: Path, accepted, cands):
    from test_fault_signatures import vllm_scrape

    from eagle3_doctor.analyses.faults.attribute import rank
    from eagle3_doctor.analyses.server_metrics.measured import load_measured

    f = tmp_path / "after.prom"
    f.write_text(vllm_scrape(accepted, K))
    m = load_measured(str(f))
    m.temperature = T
    return rank(cands, m, K)


def test_the_two_proposals_predict_apart(cands):
    """The expected rates, not draws: at T = 1 the argmax proposal accepts position 1 less often than a sampled one."""
    from eagle3_doctor.analyses.faults.attribute import _counts

    sampled, argmax = (_counts(c, K) for c in cands)
    assert sampled[:, 2].sum() / sampled[:, 0].sum() > argmax[:, 2].sum() / argmax[:, 0].sum()


def test_argmax_proposal_is_attributed(pair, cands, tmp_path):
    setup, rep = pair
    r = _rank(tmp_path, plant_argmax(setup, rep, torch.Generator().manual_seed(PLANT_SEED)), cands)
    assert r.verdict == "argmax-proposal", r.to_dict()


def test_sampled_proposal_is_as_trained(pair, cands, tmp_path):
    setup, rep = pair
    r = _rank(tmp_path, plant_sampled(setup, rep, torch.Generator().manual_seed(PLANT_SEED)), cands)
    assert r.verdict == "as trained", r.to_dict()
