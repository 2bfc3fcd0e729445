"""The prefill of a ragged batch: in groups of like length (the static decoder's way) against one forward at the
longest prompt's width, timed in the same process, beside the FLOP floor of the prompts' own tokens.

    PYTHONPATH=. python3 bench/bench_prefill.py                  # GPU: 8B-shaped Llama (bench_speedup's), bf16
    PYTHONPATH=. python3 bench/bench_prefill.py --quick          # CPU smoke run: tiny shapes, float32

Each case ``N:LO-HI`` is N prompts of random ids whose lengths are spread evenly over LO..HI tokens (shuffled): a
batch of prompts as users send them. Each way runs ``StaticDecoder.prefill`` on a fresh static cache of the batch,
once untimed (the kernels' first compile), then ``--repeats`` times timed; the best is reported. "one forward"
is the same code with the grouping turned off (``GROUP_TOKENS`` and ``GROUP_MAX_TOKENS`` past the batch's padded
tokens). The floor is 2 x the target's per-token parameters x the prompts' own tokens at the bf16 matmul rate
measured here (``pair.flop_rate``); the first tokens of the two ways are compared.
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

from bench_speedup import build_target  # noqa: E402
from pair import flop_rate  # noqa: E402

from eagle3_doctor.model import static  # noqa: E402
from eagle3_doctor.model.native.plan import native_from_model  # noqa: E402
from eagle3_doctor.model.setup import Setup  # noqa: E402


def prefill_once(tgt, ids: torch.Tensor, pads: torch.Tensor, grouped: bool) -> tuple[torch.Tensor, float]:
    B, T = ids.shape
    cache = static.static_cache(tgt, B, T + 8)
    dec = static.StaticDecoder(tgt, cache, B, T + 8, ())
    old = static.GROUP_TOKENS, static.GROUP_MAX_TOKENS
    if not grouped:
        static.GROUP_TOKENS = static.GROUP_MAX_TOKENS = B * T + 1
    try:
        if ids.is_cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        amax, _ = dec.prefill(ids, pads)
        if ids.is_cuda:
            torch.cuda.synchronize()
        return amax.clone(), time.perf_counter() - t0
    finally:
        static.GROUP_TOKENS, static.GROUP_MAX_TOKENS = old
        dec.close()
        del cache
        if ids.is_cuda:
            torch.cuda.empty_cache()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cases", default="128:64-2048,512:20-130")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--residual-scale", type=float, default=0.01)
    ap.add_argument("--head-scale", type=float, default=1.0)
    args = ap.parse_args()
    dev = "cpu" if args.quick else args.device
    dtype = torch.float32 if dev == "cpu" else torch.bfloat16
    if args.quick:
        args.cases, args.repeats = "12:4-90", 1
        static.GROUP_TOKENS = 64  # tiny shapes: groups only form below the GPU's threshold
    native = native_from_model(build_target(args, dev, dtype))
    tgt = Setup.from_model(native, device=dev).target
    per_token = sum(p.numel() for n, p in native.named_parameters() if "embed_tokens" not in n and "lm_head" not in n)
    rate = flop_rate(dev) if dev != "cpu" else float("nan")
    g = torch.Generator().manual_seed(0)
    for case in args.cases.split(","):
        n, span = case.split(":")
        lo, hi = (int(x) for x in span.split("-"))
        lengths = [lo + (hi - lo) * i // max(1, int(n) - 1) for i in range(int(n))]
        lengths = [lengths[i] for i in torch.randperm(len(lengths), generator=g).tolist()]
        prompts = [torch.randint(10, native.config.vocab_size - 10, (k,), generator=g).tolist() for k in lengths]
        ids, pads = static.left_padded(prompts, 0)
        ids, pads = ids.to(dev), pads.to(dev)
        row: dict[str, object] = {"prompts": len(prompts), "tokens": sum(lengths), "padded": ids.numel()}
        row["groups"] = len(static.prefill_groups(lengths))
        got = {}
        for way, grouped in (("one_forward", False), ("grouped", True)):
            prefill_once(tgt, ids, pads, grouped)  # the first compile of each shape is not the prefill's cost
            runs = [prefill_once(tgt, ids, pads, grouped) for _ in range(max(1, args.repeats))]
            got[way] = runs[0][0]
            row[f"{way}_s"] = round(min(t for _, t in runs), 3)
        row["floor_s"] = round(2 * per_token * sum(lengths) / rate, 3)
        row["speedup"] = round(float(row["one_forward_s"]) / float(row["grouped_s"]), 2)  # type: ignore[arg-type]
        row["first_tokens_equal"] = f"{int((got['one_forward'] == got['grouped']).sum())}/{len(prompts)}"
        print(json.dumps(row), flush=True)
    if dev != "cpu":
        print(f"peak GPU memory {torch.cuda.max_memory_allocated() / 1e9:.1f} GB")


if __name__ == "__main__":
    main()
