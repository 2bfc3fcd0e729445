"""Exact greedy acceptance for the draft trees the engines actually build.

SGLang 0.5.23 (EAGLE/EAGLE3 with ``--speculative-eagle-topk`` > 1), read from its source:
- ``srt/speculative/eagle_worker_v2.py`` ``draft_forward`` (lines 742-900): the draft-extend output at
  the last verified position gives ``topk_p, topk_index = fast_topk(softmax(logits), topk)``; then
  ``speculative_num_steps`` selection rounds, with a draft forward between consecutive rounds.
- ``srt/speculative/spec_utils.py`` ``_select_top_k_tokens_first`` / ``_select_top_k_tokens_later``
  (lines 417-471): round 0 takes the root's top-k as the frontier (score = its probability);
  round i > 0 scores every child of every frontier node ``score(parent) * p(child | parent)``
  (``expand_scores``, topk x topk), keeps the best topk as the next frontier (``topk_cs_index``)
  and hands each the *output state of its parent's forward*; every expanded child is a candidate.
- ``srt/speculative/eagle_utils.py`` ``organize_draft_results`` (lines 100-130): the
  ``num_draft_tokens - 1`` best-scoring candidates of all rounds (``torch.topk`` over the
  concatenated scores, indices then sorted) form the tree under the root (the bonus token).
  The parent of candidate x is the root for x < topk, else ``parent_list[(x - topk) // topk + 1]``
  with ``parent_list = cat(parents_list[:-1])`` (the kernel behind ``build_tree_kernel_efficient``).
- ``kernels/ops/speculative/cache_locs.py`` ``generate_draft_decode_kv_indices`` (lines 161-280):
  in a draft forward, frontier slot s attends to the prefix and to the KV entries *slot s* wrote in
  earlier rounds (``seq_len + topk_id * num_steps + [0, iters)``), not to the KV of the node's real
  ancestors: after re-selection a slot may hold a child of another slot. Reproduced here as is.
- Verification (greedy): walk from the root, at each node accept the child whose token is the
  target's argmax; accepted length = depth reached.

vLLM (versions with ``speculative_token_tree``; 0.33.0 has none and drafts a chain): a static tree of
child-rank paths; node ``(r1, ..., rj)`` is the rank-rj token of its parent's draft distribution and
every node attends to its real ancestors. Along the verified path the node inputs are exactly the
teacher-forced ones, so the per-base accepted depth follows from the unroll's label ranks alone.

Both estimators run all bases of a sequence at once; :func:`sglang_tree_reference_loop` and
:func:`static_tree_reference_loop` are the plain sequential loops they are tested equal to.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..draft.lse import causal_parts, merged
from ..draft.model import DraftCache, Eagle3Draft


def full_candidates(topk: int, num_steps: int) -> int:
    """Candidates SGLang scores per pass: topk in round 0, topk^2 in each later round."""
    return topk + (num_steps - 1) * topk * topk


def check_tree_settings(topk: int, num_steps: int, num_draft_tokens: int) -> None:
    from ..core.errors import BadInput

    n = full_candidates(topk, num_steps)
    if num_draft_tokens < 2 or num_draft_tokens - 1 > n:
        raise BadInput(
            f"--num-draft-tokens {num_draft_tokens} does not fit topk {topk} and {num_steps} steps "
            f"(SGLang picks num_draft_tokens - 1 of {n} candidates)",
            f"use a value between 2 and {n + 1}",
        )


# --------------------------------------------------------------------------- SGLang: batched estimator


def _attend_slots(
    attn,
    q: torch.Tensor,
    k1: torch.Tensor,
    v1: torch.Tensor,
    ek: list[torch.Tensor],
    ev: list[torch.Tensor],
    key_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """q [B,nh,Tq,S,d]: the S slots of the last Tq bases; k1/v1 [B,nkv,T,d] prefix (step-1) keys; ek/ev: per round so
    far, [B,nkv,Tq,S,d] keys written by each slot; key_mask [B,T] (True = real key) or None. Slot s of base t attends
    the prefix keys <= t and the keys slot s wrote. Returns [B,Tq*S,hidden].

    One softmax in three parts merged exactly through their log-sum-exps (:func:`.merged`): the prefix on the
    kernels of :func:`.causal_parts`, each slot a row of the batch, the slot's own few keys explicitly. An explicit
    [Tq, S, T] score tensor over the prefix took gigabytes a layer at a few hundred positions and grew with the
    prompt's square."""
    B, nh, Tq, S, d = q.shape
    nkv, scale = k1.shape[1], 1.0 / math.sqrt(d)

    def per_slot(x: torch.Tensor) -> torch.Tensor:  # [B, ...] -> [B * S, ...], slot-major within a row
        return x[:, None].expand(B, S, *x.shape[1:]).reshape(B * S, *x.shape[1:])

    def back(x: torch.Tensor) -> torch.Tensor:  # [B * S, nh, Tq, ...] -> [B, nh, Tq, S, ...] in float32
        return x.reshape(B, S, nh, Tq, *x.shape[3:]).movedim(1, 3).float()

    qs = q.movedim(3, 1).reshape(B * S, nh, Tq, d)
    parts = causal_parts(qs, per_slot(k1), per_slot(v1), scale, None if key_mask is None else per_slot(key_mask))
    rep = nh // nkv
    ke = torch.stack(ek, dim=4).repeat_interleave(rep, 1).float()  # [B,nh,Tq,S,J,d]
    ve = torch.stack(ev, dim=4).repeat_interleave(rep, 1).float()
    se = torch.einsum("bhtsd,bhtsjd->bhtsj", q.float(), ke) * scale
    parts = [(back(o), back(lse)[..., None]) for o, lse in parts]  # [B,nh,Tq,S,d|1]
    o = merged(parts, se, lambda w: torch.einsum("bhtsj,bhtsjd->bhtsd", w, ve), masked=key_mask is not None).to(q.dtype)
    return attn.o_proj(o.permute(0, 2, 3, 1, 4).reshape(B, Tq * S, nh * d))


def _topk_probs(draft: Eagle3Draft, h: torch.Tensor, topk: int) -> tuple[torch.Tensor, torch.Tensor]:
    probs = torch.softmax(draft.logits(h), dim=-1)
    p, i = probs.topk(topk, dim=-1)
    return p, draft.to_target_ids(i)


@dataclass
class _TreeKV:
    """One draft layer's keys in the tree: the prefix's (step 1) and, per round, those each slot wrote."""

    k1: torch.Tensor | None = None
    v1: torch.Tensor | None = None
    ek: list[torch.Tensor] = field(default_factory=list)
    ev: list[torch.Tensor] = field(default_factory=list)


def _tree_forward(
    draft: Eagle3Draft,
    kv: list[_TreeKV],
    h: torch.Tensor,
    ids: torch.Tensor,
    pos: torch.Tensor,
    attend: Callable[[Any, torch.Tensor, _TreeKV], torch.Tensor],
    slot_shape: tuple[int, int] | None = None,
) -> torch.Tensor:
    """One draft forward through every layer (Eagle3Draft.through_layers) with the tree's keys: without
    ``slot_shape`` the prefix extend (keys kept as each layer's k1/v1); with it, one round of slots (keys
    appended per slot)."""

    def layer_attend(i: int, attn: Any, x: torch.Tensor) -> torch.Tensor:
        c = kv[i]
        q, k, v = attn.qkv(x, pos, draft.inv_freq)
        if slot_shape is None:
            c.k1, c.v1 = k, v
        else:
            B, nkv, _, d = k.shape
            c.ek.append(k.view(B, nkv, *slot_shape, d))
            c.ev.append(v.view(B, nkv, *slot_shape, d))
        return attend(attn, q, c)

    return draft.through_layers(h, ids, layer_attend)


@torch.inference_mode()
def sglang_tree_accepted(
    draft: Eagle3Draft,
    aux: torch.Tensor,
    tokens: torch.Tensor,
    labels: Callable[[int], torch.Tensor],
    lengths: Sequence[int],
    num_steps: int,
    topk: int,
    num_draft_tokens: int,
    key_mask: torch.Tensor | None = None,
    from_base: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Accepted depth at every base t of SGLang's tree, all bases at once.

    aux [B,T,nH], tokens [B,T]; labels(k) -> [B,T] the verifier's token for depth k at base t.
    Returns (accepted [B,T] long, drafted [B,T] long: depths with a label, min(K, len-2-t)).
    ``from_base``: the trees of the bases from it on (accepted and drafted 0 before it): the prefix extend runs over
    every position (its keys are every tree's context), the rounds and the walk only where a base is scored.
    """
    check_tree_settings(topk, num_steps, num_draft_tokens)
    (B, T), dev, K, S, t0 = tokens.shape, tokens.device, num_steps, topk, from_base
    ids = torch.roll(tokens, -1, dims=1)
    pos = torch.arange(T, device=dev).expand(B, T)
    # round 0 input: the draft extend over the verified prefix (step 1 of the unroll, by its attention), every layer
    # keeping its own prefix keys and, per round, the keys each slot wrote
    kv = [_TreeKV() for _ in range(1 + len(draft.later_layers()))]
    h1 = _tree_forward(
        draft, kv, draft.project_aux(aux), ids, pos, lambda attn, q, c: attn.attend_unroll(q, c.k1, c.v1, [], [], key_mask)
    )[:, t0:]
    T, pos = T - t0, pos[:, t0:]  # the scored bases' trees
    p, tok = _topk_probs(draft, h1, S)  # [B,T,S]
    scores, score_list, token_list = p, [p], [tok]  # the lists: each round's [B,T,n_i]
    parents_list = [torch.arange(-1, S, device=dev).expand(B, T, S + 1)]
    in_ids, H = tok, h1.shape[-1]  # [B,T,S] frontier tokens
    hidden = h1[:, :, None].expand(B, T, S, H)  # state each slot's forward reads

    def slots(attn: Any, q: torch.Tensor, c: _TreeKV) -> torch.Tensor:
        assert c.k1 is not None and c.v1 is not None  # the prefix forward (h1, above) set them
        return _attend_slots(attn, q.view(B, attn.nh, T, S, q.shape[-1]), c.k1, c.v1, c.ek, c.ev, key_mask)

    for i in range(K - 1):
        step_pos = (pos + 1 + i)[:, :, None].expand(B, T, S).reshape(B, T * S)
        out = _tree_forward(
            draft, kv, hidden.reshape(B, T * S, H), in_ids.reshape(B, T * S), step_pos, slots, slot_shape=(T, S)
        ).view(B, T, S, H)
        cp, ctok = _topk_probs(draft, out, S)  # [B,T,S(parent),S(child)]
        expand = scores[..., None] * cp
        scores, cs_idx = expand.flatten(-2).topk(S, dim=-1)  # [B,T,S]
        flat_tok = ctok.flatten(-2)
        in_ids, hidden = flat_tok.gather(-1, cs_idx), out.gather(2, (cs_idx // S)[..., None].expand(B, T, S, H))
        score_list.append(expand.flatten(-2))
        token_list.append(flat_tok)
        parents_list.append(cs_idx + (S * S * i + S))
    acc, drafted = _walk_selected(
        score_list, token_list, parents_list, lambda j: labels(j)[:, t0:], lengths, K, S, num_draft_tokens, B, T, dev, t0
    )
    none = torch.zeros(B, t0, dtype=torch.long, device=dev)
    return torch.cat([none, acc], dim=1), torch.cat([none, drafted], dim=1)


def _walk_selected(score_list, token_list, parents_list, labels, lengths, K, S, num_draft_tokens, B, T, dev, t0=0):
    all_scores = torch.cat(score_list, dim=-1)  # [B,T,N]
    all_tokens = torch.cat(token_list, dim=-1)
    N = all_scores.shape[-1]
    sel = all_scores.topk(num_draft_tokens - 1, dim=-1).indices  # organize_draft_results
    selected = torch.zeros(B, T, N, dtype=torch.bool, device=dev).scatter_(-1, sel, True)
    parent_list = torch.cat(parents_list[:-1], dim=-1) if len(parents_list) > 1 else None
    cand = torch.arange(N, device=dev)
    parent = torch.full((B, T, N), -1, dtype=torch.long, device=dev)
    if parent_list is not None and N > S:
        parent[..., S:] = parent_list[..., (cand[S:] - S) // S + 1]
    lens = torch.as_tensor(list(lengths), device=dev)
    t_idx = torch.arange(t0, t0 + T, device=dev)
    drafted = (lens[:, None] - 2 - t_idx[None]).clamp(min=0, max=K)
    cur = torch.full((B, T), -1, dtype=torch.long, device=dev)
    alive = torch.ones(B, T, dtype=torch.bool, device=dev)
    acc = torch.zeros(B, T, dtype=torch.long, device=dev)
    for j in range(1, K + 1):
        lab = labels(j)
        hit = selected & (parent == cur[..., None]) & (all_tokens == lab[..., None])
        found = hit.any(-1) & alive & (j <= drafted)
        cur = torch.where(found, hit.float().argmax(-1), cur)
        alive = found
        acc += found.long()
    return acc, drafted


# --------------------------------------------------------------------------- SGLang: sequential reference


@torch.inference_mode()
def _sglang_pass_candidates(
    draft: Eagle3Draft, aux: torch.Tensor, seq: list[int], t: int, num_steps: int, S: int
) -> list[tuple[float, int, int]]:
    """One pass of SGLang's tree drafting at base t: every scored candidate (score, target token, parent index).

    Each slot keeps its own draft KV cache (prefix + the entries it wrote), as SGLang's kv indices do.
    """
    dev = aux.device
    cache = DraftCache()
    out = draft.extend(
        aux[:, : t + 1], torch.tensor([seq[1 : t + 2]], device=dev), torch.arange(t + 1, device=dev)[None], cache, from_aux=True
    )
    probs = torch.softmax(draft.logits(out[:, -1]), dim=-1)[0]
    p, i = probs.topk(S)
    tok = draft.to_target_ids(i)
    # candidates: flat list of (score, token, parent flat index)
    cands: list[tuple[float, int, int]] = [(float(p[s]), int(tok[s]), -1) for s in range(S)]
    frontier = list(range(S))  # flat candidate index held by each slot
    slot_in = [(int(tok[s]), out[:, -1:]) for s in range(S)]  # (token, parent state) per slot
    slot_cache = [cache.clone() for _ in range(S)]
    scores = [float(p[s]) for s in range(S)]
    for rnd in range(num_steps - 1):
        child = []  # per slot: (probs [S], target ids [S], output state)
        for s in range(S):
            tk, hs = slot_in[s]
            o = draft.extend(
                hs, torch.tensor([[tk]], device=dev), torch.tensor([[t + 1 + rnd]], device=dev), slot_cache[s], from_aux=False
            )
            pr = torch.softmax(draft.logits(o[:, -1]), dim=-1)[0]
            cp, ci = pr.topk(S)
            child.append((cp, draft.to_target_ids(ci), o))
        expand = torch.stack([scores[s] * child[s][0] for s in range(S)])  # [S,S], float32 like SGLang
        base = len(cands)
        for s in range(S):
            for c in range(S):
                cands.append((float(expand[s, c]), int(child[s][1][c]), frontier[s]))
        best = expand.flatten().topk(S)
        new_frontier, new_in, new_scores = [], [], []
        for v, f in zip(best.values.tolist(), best.indices.tolist()):
            new_frontier.append(base + f)
            new_in.append((cands[base + f][1], child[f // S][2]))
            new_scores.append(v)
        frontier, slot_in = new_frontier, new_in
        scores = [float(x) for x in best.values]
    return cands


def greedy_verify(
    child: Callable[[Any, int], Any],
    root: Any,
    seq: list[int],
    amax: torch.Tensor,
    t: int,
    k_eff: int,
    target_step: Callable[[list[int]], tuple[torch.Tensor, torch.Tensor]],
) -> tuple[int, int]:
    """The tree loops' greedy verify: from ``root``, follow the child (``child(node, token)``, None when
    there is none) holding the target's argmax, one target forward per accepted token, at most ``k_eff``.
    Appends the accepted tokens to ``seq``; returns (accepted, the target's next token: the bonus)."""
    a, cur, nxt = 0, root, int(amax[t + 1])
    while a < k_eff:
        cur = child(cur, nxt)
        if cur is None:
            break
        seq.append(nxt)
        a += 1
        _, amax = target_step(seq)
        nxt = int(amax[-1])
    return a, nxt


def _sglang_child(order: list[int], cands: list[tuple[float, int, int]], cur: int, tok: int) -> int | None:
    """greedy_verify's child in an SGLang pass: the selected candidate under ``cur`` holding ``tok``
    (among equal tokens under one parent, the first selected), or None."""
    return next((x for x in order if cands[x][2] == cur and cands[x][1] == tok), None)


def _static_child(nodes: list[tuple[int, ...]], token: dict[tuple, int], cur: tuple, tok: int) -> tuple | None:
    """greedy_verify's child in a static tree: the node under ``cur`` whose drafted token is ``tok``, or None."""
    return next((n for n in nodes if len(n) == len(cur) + 1 and n[:-1] == cur and token[n] == tok), None)


@torch.inference_mode()
def sglang_tree_reference_loop(
    target_step: Callable[[list[int]], tuple[torch.Tensor, torch.Tensor]],
    draft: Eagle3Draft,
    prompt: list[int],
    total_len: int,
    num_steps: int,
    topk: int,
    num_draft_tokens: int,
) -> tuple[list[int], list[int], list[int]]:
    """SGLang's draft tree written one pass, one slot, one node at a time; greedy tree verify.

    Each slot keeps its own draft KV cache (prefix + the entries it wrote), as SGLang's kv indices
    do. The verify walks the tree with the target's argmax, one target forward per accepted token.
    Returns (tokens, accepted per pass, drafted depth per pass).
    """
    check_tree_settings(topk, num_steps, num_draft_tokens)
    seq = list(prompt)
    aux, amax = target_step(seq)
    seq.append(int(amax[-1]))
    accepted, drafted = [], []
    S = topk
    while True:
        t = len(seq) - 2
        k_eff = min(num_steps, total_len - 2 - t)
        if k_eff <= 0:
            break
        aux, amax = target_step(seq)  # features of x_0..x_{t+1}; amax[t+1] = the target's next token
        cands = _sglang_pass_candidates(draft, aux, seq, t, num_steps, S)
        all_scores = torch.tensor([c[0] for c in cands])
        chosen = set(all_scores.topk(num_draft_tokens - 1).indices.tolist())
        order = sorted(chosen)  # among equal tokens under one parent, the first selected node
        a, nxt = greedy_verify(
            functools.partial(_sglang_child, order, cands),
            -1,
            seq,
            amax,
            t,
            k_eff,
            target_step,
        )
        accepted.append(a)
        drafted.append(k_eff)
        if len(seq) < total_len:
            seq.append(nxt)  # bonus token
    return seq[:total_len], accepted, drafted


# --------------------------------------------------------------------------- vLLM static tree


def static_tree_accepted(ranks: torch.Tensor, valid: torch.Tensor, paths: Sequence[Sequence[int]]) -> torch.Tensor:
    """ranks [B,K,T]: rank of the verifier's token in the teacher-forced draft distribution at step k
    (>= max children when absent); valid [B,K,T]. Accepted depth = longest prefix whose rank path is a node.

    Walked for every base at once through the tree's child table (node, rank) -> node: a base-by-base walk in
    Python took seconds at hundreds of thousands of bases."""
    B, K, T = ranks.shape
    nodes = sorted({tuple(p) for p in paths}, key=len)  # parents before children
    depth = max(len(p) for p in nodes)
    width = max(int(ranks.max()) + 1 if ranks.numel() else 1, max(p[-1] for p in nodes) + 1)
    index: dict[tuple[int, ...], int] = {(): 0}
    child = torch.full((len(nodes) + 1, width), -1, dtype=torch.long)
    for p in nodes:
        if p[:-1] in index:  # a node under a missing parent is never reached, as no walk passes its parent
            index[p] = len(index)
            child[index[p[:-1]], p[-1]] = index[p]
    child = child.to(ranks.device)
    at = torch.zeros(B, T, dtype=torch.long, device=ranks.device)  # the root
    alive = torch.ones(B, T, dtype=torch.bool, device=ranks.device)
    out = torch.zeros(B, T, dtype=torch.long, device=ranks.device)
    for j in range(min(K, depth)):
        nxt = child[at, ranks[:, j]]
        alive &= valid[:, j] & (nxt >= 0)
        out += alive
        at = torch.where(alive, nxt, at)
    return out


@torch.inference_mode()
def static_tree_reference_loop(
    target_step: Callable[[list[int]], tuple[torch.Tensor, torch.Tensor]],
    draft: Eagle3Draft,
    prompt: list[int],
    total_len: int,
    paths: Sequence[Sequence[int]],
) -> tuple[list[int], list[int], list[int]]:
    """A vLLM-style static token tree, node by node: each node runs the draft on its real ancestors'
    cache; children are the top-ranked tokens of its distribution; greedy verify walks the tree."""
    nodes = sorted({tuple(p) for p in paths}, key=lambda p: (len(p), p))
    depth = max(len(p) for p in nodes)
    width = max(p[-1] for p in nodes) + 1
    seq = list(prompt)
    aux, amax = target_step(seq)
    seq.append(int(amax[-1]))
    accepted, drafted = [], []
    dev = aux.device
    while True:
        t = len(seq) - 2
        k_eff = min(depth, total_len - 2 - t)
        if k_eff <= 0:
            break
        aux, amax = target_step(seq)
        root_cache = DraftCache()
        out = draft.extend(
            aux[:, : t + 1],
            torch.tensor([seq[1 : t + 2]], device=dev),
            torch.arange(t + 1, device=dev)[None],
            root_cache,
            from_aux=True,
        )
        state: dict[tuple, tuple[DraftCache, torch.Tensor]] = {(): (root_cache, out[:, -1:])}
        token: dict[tuple, int] = {}
        for node in nodes:
            parent = node[:-1]
            pcache, ph = state[parent]
            top = draft.to_target_ids(draft.logits(ph[:, -1]).topk(width, dim=-1).indices)[0]
            token[node] = int(top[node[-1]])
            if len(node) < depth and any(len(q) == len(node) + 1 and q[:-1] == node for q in nodes):
                c = pcache.clone()
                h = draft.extend(
                    ph, torch.tensor([[token[node]]], device=dev), torch.tensor([[t + len(node)]], device=dev), c, from_aux=False
                )
                state[node] = (c, h)
        a, nxt = greedy_verify(
            functools.partial(_static_child, nodes, token),
            (),
            seq,
            amax,
            t,
            k_eff,
            target_step,
        )
        accepted.append(a)
        drafted.append(k_eff)
        if len(seq) < total_len:
            seq.append(nxt)
    return seq[:total_len], accepted, drafted
