"""Predicted decoding speed per speculative setting, before serving, and the best setting.

    tokens/s (setting, batch B) = B x L / (draft cost + verify cost at the setting's token budget)

- L, the mean tokens a verify pass yields (accepted draft tokens + the bonus), is measured exactly for
  every setting from ONE target forward over the prompts and their greedy continuation: one
  teacher-forced draft unroll of the longest chain gives every chain K (the accepted prefix of the
  first K steps), SGLang's trees come from :func:`tree.sglang_tree_accepted` on the same features,
  and each sequence is walked pass by pass as a decode loop would (:func:`acceptance.walk_chain`).
- The costs are measured: the cached target forward over 1 + draft tokens per sequence against a
  KV cache of about ``context`` positions (a new length each run, as in a decode loop), the draft's
  extend over the newly verified tokens and its single steps (``topk`` tokens wide in a tree), each
  the median of repeated runs at each batch size;
  the plain decode step (1 token) is the baseline. Eager PyTorch: no CUDA graphs, no torch.compile.
- Intervals: prompts are resampled (:mod:`core.stats`, one shared resample for every setting, so
  settings are compared on the same prompts); costs stay at their measured medians.

The same cached target forward and draft run in :mod:`spec_loop`, the real decode loop the
prediction is checked against (:func:`check_loop`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..core.errors import BadInput
from ..core.stats import Interval, bootstrap, weights
from ..core.typed_json import JsonFields, fields_json
from ..engines.spec_settings import Setting
from ..model.decode import CachedTarget
from .acceptance.estimator import unroll_outcomes
from .acceptance.measurement import _labels_fn
from .acceptance.metrics import _leading_ones_np, walk_chain
from .acceptance.options import AcceptanceOptions, Replay, _no_progress
from .cost_probe import CHAIN, EXTEND, STEP, VERIFY, Cost, CostProbe, probe_costs, resampled_rounds

if TYPE_CHECKING:
    from ..model.setup import Setup
    from .spec_loop import LoopRun

SCHEMA = "eagle3-doctor/speedup/1"
Progress = Callable[[str, int, int], None]


@dataclass
class SettingAcceptance(JsonFields):
    """Mean tokens per verify pass (accepted + bonus) of one setting, with its interval over prompts."""

    setting: Setting
    label: str
    current: bool  # the setting the launch command configures
    passes: int
    tokens_per_pass: Interval
    accepted_lengths: list[list[int]]  # per prompt, draft tokens accepted in each pass (bonus excluded)


@dataclass
class Prediction(JsonFields):
    """Predicted speed of one setting at one batch size."""

    label: str
    batch_size: int
    draft_seconds: float  # per verify pass: one extend + (steps - 1) draft steps
    verify_seconds: float
    tokens_per_second: Interval
    speedup: Interval  # over plain decoding at the same batch size
    best: bool
    tied: bool  # its interval overlaps the best one's
    current: bool


@dataclass
class BatchSummary(JsonFields):
    """Plain decoding and the best setting at one batch size."""

    batch_size: int
    plain_seconds: float  # one decode step (1 token per sequence)
    plain_tokens_per_second: float
    best: str
    tied: list[str]
    best_speedup: Interval
    current: str | None
    current_speedup: Interval | None


@dataclass
class LoopCheck(JsonFields):
    """The real decode loop (batch 1) at one chain setting, against the prediction."""

    label: str
    prompts: int
    new_tokens: int  # tokens the verify passes yielded (accepted + bonus each)
    passes: int
    draft_steps: int
    tokens_per_pass: float  # measured: new_tokens / passes
    predicted_tokens_per_pass: float
    same_passes_as_estimator: bool  # accepted length of every pass equal to the estimator's
    same_as_greedy: bool  # output equal to plain greedy decoding, token for token
    seconds: float
    plain_seconds: float
    measured_speedup: float
    predicted_speedup: float
    # per verify pass, measured in the loop and predicted from the probe: where a miss comes from
    draft_ms_per_pass: float
    verify_ms_per_pass: float
    other_ms_per_pass: float  # the loop's own bookkeeping (comparing, cropping), which the probe does not time
    predicted_draft_ms_per_pass: float
    predicted_verify_ms_per_pass: float
    plain_ms_per_step: float  # the plain loop's, against the probe's 1-token verify


@dataclass
class SpeedupResult(JsonFields):
    """Predicted tokens per second per setting, the best setting, and (with the loop) the check."""

    target: str
    draft: str | None
    engine: str
    prompts: int
    current: str | None
    acceptance: list[SettingAcceptance]
    costs: CostProbe
    batches: list[BatchSummary]
    predictions: list[Prediction]
    loop: list[LoopCheck] | None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, **fields_json(self)}


@dataclass
class SpeedupOptions:
    """What to predict over and how the replay and the probe run."""

    settings: list[Setting]
    batch_sizes: list[int] = field(default_factory=lambda: [1])
    current: Setting | None = None
    context: int | None = None  # None: the mean position a verify pass sees on these prompts
    repeats: int = 5
    max_new_tokens: int = 128
    max_tokens: int | None = 512
    batch_size: int = 8  # sequences per replay forward
    limit: int | None = None
    loop: Sequence[Setting] = ()  # chain settings to time the real decode loop at


# --------------------------------------------------------------------------- acceptance per setting


def _walk_all(acc: dict, s: Setting, A: np.ndarray, drafted: np.ndarray, rb: Any, rep: Replay) -> None:
    for b, i in enumerate(rb.index):
        _, a, _ = walk_chain(A[b], drafted[b], rep.starts[i], rb.batch.lengths[b] - 1)
        acc[s][i] = a


@torch.inference_mode()
def grid_acceptance(
    setup: Setup, rep: Replay, settings: Sequence[Setting], batch_size: int, progress: Progress = _no_progress
) -> dict[Setting, list[list[int]]]:
    """Per setting, per prompt: the draft tokens accepted in each verify pass, from one target forward."""
    from ..model.replay import iter_captures
    from ..model.target import target_argmax
    from .tree import sglang_tree_accepted

    tgt, draft, spec = setup.target, setup.draft, setup.serving.spec
    assert draft is not None
    chains = [s for s in settings if s.kind == "chain"]
    kmax = max((s.num_steps for s in chains), default=0)
    acc: dict[Setting, list] = {s: [None] * len(rep.seqs) for s in settings}
    for rb in iter_captures(
        tgt, rep.seqs, set(spec), batch_size=batch_size, want_logits=True, progress=lambda d, n: progress("acceptance", d, n)
    ):
        assert rb.last is not None  # replayed with want_logits
        labels = _labels_fn(rb, target_argmax(tgt, rb.last), True)
        aux = torch.cat([rb.captured[p] for p in spec], dim=-1)
        lens, t0 = rb.batch.lengths, min(rep.starts[i] for i in rb.index)  # walks start at a row's start
        if kmax:
            out = unroll_outcomes(draft, aux, rb.tokens, labels, lens, kmax, from_base=t0)
            m, v = out.match.cpu().numpy(), out.valid.cpu().numpy()  # [B, K, T]
            for s in chains:
                k = s.num_steps
                _walk_all(acc, s, _leading_ones_np(m[:, :k].transpose(0, 2, 1)), v[:, :k].sum(axis=1), rb, rep)
        for s in settings:
            if s.kind == "sglang":
                a, d = sglang_tree_accepted(
                    draft, aux, rb.tokens, labels, lens, s.num_steps, s.topk, s.num_draft_tokens, from_base=t0
                )
                _walk_all(acc, s, a.cpu().numpy(), d.cpu().numpy(), rb, rep)
    return acc


# --------------------------------------------------------------------------- prediction


def _setting_acceptance(settings: Sequence[Setting], acc: dict, current: Setting | None, w: np.ndarray) -> list:
    out = []
    for s in settings:
        counts = np.asarray([[len(a), sum(a)] for a in acc[s]], dtype=np.float64)  # per prompt [passes, accepted]
        iv = bootstrap(counts, lambda c: 1.0 + c[..., 1] / c[..., 0], w=w)
        out.append(SettingAcceptance(s, s.label, s == current, int(counts[:, 0].sum()), iv, acc[s]))
    return out


def _speed_stat(
    s: Setting, costs: CostProbe, B: int, rounds: np.ndarray
) -> tuple[Callable[[np.ndarray], np.ndarray], float, Callable]:
    """(tokens/s as a function of summed [passes, accepted] counts, verify seconds, draft seconds of L).

    A pass's draft work: the catch-up over the L tokens the last pass kept (interpolated between the
    widths timed at a fractional L), then a chain's K proposals, or a tree's first proposal and its
    steps - 1 topk-wide steps. Each forward's seconds are its :class:`Cost`: the point for the prompts' counts, a
    resample of the timed rounds for each bootstrap replicate (``rounds``)."""
    widths = sorted({r.tokens for r in costs.rows if r.part == EXTEND and r.batch_size == B})
    ext = [costs.cost(B, EXTEND, w, rounds) for w in widths]
    ext_point, ext_draws = np.asarray([e.point for e in ext]), np.stack([e.draws for e in ext], axis=1)
    if s.kind == "chain":
        propose = costs.cost(B, CHAIN, s.num_steps, rounds)
    else:
        propose = costs.cost(B, CHAIN, 1, rounds)
        if s.num_steps > 1:
            propose = propose + costs.cost(B, STEP, s.topk, rounds) * (s.num_steps - 1)
    verify = costs.cost(B, VERIFY, s.verify_tokens, rounds)

    def draft_s(L: np.ndarray) -> np.ndarray:
        if np.ndim(L) == 0:
            return np.interp(L, widths, ext_point) + propose.point
        return _interp_rows(L, widths, ext_draws) + propose.draws

    def tps(c: np.ndarray) -> np.ndarray:
        L = 1.0 + c[..., 1] / c[..., 0]
        return B * L / (draft_s(L) + verify.of(c))

    return tps, verify.point, draft_s


def _over_plain(tps: Callable[[np.ndarray], np.ndarray], plain: Cost, B: int) -> Callable[[np.ndarray], np.ndarray]:
    """The speedup over plain decoding (B tokens a forward of ``plain`` seconds), each replicate with its own draw
    of both sides' costs."""
    return lambda c: tps(c) * plain.of(c) / B


def _interp_rows(x: np.ndarray, xs: Sequence[int], ys: np.ndarray) -> np.ndarray:
    """np.interp of each x[i] over its own row ys[i] (ys [n, len(xs)]), clamped at the ends as np.interp is."""
    xa = np.asarray(xs, dtype=np.float64)
    if len(xa) == 1:
        return ys[:, 0]
    i = np.clip(np.searchsorted(xa, x, side="right") - 1, 0, len(xa) - 2)
    t = np.clip((x - xa[i]) / (xa[i + 1] - xa[i]), 0.0, 1.0)
    rows = np.arange(len(x))
    return ys[rows, i] * (1.0 - t) + ys[rows, i + 1] * t


def predict(
    rows: Sequence[SettingAcceptance], costs: CostProbe, batch_sizes: Sequence[int], w: np.ndarray
) -> tuple[list[Prediction], list[BatchSummary]]:
    """Tokens/s and speedup per setting and batch size; the best setting and those tied with it."""
    preds: list[Prediction] = []
    summaries = []
    rounds = resampled_rounds(costs.repeats, w.shape[0])  # the same rounds for every forward and setting
    for B in batch_sizes:
        base = costs.cost(B, VERIFY, 1, rounds)
        plain = base.point
        here = []
        for r in rows:
            counts = np.asarray([[len(a), sum(a)] for a in r.accepted_lengths], dtype=np.float64)
            tps, verify, draft_s = _speed_stat(r.setting, costs, B, rounds)
            t_iv = bootstrap(counts, tps, w=w)
            s_iv = bootstrap(counts, _over_plain(tps, base, B), w=w)
            d = float(draft_s(np.asarray(r.tokens_per_pass.point)))
            here.append(Prediction(r.label, B, d, verify, t_iv, s_iv, False, False, r.current))
        best = max(here, key=lambda p: p.tokens_per_second.point)
        best.best = True
        for p in here:  # overlapping 95% intervals: the prompts cannot order the two
            p.tied = p is not best and p.tokens_per_second.hi >= best.tokens_per_second.lo
        cur = next((p for p in here if p.current), None)
        summaries.append(
            BatchSummary(
                B, plain, B / plain, best.label, [p.label for p in here if p.tied], best.speedup,
                cur.label if cur else None, cur.speedup if cur else None,
            )
        )  # fmt: skip
        preds += here
    return preds, summaries


# --------------------------------------------------------------------------- the real loop, as a check


@torch.inference_mode()
def check_loop(
    setup: Setup, rep: Replay, rows: Sequence[SettingAcceptance], preds: Sequence[Prediction], progress: Progress
) -> list:
    """The timed decode loop (batch 1) at each chain setting asked, on the replay's prompts.

    Prompt by prompt, plain decoding and every setting back to back (after one untimed warm-up of
    each), so a slow spell of the machine lands on all of them alike; the order turns by one each
    prompt, because a host whose pace sags under sustained load (measured: a third slower after a
    minute of the loop) would otherwise always charge the settings that run last."""
    from ..draft.decode import DraftDecoder
    from .spec_loop import plain_decode, speculative_decode

    longest = max(len(s) for s in rep.seqs) + max(r.setting.num_steps for r in rows) + 1
    assert setup.draft is not None  # predict_speedup refuses a Setup without one
    ct = CachedTarget(setup.target, setup.serving.spec, max_len=longest)
    draft = DraftDecoder(setup.draft, 1, longest)
    prompts = [p.ids for p in rep.src.prompts]
    plain: list[LoopRun] = []
    runs: list[list[LoopRun]] = [[] for _ in rows]
    for i, (p, s) in enumerate(zip(prompts, rep.seqs)):

        def one(j: int, p: list = p, n: int = len(s)) -> LoopRun:  # j 0: plain decoding, j: setting j - 1
            return plain_decode(ct, p, n) if j == 0 else speculative_decode(ct, draft, p, n, rows[j - 1].setting.num_steps)

        order = [(i + j) % (len(rows) + 1) for j in range(len(rows) + 1)]
        for _ in range(2 if i == 0 else 1):  # the first prompt once more, untimed, as the warm-up
            got = {j: one(j) for j in order}
        plain.append(got[0])
        for j, r in enumerate(runs, start=1):
            r.append(got[j])
        progress("decode loop", i + 1, len(prompts))
    plain_s = sum(r.seconds for r in plain)
    return [_loop_check(row, rr, plain, plain_s, preds) for row, rr in zip(rows, runs)]


def _loop_check(row: SettingAcceptance, runs: list, plain: list, plain_s: float, preds: Sequence[Prediction]) -> LoopCheck:
    new, passes, secs = sum(r.new_tokens for r in runs), sum(r.passes for r in runs), sum(r.seconds for r in runs)
    pred = next((p for p in preds if p.label == row.label and p.batch_size == 1), None)
    ms = 1000.0 / max(passes, 1)
    draft, verify = sum(r.draft_seconds for r in runs), sum(r.verify_seconds for r in runs)
    nan = float("nan")
    return LoopCheck(
        row.label, len(runs), new, passes, sum(r.draft_steps for r in runs), new / max(passes, 1),
        row.tokens_per_pass.point, [r.accepted for r in runs] == row.accepted_lengths,
        all(r.tokens == q.tokens for r, q in zip(runs, plain)), secs, plain_s, plain_s / secs,
        pred.speedup.point if pred is not None else nan,
        draft * ms, verify * ms, (secs - draft - verify) * ms,
        pred.draft_seconds * 1000.0 if pred is not None else nan, pred.verify_seconds * 1000.0 if pred is not None else nan,
        1000.0 * plain_s / max(sum(q.passes for q in plain), 1),
    )  # fmt: skip


# --------------------------------------------------------------------------- the run


def _replay(setup: Setup, opts: SpeedupOptions, prompts_path: str | None, prompt_ids: Any, progress: Progress) -> Replay:
    from ..model.replay import load_sources
    from .acceptance.run import acceptance_sequences

    src = load_sources(setup.target, prompts_path, None, opts.max_tokens, opts.limit, prompt_ids)
    aopts = AcceptanceOptions(
        num_steps=max(s.num_steps for s in opts.settings),
        max_new_tokens=opts.max_new_tokens,
        max_tokens=opts.max_tokens,
        batch_size=opts.batch_size,
        limit=opts.limit,
    )
    return acceptance_sequences(setup, src, aopts, progress)


def default_context(rep: Replay) -> int:
    """The mean position a verify pass sees on these prompts: halfway through each continuation."""
    return max(1, round(float(np.mean([(st + len(s)) / 2 for st, s in zip(rep.starts, rep.seqs)]))))


@torch.inference_mode()
def predict_speedup(
    setup: Setup,
    opts: SpeedupOptions,
    *,
    prompts_path: str | None = None,
    prompt_ids: Sequence[Sequence[int]] | None = None,
    progress: Progress = _no_progress,
) -> SpeedupResult:
    """Acceptance per setting (one target forward), the cost probe, the prediction, and the loop if asked."""
    if setup.draft is None:
        raise BadInput("speedup needs a draft", "pass --draft DIR")
    settings = list(dict.fromkeys([*opts.settings, *([opts.current] if opts.current else [])]))
    opts = SpeedupOptions(**{**vars(opts), "settings": settings})
    rep = _replay(setup, opts, prompts_path, prompt_ids, progress)
    acc = grid_acceptance(setup, rep, settings, opts.batch_size, progress)
    w = weights(len(rep.seqs))
    rows = _setting_acceptance(settings, acc, opts.current, w)
    context = opts.context or default_context(rep)
    with _Step(progress, "cost probe"):
        costs = probe_costs(setup, settings, opts.batch_sizes, context, opts.repeats)
    preds, batches = predict(rows, costs, opts.batch_sizes, w)
    loop_rows = [r for r in rows if r.setting in opts.loop and r.setting.kind == "chain"]
    loop = check_loop(setup, rep, loop_rows, preds, progress) if opts.loop else None
    notes = _notes(setup, opts, costs, loop)
    draft = setup.info.path if setup.info is not None else None
    return SpeedupResult(
        setup.target.name, draft, setup.serving.label, len(rep.seqs),
        opts.current.label if opts.current else None, rows, costs, batches, preds, loop, notes,
    )  # fmt: skip


class _Step:
    """A progress line for a step that reports no fraction: 0 of 1 when it starts, 1 of 1 when it ends."""

    def __init__(self, progress: Progress, label: str):
        self.progress, self.label = progress, label

    def __enter__(self) -> None:
        self.progress(self.label, 0, 1)

    def __exit__(self, *exc: Any) -> None:
        self.progress(self.label, 1, 1)


def _notes(setup: Setup, opts: SpeedupOptions, costs: CostProbe, loop: list | None) -> list[str]:
    notes = list(setup.notes)
    notes.append(
        f"{costs.where}, {costs.mode}, {costs.dtype}, KV caches of about {costs.context} positions, one longer each run, "
        f"median of {costs.repeats} runs; the decode loop runs the same forwards the same way"
    )
    if "cuda graphs" in costs.mode and any(x.kind != "chain" for x in opts.settings):
        notes.append("a tree's topk-wide draft steps run eager over a dynamic cache: only chains are graphed")
    notes.append(
        "acceptance: greedy, along the target's own continuation of each prompt, the draft as checkpointed on the "
        f"serving features ({setup.serving.label}); intervals: 95% percentile bootstrap over prompts and the costs' timed rounds"
    )
    if any(s.kind == "sglang" for s in opts.settings):
        notes.append(
            "a tree's verify is timed as a causal forward of its num_draft_tokens (the engine's tree mask has the "
            "same shape), its draft steps as topk tokens against the cache"
        )
    if opts.loop and any(s.kind != "chain" for s in opts.loop):
        notes.append("the decode loop runs chains only: tree settings are predicted, not timed")
    return notes
