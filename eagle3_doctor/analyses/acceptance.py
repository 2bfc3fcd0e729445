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

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..core.errors import BadInput, ResourceError
from ..core.findings import Finding
from ..core.taps import CapturePoint, FeatureSpec
from ..draft.model import DraftCache, Eagle3Draft
from ..model.replay import ReplayBatch, Sources, check_seq_len, iter_captures, load_sources, replay_order
from .results import (
    AcceptanceRun,
    ChainMetrics,
    PathResult,
    PositionBucket,
    ReferenceResult,
    RequestCounts,
    RunSettings,
    ScanRow,
    TemperatureFigures,
    TreePlan,
    TreeReference,
    spec_label,
)

if TYPE_CHECKING:
    from ..model.setup import Setup
    from ..model.target import Target


# --------------------------------------------------------------------------- reporting conventions


def metrics_from_passes(accepted: Sequence[int], drafted: Sequence[int], num_steps: int) -> ChainMetrics:
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
        return ChainMetrics()
    total = int(acc.sum())
    per_pos = [float((acc >= k).sum() / n) for k in range(1, num_steps + 1)]
    cond = []
    for k in range(1, num_steps + 1):
        reach = int((acc >= k - 1).sum() if k > 1 else n)
        cond.append(float((acc >= k).sum() / reach) if reach else float("nan"))
    hist = np.bincount(acc, minlength=num_steps + 1).tolist()
    return ChainMetrics(
        passes=n,
        accepted_tokens=total,
        drafted_tokens=int(drf.sum()),
        mean_acceptance_length=1.0 + total / n,
        mean_accepted_without_bonus=total / n,
        draft_acceptance_rate=total / max(int(drf.sum()), 1),
        sglang_accept_length=(total + n) / n,
        sglang_accept_rate=total / (n * num_steps),
        per_position_rate=per_pos,
        conditional_rate=cond,
        accepted_length_histogram=hist,
    )


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
    target_logits: Callable[[int], Iterable[tuple[slice, torch.Tensor]]] | None = None,
    temp_mode: str = "sampled",
    rank_width: int = 0,
) -> StepOutputs:
    """aux [B,T,nH], tokens [B,T] (right-padded); labels(k) -> [B,T] verifier token for step k at base t.

    target_logits(k) (temperature > 0) yields (slice over the B*T flattened positions, target logits
    float32 [n, V] at position t+k for those bases), as :func:`target.head_chunks` does.

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
            a = _expected_alpha(draft, logits, prop, target_logits(k), temperature, temp_mode).view(B, T)
            alpha[:, k0] = torch.where(v, a, torch.zeros_like(a))  # type: ignore[index]
    return StepOutputs(match, valid, hit, alpha, ranks)


def _expected_alpha(
    draft: Eagle3Draft,
    logits: torch.Tensor,
    prop: torch.Tensor,
    target_chunks: Iterable[tuple[slice, torch.Tensor]],
    temperature: float,
    mode: str,
) -> torch.Tensor:
    """Acceptance probability at every flattened position [B*T], a chunk of positions at a time: the
    target's and the draft's distributions over the target vocabulary never exist for all [B, T] at once."""
    lg = logits.reshape(-1, logits.shape[-1])  # [B*T, Vd]
    pr = prop.reshape(-1)
    out = torch.zeros(lg.shape[0], dtype=torch.float32, device=lg.device)
    for sl, tl in target_chunks:
        p = torch.softmax(tl / temperature, dim=-1)  # [n, V]
        q = draft_probs_in_target_vocab(draft, lg[sl], temperature, p.shape[-1])
        out[sl] = expected_accept_prob(p, q, pr[sl], mode)
    return out


# --------------------------------------------------------------------------- aggregate over a run


@dataclass
class PathAccumulator:
    """Counts for one feature path across all batches."""

    name: str
    num_steps: int
    bucket: int = 64
    passes_acc: list[int] = field(default_factory=list)
    passes_drf: list[int] = field(default_factory=list)
    per_request: list[float] = field(default_factory=list)  # mean acceptance length of each sequence
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
        # per request too: the bootstrap over prompts resamples these (eagle3_doctor.core.stats)
        hb = (m & mv).sum(axis=2).tolist()
        nb = mv.sum(axis=2).tolist()
        self.per_request_hits += list(zip(hb, nb))
        self._add_step1(m[:, 0] & region, v[:, 0] & region)
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
                self.per_request.append(1 + sum(acc) / len(acc))
        if out.alpha is not None:
            al = out.alpha.cpu().double().numpy()  # [B, K, T]
            prod = np.cumprod(al, axis=1)  # P(first k accepted) along the teacher-forced path
            sel = v[:, 0] & region
            s = (prod * sel[:, None]).sum(axis=(0, 2))
            self.alpha_prod_sum = s if self.alpha_prod_sum is None else self.alpha_prod_sum + s
            self.alpha_n += int(sel.sum())

    def _add_step1(self, step1: np.ndarray, valid1: np.ndarray) -> None:
        """Step-1 hits [B, T] per sequence, and by position bucket (accuracy as the context grows)."""
        for b in range(step1.shape[0]):
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

    def result(self) -> PathResult:
        """The path's figures, per-prompt lists still in replay order (see :func:`path_results`)."""
        K = self.num_steps
        hits, totals = (self.hits, self.totals) if self.hits is not None and self.totals is not None else ([], [])
        acc_k = [float(h / n) if n else float("nan") for h, n in zip(hits, totals)]
        tree = None
        if self.tree_acc:
            tree = metrics_from_passes(self.tree_acc, self.tree_drf, K)
            tree.accepted_lengths = self.tree_per_request or None
        temperature = None
        if self.alpha_prod_sum is not None and self.alpha_n:
            rates = (self.alpha_prod_sum / self.alpha_n).tolist()
            temperature = TemperatureFigures(rates, 1 + float(sum(rates)))
        return PathResult(
            name=self.name,
            acc_k=acc_k,
            acc_k_positions=[int(n) for n in totals],
            tau=tau_from_acc(acc_k),
            chain=metrics_from_passes(self.passes_acc, self.passes_drf, K),
            step1_by_position=[
                PositionBucket(b * self.bucket, (b + 1) * self.bucket - 1, h / n, n)
                for b, (h, n) in sorted(self.pos_hits.items())
                if n
            ],
            per_request_mean_acceptance_length=float(np.mean(self.per_request)) if self.per_request else float("nan"),
            accepted_lengths=[a for a, _ in self.per_request_passes],
            acc_k_by_request=[RequestCounts(h, n) for h, n in self.per_request_hits],
            step1_counts=[list(x) for x in self.per_request_step1],
            tree=tree,
            temperature=temperature,
        )


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


def triage(path: PathResult, dtype: str) -> list[str]:
    """What an acceptance pattern usually means (hints for the report, not findings)."""
    hints: list[str] = []
    length, rates, cond = path.chain.mean_acceptance_length, path.chain.per_position_rate, path.chain.conditional_rate
    if length <= 1.1:
        hints.append(
            f"mean acceptance length {length:.2f} (about 1): the draft proposes almost nothing the target takes; "
            "run eagle3-doctor diagnose (module ablation names a module that contributes nothing, the levers a "
            "serving difference) and eagle3-doctor inspect (every tensor of the checkpoint)"
        )
    elif len(rates) >= 2 and 0.15 <= rates[0] <= 0.6 and len(cond) >= 2 and cond[1] < 0.3:
        hints.append(
            f"first position moderate ({rates[0]:.2f}) then near zero (P(2nd | 1st) = {cond[1]:.2f}): the "
            "draft's own later steps fail: typical of wrong capture points or RoPE settings "
            "(run eagle3-doctor compare-hidden; inspect CFG003/CFG004)"
        )
    buckets = [b for b in path.step1_by_position if b.n >= 50]
    if len(buckets) >= 3 and buckets[0].acc - buckets[-1].acc > 0.15:
        first, last = buckets[0], buckets[-1]
        hints.append(
            f"step-1 accuracy falls with context ({first.acc:.2f} at positions {first.start}-"
            f"{first.end}, {last.acc:.2f} at {last.start}-{last.end}): "
            "suspect positions: rope_scaling, max_position_embeddings or the position base"
        )
    if dtype in ("bfloat16", "float16") and rates and rates[0] < 0.5:
        hints.append(
            f"measured in {dtype}: rerun with --dtype float32; a large gap between the two points at numerics "
            "(draft dtype, fp16 overflow) rather than wiring"
        )
    return hints


# --------------------------------------------------------------------------- the acceptance run
# The steps of :func:`measure_acceptance`, each named: options -> sequences -> feature paths ->
# replay (estimator per path, scan) -> results in prompt order -> reference loop -> findings.

Progress = Callable[[str, int, int], None]


def _no_progress(_label: str, _done: int, _total: int) -> None:
    pass


@dataclass
class AcceptanceOptions:
    """How acceptance is measured (the engine's speculative settings, and the replay's)."""

    num_steps: int = 7
    continuation: str = "greedy"  # greedy: the target's own continuation; text: the text as given
    max_new_tokens: int = 128
    max_tokens: int | None = 512
    batch_size: int = 8
    temperature: float = 0.0
    temp_mode: str = "sampled"
    topk: int = 1
    num_draft_tokens: int | None = None
    token_tree: Sequence[Sequence[int]] | None = None
    reference: bool = False
    scan: bool = False
    limit: int | None = None

    def check(self) -> None:
        if self.continuation not in ("greedy", "text"):
            raise BadInput(f"unknown --continuation {self.continuation!r}", "use greedy or text")
        if self.num_steps < 1:
            raise BadInput("--num-steps must be at least 1", "use e.g. --num-steps 7")


def options_from_serve(
    serve: Any, num_steps: int | None, topk: int | None, num_draft_tokens: int | None
) -> tuple[int, int, int | None]:
    """(num_steps, topk, num_draft_tokens): explicit values win, then the launch command's, then 7 / 1 / None."""
    if num_steps is None:
        num_steps = serve.num_steps if serve is not None and serve.num_steps else 7
    if topk is None:
        topk = serve.topk if serve is not None and serve.topk else 1
    if num_draft_tokens is None and serve is not None and topk == serve.topk:
        num_draft_tokens = serve.num_draft_tokens
    return num_steps, topk, num_draft_tokens


@dataclass
class Replay:
    """The sequences acceptance walks, and where in each the decode begins."""

    src: Sources
    seqs: list[list[int]]
    starts: list[int]  # first base a decode reaches: the prompt's last position (greedy), else 0
    opts: AcceptanceOptions  # continuation is "text" for a dump, whatever was asked
    notes: list[str]


def acceptance_sequences(setup: Setup, src: Sources, opts: AcceptanceOptions, progress: Progress) -> Replay:
    """Prompts plus the target's greedy continuation, or the text (or dump) as given."""
    from ..model.target import greedy_continue

    tgt = setup.target
    notes = list(setup.notes) + src.notes
    if src.dump is not None:
        seqs, starts = src.sequences, [0] * len(src.dump)
        if opts.continuation == "greedy":
            notes.append("a training dump fixes the text: acceptance is measured along it (--continuation text)")
            opts = replace(opts, continuation="text")
    elif opts.continuation == "greedy":
        for p in src.prompts:
            check_seq_len(tgt, len(p.ids) + opts.max_new_tokens)
        try:
            seqs = greedy_continue(
                tgt,
                src.sequences,
                opts.max_new_tokens,
                opts.batch_size,
                progress=lambda d, n: progress("greedy continuation (tokens x batches)", d, n),
            )
        except torch.cuda.OutOfMemoryError:
            raise ResourceError(
                "CUDA out of memory while generating continuations", f"retry with --batch-size {max(1, opts.batch_size // 2)}"
            ) from None
        starts = [len(p.ids) - 1 for p in src.prompts]
    else:
        seqs, starts = src.sequences, [0] * len(src.prompts)
    for s in seqs:
        check_seq_len(tgt, len(s))
    return Replay(src, seqs, starts, opts, notes)


def feature_paths(setup: Setup, dump: bool, n_aux: int, notes: list[str]) -> dict[str, FeatureSpec | None]:
    """The measurable paths: serving, and training where it differs (None = the dump's own tensors)."""
    serving = setup.serving
    paths: dict[str, FeatureSpec | None] = {"serving": serving.spec}
    if serving.failure is not None:
        notes.append(f"{serving.label} fails at {serving.failure.when}: {serving.failure.message}")
    if dump:
        paths["training"] = None
    elif setup.train_spec is not None and setup.train_spec != serving.spec:
        paths["training"] = setup.train_spec
    elif setup.train_spec is not None:
        notes.append("training and serving feature paths are the same capture points: one path measured")
    for name, spec in paths.items():
        if spec is not None and len(spec) != n_aux:
            notes.append(f"{name} path feeds {len(spec)} slot(s) but the draft's fc takes {n_aux}: not measurable")
    return {n: s for n, s in paths.items() if s is None or len(s) == n_aux}


def _labels_fn(rb: ReplayBatch, amax: torch.Tensor, greedy: bool) -> Callable[[int], torch.Tensor]:
    tokens = rb.tokens

    def labels(k: int) -> torch.Tensor:
        if greedy:
            return torch.roll(tokens, -(1 + k), dims=1)  # x_{t+1+k}: the target's own greedy tokens
        return torch.roll(amax, -k, dims=1)  # a_{t+k}: the target's choice along the given text

    return labels


def _target_logits_fn(tgt: Target, last: torch.Tensor) -> Callable[[int], Iterable[tuple[slice, torch.Tensor]]]:
    """Target logits at t+k for every base t, in chunks of positions (never [B, T, V] whole)."""
    from ..model.target import head_chunks

    def tl(k: int) -> Iterable[tuple[slice, torch.Tensor]]:
        return head_chunks(tgt, torch.roll(last, -k, dims=1))

    return tl


class Measurement:
    """Per-path estimator counts and the scan's step-1 hits, over the replayed batches."""

    def __init__(
        self,
        setup: Setup,
        rep: Replay,
        paths: dict[str, FeatureSpec | None],
        tree: TreePlan | None,
        drafts: dict[str, Eagle3Draft],
        cands: list[FeatureSpec] | None = None,
    ):
        self.setup, self.rep, self.paths, self.tree = setup, rep, paths, tree
        self.drafts = drafts  # per path: the draft as trained, or a copy as the engine runs it (as_served)
        opts = rep.opts
        L = setup.target.num_layers
        if cands is None:
            cands = scan_candidates(setup.train_spec or setup.serving.spec, L) if opts.scan else []
        self.cands = cands
        self.accs = {n: PathAccumulator(n, opts.num_steps) for n in paths}
        # per replayed sequence [step-1 hits, positions]: the scan's ranking gets paired intervals over prompts
        self.scan_hits: dict[FeatureSpec, list[tuple[int, int]]] = {c: [] for c in self.cands}

    @property
    def points(self) -> set[CapturePoint]:
        return {p for s in self.paths.values() if s for p in s} | {p for c in self.cands for p in c}

    def _aux(self, rb: ReplayBatch, spec: FeatureSpec | None) -> torch.Tensor:
        if spec is not None:
            return torch.cat([rb.captured[p] for p in spec], dim=-1)
        from ..model.replay import dump_slots

        tgt, draft = self.setup.target, self.setup.draft
        return dump_slots(self.rep.src.dump, rb, draft.config.num_aux_states * tgt.hidden_size, tgt.dtype)  # type: ignore

    def add(self, rb: ReplayBatch) -> None:
        from ..model.target import target_argmax

        tgt, draft, opts, tree = self.setup.target, self.setup.draft, self.rep.opts, self.tree
        greedy = opts.continuation == "greedy"
        labels = _labels_fn(rb, target_argmax(tgt, rb.last), greedy)
        tl = _target_logits_fn(tgt, rb.last) if opts.temperature > 0 else None
        lens, st = rb.batch.lengths, [self.rep.starts[i] for i in rb.index]
        for name, spec in self.paths.items():
            aux, d = self._aux(rb, spec), self.drafts[name]
            out = unroll_outcomes(
                d,
                aux,
                rb.tokens,
                labels,
                lens,
                opts.num_steps,
                topk=1 if tree else opts.topk,
                temperature=opts.temperature,
                target_logits=tl,
                temp_mode=opts.temp_mode,
                rank_width=(tree.width or 0) if tree is not None and tree.kind == "static" else 0,
            )
            if tree is not None:
                out.tree_accepted = _tree_accepted(tree, d, aux, rb.tokens, labels, lens, opts.num_steps, out)
            self.accs[name].add(out, st, lens, walk=greedy)
        for c in self.cands:
            aux = torch.cat([rb.captured[p] for p in c], dim=-1)
            out = unroll_outcomes(draft, aux, rb.tokens, labels, lens, 1)
            region = torch.stack([torch.arange(rb.tokens.shape[1], device=rb.tokens.device) >= s for s in st])
            hits, valid = (out.match[:, 0] & region).sum(dim=1), (out.valid[:, 0] & region).sum(dim=1)
            self.scan_hits[c].extend(zip(hits.tolist(), valid.tolist()))

    def replay(self, batch_size: int, label: str, progress: Progress, each: Callable[[ReplayBatch], None] | None = None) -> None:
        """Every sequence through the target once, each batch added to every path (and handed to ``each``)."""
        for rb in iter_captures(
            self.setup.target,
            self.rep.seqs,
            self.points,
            batch_size=batch_size,
            want_logits=True,
            progress=lambda d, n: progress(label, d, n),
        ):
            self.add(rb)
            if each is not None:
                each(rb)

    def scan_result(self) -> list[ScanRow] | None:
        """Candidates by step-1 accuracy, each with its interval over prompts and, paired on the same
        prompts, its difference to the configured capture points (what ACC004 decides on)."""
        if not self.rep.opts.scan and not self.cands:
            return None
        from ..core.stats import paired, ratio

        cur = self.setup.train_spec or self.setup.serving.spec
        ref = self.cands.index(cur) if cur in self.cands else None
        counts = [np.asarray(self.scan_hits[c], dtype=np.float64).reshape(-1, 2) for c in self.cands]
        own, diff = paired(counts, ratio(0, 1), ref or 0)
        # which candidates the prompts cannot tell apart from the best one (paired interval reaching 0)
        best = int(np.nanargmax([o.point for o in own])) if any(o.point == o.point for o in own) else 0
        _, vs_best = paired(counts, ratio(0, 1), best)
        rows = [
            ScanRow(c, o.point, int(k[:, 1].sum()), (o.lo, o.hi), c == cur, d if ref is not None else None, not b.excludes_zero())
            for c, k, o, d, b in zip(self.cands, counts, own, diff, vs_best)
        ]
        return sorted(rows, key=lambda r: -r.step1_acc if r.step1_acc == r.step1_acc else 1.0)


def _to_prompt_order(values: list[Any], order: Sequence[int]) -> list[Any]:
    """Batches ran longest first: ``values[j]`` belongs to sequence ``order[j]``."""
    out: list[Any] = [None] * len(order)
    for j, i in enumerate(order):
        out[i] = values[j]
    return out


def path_results(m: Measurement) -> dict[str, PathResult]:
    """Each path's metrics, per-prompt lists in prompt order, with intervals over prompts (issue 14)."""
    from ..core.stats import acceptance_intervals

    order, K = replay_order(m.rep.seqs), m.rep.opts.num_steps
    results = {n: a.result() for n, a in m.accs.items()}
    for n, res in results.items():
        res.spec = m.paths[n]
        res.accepted_lengths = _to_prompt_order(res.accepted_lengths, order)
        res.acc_k_by_request = _to_prompt_order(res.acc_k_by_request, order)
        res.step1_counts = _to_prompt_order(res.step1_counts, order)
        if res.tree is not None and res.tree.accepted_lengths is not None:
            res.tree.accepted_lengths = _to_prompt_order(res.tree.accepted_lengths, order)
        res.intervals = acceptance_intervals(res.counts(K), K)
    return results


def _target_step_fn(tgt: Target, spec: FeatureSpec) -> Callable[[list[int]], tuple[torch.Tensor, torch.Tensor]]:
    from ..model.target import capture, make_batch, target_argmax

    def step(tokens: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        batch = make_batch([tokens], 0, tgt.device)
        got, last = capture(tgt, batch, spec, want_logits=True)
        aux = torch.cat([got[p] for p in spec], dim=-1)
        return aux, target_argmax(tgt, last)[0]

    return step


def _reference_tree(setup: Setup, rep: Replay, tree: TreePlan, step: Callable, progress: Progress) -> tuple[list, list, bool]:
    from .tree import sglang_tree_reference_loop, static_tree_reference_loop

    opts, prompts = rep.opts, rep.src.prompts
    t_acc, t_drf, same = [], [], True
    for i, p in enumerate(prompts):
        if tree.kind == "sglang":
            toks, a, d = sglang_tree_reference_loop(
                step, setup.draft, list(p.ids), len(rep.seqs[i]), opts.num_steps, opts.topk, tree.num_draft_tokens
            )
        else:
            toks, a, d = static_tree_reference_loop(step, setup.draft, list(p.ids), len(rep.seqs[i]), tree.paths)
        same &= toks == rep.seqs[i]
        t_acc.append(a)
        t_drf.append(d)
        progress("reference tree loop", i + 1, len(prompts))
    return t_acc, t_drf, same


def run_reference(
    setup: Setup, rep: Replay, results: dict[str, PathResult], tree: TreePlan | None, progress: Progress
) -> ReferenceResult:
    """The plain sequential loop over every prompt, and whether the estimator agrees with it."""
    if rep.opts.continuation != "greedy":
        raise BadInput("--reference-loop needs --continuation greedy", "drop --continuation text")
    if "serving" not in results:
        raise BadInput("--reference-loop needs a serving path the draft can take", "fix the slot count first (see notes)")
    K, prompts, seqs = rep.opts.num_steps, rep.src.prompts, rep.seqs
    ref_acc, ref_drf, same_each = [], [], []
    step = _target_step_fn(setup.target, setup.serving.spec)
    for i, p in enumerate(prompts):
        toks, a, d = reference_loop(step, setup.draft, list(p.ids), len(seqs[i]), K)  # type: ignore[arg-type]
        same_each.append(toks == seqs[i])
        ref_acc.append(a)
        ref_drf.append(d)
        progress("reference loop", i + 1, len(prompts))
    serving = results["serving"]
    ref = ReferenceResult(
        accepted_lengths=ref_acc,
        chain=metrics_from_passes([x for r in ref_acc for x in r], [x for r in ref_drf for x in r], K),
        agrees_with_estimator=ref_acc == serving.accepted_lengths,
        same_tokens=all(same_each),
        same_tokens_per_prompt=same_each,
    )
    if tree is not None:
        t_acc, t_drf, same = _reference_tree(setup, rep, tree, step, progress)
        est = serving.tree.accepted_lengths if serving.tree is not None else None
        metrics = metrics_from_passes([x for r in t_acc for x in r], [x for r in t_drf for x in r], K)
        ref.tree = TreeReference(t_acc, metrics, t_acc == est)
        ref.same_tokens = ref.same_tokens and same
        ref.agrees_with_estimator = ref.agrees_with_estimator and ref.tree.agrees_with_estimator
    return ref


def run_settings(setup: Setup, rep: Replay, tree: TreePlan | None, train_dump: str | None) -> RunSettings:
    """What was measured and how."""
    tgt, serving, o, seqs = setup.target, setup.serving, rep.opts, rep.seqs
    return RunSettings(
        target=tgt.name,
        draft=setup.draft_summary(),
        engine=serving.label,
        num_steps=o.num_steps,
        continuation=o.continuation,
        max_new_tokens=o.max_new_tokens if o.continuation == "greedy" else None,
        temperature=o.temperature,
        temperature_mode=o.temp_mode if o.temperature > 0 else None,
        topk=o.topk,
        num_draft_tokens=o.num_draft_tokens,
        dtype=str(tgt.dtype).replace("torch.", ""),
        device=str(tgt.device),
        compiled=setup.compiled,
        sequences=len(seqs),
        tokens=sum(len(s) for s in seqs),
        serving_spec=tuple(serving.spec),
        serving_source=serving.source,
        training_spec=tuple(setup.train_spec) if setup.train_spec else None,
        training_source=setup.train_source if rep.src.dump is None else f"dump {train_dump}",
        tree=tree,
    )


@torch.inference_mode()
def measure_acceptance(
    setup: Setup,
    opts: AcceptanceOptions,
    *,
    prompts_path: str | None = None,
    train_dump: str | None = None,
    prompt_ids: Sequence[Sequence[int]] | None = None,
    progress: Progress = _no_progress,
) -> AcceptanceRun:
    """Acceptance of ``setup.draft`` on each feature path (see :func:`doctor.acceptance` for the fields)."""
    if setup.draft is None:
        raise BadInput("acceptance needs a draft", "pass --draft DIR")
    opts.check()
    tree = tree_plan(setup.serving.engine, opts.num_steps, opts.topk, opts.num_draft_tokens, opts.token_tree)
    if tree is not None and tree.kind == "static":
        opts = replace(opts, num_steps=tree.depth)
    src = load_sources(setup.target, prompts_path, train_dump, opts.max_tokens, opts.limit, prompt_ids)
    rep = acceptance_sequences(setup, src, opts, progress)
    paths = feature_paths(setup, src.dump is not None, setup.draft.config.num_aux_states, rep.notes)
    # issue 13: the serving features also through the draft as the engine runs it (draft/as_served.py)
    from .as_served import measured_findings, served_paths

    served = served_paths(setup)
    drafts = dict.fromkeys(paths, setup.draft)
    if "serving" in paths:
        for n, d in served.drafts.items():
            paths[n], drafts[n] = setup.serving.spec, d
    m = Measurement(setup, rep, paths, tree, drafts)
    m.replay(opts.batch_size, "acceptance", progress)
    results = path_results(m)
    ref = run_reference(setup, rep, results, tree, progress) if opts.reference else None
    scan_res = m.scan_result()
    settings = run_settings(setup, rep, tree, train_dump)
    findings = acceptance_findings(results, scan_res, setup) + measured_findings(served, results, rep.opts.num_steps)
    for res in results.values():
        res.triage = triage(res, settings.dtype)
    return AcceptanceRun(results, settings, findings, rep.notes, ref, scan_res)


def scan_candidates(spec: FeatureSpec, num_layers: int) -> list[FeatureSpec]:
    """Each slot +-1 layer, embed in front, final_norm at the back: the plausible wirings."""
    import itertools

    from ..core.taps import embed, final_norm, layer_out

    def around(p: CapturePoint, slot: int) -> list[CapturePoint]:
        opts = [p]
        if p.is_layer_out():
            opts += [layer_out(i) for i in (p.layer - 1, p.layer + 1) if 0 <= i < num_layers]  # type: ignore[operator]
        if slot == 0:
            opts.append(embed())
        if slot == len(spec) - 1:
            opts.append(final_norm())
        return list(dict.fromkeys(opts))

    # duplicates are dropped: no training recipe feeds one capture point twice
    cands = [tuple(c) for c in itertools.product(*(around(p, i) for i, p in enumerate(spec))) if len(set(c)) == len(c)]
    shift = (embed(),) + tuple(spec[:-1])  # the seed-style slot shift
    if shift not in cands:
        cands.append(shift)
    return cands


def tree_plan(
    engine: str, num_steps: int, topk: int, num_draft_tokens: int | None, token_tree: Sequence[Sequence[int]] | None
) -> TreePlan | None:
    """Which tree the engine builds for these settings (exact acceptance for it: tree.py)."""
    if token_tree:
        paths = [list(p) for p in token_tree]
        depth, width = max(len(p) for p in paths), max(p[-1] for p in paths) + 1
        label = f"exact greedy acceptance of the vLLM speculative_token_tree ({len(paths)} nodes, depth {depth})"
        return TreePlan("static", depth, len(paths) + 1, label, paths=paths, width=width)
    if topk <= 1:
        return None
    if engine == "vllm":
        return _full_static_tree(num_steps, topk)
    return _sglang_tree(num_steps, topk, num_draft_tokens)


def _full_static_tree(num_steps: int, topk: int) -> TreePlan:
    import itertools

    paths = [list(p) for d in range(1, num_steps + 1) for p in itertools.product(range(topk), repeat=d)]
    if len(paths) > 20000:
        raise BadInput(
            f"a full top-{topk} tree of depth {num_steps} has {len(paths)} nodes",
            "pass the server's speculative_token_tree (--serve-cmd) or a smaller --topk/--num-steps",
        )
    label = f"exact greedy acceptance of a full top-{topk} static tree of depth {num_steps} ({len(paths)} nodes)"
    return TreePlan("static", num_steps, len(paths) + 1, label, paths=paths, width=topk)


def _sglang_tree(num_steps: int, topk: int, num_draft_tokens: int | None) -> TreePlan:
    from .tree import check_tree_settings, full_candidates

    ndt = num_draft_tokens if num_draft_tokens is not None else full_candidates(topk, num_steps) + 1
    check_tree_settings(topk, num_steps, ndt)
    label = (
        f"exact greedy acceptance of SGLang's tree: topk {topk}, {num_steps} steps, {ndt} draft tokens "
        f"(best {ndt - 1} of {full_candidates(topk, num_steps)} scored candidates)"
    )
    if num_draft_tokens is None:
        label += "; --num-draft-tokens not given: every candidate kept"
    return TreePlan("sglang", num_steps, ndt, label, topk=topk)


def _tree_accepted(
    tree: TreePlan,
    draft: Eagle3Draft,
    aux: torch.Tensor,
    tokens: torch.Tensor,
    labels: Callable[[int], torch.Tensor],
    lens: Sequence[int],
    num_steps: int,
    out: StepOutputs,
) -> torch.Tensor:
    from .tree import sglang_tree_accepted, static_tree_accepted

    if tree.kind == "sglang":
        acc, _ = sglang_tree_accepted(draft, aux, tokens, labels, lens, num_steps, tree.topk, tree.num_draft_tokens)
        return acc
    return static_tree_accepted(out.ranks, out.valid, tree.paths)


# --------------------------------------------------------------------------- findings


def acc_fix(setup: Setup) -> str:
    """The fix line of an acceptance gap: the ids that make serving feed what was trained."""
    from .compare.fixes import fix_for

    if setup.train_spec is None:
        return "run eagle3-doctor compare-hidden for the exact layer ids to write"
    text, _ = fix_for(setup.serving, setup.train_spec)
    return text or f"{setup.serving.label} cannot feed what was trained: see eagle3-doctor compare-hidden"


def acceptance_findings(results: dict[str, PathResult], scan_res: list[ScanRow] | None, setup: Setup) -> list[Finding]:
    """ACC001 (serving features cost accuracy), ACC002 (low even on the best path), ACC004 (scan found better)."""
    out: list[Finding] = []
    s, t = results.get("serving"), results.get("training")
    if s and t and s.acc_k and t.acc_k:
        ds, dt = s.step1, t.step1
        ls, lt = s.chain.mean_acceptance_length, t.chain.mean_acceptance_length
        if dt - ds > 0.05:
            out.append(
                Finding(
                    "ACC001",
                    f"the serving features cost {100 * (dt - ds):.1f} points of step-1 accuracy "
                    f"({ds:.3f} served vs {dt:.3f} trained)",
                    [
                        f"step-1 accuracy: serving {ds:.3f}, training {dt:.3f}",
                        f"mean acceptance length: serving {ls:.2f}, training {lt:.2f}",
                        f"serving feeds {spec_label(s.spec)}; trained on {spec_label(t.spec)}",
                    ],
                    acc_fix(setup),
                )
            )
    ref = t or s
    if ref and ref.acc_k and ref.step1 < 0.3:
        out.append(
            Finding(
                "ACC002",
                f"step-1 accuracy is {ref.step1:.3f} even on the {ref.name} features",
                [f"acc_k: {', '.join(f'{a:.3f}' for a in ref.acc_k)}"],
                "run eagle3-doctor diagnose: it measures where the gap lives (which serving difference, which module of "
                "the draft, which part of the context) instead of guessing",
            )
        )
    return out + _scan_finding(scan_res, setup)


def _scan_finding(scan_res: list[ScanRow] | None, setup: Setup) -> list[Finding]:
    from ..core.stats import MIN_PROMPTS

    if not scan_res:
        return []
    best = scan_res[0]
    cur_row = next((r for r in scan_res if r.configured), None)
    d = best.diff_to_configured
    # decided on the paired interval over prompts, not on the point estimate: a better-looking
    # candidate whose interval reaches 0 is not reported (the scan table shows it with its interval)
    if not (cur_row and not best.configured and d is not None and d.lo > 0 and d.n >= MIN_PROMPTS):
        return []
    evidence = [
        f"step-1 accuracy {best.step1_acc:.3f} vs {cur_row.step1_acc:.3f}; difference "
        f"{d.point:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}] (95%, paired bootstrap over {d.n} prompts)"
    ]
    tied = [spec_label(r.spec) for r in scan_res[1:] if r.tied_with_best and not r.configured]
    fix = "the draft was probably trained on those capture points: set the training recipe accordingly and re-run compare-hidden"
    if tied:  # the best one is not singled out: say which, and what can tell them apart
        evidence.append(f"not separated from it on these prompts (paired 95% interval reaching 0): {'; '.join(tied)}")
        fix = (
            "the draft was probably trained on one of these capture points: `eagle3-doctor fingerprint` tells them "
            "apart; then set the training recipe accordingly and re-run compare-hidden"
        )
    return [Finding("ACC004", f"{spec_label(best.spec)} fits the draft better than {spec_label(cur_row.spec)}", evidence, fix)]


def threshold_findings(paths: dict[str, PathResult], min_accept_rate: float | None, min_tau: float | None) -> list[Finding]:
    """ACC003: the serving path below --min-accept-rate (first position) or --min-tau."""
    out = []
    serving = paths.get("serving")
    rates = (serving.chain.per_position_rate or None) if serving is not None else None
    rate1 = (rates or [float("nan")])[0]
    if min_accept_rate is not None and not rate1 >= min_accept_rate:
        out.append(
            Finding(
                "ACC003",
                f"first-position acceptance {rate1:.3f} is below --min-accept-rate {min_accept_rate}",
                [f"serving path per-position rates: {rates}"],
                "fix the findings above, or retrain the draft",
            )
        )
    tau = serving.tau if serving is not None else float("nan")
    if min_tau is not None and not tau >= min_tau:
        out.append(
            Finding(
                "ACC003",
                f"tau {tau:.3f} is below --min-tau {min_tau}",
                [f"acc_k: {serving.acc_k if serving is not None else None}"],
                "fix the findings above, or retrain the draft",
            )
        )
    return out
