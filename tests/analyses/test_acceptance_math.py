"""Reporting conventions on hand-made counts; temperature and tree modes against brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from eagle3_doctor.analyses.acceptance.estimator import expected_accept_prob
from eagle3_doctor.analyses.acceptance.metrics import leading_ones, metrics_from_passes, tau_from_acc, walk_chain


def test_conventions_on_hand_made_counts():
    # 4 verify passes, K = 3, accepted 3, 0, 1, 2 (bonus excluded)
    m = metrics_from_passes([3, 0, 1, 2], [3, 3, 3, 3], 3)
    assert m.passes == 4 and m.accepted_tokens == 6 and m.drafted_tokens == 12
    assert m.mean_acceptance_length == pytest.approx(1 + 6 / 4)  # vLLM: 1 + accepted/num_drafts
    assert m.draft_acceptance_rate == pytest.approx(6 / 12)  # vLLM: accepted/num_draft_tokens
    assert m.per_position_rate == pytest.approx([3 / 4, 2 / 4, 1 / 4])  # vLLM: #(A>=k)/num_drafts
    assert m.conditional_rate == pytest.approx([3 / 4, 2 / 3, 1 / 2])
    # SGLang: accept_len = accept tokens incl. bonus / forward_ct; accept_rate = (tokens-ct)/(ct*(num_draft_tokens-1))
    accept_tokens, ct, ndt = 6 + 4, 4, 3 + 1
    assert m.sglang_accept_length == pytest.approx(accept_tokens / ct)
    assert m.sglang_accept_rate == pytest.approx((accept_tokens - ct) / (ct * (ndt - 1)))
    assert m.accepted_length_histogram == [1, 1, 1, 1]


def test_tau_bridge():
    assert tau_from_acc([0.8, 0.5]) == pytest.approx(1 + 0.8 + 0.4)
    assert tau_from_acc([]) == 1.0


def test_leading_ones_and_chain_walk():
    m = torch.tensor([[1, 1, 0, 1], [0, 1, 1, 1], [1, 1, 1, 1]], dtype=torch.bool)
    assert leading_ones(m).tolist() == [2, 0, 4]
    A = np.array([2, 0, 1, 0, 3, 0, 0, 0])
    drafted = np.array([3, 3, 3, 3, 3, 2, 1, 0])
    bases, acc, drf = walk_chain(A, drafted, 0, 8)
    assert bases == [0, 3, 4] and acc == [2, 0, 3] and drf == [3, 3, 3]


def test_temperature_single_step_against_enumeration():
    """Speculative sampling: draft samples x ~ q, accepted with prob min(1, p/q): P = sum min(p, q)."""
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        p = torch.softmax(torch.randn(5, generator=g) * 2, -1)
        q = torch.softmax(torch.randn(5, generator=g) * 2, -1)
        brute = sum(float(q[x]) * min(1.0, float(p[x] / q[x])) for x in range(5))
        assert float(expected_accept_prob(p, q, None, "sampled")) == pytest.approx(brute, abs=1e-6)
        d = int(q.argmax())
        # argmax drafting verified by sampling from p: accepted iff the target samples d
        assert float(expected_accept_prob(p, q, torch.tensor(d), "argmax")) == pytest.approx(float(p[d]))


def test_temperature_chain_against_enumeration():
    """Chain of K=3 with per-step distributions: enumerate every draft sequence and every
    accept/reject outcome; the expected accepted length equals sum_k prod_{j<=k} alpha_j."""
    g = torch.Generator().manual_seed(1)
    V, K = 3, 3
    ps = [torch.softmax(torch.randn(V, generator=g), -1) for _ in range(K)]
    qs = [torch.softmax(torch.randn(V, generator=g), -1) for _ in range(K)]
    expect = 0.0
    for xs in itertools.product(range(V), repeat=K):
        prob_draft = math.prod(float(qs[j][xs[j]]) for j in range(K))
        # accepted length distribution given this draft: step j accepted with min(1, p/q)
        acc_probs = [min(1.0, float(ps[j][xs[j]] / qs[j][xs[j]])) for j in range(K)]
        e, alive = 0.0, 1.0
        for j in range(K):
            alive *= acc_probs[j]
            e += alive
        expect += prob_draft * e
    alphas = [float(expected_accept_prob(ps[j], qs[j], None, "sampled")) for j in range(K)]
    formula = sum(math.prod(alphas[: k + 1]) for k in range(K))
    assert formula == pytest.approx(expect, abs=1e-6)  # float32 distributions


class _TableDraft:
    """A stand-in draft whose step-k logits at base t are a fixed random function of the tokens it
    conditions on (x_{t+1}, then the true x_{t+2..t+k} the teacher-forced unroll feeds): the tree it
    implies can be built node by node."""

    def __init__(self, tokens: torch.Tensor, vocab: int, seed: int):
        self.tokens, self.V, self.rng, self.table = tokens, vocab, np.random.default_rng(seed), {}

    def row(self, key: tuple) -> torch.Tensor:
        if key not in self.table:
            self.table[key] = torch.tensor(self.rng.standard_normal(self.V), dtype=torch.float32)
        return self.table[key]

    def unroll(self, aux, ids, num_steps, from_base=0):
        assert from_base == 0  # every base is scored here
        yield from range(num_steps)  # the "hidden state" of step k is k itself

    def logits(self, k0: int) -> torch.Tensor:
        B, T = self.tokens.shape
        return torch.stack(
            [torch.stack([self.row(tuple(self.tokens[b, t + 1 : t + 2 + k0].tolist())) for t in range(T)]) for b in range(B)]
        )

    def to_target_ids(self, ids: torch.Tensor) -> torch.Tensor:
        return ids


def test_tree_against_brute_force_enumeration():
    """The estimator's full top-k tree (unroll_outcomes' top-k hits, accumulated by PathAccumulator) gives,
    at every base, the depth a verifier reaches by building the tree node by node (each node's children:
    the draft's top-k given the path to it) and descending into the child equal to the target's token."""
    from eagle3_doctor.analyses.acceptance.accumulate import PathAccumulator
    from eagle3_doctor.analyses.acceptance.estimator import unroll_outcomes

    V, K, topk, T = 5, 3, 2, 24
    rng = np.random.default_rng(0)
    tokens = torch.tensor(rng.integers(0, V, size=(3, T)))
    lengths = [T, T - 5, T - 11]  # right-padded sequences: the last bases draft fewer than K steps
    draft = _TableDraft(tokens, V, seed=1)

    def labels(k: int) -> torch.Tensor:  # the verifier's token for step k at base t: x_{t+1+k}
        return torch.roll(tokens, -(1 + k), dims=1)

    out = unroll_outcomes(draft, torch.zeros(3, T, 1), tokens, labels, lengths, K, topk=topk)
    acc = PathAccumulator("serving", K)
    acc.add(out, [0, 0, 0], lengths, walk=False)  # text mode: every base with a draft is one verify pass

    brute, budgets = [], []
    for b, n in enumerate(lengths):
        toks = tokens[b].tolist()
        for t in range(n - 1):
            budget = min(K, n - 2 - t)  # steps with a label inside the sequence
            if budget <= 0:
                continue
            depth, path = 0, [toks[t + 1]]
            while depth < budget:
                children = torch.topk(draft.row(tuple(path)), topk).indices.tolist()
                if toks[t + 2 + depth] not in children:
                    break
                path.append(toks[t + 2 + depth])
                depth += 1
            brute.append(depth)
            budgets.append(budget)
    assert acc.tree_acc == brute and acc.tree_drf == budgets
    assert {0, 1, 2, 3} <= set(brute)  # every depth occurs: the comparison is not about one case
    # the chain is the top-1 path of the same tree: never deeper
    assert all(c <= t for c, t in zip(acc.passes_acc, acc.tree_acc)) and sum(acc.passes_acc) < sum(acc.tree_acc)


def test_triage_hints_name_the_usual_causes():
    from conftest import path_result

    from eagle3_doctor.analyses.acceptance.findings import triage

    dead = path_result(metrics_from_passes([0] * 50 + [1], [5] * 51, 5))
    # about 1: no guessed list of parts, the command that measures which part it is
    assert "eagle3-doctor diagnose" in triage(dead, "float32")[0] and "lm_head, d2t" not in triage(dead, "float32")[0]
    cliff = path_result(metrics_from_passes([1] * 40 + [0] * 60 + [2] * 3, [5] * 103, 5))
    assert "capture points or RoPE" in triage(cliff, "float32")[0]
    decay = path_result(
        metrics_from_passes([3] * 10, [5] * 10, 5), buckets=[(0, 63, 0.8, 100), (64, 127, 0.6, 100), (128, 191, 0.4, 100)]
    )
    assert any("positions" in h for h in triage(decay, "float32"))
    healthy = path_result(metrics_from_passes([3, 2, 4, 1, 3], [5] * 5, 5))
    assert triage(healthy, "float32") == []
