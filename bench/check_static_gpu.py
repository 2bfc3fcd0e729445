"""The static-cache, CUDA-graphed decode path on a GPU: exact, and how close to the HBM floor.

    PYTHONPATH=. python3 bench/check_static_gpu.py            # GPU: the fixture target, then the 8B shape
    PYTHONPATH=. python3 bench/check_static_gpu.py --quick    # fixtures only

1. Exactness: the committed fixture target in float32 on the GPU, ragged prompts, batches of 1, 5 and 16:
   ``greedy_continue`` (graphed static path) against transformers' ``generate``, token for token.
2. The 8B shape (bench_speedup's near-bigram Llama, random bf16 weights drawn on the GPU): a decode step's
   time at batch 1, 16 and 64 over the graphed static cache, against the HBM floor measured in the same
   run (the target's weight bytes over a device-to-device copy's bandwidth), beside ``generate``'s step.
   Token agreement with ``generate`` in bf16 is reported (different kernels may break near-ties).
3. ``--dir D`` (a pair bench_e2e.py saved, D/target): that checkpoint loaded as a command loads it, on the
   native decoder and on transformers' model in turn, each decode step timed the same way at batch 1, 16
   and 64, and the two implementations' greedy tokens compared row by row.
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


def exactness(forward: str) -> None:
    """The fixture in float32 on the GPU, graphed on one implementation, against transformers' ``generate``
    over the same weights (the graphed runs first, as a command runs them, before the reference is loaded)."""
    tgt = load_target(str(FIX / "target"), dtype="float32", device="cuda", forward=forward)
    ps = prompts_of(tgt.tokenizer, 16, 6)
    got = {b: greedy_continue(tgt, ps, 48, b) for b in (1, 5, 16)}
    hf = (
        tgt
        if forward == "transformers"
        else load_target(str(FIX / "target"), dtype="float32", device="cuda", forward="transformers")
    )
    for b, rows in got.items():
        want = [s for i in range(0, len(ps), b) for s in _generate(hf, ps[i : i + b], 48, lambda k: None)]
        say(check=f"fixture float32 graphed ({tgt.forward}) == generate", batch=b, equal=rows == want, rows=len(ps))


def saved(d: Path, new: int) -> None:
    """The saved 8B target on each implementation: step times, and the native rows equal to transformers'."""
    g = torch.Generator().manual_seed(0)
    prompts = {b: torch.randint(0, 128000, (b, 96), generator=g).tolist() for b in (1, 16, 64)}
    tokens: dict[str, dict[int, list]] = {}
    for forward in ("native", "transformers"):
        t0 = time.perf_counter()
        tgt = load_target(str(d / "target"), dtype="bfloat16", device="cuda", forward=forward)
        torch.cuda.synchronize()
        say(forward=tgt.forward, load_s=round(time.perf_counter() - t0, 2))
        from types import SimpleNamespace

        tgt.tokenizer = SimpleNamespace(eos_token_id=None, pad_token_id=0)  # never stop early: every step is timed
        wbytes = sum(p.numel() * p.element_size() for p in tgt.model.parameters())
        floor_ms = 1000 * wbytes / hbm_bandwidth()
        for b, ps in prompts.items():
            greedy_static(tgt, ps, 8)  # capture and warm-up
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            out = greedy_static(tgt, ps, new)
            torch.cuda.synchronize()
            step = 1000 * (time.perf_counter() - t1) / new
            tokens.setdefault(forward, {})[b] = out
            say(
                forward=forward,
                batch=b,
                step_ms=round(step, 2),
                floor_ms=round(floor_ms, 2),
                floor_share=round(floor_ms / step, 3),
            )
        del tgt
        torch.cuda.empty_cache()
    for b in prompts:
        same = sum(x == y for x, y in zip(tokens["native"][b], tokens["transformers"][b]))
        say(check="bf16 native rows == transformers rows (graphed static, 128 new)", batch=b, equal=f"{same}/{b}")


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
    ap.add_argument("--dir", default=None, help="a directory bench_e2e.py saved its pair to: time D/target both ways")
    ap.add_argument("--skip-random", action="store_true", help="skip the 8B shape drawn on the GPU (item 2)")
    ap.add_argument("--forward", default="native", choices=["native", "transformers"], help="the fixture check's decoder")
    args = ap.parse_args()
    say(torch=torch.__version__, gpu=torch.cuda.get_device_name())
    exactness(args.forward)
    if not args.quick and not args.skip_random:
        eight_b(args.new)
    if args.dir:
        saved(Path(args.dir), args.new)


if __name__ == "__main__":
    main()
