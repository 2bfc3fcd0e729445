"""The static-cache, CUDA-graphed decode path on a GPU: exact, and how close to the HBM floor.

    PYTHONPATH=. python3 bench/check_static_gpu.py            # GPU: the fixture target, then the 8B shape
    PYTHONPATH=. python3 bench/check_static_gpu.py --quick    # fixtures only

1. Exactness: the committed fixture target in float32 on the GPU, ragged prompts, batches of 1, 5 and 16:
   ``greedy_continue`` (graphed static path) against transformers' ``generate``, token for token.
2. The 8B shape (bench_speedup's near-bigram Llama, random bf16 weights drawn on the GPU): a decode step's
   time at batch 1, 16 and 64 over the graphed static cache, against the HBM floor measured in the same
   run (the target's weight bytes over a device-to-device copy's bandwidth), beside ``generate``'s step.
   Token agreement with ``generate`` in bf16 is reported (different kernels may break near-ties).
Prints one JSON object per measurement.
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

from pair import hbm_bandwidth  # noqa: E402

from eagle3_doctor.model.continuation import _generate, greedy_continue  # noqa: E402
from eagle3_doctor.model.setup import Setup  # noqa: E402
from eagle3_doctor.model.static import greedy_static  # noqa: E402
from eagle3_doctor.model.target import load_target  # noqa: E402

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def say(**kw) -> None:
    print(json.dumps(kw), flush=True)


def prompts_of(tok, n: int, words: int) -> list[list[int]]:
    lines = [json.loads(x)["messages"][0]["content"] for x in (FIX / "prompts.jsonl").read_text().splitlines()]
    return [tok(" ".join((lines[i % len(lines)] + " ").split()[: words + i % 9]))["input_ids"] for i in range(n)]


def exactness() -> None:
    t = load_target(str(FIX / "target"), dtype="float32", device="cuda")
    ps = prompts_of(t.tokenizer, 16, 6)
    for b in (1, 5, 16):
        got = greedy_continue(t, ps, 48, b)
        want = [s for i in range(0, len(ps), b) for s in _generate(t, ps[i : i + b], 48, lambda k: None)]
        say(check="fixture float32 graphed == generate", batch=b, equal=got == want, rows=len(ps))


def eight_b(new: int) -> None:
    import bench_speedup

    class A:
        quick, residual_scale, head_scale = False, 0.01, 1.0

    model = bench_speedup.build_target(A, "cuda", torch.bfloat16)
    setup = Setup.from_model(model, None, name="8B shape", device="cuda")
    tgt = setup.target
    from types import SimpleNamespace

    tgt.tokenizer = SimpleNamespace(eos_token_id=None, pad_token_id=0)  # never stop early: every step is timed
    wbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    bw = hbm_bandwidth()
    floor_ms = 1000 * wbytes / bw
    say(weights_gb=round(wbytes / 1e9, 2), hbm_tb_s=round(bw / 1e12, 2), floor_step_ms=round(floor_ms, 2))
    g = torch.Generator().manual_seed(0)
    for b in (1, 16, 64):
        ps = torch.randint(0, 128000, (b, 96), generator=g).tolist()
        greedy_static(tgt, ps, 8)  # capture and warm-up
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fast = greedy_static(tgt, ps, new)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        ref = _generate(tgt, ps, new, lambda k: None) if b <= 16 else None
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        step = 1000 * (t1 - t0) / new
        row = dict(batch=b, new=new, static_graphed_step_ms=round(step, 2), floor_share=round(floor_ms / step, 3))
        if ref is not None:
            same = sum(x == y for x, y in zip(fast, ref))
            row.update(generate_step_ms=round(1000 * (t2 - t1) / new, 2), rows_equal_to_generate=f"{same}/{b}")
        say(**row)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--new", type=int, default=128)
    args = ap.parse_args()
    say(torch=torch.__version__, gpu=torch.cuda.get_device_name())
    exactness()
    if not args.quick:
        eight_b(args.new)


if __name__ == "__main__":
    main()
