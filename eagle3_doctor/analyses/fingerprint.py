"""The draft's own fingerprint: which capture points was it trained on? Asked of the weights alone.

A draft trained on features F predicts the target's next tokens best when fed F. So each candidate
feature spec is scored by the mean log-likelihood, under the draft, of the target's own greedy
tokens, over all K teacher-forced steps (the quantity EAGLE-3 training maximises, up to the soft
targets), and the candidates are ranked by it. Log-likelihood rather than argmax accuracy: every
position contributes a graded score instead of a 0/1 hit, so two wirings whose accuracies tie still
separate (measured on the fixtures: see docs/gate.md).

Cost: ONE target forward per batch captures every capture point; each candidate then costs only the
draft's K-step unroll (a one-layer network), so the whole search is a small multiple of one
acceptance run, not one acceptance run per candidate.

Every candidate gets a bootstrap interval over prompts, and the paired interval of its difference
to the best (same resampled prompts for all, so the per-prompt difficulty cancels). When any
other candidate's paired interval includes zero the verdict is "undetermined": the data cannot
tell those wirings apart, and no winner is named.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..core.stats import Interval
from ..core.taps import CapturePoint, FeatureSpec, all_points, embed, final_norm, format_spec, layer_out

UNDETERMINED = "undetermined"

SCHEMA = "eagle3-doctor/fingerprint/1"  # schemas/fingerprint.v1.schema.json


def _move(p: CapturePoint, d: int, L: int) -> CapturePoint | None:
    """One layer earlier (d=-1) or later (d=+1), on the line embed, layer_out[0..L-1], final_norm."""
    line = [embed()] + [layer_out(i) for i in range(L)] + [final_norm()]
    j = line.index(p) + d
    return line[j] if 0 <= j < len(line) else None


def shifts(spec: FeatureSpec, num_layers: int) -> list[FeatureSpec]:
    """Every one-layer shift of a spec: one slot moved by one layer, or all slots together."""
    out: list[FeatureSpec] = []
    for d in (-1, 1):
        for i in range(len(spec)):
            q = _move(spec[i], d, num_layers)
            if q is not None:
                out.append(tuple(spec[:i]) + (q,) + tuple(spec[i + 1 :]))
        moved = [_move(p, d, num_layers) for p in spec]
        known = [q for q in moved if q is not None]
        if len(known) == len(moved):
            out.append(tuple(known))
    return [c for c in dict.fromkeys(out) if len(set(c)) == len(c)]


def candidates(anchors: Sequence[FeatureSpec], num_layers: int) -> list[FeatureSpec]:
    """Plausible wirings around each anchor (configured, trained, engine default).

    Per anchor: the anchor, its one-layer shifts, the seed-style slot shift (embed, a, b) of
    (a, b, c), and the inverse of that shift: a spec that starts with embed may be a shifted
    (a, b, c), so (a, b, next(b)) joins, with its own one-layer shifts. Duplicated points are
    dropped (no recipe feeds one capture point twice).
    """
    L = num_layers
    out: list[FeatureSpec] = []
    for a in anchors:
        a = tuple(a)
        out += [a, *shifts(a, L), (embed(),) + a[:-1]]
        if len(a) >= 2 and a[0] == embed():
            nxt = _move(a[-1], 1, L)
            if nxt is not None:
                un = a[1:] + (nxt,)
                out += [un, *shifts(un, L)]
    return [c for c in dict.fromkeys(out) if len(set(c)) == len(c)]


@dataclass
class FingerprintRow:
    """One candidate wiring: its fit (mean log-likelihood) with its interval, paired against the best."""

    rank: int
    spec: FeatureSpec
    log_lik: Interval
    diff_to_best: Interval
    separated: bool  # the paired interval to the best lies below 0 (the best itself: True)
    configured: bool  # what the engine feeds
    trained: bool  # what the training side declares

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "spec": [str(p) for p in self.spec],
            "log_lik": self.log_lik.to_dict(),
            "diff_to_best": self.diff_to_best.to_dict(),
            "separated": self.separated,
            "configured": self.configured,
            "trained": self.trained,
        }


@dataclass
class FingerprintResult:
    rows: list[FingerprintRow]  # ranked, best first
    verdict: str  # the best spec as text, or UNDETERMINED
    best: FeatureSpec | None
    tied: list[FeatureSpec]  # candidates whose paired interval to the best includes zero
    statistic: str
    settings: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def determined(self) -> bool:
        return self.verdict != UNDETERMINED

    def row_for(self, spec: FeatureSpec) -> FingerprintRow | None:
        return next((r for r in self.rows if r.spec == tuple(spec)), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "verdict": self.verdict,
            "best": [str(p) for p in self.best] if self.best is not None else None,
            "tied": [[str(p) for p in t] for t in self.tied],
            "statistic": self.statistic,
            "settings": self.settings,
            "seconds": self.seconds,
            "rows": [r.to_dict() for r in self.rows],
        }


STEP_WEIGHT = 0.8  # EAGLE-3 / SpecForge weight the TTT loss of step k by 0.8**(k-1)


@torch.inference_mode()
def fingerprint(
    setup: Any,
    *,
    prompts_path: str | None = None,
    num_steps: int = 3,
    max_new_tokens: int = 64,
    max_tokens: int | None = 512,
    limit: int | None = None,
    batch_size: int = 8,
    prompt_ids: Sequence[Sequence[int]] | None = None,
    extra: Sequence[FeatureSpec] = (),
    seed: int = 0,
    progress: Callable[[str, int, int], None] | None = None,
) -> FingerprintResult:
    """Rank candidate feature specs by the draft's training loss when fed each one.

    The sequences are the prompts plus the target's greedy continuation (what a draft sees in
    serving). Step k at base t reads the true tokens teacher-forced and is scored against the
    target's full next-token distribution there: the soft cross-entropy EAGLE-3 training
    minimises, weighted 0.8**(k-1) over steps 1..num_steps, reported as a log-likelihood
    (higher is better). Target tokens outside the draft vocabulary carry no draft probability
    and drop out of the sum for every candidate alike.
    """
    import time

    from ..model.replay import iter_captures

    t0 = time.perf_counter()
    tgt, draft = setup.target, setup.draft
    if draft is None:
        from ..core.errors import BadInput

        raise BadInput("the fingerprint needs a draft", "pass --draft DIR")
    L = tgt.num_layers
    anchors = _anchors(setup, draft.config.num_aux_states, extra)
    cands = candidates(anchors, L)
    seqs = _sequences(tgt, prompts_path, max_tokens, limit, prompt_ids, max_new_tokens, progress)
    # per candidate, per prompt: [weighted sum of log-likelihood, weighted scored positions,
    # weighted log-likelihood of a uniform guess over the draft vocabulary (the no-information line)]
    counts = np.zeros((len(cands), len(seqs), 3), dtype=np.float64)
    report = (lambda d, n: progress("fingerprint", d, n)) if progress else None
    for rb in iter_captures(tgt, seqs, all_points(L), batch_size=batch_size, want_logits=True, progress=report):
        _score_batch(tgt, draft, rb, cands, num_steps, counts)  # every capture point, one forward
    rows, chance = _ranking(counts, cands, setup, seed)
    tied = [r.spec for r in rows[1:] if not r.separated]
    best = rows[0].spec if rows else None
    informative = bool(chance and chance["above_chance"])
    verdict = UNDETERMINED if (best is None or tied or not informative) else format_spec(best)
    settings = _settings(cands, seqs, num_steps, max_new_tokens, seed, anchors, chance)
    stat = (
        f"mean log-likelihood per position of the target's next-token distribution under the draft (soft "
        f"cross-entropy, the EAGLE-3 training loss), steps 1..{num_steps} weighted {STEP_WEIGHT}^(k-1)"
    )
    return FingerprintResult(rows, verdict, best, tied, stat, settings, time.perf_counter() - t0)


def _sequences(
    tgt: Any,
    prompts_path: str | None,
    max_tokens: int | None,
    limit: int | None,
    prompt_ids: Sequence[Sequence[int]] | None,
    max_new_tokens: int,
    progress: Callable[[str, int, int], None] | None,
) -> list[Any]:
    """The prompts plus the target's greedy continuation: the tokens a draft sees in serving.

    The continuation takes as many prompts per batch as memory allows (the replay after it keeps every
    layer's output, so it stays at ``batch_size``): on a GPU, batches of 8 ran the decode loop 8 times
    for 64 prompts."""
    from ..model.continuation import greedy_continue
    from ..model.replay import check_seq_len, prompts_from
    from ..model.static import decode_batch_size

    prompts, _ = prompts_from(tgt, prompts_path, max_tokens, limit, prompt_ids)
    seqs = [p.ids for p in prompts]
    for s in seqs:
        check_seq_len(tgt, len(s) + max_new_tokens)
    if max_new_tokens and seqs:
        report = (lambda d, n: progress("greedy continuation (tokens x batches)", d, n)) if progress else None
        longest = max(map(len, seqs))
        size = decode_batch_size(tgt, longest, longest + max_new_tokens)
        seqs = greedy_continue(tgt, seqs, max_new_tokens, size, progress=report)
    return seqs


def _settings(
    cands: Sequence[Any],
    seqs: Sequence[Any],
    num_steps: int,
    max_new_tokens: int,
    seed: int,
    anchors: Sequence[FeatureSpec],
    chance: Any,
) -> dict[str, Any]:
    return {
        "candidates": len(cands),
        "prompts": len(seqs),
        "tokens": int(sum(len(s) for s in seqs)),
        "num_steps": num_steps,
        "max_new_tokens": max_new_tokens,
        "bootstrap_seed": seed,
        "anchors": [format_spec(a) for a in anchors],
        "chance": chance,
    }


def _anchors(setup: Any, n_aux: int, extra: Sequence[FeatureSpec]) -> list[FeatureSpec]:
    """The specs candidates are built around: serving, training, the engines' default, any extra."""
    from ..engines.capture import default_spec_llama

    anchors = [tuple(s) for s in (setup.serving.spec, setup.train_spec) if s is not None and len(s) == n_aux]
    if n_aux == 3:
        anchors.append(tuple(default_spec_llama(setup.target.num_layers)))
    anchors += [tuple(e) for e in extra if len(e) == n_aux]
    return list(dict.fromkeys(anchors))


def _score_batch(tgt: Any, draft: Any, rb: Any, cands: Sequence[FeatureSpec], K: int, counts: np.ndarray) -> None:
    """Add one replayed batch's weighted log-likelihoods into counts[candidate, sequence]."""
    from ..model.target import head_chunks

    tid = (torch.arange(draft.d2t.numel(), device=draft.d2t.device) + draft.d2t).clamp(0, tgt.vocab_size - 1)
    log_vd = float(np.log(tid.numel()))
    w = [STEP_WEIGHT**k for k in range(K)]
    got, last, batch, idx = rb.captured, rb.last, rb.batch, rb.index
    B, T = batch.input_ids.shape
    # target next-token distribution restricted to the draft vocabulary: [B, T, Vd]
    p_t = torch.empty(B * T, tid.numel(), dtype=torch.float32, device=last.device)
    for sl, lg in head_chunks(tgt, last):
        p_t[sl] = torch.softmax(lg, dim=-1)[:, tid.to(lg.device)]
    p_t = p_t.view(B, T, -1)
    lens = torch.as_tensor(batch.lengths, device=last.device)
    pos = torch.arange(T, device=last.device)
    ids = torch.roll(batch.input_ids, -1, dims=1)
    key_mask = batch.attention_mask.bool()
    # several candidates share one draft call: stacked along the batch dimension
    per_call = max(1, 64 // B)
    for c0 in range(0, len(cands), per_call):
        chunk = cands[c0 : c0 + per_call]
        n = len(chunk)
        aux = torch.cat([torch.cat([got[p] for p in c], dim=-1) for c in chunk], dim=0)
        for k0, h in enumerate(draft.unroll(aux, ids.repeat(n, 1), K, key_mask=key_mask.repeat(n, 1))):
            k = k0 + 1
            # step k at base t predicts the token after x_{t+k}: the target's distribution at t+k
            v = (pos[None, :] + k <= lens[:, None] - 1).float()  # [B, T]
            logq = torch.log_softmax(draft.logits(h).float(), dim=-1).view(n, B, T, -1)
            ll = (torch.roll(p_t, -k, dims=1)[None] * logq).sum(-1)  # [n, B, T]
            counts[c0 : c0 + n, idx, 0] += w[k0] * (ll * v[None]).sum(-1).double().cpu().numpy()
            counts[c0 : c0 + n, idx, 1] += w[k0] * v.sum(-1).double().cpu().numpy()[None]
            mass = torch.roll(p_t, -k, dims=1).sum(-1)  # target probability inside the draft vocabulary
            counts[c0 : c0 + n, idx, 2] += w[k0] * -log_vd * (mass * v).sum(-1).double().cpu().numpy()[None]


def _mean_ll(s: np.ndarray) -> np.ndarray:
    return s[..., 0] / s[..., 1]


def _ranking(
    counts: np.ndarray, cands: Sequence[FeatureSpec], setup: Any, seed: int
) -> tuple[list[FingerprintRow], dict[str, Any] | None]:
    """Candidates ranked by log-likelihood with paired intervals over prompts, and the best one against chance."""
    from ..core.stats import paired

    raw = [float(_mean_ll(counts[ci].sum(0))) for ci in range(len(cands))]
    rank = sorted(range(len(cands)), key=lambda ci: -raw[ci])
    own, diff = paired([counts[ci] for ci in rank], _mean_ll, ref=0, seed=seed) if cands else ([], [])
    configured = tuple(setup.serving.spec)
    trained = tuple(setup.train_spec) if setup.train_spec is not None else None
    rows = []
    for j, ci in enumerate(rank):
        spec = tuple(cands[ci])
        rows.append(FingerprintRow(j + 1, spec, own[j], diff[j], j == 0 or diff[j].hi < 0, spec == configured, spec == trained))
    # a draft whose best fit is no better than a uniform guess carries no trained fingerprint (random
    # weights, a wrong target): its ranking is an artefact of feature magnitudes, so name no winner
    chance = None
    if cands:
        with np.errstate(divide="ignore", invalid="ignore"):
            _, cd = paired([counts[rank[0]][:, [2, 1]], counts[rank[0]][:, :2]], _mean_ll, ref=0, seed=seed)
        chance = {
            "log_lik": float(_mean_ll(counts[rank[0]][:, [2, 1]].sum(0))),
            "best_minus_chance": cd[1].to_dict(),
            "above_chance": bool(cd[1].lo > 0),
        }
    return rows, chance


def _mark(r: FingerprintRow) -> str:
    return " ".join(x for x, on in (("configured", r.configured), ("trained", r.trained)) if on)


def shown_rows(fp: FingerprintResult, top: int) -> list[FingerprintRow | None]:
    """The rows a table shows: the ``top`` best, then the configured and trained rows wherever they rank (the
    comparison a reader needs), a None where ranks are skipped."""
    rows: list[FingerprintRow | None] = list(fp.rows[:top])
    for r in fp.rows[top:]:
        if r.configured or r.trained:
            if rows[-1] is not None and rows[-1].rank != r.rank - 1:
                rows.append(None)
            rows.append(r)
    return rows


def render_fingerprint(console: Any, fp: FingerprintResult, top: int = 12) -> None:
    from rich.table import Table

    t = Table(title="the draft's fingerprint: candidate capture points ranked by fit (95% intervals over prompts)")
    for col in ("rank", "features", "log-lik", "diff to best (paired)", "", "row"):
        t.add_column(col, justify="right" if col in ("rank", "log-lik") else "left")
    for r in shown_rows(fp, top):
        if r is None:
            t.add_row("...", "", "", "", "", "")
            continue
        ll, d = r.log_lik, r.diff_to_best
        t.add_row(
            str(r.rank),
            format_spec(r.spec),
            f"{ll.point:.4f} [{ll.lo:.4f}, {ll.hi:.4f}]",
            "-" if r.rank == 1 else f"{d.point:+.4f} [{d.lo:+.4f}, {d.hi:+.4f}]",
            "" if r.rank == 1 else ("separated" if r.separated else "within noise"),
            _mark(r),
            style="bold" if r.configured or r.trained else None,
        )
    console.print(t)
    s = fp.settings
    console.print(
        f"statistic: {fp.statistic}; {s['candidates']} candidates, {s['prompts']} prompts / {s['tokens']} tokens, "
        f"one target forward shared by all; {fp.seconds:.1f} s",
        markup=False,
        soft_wrap=True,
    )
    ch = s.get("chance")
    if ch:
        d = ch["best_minus_chance"]
        console.print(
            f"uniform guess over the draft vocabulary: log-lik {ch['log_lik']:.4f}; best minus that "
            f"{d['point']:+.4f} [{d['lo']:+.4f}, {d['hi']:+.4f}]",
            markup=False,
            soft_wrap=True,
        )
    console.print(f"fingerprint: {fp.verdict}", markup=False, style="bold")


def fingerprint_markdown(fp: FingerprintResult, top: int = 8) -> str:
    lines = [
        f"fingerprint: **{fp.verdict}** ({fp.settings['candidates']} candidates, {fp.settings['prompts']} prompts)",
        "",
        "| rank | features | log-lik [95%] | diff to best [95%, paired] | row |",
        "|---|---|---|---|---|",
    ]
    for r in shown_rows(fp, top):
        if r is None:
            lines.append("| ... | | | | |")
            continue
        ll, d = r.log_lik, r.diff_to_best
        diff = "-" if r.rank == 1 else f"{d.point:+.4f} [{d.lo:+.4f}, {d.hi:+.4f}]"
        lines.append(f"| {r.rank} | {format_spec(r.spec)} | {ll.point:.4f} [{ll.lo:.4f}, {ll.hi:.4f}] | {diff} | {_mark(r)} |")
    return "\n".join(lines)
