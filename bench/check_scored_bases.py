"""The estimator's work at the bases no walk scores: the teacher-forced unroll's steps 2..K and SGLang's tree rounds
run over every base, or from the batch's first scored base on (a prompt's last position), on the same inputs; each
timed, the outcomes at the scored bases compared. A random draft of the given width (on a GPU in bf16: its matmuls
are the estimator's), prompts of ``--prompt`` positions ahead of ``--new`` scored ones.

    PYTHONPATH=. python3 bench/check_scored_bases.py [--device cuda] [--hidden 4096] [--heads 32] [--kv-heads 8]
        [--vocab 32000] [--batch 64] [--prompt 74] [--new 512] [--steps 7] [--topk 2]

Prints one line per route: seconds over every base, from the first scored base, their ratio, and whether the
outcomes agree at the scored bases (to the bit on the CPU in float32; a GPU's 16-bit matmuls may round a near-tie
otherwise).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import torch

from eagle3_doctor.analyses.acceptance.estimator import unroll_outcomes
from eagle3_doctor.analyses.tree import sglang_tree_accepted
from eagle3_doctor.draft.config import DraftConfig
from eagle3_doctor.draft.model import Eagle3Draft


def _draft(a: argparse.Namespace, dev: torch.device, dtype: torch.dtype) -> Eagle3Draft:
    cfg = DraftConfig(hidden_size=a.hidden, intermediate_size=int(3.5 * a.hidden), num_attention_heads=a.heads,
                      num_key_value_heads=a.kv_heads, vocab_size=a.vocab * 4, draft_vocab_size=a.vocab)  # fmt: skip
    torch.manual_seed(0)
    with torch.device(dev):
        d = Eagle3Draft(cfg)
        for p in d.parameters():
            torch.nn.init.normal_(p, 0, a.hidden**-0.5)
        d.set_embeddings(torch.randn(a.vocab * 4, a.hidden), own=True)
    return d.to(dtype).eval()


def _timed(fn: Callable[[], Any], dev: torch.device) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(3):  # the first run compiles and warms; the best of the rest
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        s = time.perf_counter()
        out = fn()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        best = min(best, time.perf_counter() - s)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser()
    for name, default in [("hidden", 512), ("heads", 8), ("kv-heads", 2), ("vocab", 4000), ("batch", 8), ("prompt", 74),
                          ("new", 512), ("steps", 7), ("topk", 2)]:  # fmt: skip
        ap.add_argument(f"--{name}", type=int, default=default)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    dev = torch.device(a.device)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    d = _draft(a, dev, dtype)
    B, T, t0 = a.batch, a.prompt + a.new, a.prompt
    g = torch.Generator(device=dev).manual_seed(1)
    tokens = torch.randint(0, a.vocab * 4, (B, T), generator=g, device=dev)
    aux = torch.randn(B, T, 3 * a.hidden, generator=g, device=dev).to(dtype)

    def labels(k: int) -> torch.Tensor:
        return torch.roll(tokens, -(1 + k), dims=1)

    lens = [T] * B
    print(f"device {dev} {dtype}; draft hidden {a.hidden}; {B} sequences of {T} positions, {t0} of them prompt")
    with torch.inference_mode():
        for name, run in [
            (f"unroll, K = {a.steps}", lambda fb: unroll_outcomes(d, aux, tokens, labels, lens, a.steps, from_base=fb)),
            (f"SGLang tree, topk {a.topk}, 3 steps",
             lambda fb: sglang_tree_accepted(d, aux, tokens, labels, lens, 3, a.topk, 2 * a.topk + 2, from_base=fb)),
        ]:  # fmt: skip
            every, whole = _timed(lambda run=run: run(0), dev)
            scored, cut = _timed(lambda run=run: run(t0), dev)
            if isinstance(whole, tuple):
                same = all(torch.equal(x[:, t0:], y[:, t0:]) for x, y in zip(whole, cut))
            else:
                same = torch.equal(whole.match[:, :, t0:], cut.match[:, :, t0:])
            print(f"{name}: every base {every:.3f} s, from the first scored base {scored:.3f} s "
                  f"({scored / every:.2f}x); outcomes at the scored bases equal: {same}")  # fmt: skip
    _static_tree(tokens, dev)


def _walked(ranks: torch.Tensor, valid: torch.Tensor, paths: list[list[int]]) -> torch.Tensor:
    """The static tree's depths one base at a time in Python, as they were counted until 2026-12-05."""
    nodes, (B, K, T) = {tuple(p) for p in paths}, ranks.shape
    r, v = ranks.permute(0, 2, 1).cpu(), valid.permute(0, 2, 1).cpu()
    out = torch.zeros(B, T, dtype=torch.long)
    for b in range(B):
        for t in range(T):
            pre: tuple[int, ...] = ()
            for j in range(min(K, 4)):
                if not bool(v[b, t, j]):
                    break
                pre += (int(r[b, t, j]),)
                if pre not in nodes:
                    break
                out[b, t] += 1
    return out


def _static_tree(tokens: torch.Tensor, dev: torch.device) -> None:
    """A depth-4 tree of nine nodes over the run's bases, the verifier's token's rank at each step drawn uniformly
    from 0-3 (3: outside the draft's top 3) and a label at 95% of them: deep walks, where the walk costs most."""
    from eagle3_doctor.analyses.tree import static_tree_accepted

    paths = [[0], [1], [2], [0, 0], [0, 1], [1, 0], [0, 0, 0], [0, 1, 0], [0, 0, 0, 0]]
    B, T = tokens.shape
    g = torch.Generator(device=dev).manual_seed(2)
    ranks = torch.randint(0, 4, (B, 4, T), generator=g, device=dev)
    valid = torch.rand(B, 4, T, generator=g, device=dev) < 0.95
    walk, want = _timed(lambda: _walked(ranks, valid, paths), dev)
    table, got = _timed(lambda: static_tree_accepted(ranks, valid, paths), dev)
    print(f"static tree depths over {B * T} bases: the walk {walk:.3f} s, the child table {table:.3f} s; "
          f"equal: {torch.equal(want, got.cpu())}")  # fmt: skip


if __name__ == "__main__":
    main()
