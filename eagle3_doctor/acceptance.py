"""Acceptance of a draft: a parallel estimator, and the sequential loop it is checked against.

Notation (one sequence x_0..x_{N-1}; f_t = target features of x_t; a_t = target argmax at t):
a verify pass at *base* t knows x_0..x_{t+1} (x_{t+1} is the bonus token of the previous pass).
The draft's step j proposes d_j for x_{t+1+j}; greedy verification accepts the longest prefix with
d_j == target's choice, then adds one bonus token, so the next base is t + A + 1.

The estimator runs the draft K steps teacher-forced at every t at once (:meth:`Eagle3Draft.unroll`).
Along the target's own greedy continuation the teacher-forced inputs are exactly the tokens a
decode loop would feed whenever the earlier steps were accepted, so the per-base accepted length
A(t) is exact, and walking t -> t + A(t) + 1 from the first base reproduces the loop's passes.
:func:`reference_loop` is that loop written plainly (draft KV cache, one target forward per pass).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch

from .draft.model import DraftCache, Eagle3Draft

SCHEMA = "eagle3-doctor/acceptance/1"


# --------------------------------------------------------------------------- reporting conventions


def metrics_from_passes(accepted: Sequence[int], drafted: Sequence[int], num_steps: int) -> dict[str, Any]:
    """Every engine's acceptance numbers from one list of verify passes.

    accepted[i]: draft tokens accepted in pass i (bonus excluded); drafted[i]: tokens proposed.
    - vLLM (v1/spec_decode/metrics.py): mean acceptance length = 1 + accepted/num_drafts;
      draft acceptance rate = accepted/num_draft_tokens; per-position rate k = #(A >= k)/num_drafts.
    - SGLang: accept_length = (accepted + passes)/passes (bonus included); accept_rate =
      (accept_tokens - forward_ct) / (forward_ct * (num_draft_tokens - 1)) = accepted/(passes*K).
    """
    acc = np.asarray(accepted, dtype=np.int64)
    drf = np.asarray(drafted, dtype=np.int64)
    n = int(acc.size)
    if n == 0:
        return {"passes": 0}
    total = int(acc.sum())
    per_pos = [float((acc >= k).sum() / n) for k in range(1, num_steps + 1)]
    cond = []
    for k in range(1, num_steps + 1):
        reach = int((acc >= k - 1).sum() if k > 1 else n)
        cond.append(float((acc >= k).sum() / reach) if reach else float("nan"))
    hist = np.bincount(acc, minlength=num_steps + 1).tolist()
    return {
        "passes": n,
        "accepted_tokens": total,
        "drafted_tokens": int(drf.sum()),
        "mean_acceptance_length": 1.0 + total / n,  # vLLM and SGLang accept_length: bonus included
        "mean_accepted_without_bonus": total / n,
        "draft_acceptance_rate": total / max(int(drf.sum()), 1),  # vLLM
        "sglang_accept_length": (total + n) / n,
        "sglang_accept_rate": total / (n * num_steps),
        "per_position_rate": per_pos,  # vLLM, unconditional
        "conditional_rate": cond,  # P(A >= k | A >= k-1)
        "accepted_length_histogram": hist,
    }


def tau_from_acc(acc_k: Sequence[float]) -> float:
    """tau = 1 + sum_k prod_{i<=k} acc_i (the bridge from SpecForge acc_k to acceptance length)."""
    tau, prod = 1.0, 1.0
    for a in acc_k:
        prod *= a
        tau += prod
    return tau


def leading_ones(match: torch.Tensor) -> torch.Tensor:
    """match [..., K] bool -> number of leading True along the last dim."""
    return match.long().cumprod(dim=-1).sum(dim=-1)


def _leading_ones_np(match: np.ndarray) -> np.ndarray:
    """:func:`leading_ones` in numpy: match [..., K] bool -> leading True count along the last dim."""
    return np.cumprod(match, axis=-1, dtype=np.int64).sum(axis=-1)


def walk_chain(A: np.ndarray, drafted: np.ndarray, start: int, stop: int) -> tuple[list[int], list[int], list[int]]:
    """Bases visited by a decode loop: t -> t + A(t) + 1 from ``start`` while a draft is possible.

    A, drafted: per-base accepted / proposable counts (indexed by base t). Returns (bases, A, K_eff).
    """
    bases, acc, drf = [], [], []
    t = start
    while t < stop and drafted[t] > 0:
        bases.append(t)
        acc.append(int(A[t]))
        drf.append(int(drafted[t]))
        t += int(A[t]) + 1
    return bases, acc, drf


def expected_accept_prob(p: torch.Tensor, q: torch.Tensor, draft_token: torch.Tensor | None, mode: str) -> torch.Tensor:
    """Acceptance probability of one draft position at temperature > 0, without sampling noise.

    mode "sampled": the draft token is sampled from q and verified by speculative sampling:
    P(accept) = sum_x q(x) min(1, p(x)/q(x)) = sum_x min(p(x), q(x)).
    mode "argmax": the draft proposes argmax q (vLLM V1 at any temperature): P = p(draft token).
    """
    if mode == "sampled":
        return torch.minimum(p, q).sum(-1)
    if mode == "argmax":
        assert draft_token is not None
        return p.gather(-1, draft_token.unsqueeze(-1)).squeeze(-1)
    raise ValueError(mode)


def draft_probs_in_target_vocab(draft: Eagle3Draft, logits: torch.Tensor, temperature: float, vocab: int) -> torch.Tensor:
    q_d = torch.softmax(logits.float() / temperature, dim=-1)
    q = torch.zeros(*q_d.shape[:-1], vocab, dtype=q_d.dtype, device=q_d.device)
    idx = (torch.arange(q_d.shape[-1], device=q_d.device) + draft.d2t).clamp(0, vocab - 1)
    q.index_add_(-1, idx, q_d)
    return q


# --------------------------------------------------------------------------- estimator core


@dataclass
class StepOutputs:
    """Per (sequence, base t, step k) draft outcomes from one teacher-forced unroll."""

    match: torch.Tensor  # [B, K, T] bool: greedy chain proposal == the verifier's token
    valid: torch.Tensor  # [B, K, T] bool: a label exists for this step at this base
    topk_hit: torch.Tensor | None = None  # [B, K, T] bool: verifier's token within draft top-k
    alpha: torch.Tensor | None = None  # [B, K, T] float: acceptance probability at temperature
    ranks: torch.Tensor | None = None  # [B, K, T] long: rank of the verifier's token among the draft's top-N
    tree_accepted: torch.Tensor | None = None  # [B, T] long: exact accepted depth of the engine's tree (tree.py)


@torch.inference_mode()
def unroll_outcomes(
    draft: Eagle3Draft,
    aux: torch.Tensor,
    tokens: torch.Tensor,
    labels: Callable[[int], torch.Tensor],
    lengths: Sequence[int],
    num_steps: int,
    *,
    topk: int = 1,
    temperature: float = 0.0,
    target_logits: Callable[[int], torch.Tensor] | None = None,
    temp_mode: str = "sampled",
    rank_width: int = 0,
) -> StepOutputs:
    """aux [B,T,nH], tokens [B,T] (right-padded); labels(k) -> [B,T] verifier token for step k at base t.

    Step k (1-based) at base t proposes for x_{t+1+k}; it has a label when t + 1 + k <= len - 1.
    """
    B, T = tokens.shape
    dev = tokens.device
    ids = torch.roll(tokens, -1, dims=1)
    lens = torch.as_tensor(list(lengths), device=dev)
    pos = torch.arange(T, device=dev)
    match = torch.zeros(B, num_steps, T, dtype=torch.bool, device=dev)
    valid = torch.zeros_like(match)
    hit = torch.zeros_like(match) if topk > 1 else None
    alpha = torch.zeros(B, num_steps, T, dtype=torch.float32, device=dev) if temperature > 0 else None
    ranks = torch.full((B, num_steps, T), rank_width, dtype=torch.long, device=dev) if rank_width else None
    for k0, h in enumerate(draft.unroll(aux, ids, num_steps)):
        k = k0 + 1
        v = pos[None, :] + 1 + k <= lens[:, None] - 1
        lab = labels(k)
        logits = draft.logits(h)
        if topk > 1:
            top = draft.to_target_ids(logits.topk(topk, dim=-1).indices)
            hit[:, k0] = (top == lab[..., None]).any(-1) & v  # type: ignore[index]
            prop = top[..., 0]
        else:
            prop = draft.to_target_ids(logits.argmax(-1))
        match[:, k0] = (prop == lab) & v
        valid[:, k0] = v
        if ranks is not None:
            # rank of the verifier's token in this step's draft distribution (rank_width = absent)
            top = draft.to_target_ids(logits.topk(rank_width, dim=-1).indices)
            eq = top == lab[..., None]
            ranks[:, k0] = torch.where(eq.any(-1), eq.long().argmax(-1), torch.full_like(lab, rank_width))
        if temperature > 0:
            assert target_logits is not None
            p = torch.softmax(target_logits(k) / temperature, dim=-1)
            q = draft_probs_in_target_vocab(draft, logits, temperature, p.shape[-1])
            a = expected_accept_prob(p, q, prop, temp_mode)
            alpha[:, k0] = torch.where(v, a, torch.zeros_like(a))  # type: ignore[index]
    return StepOutputs(match, valid, hit, alpha, ranks)


# --------------------------------------------------------------------------- aggregate over a run


@dataclass
class PathAccumulator:
    """Counts for one feature path across all batches."""

    name: str
    num_steps: int
    bucket: int = 64
    passes_acc: list[int] = field(default_factory=list)
    passes_drf: list[int] = field(default_factory=list)
    per_request: list[dict[str, float]] = field(default_factory=list)
    per_request_passes: list[tuple[list[int], list[int]]] = field(default_factory=list)
    per_request_step1: list[tuple[int, int]] = field(default_factory=list)  # (hits, positions) per sequence
    hits: np.ndarray | None = None
    totals: np.ndarray | None = None
    pos_hits: dict[int, list[int]] = field(default_factory=dict)  # bucket -> [hits, total] for step 1
    tree_acc: list[int] = field(default_factory=list)
    tree_drf: list[int] = field(default_factory=list)
    tree_per_request: list[list[int]] = field(default_factory=list)
    alpha_prod_sum: np.ndarray | None = None
    alpha_n: int = 0
    per_request_hits: list[tuple[list[int], list[int]]] = field(default_factory=list)  # acc_k (hits, positions) per request

    def add(self, out: StepOutputs, starts: Sequence[int], lengths: Sequence[int], walk: bool) -> None:
        # numpy, not torch, for this bookkeeping: torch's CPU reductions over these small bool
        # tensors cost ~0.1 s a batch (bench/RESULTS.md), as much as the draft's own 7 steps
        m, v = out.match.cpu().numpy(), out.valid.cpu().numpy()  # [B, K, T] bool
        # count only bases a decode would reach: t >= start (the prompt's last position in greedy mode)
        B, _, T = m.shape
        t_idx = np.arange(T)
        region = t_idx[None, :] >= np.asarray(list(starts))[:, None]  # [B, T]
        mv = v & region[:, None]
        h = (m & mv).sum(axis=(0, 2))
        n = mv.sum(axis=(0, 2))
        self.hits = h if self.hits is None else self.hits + h
        self.totals = n if self.totals is None else self.totals + n
        # per request too: the bootstrap over prompts resamples these (eagle3_doctor.stats)
        hb = (m & mv).sum(axis=2).tolist()
        nb = mv.sum(axis=2).tolist()
        self.per_request_hits += list(zip(hb, nb))
        step1 = m[:, 0] & region
        valid1 = v[:, 0] & region
        for b in range(B):
            self.per_request_step1.append((int(step1[b].sum()), int(valid1[b].sum())))
            ts = np.nonzero(valid1[b])[0]
            if ts.size == 0:
                continue
            bk = ts // self.bucket
            keys, tot = np.unique(bk, return_counts=True)
            hit = np.bincount(bk, weights=step1[b, ts])[keys]
            for key, hh, nn in zip(keys.tolist(), hit.tolist(), tot.tolist()):
                cur = self.pos_hits.setdefault(key, [0, 0])
                cur[0] += int(hh)
                cur[1] += nn
        A = _leading_ones_np(m.transpose(0, 2, 1))  # [B, T]
        drafted = v.sum(axis=1)  # [B, T] = min(K, len-2-t) for real bases
        if out.tree_accepted is not None:  # exact, for the engine's own tree (tree.py)
            tree = out.tree_accepted.cpu().numpy()
        else:
            tree = _leading_ones_np(out.topk_hit.cpu().numpy().transpose(0, 2, 1)) if out.topk_hit is not None else None
        for b in range(B):
            if walk:
                _, acc, drf = walk_chain(A[b], drafted[b], starts[b], lengths[b] - 1)
                if tree is not None:
                    _, tacc, tdrf = walk_chain(tree[b], drafted[b], starts[b], lengths[b] - 1)
                    self.tree_acc += tacc
                    self.tree_drf += tdrf
                    self.tree_per_request.append(tacc)
            else:
                # text mode: every base is a pass (acceptance against the target's argmax along the text)
                sel = np.nonzero(drafted[b, starts[b] : lengths[b] - 1] > 0)[0] + starts[b]
                acc, drf = A[b, sel].tolist(), drafted[b, sel].tolist()
                if tree is not None:
                    self.tree_acc += tree[b, sel].tolist()
                    self.tree_drf += drf
            self.passes_acc += acc
            self.passes_drf += drf
            self.per_request_passes.append((acc, drf))
            if acc:
                self.per_request.append({"mean_acceptance_length": 1 + sum(acc) / len(acc)})
        if out.alpha is not None:
            al = out.alpha.cpu().double().numpy()  # [B, K, T]
            prod = np.cumprod(al, axis=1)  # P(first k accepted) along the teacher-forced path
            sel = v[:, 0] & region
            s = (prod * sel[:, None]).sum(axis=(0, 2))
            self.alpha_prod_sum = s if self.alpha_prod_sum is None else self.alpha_prod_sum + s
            self.alpha_n += int(sel.sum())

    def result(self) -> dict[str, Any]:
        K = self.num_steps
        acc_k = [float(h / n) if n else float("nan") for h, n in zip(self.hits, self.totals)] if self.hits is not None else []
        res: dict[str, Any] = {
            "name": self.name,
            "acc_k": acc_k,  # SpecForge/EAGLE: teacher-forced token accuracy per TTT step
            "acc_k_positions": [int(n) for n in (self.totals if self.totals is not None else [])],
            "tau": tau_from_acc(acc_k),
            "chain": metrics_from_passes(self.passes_acc, self.passes_drf, K),
            "step1_by_position": [
                {"from": b * self.bucket, "to": (b + 1) * self.bucket - 1, "acc": h / n, "n": n}
                for b, (h, n) in sorted(self.pos_hits.items()) if n
            ],
        }
        lengths = [r["mean_acceptance_length"] for r in self.per_request]
        res["per_request_mean_acceptance_length"] = float(np.mean(lengths)) if lengths else float("nan")
        res["accepted_lengths"] = [a for a, _ in self.per_request_passes]
        res["acc_k_by_request"] = [{"hits": h, "positions": n} for h, n in self.per_request_hits]
        res["step1_counts"] = [list(x) for x in self.per_request_step1]  # per sequence: a paired bootstrap resamples these
        if self.tree_acc:
            res["tree"] = metrics_from_passes(self.tree_acc, self.tree_drf, K)
            if self.tree_per_request:
                res["tree"]["accepted_lengths"] = self.tree_per_request
        if self.alpha_prod_sum is not None and self.alpha_n:
            rates = (self.alpha_prod_sum / self.alpha_n).tolist()
            res["temperature"] = {"expected_per_position_rate": rates, "expected_mean_acceptance_length": 1 + float(sum(rates))}
        return res


# --------------------------------------------------------------------------- reference loop


@torch.inference_mode()
def reference_loop(
    target_step: Callable[[list[int]], tuple[torch.Tensor, torch.Tensor]],
    draft: Eagle3Draft,
    prompt: list[int],
    total_len: int,
    num_steps: int,
) -> tuple[list[int], list[int], list[int]]:
    """A plain greedy chain speculative-decoding loop, the estimator's independent reference.

    target_step(tokens) -> (aux [1, n, nH] features of every position, argmax [n] next-token ids)
    runs the target over the whole sequence (no cache: simple over fast). Each pass: the draft
    re-extends over positions 0..t from fresh target features (step 1), proposes K-1 more tokens
    one at a time through its KV cache, the target verifies, the matching prefix plus one bonus
    token is kept. Stops when ``total_len`` tokens exist. Returns (tokens, accepted, drafted).
    """
    seq = list(prompt)
    aux, amax = target_step(seq)
    seq.append(int(amax[-1]))  # prefill's bonus token
    accepted, drafted = [], []
    dev = aux.device
    while True:
        t = len(seq) - 2  # base: features of x_t pair with the last token x_{t+1}
        k_eff = min(num_steps, total_len - 2 - t)
        if k_eff <= 0:
            break
        cache = DraftCache()
        ids = torch.tensor([seq[1 : t + 2]], device=dev)
        pos = torch.arange(t + 1, device=dev)[None]
        out = draft.extend(aux[:, : t + 1], ids, pos, cache, from_aux=True)
        h = out[:, -1:]
        props: list[int] = []
        for j in range(1, k_eff + 1):
            d = int(draft.to_target_ids(draft.logits(h).argmax(-1))[0, 0])
            props.append(d)
            if j == k_eff:
                break
            h = draft.extend(h, torch.tensor([[d]], device=dev), torch.tensor([[t + j]], device=dev), cache, from_aux=False)
        aux, amax = target_step(seq + props)
        a = 0
        while a < k_eff and props[a] == int(amax[t + 1 + a]):
            a += 1
        accepted.append(a)
        drafted.append(k_eff)
        seq += props[:a]
        if len(seq) < total_len:
            seq.append(int(amax[t + 1 + a]))  # bonus token
        aux = aux[:, : len(seq)]
    return seq[:total_len], accepted, drafted


# --------------------------------------------------------------------------- triage


def triage(path: dict[str, Any], dtype: str) -> list[str]:
    """What an acceptance pattern usually means (hints for the report, not findings)."""
    hints: list[str] = []
    chain = path.get("chain", {})
    length = chain.get("mean_acceptance_length")
    rates = chain.get("per_position_rate") or []
    cond = chain.get("conditional_rate") or []
    if length is not None and length <= 1.1:
        hints.append(f"mean acceptance length {length:.2f} (about 1): the draft proposes almost nothing the target takes; "
                     "suspect the weights or the vocabulary: missing/untrained lm_head, d2t/t2d, embeddings, tokenizer "
                     "(run eagle3-doctor inspect)")
    elif len(rates) >= 2 and 0.15 <= rates[0] <= 0.6 and len(cond) >= 2 and cond[1] < 0.3:
        hints.append(f"first position moderate ({rates[0]:.2f}) then near zero (P(2nd | 1st) = {cond[1]:.2f}): the "
                     "draft's own later steps fail: typical of wrong capture points or RoPE settings "
                     "(run eagle3-doctor compare-hidden; inspect CFG003/CFG004)")
    buckets = [b for b in path.get("step1_by_position", []) if b["n"] >= 50]
    if len(buckets) >= 3 and buckets[0]["acc"] - buckets[-1]["acc"] > 0.15:
        hints.append(f"step-1 accuracy falls with context ({buckets[0]['acc']:.2f} at positions {buckets[0]['from']}-"
                     f"{buckets[0]['to']}, {buckets[-1]['acc']:.2f} at {buckets[-1]['from']}-{buckets[-1]['to']}): "
                     "suspect positions: rope_scaling, max_position_embeddings or the position base")
    if dtype in ("bfloat16", "float16") and rates and rates[0] < 0.5:
        hints.append(f"measured in {dtype}: rerun with --dtype float32; a large gap between the two points at numerics "
                     "(draft dtype, fp16 overflow) rather than wiring")
    return hints
