"""The engines' own trees: the parallel tree estimator equals a sequential tree-verify loop exactly
(float32, fixtures), for SGLang's dynamic tree and vLLM's static token trees."""

from __future__ import annotations

import pytest
import torch
from conftest import DRAFTS, PROMPTS, TARGET, two_layer_draft

from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.doctor import acceptance, load_setup


def _setup(engine: str = "sglang", layer_ids: str | None = None):
    return load_setup(
        target=str(TARGET), draft=str(DRAFTS["sglang"]), engine=engine, layer_ids=layer_ids, dtype="float32", device="cpu"
    )


@pytest.mark.parametrize(("steps", "topk", "ndt"), [(5, 4, 8), (3, 2, 6), (4, 3, None)])
def test_sglang_tree_estimator_equals_tree_loop(steps, topk, ndt):
    run = acceptance(
        _setup(),
        prompts_path=str(PROMPTS),
        num_steps=steps,
        topk=topk,
        num_draft_tokens=ndt,
        max_new_tokens=24,
        limit=2,
        reference=True,
        batch_size=2,
    )
    ref, tree = run.reference.tree, run.paths["serving"].tree
    assert run.reference.same_tokens
    assert ref.accepted_lengths == tree.accepted_lengths, "estimator and loop must agree pass by pass"
    assert ref.agrees_with_estimator and run.reference.agrees_with_estimator
    assert ref.metrics.mean_acceptance_length == tree.mean_acceptance_length
    assert "exact" in run.settings.tree.label and "upper bound" not in run.settings.tree.label
    assert max(a for r in tree.accepted_lengths for a in r) >= 2


@pytest.mark.parametrize("t0", [1, 7])
def test_sglang_trees_from_a_base_are_the_whole_runs_there(t0):
    """The tree's rounds run at the bases from the first scored one on: there the accepted and drafted depths are the
    whole run's, before it none."""
    from eagle3_doctor.analyses.tree import sglang_tree_accepted

    s = _setup()
    g = torch.Generator().manual_seed(5)
    B, T = 2, 21
    tokens = torch.randint(0, s.draft.config.vocab_size, (B, T), generator=g)
    aux = torch.randn(B, T, s.draft.config.fc_in_features, generator=g)
    with torch.inference_mode():
        first = s.draft.to_target_ids(s.draft.logits(next(s.draft.unroll(aux, torch.roll(tokens, -1, 1), 1))).argmax(-1))

    def labels(k: int) -> torch.Tensor:  # the draft's own first proposal at depth 1: some trees accept
        return first if k == 1 else torch.roll(tokens, -(1 + k), dims=1)

    whole = sglang_tree_accepted(s.draft, aux, tokens, labels, [T, T - 4], 3, 2, 5)
    cut = sglang_tree_accepted(s.draft, aux, tokens, labels, [T, T - 4], 3, 2, 5, from_base=t0)
    assert int(whole[0][:, t0:].sum()) > 0
    for a, b in zip(cut, whole):
        assert torch.equal(a[:, t0:], b[:, t0:]) and not a[:, :t0].any()


@pytest.mark.parametrize("t0", [0, 5])
@pytest.mark.parametrize("masked", [False, True])
def test_the_slots_attention_is_one_softmax_over_the_prefix_and_the_slots_own_keys(t0, masked):
    """A tree slot's attention, merged from kernel parts by their log-sum-exps, is the explicit softmax over the prefix
    keys up to its base (the real ones) and the keys its slot wrote."""
    import math

    from eagle3_doctor.analyses.tree import _attend_slots
    from eagle3_doctor.draft.config import DraftConfig
    from eagle3_doctor.draft.model import DraftAttention

    cfg = DraftConfig(hidden_size=32, intermediate_size=48, num_attention_heads=4, num_key_value_heads=2, vocab_size=10,
                      draft_vocab_size=10)  # fmt: skip
    torch.manual_seed(0)
    attn = DraftAttention(cfg).eval()
    g = torch.Generator().manual_seed(3)
    B, T, S, J, d = 2, 13, 3, 2, 8
    Tq = T - t0
    q = torch.randn(B, 4, Tq, S, d, generator=g)
    k1, v1 = torch.randn(B, 2, T, d, generator=g), torch.randn(B, 2, T, d, generator=g)
    ek = [torch.randn(B, 2, Tq, S, d, generator=g) for _ in range(J)]
    ev = [torch.randn(B, 2, Tq, S, d, generator=g) for _ in range(J)]
    km = None
    if masked:
        km = torch.ones(B, T, dtype=torch.bool)
        km[1, :3] = False
    with torch.no_grad():
        got = _attend_slots(attn, q, k1, v1, ek, ev, km)
        seen = torch.arange(T)[None, :] <= torch.arange(t0, T)[:, None]  # [Tq, T]
        if km is not None:
            seen = seen[None] & km[:, None, :]
        kk, vv = k1.repeat_interleave(2, 1), v1.repeat_interleave(2, 1)
        sp = torch.einsum("bhtsd,bhud->bhtsu", q, kk) / math.sqrt(d)
        sp = sp.masked_fill(~(seen if seen.dim() == 3 else seen[None])[:, None, :, None, :], float("-inf"))
        ke, ve = (torch.stack(x, 4).repeat_interleave(2, 1) for x in (ek, ev))
        se = torch.einsum("bhtsd,bhtsjd->bhtsj", q, ke) / math.sqrt(d)
        w = torch.softmax(torch.cat([sp, se], -1), -1)
        o = torch.einsum("bhtsu,bhud->bhtsd", w[..., :T], vv) + torch.einsum("bhtsj,bhtsjd->bhtsd", w[..., T:], ve)
        want = attn.o_proj(o.permute(0, 2, 3, 1, 4).reshape(B, Tq * S, 4 * d))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_sglang_tree_with_the_seed_shift_still_matches_the_loop():
    run = acceptance(
        _setup(layer_ids=[-1, 1, 3]),
        prompts_path=str(PROMPTS),
        num_steps=4,
        topk=4,
        num_draft_tokens=8,
        max_new_tokens=24,
        limit=2,
        reference=True,
        batch_size=2,
    )
    assert run.reference.tree.agrees_with_estimator


@pytest.mark.parametrize(
    "paths",
    [
        [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0], [0, 0, 1]],
        [[0], [1], [2], [0, 0], [1, 0], [0, 0, 0], [0, 0, 0, 0]],
    ],
)
def test_vllm_static_tree_estimator_equals_tree_loop(paths):
    run = acceptance(
        _setup("vllm"),
        prompts_path=str(PROMPTS),
        num_steps=7,
        token_tree=paths,
        max_new_tokens=24,
        limit=2,
        reference=True,
        batch_size=2,
    )
    assert run.settings.num_steps == max(len(p) for p in paths)
    assert run.reference.tree.accepted_lengths == run.paths["serving"].tree.accepted_lengths
    assert run.reference.tree.agrees_with_estimator


def _walked(ranks, valid, paths):
    """Each base's accepted depth walked one base at a time: the longest prefix of its ranks that is a node."""
    nodes, B, K, T = {tuple(p) for p in paths}, *ranks.shape
    out = torch.zeros(B, T, dtype=torch.long)
    for b in range(B):
        for t in range(T):
            pre: tuple[int, ...] = ()
            for j in range(min(K, max(map(len, nodes)))):
                pre += (int(ranks[b, j, t]),)
                if not valid[b, j, t] or pre not in nodes:
                    break
                out[b, t] += 1
    return out


@pytest.mark.parametrize(
    "paths",
    [
        [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0], [0, 0, 1]],
        [[0], [2], [0, 0], [1, 0], [2, 1], [0, 0, 0]],  # [1, 0] hangs under a missing node: never reached
    ],
)
def test_the_static_trees_depths_at_every_base_equal_the_walk_of_each(paths):
    from eagle3_doctor.analyses.tree import static_tree_accepted

    g = torch.Generator().manual_seed(4)
    ranks = torch.randint(0, 4, (3, 4, 50), generator=g)  # 3: absent (the unroll's rank width)
    valid = torch.rand(3, 4, 50, generator=g) < 0.9
    got = static_tree_accepted(ranks, valid, paths)
    assert torch.equal(got, _walked(ranks, valid, paths)) and int(got.max()) == 3


def test_a_budget_too_large_for_the_tree_is_refused():
    with pytest.raises(BadInput):
        acceptance(_setup(), prompts_path=str(PROMPTS), num_steps=2, topk=2, num_draft_tokens=50, limit=1)


@pytest.mark.parametrize(("engine", "tree"), [("sglang", dict(topk=3, num_draft_tokens=6)), ("vllm", {})])
def test_a_two_layer_draft_estimator_equals_the_loop(tmp_path, engine, tree):
    """Every draft layer keeps its own keys per slot in the tree (and through the chain): a 2-layer
    draft, run by SGLang's dynamic tree and by vLLM's chain, matches the sequential loops exactly."""
    d = two_layer_draft(tmp_path / "d2", "sglang")
    setup = load_setup(target=str(TARGET), draft=str(d), engine=engine, dtype="float32", device="cpu")
    assert setup.draft.config.num_hidden_layers == 2
    run = acceptance(
        setup, prompts_path=str(PROMPTS), num_steps=3, max_new_tokens=24, limit=2, reference=True, batch_size=2, **tree
    )
    assert run.reference.same_tokens and run.reference.agrees_with_estimator
    if tree:
        assert run.reference.tree.agrees_with_estimator
        assert run.reference.tree.accepted_lengths == run.paths["serving"].tree.accepted_lengths
    # the later layer matters: the same checkpoint cut to one layer drafts otherwise
    one = acceptance(_setup(engine), prompts_path=str(PROMPTS), num_steps=3, max_new_tokens=24, limit=2, batch_size=2, **tree)
    assert one.paths["serving"].acc_k != run.paths["serving"].acc_k
