"""The greedy continuation generated plainly and by speculative decoding with a draft that accepts, timed.

    PYTHONPATH=. python3 bench/bench_spec_continuation.py                # GPU: 8B-shaped Llama, bf16
    PYTHONPATH=. python3 bench/bench_spec_continuation.py --quick        # CPU smoke run: tiny shapes, float32

The pair is ``bench/bench_speedup.py``'s: a random 8B-shaped Llama target made near-bigram (its greedy token has
a margin, so bf16 rounding does not flip it) and an EAGLE-3 draft derived from it that proposes the target's
successor map with a ``--draft-miss`` share of tokens wrong (per-step acceptance about 1 - miss). The target runs
on the native decoder, as the CLI loads a Llama checkpoint. For each batch size, the same prompts continue
``--new`` tokens through ``model.continuation.greedy_continue`` (the plain path acceptance takes) and through
``analyses.spec_continuation.speculative_continue`` (``--continuation speculative``), each timed whole (graph
captures included, as a run pays them), and the two continuations are compared token for token.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_speedup import build_target, derived_draft, successor  # noqa: E402

from eagle3_doctor.analyses.acceptance.options import AcceptanceOptions  # noqa: E402
from eagle3_doctor.analyses.spec_continuation import speculative_continue  # noqa: E402
from eagle3_doctor.model.continuation import greedy_continue  # noqa: E402
from eagle3_doctor.model.native.plan import native_from_model  # noqa: E402
from eagle3_doctor.model.setup import Setup  # noqa: E402


def _sync(dev: str) -> None:
    if dev != "cpu":
        torch.cuda.synchronize()


def timed(dev: str, fn, *args):
    _sync(dev)
    t0 = time.perf_counter()
    out = fn(*args)
    _sync(dev)
    return out, time.perf_counter() - t0


def _quiet(*_: object) -> None:
    pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--prompts", type=int, default=256)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--batch-sizes", default="1,16,64,256")
    ap.add_argument("--ks", default="3,5")
    ap.add_argument("--residual-scale", type=float, default=0.01)
    ap.add_argument("--head-scale", type=float, default=1.0)
    ap.add_argument("--draft-miss", type=float, default=0.2)
    ap.add_argument("--profile", type=int, default=0, help="B: profile one speculative batch of B rows (K = the first of --ks)")
    args = ap.parse_args()
    dev = "cpu" if args.quick else args.device
    dtype = torch.float32 if dev == "cpu" else torch.bfloat16
    if args.quick:
        args.prompts, args.new, args.batch_sizes, args.prompt_len = 6, 24, "1,3,6", 16
    t0 = time.perf_counter()
    model = build_target(args, dev, dtype)
    f = successor(model)
    draft = derived_draft(model, f, dev, dtype, args.draft_miss)
    native = native_from_model(model)
    del model
    setup = Setup.from_model(native, draft, name="8B-shaped Llama, near-bigram", device=dev)
    print(f"built the pair in {time.perf_counter() - t0:.1f} s on {dev}; native decoder: {getattr(native, 'native', False)}")
    g = torch.Generator().manual_seed(2)
    V = native.config.vocab_size
    prompts = torch.randint(10, V - 10, (args.prompts, args.prompt_len), generator=g).tolist()
    # ragged prompts, as users send them: each cut to between half and all of --prompt-len
    cut = torch.randint(args.prompt_len // 2, args.prompt_len + 1, (args.prompts,), generator=g).tolist()
    prompts = [p[:c] for p, c in zip(prompts, cut)]
    if args.profile:
        profile(setup, draft, prompts[: args.profile], args, dev)
        return
    rows = []
    for b in [int(x) for x in args.batch_sizes.split(",")]:
        n = min(args.prompts, max(b, 16 if b == 1 else b))  # batch 1 over 16 prompts: the rest would only repeat it
        ps = prompts[:n]
        plain, t_plain = timed(dev, greedy_continue, setup.target, ps, args.new, b)
        for k in [int(x) for x in args.ks.split(",")]:
            opts = AcceptanceOptions(num_steps=k, max_new_tokens=args.new)
            got, t_spec = timed(dev, speculative_continue, setup.target, draft, setup.serving.spec, ps, opts, b, _quiet)
            assert got is not None, "the native cache was expected"
            seqs, counted = got
            same = sum(a == c for a, c in zip(seqs, plain))
            row = {"batch": b, "prompts": n, "new": args.new, "K": k, "plain_s": round(t_plain, 3), "speculative_s": round(t_spec, 3),
                   "speedup": round(t_plain / t_spec, 2), "tokens_per_pass": round(counted.tokens_per_pass, 3),
                   "passes": counted.passes, "rows_equal": f"{same}/{n}"}  # fmt: skip
            rows.append(row)
            print(json.dumps(row), flush=True)
    if dev != "cpu":
        print(f"peak GPU memory {torch.cuda.max_memory_allocated() / 1e9:.1f} GB")


def profile(setup, draft, ps, args, dev: str) -> None:
    """Where a speculative batch's time goes, kernel by kernel (after one unprofiled run for the graphs' warm-up),
    beside the plain continuation of the same batch."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as prof

    k = int(args.ks.split(",")[0])
    opts = AcceptanceOptions(num_steps=k, max_new_tokens=args.new)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev != "cpu" else [])
    for name, fn in (
        ("plain", lambda: greedy_continue(setup.target, ps, args.new, len(ps))),
        ("speculative", lambda: speculative_continue(setup.target, draft, setup.serving.spec, ps, opts, len(ps), _quiet)),
    ):
        _, t = timed(dev, fn)
        with prof(activities=acts) as p:
            _, t2 = timed(dev, fn)
        print(f"== {name}: {t:.3f} s, profiled {t2:.3f} s")
        key = "cuda_time_total" if dev != "cpu" else "cpu_time_total"
        print(p.key_averages().table(sort_by=key, row_limit=25, max_name_column_width=70))


if __name__ == "__main__":
    main()
