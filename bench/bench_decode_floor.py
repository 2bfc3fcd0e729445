"""A greedy continuation's decode step against its own floor, batch by batch, with the native decoder's own
kernels and with PyTorch's, in one run.

    PYTHONPATH=. python3 bench/bench_decode_floor.py --dir /tmp/e2e   # a pair bench_e2e.py saved (D/target)

For each batch B (prompts of --prompt random tokens, --new greedy tokens, no early stop), on the native
decoder as a command loads it: the continuation's wall per step, and the step's floor computed in the same
run from two measured rates, the device-to-device copy bandwidth and a bf16 matmul's FLOP rate:
max((weight bytes + KV bytes the written slots hold, averaged over the steps) / bandwidth,
2 x parameters x B / FLOP rate); and the steady step alone (steps 64 to the last, timed between two synchronisations,
against the floor of the slots those steps hold). Each route of --routes over the same prompts, as
``EAGLE3_DOCTOR_KERNELS`` names them (draft.gpu.kernels): "all" (the attention over each row's written slots,
model.native.spans, and the fused norms, RoPE and SiLU product, draft.gpu.fused: what commands run on a GPU),
"attention" (the attention kernel alone), "torch" (PyTorch's kernels: SDPA over the written slots rounded up to
256); several families join with "+" ("attention+fused"); the greedy tokens of each are compared row by row with
the first route's.
Then one eager decode step at the largest batch under torch.profiler: the kernels that take its time.
Prints one JSON object per measurement; peak memory is torch.cuda.max_memory_allocated over each run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pair import flop_rate, hbm_bandwidth  # noqa: E402

from eagle3_doctor.model.static import StaticDecoder, greedy_static, kv_bytes_per_token  # noqa: E402
from eagle3_doctor.model.target import load_target  # noqa: E402


def say(**kw) -> None:
    print(json.dumps(kw), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/e2e")
    ap.add_argument("--batches", default="256,512,1024")
    ap.add_argument("--prompt", type=int, default=96)
    ap.add_argument("--new", type=int, default=512)
    ap.add_argument("--routes", default="all,attention,torch")
    args = ap.parse_args()
    routes = args.routes.split(",")
    tgt = load_target(str(Path(args.dir) / "target"), dtype="bfloat16", device="cuda")
    tgt.tokenizer = SimpleNamespace(eos_token_id=None, pad_token_id=0)  # never stop early: every step is timed
    params = sum(p.numel() for p in tgt.model.parameters())
    wbytes = sum(p.numel() * p.element_size() for p in tgt.model.parameters())
    bw, fl = hbm_bandwidth(), flop_rate()
    kvb = kv_bytes_per_token(tgt)
    say(forward=tgt.forward, weights_gb=round(wbytes / 1e9, 2), hbm_tb_s=round(bw / 1e12, 2), bf16_tflop_s=round(fl / 1e12))
    g = torch.Generator().manual_seed(0)
    for b in map(int, args.batches.split(",")):
        ps = torch.randint(0, 128000, (b, args.prompt), generator=g).tolist()
        k0 = 64  # the steady steps: from the 64th on (the prefill, the first graph captures and warm-up before)
        steady = args.new - 1 - k0

        def floor(written: float, b: int = b) -> float:  # ms a step: KV bytes of ``written`` slots a row on top of the weights
            return 1000 * max((wbytes + b * written * kvb) / bw, 2 * params * b / fl)

        whole_floor = floor(args.prompt + args.new / 2)  # slots written on average over the steps
        steady_floor = floor(args.prompt + (k0 + args.new - 1) / 2)
        tokens = {}
        for mode in routes:
            os.environ["EAGLE3_DOCTOR_KERNELS"] = mode.replace("+", ",")
            greedy_static(tgt, ps, 8)  # cuBLAS and allocator warm-up; each call captures its own graphs, as a command does
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            marks: dict[int, float] = {}

            def mark(
                k: int, k0: int = k0, marks: dict = marks
            ) -> None:  # two synchronisations in a run: at the steady part's first and last step
                if k in (k0, args.new - 1):
                    torch.cuda.synchronize()
                    marks[k] = time.perf_counter()

            t0 = time.perf_counter()
            tokens[mode] = greedy_static(tgt, ps, args.new, progress=mark)
            torch.cuda.synchronize()
            step = 1000 * (time.perf_counter() - t0) / args.new
            one = 1000 * (marks[args.new - 1] - marks[k0]) / steady
            say(batch=b, kernels=mode, step_ms=round(step, 2), floor_ms=round(whole_floor, 2),
                floor_share=round(whole_floor / step, 3), steady_step_ms=round(one, 2),
                steady_floor_ms=round(steady_floor, 2), steady_floor_share=round(steady_floor / one, 3),
                peak_gb=round(torch.cuda.max_memory_allocated() / 1e9, 1))  # fmt: skip
        for mode in routes[1:]:
            same = sum(x == y for x, y in zip(tokens[routes[0]], tokens[mode]))
            say(batch=b, routes=[routes[0], mode], rows_equal=same, rows=b)
        os.environ["EAGLE3_DOCTOR_KERNELS"] = ""
    profile(tgt, b, args.prompt)


def profile(tgt, b: int, prompt: int) -> None:
    """One eager decode step at batch b, 300 slots written: the CUDA time of its top kernels."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as prof

    from eagle3_doctor.model.static import static_cache

    L = prompt + 512
    dec = StaticDecoder(tgt, static_cache(tgt, b, L), b, L)
    dec._graphs.on = False
    ids = torch.randint(0, 128000, (b, prompt), device="cuda")
    dec.prefill(ids, torch.zeros(b, dtype=torch.long, device="cuda"))
    cur = torch.randint(0, 128000, (b, 1), device="cuda")
    for _ in range(200):
        dec.forward(cur)
    torch.cuda.synchronize()
    with prof(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(3):
            dec.forward(cur)
        torch.cuda.synchronize()
    rows = sorted(p.key_averages(), key=lambda e: -e.device_time_total)[:14]
    total = sum(e.device_time_total for e in p.key_averages())
    for e in rows:
        say(kernel=e.key[:90], ms_per_step=round(e.device_time_total / 3000, 3), share=round(e.device_time_total / total, 3))
    dec.close()


if __name__ == "__main__":
    main()
