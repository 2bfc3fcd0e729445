"""The draft over its static cache (a decode loop's, CUDA-graphed on a GPU) computes what the dynamic
cache does: the same states after a catch-up, the same chain of proposals, after crops as a loop makes."""

from __future__ import annotations

import torch

from eagle3_doctor.draft.decode import DraftDecoder
from eagle3_doctor.draft.model import DraftCache


def _chain_dynamic(draft, h, cache, start, k):
    toks = []
    for j in range(k):
        t = draft.to_target_ids(draft.logits(h[:, -1:]).argmax(-1))
        toks.append(t)
        if j + 1 < k:
            h = draft.extend(h[:, -1:], t, torch.full_like(t, start + j), cache, from_aux=False)
    return torch.cat(toks, dim=1)


@torch.inference_mode()
def test_the_static_draft_cache_gives_the_dynamic_caches_states_and_proposals(setup_sglang):
    draft = setup_sglang.draft
    F = draft.fc.weight.shape[1]
    g = torch.Generator().manual_seed(0)
    aux = torch.randn(2, 12, F, generator=g)
    ids = torch.randint(0, 300, (2, 12), generator=g)
    dd, cache = DraftDecoder(draft, 2, 40), DraftCache()
    pos = torch.arange(10).expand(2, 10)
    want = draft.extend(aux[:, :10], ids[:, :10], pos, cache, from_aux=True)
    got = dd.catch_up(aux[:, :10], ids[:, :10], once=True)
    assert torch.allclose(got, want, atol=1e-5) and dd.length == cache.length == 10
    for k, kept in ((4, 2), (3, 1)):  # a pass proposes k, keeps `kept` of them, catches up over kept + 1
        start = dd.length
        assert torch.equal(dd.propose(got[:, -1:], k), _chain_dynamic(draft, want, cache, start, k))
        dd.crop(start), cache.crop(start)
        n = kept + 1
        pos = torch.arange(start, start + n).expand(2, n)
        want = draft.extend(aux[:, -n:], ids[:, :n], pos, cache, from_aux=True)
        got = dd.catch_up(aux[:, -n:], ids[:, :n])
        assert torch.allclose(got, want, atol=1e-5) and dd.length == cache.length == start + n
