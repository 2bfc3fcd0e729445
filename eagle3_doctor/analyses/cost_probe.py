"""The cost probe: every forward a speculative setting needs, timed on the user's machine as the decode
loop runs it (:mod:`spec_loop`'s own functions), at each batch size, median of repeated runs."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..core.typed_json import JsonFields
from ..draft.model import DraftCache
from ..engines.spec_settings import Setting
from ..model.decode import CachedTarget

if TYPE_CHECKING:
    from ..model.setup import Setup

VERIFY, EXTEND, CHAIN, STEP = "target verify", "draft extend", "draft chain", "draft step"


@dataclass
class CostRow(JsonFields):
    """One timed forward: median seconds over the runs (after one warm-up)."""

    batch_size: int
    part: str  # target verify | draft extend (catch-up) | draft chain (k proposals) | draft step (a tree's width)
    tokens: int  # new tokens per sequence in the forward
    seconds: float
    runs: list[float]


@dataclass
class CostProbe(JsonFields):
    """What the costs were measured on, and how."""

    where: str  # "costs measured on the CPU" or on the named GPU
    mode: str  # how the target's and the draft's forwards ran: "target cuda graphs, draft eager", "target eager, ..."
    dtype: str
    context: int  # about the KV cache positions a timed forward attends to (see probe_costs)
    repeats: int
    rows: list[CostRow]

    def seconds(self, batch_size: int, part: str, tokens: int) -> float:
        return self.row(batch_size, part, tokens).seconds

    def row(self, batch_size: int, part: str, tokens: int) -> CostRow:
        return next(r for r in self.rows if (r.batch_size, r.part, r.tokens) == (batch_size, part, tokens))

    def cost(self, batch_size: int, part: str, tokens: int, rounds: np.ndarray) -> Cost:
        """The forward's :class:`Cost`, its draws the medians of its runs in each row of ``rounds``
        (:func:`resampled_rounds`)."""
        r = self.row(batch_size, part, tokens)
        return Cost(r.seconds, np.median(np.asarray(r.runs)[rounds], axis=1))


@dataclass
class Cost:
    """A forward's seconds as a prediction's interval reads them: ``point``, the median of its runs, and per
    bootstrap replicate the median of its runs in the replicate's resampled rounds: a run's timing is a sample too
    (two runs of the fixture pair on an idle 2-core host put plain decoding's forward at 1.71 and 1.24 ms, and the
    predicted speedup at 2.14 [2.01, 2.35] and 1.58 [1.51, 1.69] with the prompts' interval alone)."""

    point: float
    draws: np.ndarray  # [replicates]

    def of(self, summed: np.ndarray) -> float | np.ndarray:
        """The point for the prompts' summed counts [m], the draws for a bootstrap's replicates [n, m]."""
        return self.point if summed.ndim == 1 else self.draws

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.point + other.point, self.draws + other.draws)

    def __mul__(self, k: float) -> Cost:
        return Cost(self.point * k, self.draws * k)


def resampled_rounds(repeats: int, replicates: int, seed: int = 0) -> np.ndarray:
    """[replicates, repeats] timed rounds drawn with replacement, the same rows for every forward: the probe times
    the forwards round robin (:func:`_timed`), so a slow spell of a shared machine is one round of all of them."""
    return np.random.default_rng(seed).integers(0, max(repeats, 1), (replicates, max(repeats, 1)))


def _timed(fns: Sequence[Callable[[], Any]], repeats: int, dev: torch.device) -> list[list[float]]:
    """Wall seconds of every ``fn``, ``repeats`` runs each after one warm-up, each run synchronised.

    Round robin (every forward once, then again): a slow spell of a shared machine then lands on all
    the forwards alike instead of on whichever was being timed, and the medians keep their order."""

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    for fn in fns:
        fn()
    runs: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, r in zip(fns, runs):
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            r.append(time.perf_counter() - t0)
    return runs


Timed = list[tuple[str, int, Callable[[], None]]]  # (part, tokens per sequence, the forward)


def _target_forwards(ct: CachedTarget, B: int, budgets: Sequence[int], g: torch.Generator) -> Timed:
    from .spec_loop import verify

    out: Timed = []
    for n in budgets:
        rows = torch.randint(0, ct.target.vocab_size, (B, n), generator=g).tolist()

        def run(rows: list = rows) -> None:
            start = ct.length
            verify(ct, rows)
            ct.crop(start + 1)  # see probe_costs: the next forward meets a cache one position longer

        out.append((VERIFY, n, run))
    return out


def _draft_forwards(
    draft: Any,
    aux: torch.Tensor,
    ids: torch.Tensor,
    extends: Sequence[int],
    chains: Sequence[int],
    widths: Sequence[int],
    runs: int,
) -> Timed:
    """The loop's catch-up over w verified tokens and its chains of k proposals (:mod:`spec_loop`'s own
    functions, over the draft's static cache); a tree's w-wide steps, which score topk children per slot,
    over a dynamic cache (the loop runs chains only)."""
    from ..draft.decode import DraftDecoder
    from .spec_loop import catch_up, propose

    B, C = ids.shape
    dd = DraftDecoder(draft, B, C + runs + max([*extends, *chains]) + 1)  # runs: each leaves one position
    h = catch_up(dd, aux, ids.tolist(), 0, once=True)
    out: Timed = []
    for w in extends:

        def extend(w: int = w) -> None:
            start = dd.length
            catch_up(dd, aux[:, -w:], ids[:, :w].tolist(), start)
            dd.crop(start + 1)  # see probe_costs: the next forward meets a cache one position longer

        out.append((EXTEND, w, extend))
    for k in chains:

        def chain(k: int = k) -> None:
            start = dd.length
            propose(dd, h, k)
            dd.crop(start + 1)

        out.append((CHAIN, k, chain))
    if widths:
        cache = DraftCache()
        hd = draft.extend(aux, ids, torch.arange(C, device=ids.device).expand(B, C), cache, from_aux=True)
    for w in widths:

        def step(w: int = w) -> None:
            start = cache.length
            pos = torch.arange(start, start + w, device=ids.device).expand(B, w)
            o = draft.extend(hd[:, -w:], ids[:, :w], pos, cache, from_aux=False)
            draft.to_target_ids(draft.logits(o).topk(w, dim=-1).indices).tolist()
            cache.crop(start + 1)

        out.append((STEP, w, step))
    return out


@torch.inference_mode()
def probe_costs(setup: Setup, settings: Sequence[Setting], batch_sizes: Sequence[int], context: int, repeats: int) -> CostProbe:
    """Time every forward the settings need, at each batch size, against caches of about ``context`` positions.

    Every timed forward leaves one position in its cache, so no two forwards of a cache meet the same
    length, as no two passes of a decode loop do: a forward that pays for each new shape (an attention
    plan, a mask, an allocation) pays for it here too. The lengths walk up through ``context``."""
    tgt, draft = setup.target, setup.draft
    budgets = sorted({1} | {s.verify_tokens for s in settings})
    extends = list(range(1, max(s.num_steps for s in settings) + 2))  # an extend covers accepted + bonus
    chains = sorted({s.num_steps for s in settings if s.kind == "chain"} | {1})  # 1: a tree's first proposal
    widths = sorted({s.topk for s in settings if s.kind != "chain" and s.num_steps > 1})
    runs_per_cache = (repeats + 1) * max(len(budgets), len(extends) + len(chains) + len(widths))
    start = max(max(extends), context - runs_per_cache // 2)  # an extend reads its w tokens from the prefill
    g = torch.Generator().manual_seed(0)
    rows: list[CostRow] = []
    mode = "eager"
    for B in batch_sizes:
        ct = CachedTarget(tgt, setup.serving.spec, batch=B, max_len=start + runs_per_cache + max(budgets) + 1)
        mode = ct.mode
        ids = torch.randint(0, tgt.vocab_size, (B, start), generator=g).to(tgt.device)
        aux, _ = ct.forward(ids, last_only=True)
        fwd = _target_forwards(ct, B, budgets, g) + _draft_forwards(draft, aux, ids, extends, chains, widths, runs_per_cache)
        for (part, n, _), runs in zip(fwd, _timed([f for _, _, f in fwd], repeats, tgt.device)):
            rows.append(CostRow(B, part, n, statistics.median(runs), runs))
        del ct, aux, fwd
    dev = tgt.device
    where = "costs measured on the CPU" if dev.type == "cpu" else f"costs measured on {_device_name(dev)}"
    draft_mode = "cuda graphs" if mode == "cuda graphs" else "static cache"
    return CostProbe(where, f"target {mode}, draft {draft_mode}", str(tgt.dtype).replace("torch.", ""), context, repeats, rows)


def _device_name(dev: torch.device) -> str:
    return torch.cuda.get_device_name(dev) if dev.type == "cuda" else str(dev)
