"""GPU benchmark at real model size: eagle3-doctor's cost as ratios to a bare target forward.

    PYTHONPATH=. python bench/bench_gpu.py [--seqs 64 --len 1024 --batch 8] [--out bench/RESULTS.md]

Builds a Llama-3.1-8B-shaped target (32 layers, hidden 4096, vocabulary 128256, bf16, random
weights) and a matching EAGLE-3 draft directly on the GPU (no download), replays a fixed
synthetic workload and measures, in one run: the bare target forward, compare-hidden's numeric
step, acceptance with K=7 teacher-forced, the reference sequential loop on a subset, peak GPU
memory of each, model build time and the CLI's start-up. Appends a dated table to --out.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eagle3_doctor.core.taps import layer_out  # noqa: E402
from eagle3_doctor.doctor import Setup, acceptance, compare_hidden  # noqa: E402
from eagle3_doctor.draft.config import DraftConfig  # noqa: E402
from eagle3_doctor.draft.model import Eagle3Draft  # noqa: E402

CUDA = torch.cuda.is_available()


def sync() -> None:
    if CUDA:
        torch.cuda.synchronize()


def timed(fn, reps: int = 3):
    """Median wall time over reps after one warm-up; peak GPU memory of the call, weights included."""
    fn()
    sync()
    times = []
    if CUDA:
        torch.cuda.reset_peak_memory_stats()
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        out = fn()
        sync()
        times.append(time.perf_counter() - t0)
    peak = torch.cuda.max_memory_allocated() if CUDA else 0
    return statistics.median(times), peak, out


def build(args, max_pos: int = 8192):
    from transformers import LlamaConfig, LlamaForCausalLM

    H, FF, NL, V, DV = (4096, 14336, 32, 128256, 32000) if not args.small else (256, 768, 8, 4096, 1024)
    cfg = LlamaConfig(
        vocab_size=V,
        hidden_size=H,
        intermediate_size=FF,
        num_hidden_layers=NL,
        num_attention_heads=32 if not args.small else 4,
        num_key_value_heads=8 if not args.small else 2,
        max_position_embeddings=max_pos,
        rope_theta=500000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    t0 = time.perf_counter()
    dev = "cuda" if CUDA else "cpu"
    torch.set_default_dtype(torch.bfloat16)  # build in bf16: no float32 copy of 8B weights
    with torch.device(dev):
        model = LlamaForCausalLM(cfg).eval()
    sync()
    t_target = time.perf_counter() - t0
    L = cfg.num_hidden_layers
    dcfg = DraftConfig(
        hidden_size=H,
        intermediate_size=FF,
        num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_key_value_heads,
        vocab_size=V,
        draft_vocab_size=DV,
        rope_theta=500000.0,
        max_position_embeddings=max_pos,
    )
    t0 = time.perf_counter()
    with torch.device(dev):
        draft = Eagle3Draft(dcfg).eval()
    torch.set_default_dtype(torch.float32)
    ar = torch.arange(DV, device=dev)
    draft.d2t.copy_(ar * 4 - ar)  # draft id i is target id 4i
    draft.t2d.zero_()
    draft.t2d[ar * 4] = True
    draft.set_embeddings(model.get_input_embeddings().weight, own=False)
    sync()
    t_draft = time.perf_counter() - t0
    name = "synthetic Llama-3.1-8B shape (random bf16)" if not args.small else "small smoke-test shape"
    spec = (layer_out(1), layer_out(L // 2 - 1), layer_out(L - 4))
    setup = Setup.from_model(model, draft, name=name, train_spec=spec, train_source="eagle-default", device=dev)
    return setup, t_target, t_draft


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqs", type=int, default=64)
    ap.add_argument("--len", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--ref-prompts", type=int, default=2)
    ap.add_argument("--ref-new", type=int, default=96)
    ap.add_argument("--out", default=None)
    ap.add_argument("--small", action="store_true", help="tiny shapes: a CPU smoke run of this script")
    ap.add_argument("--profile", default=None, help="write a torch.profiler table of one acceptance batch here")
    ap.add_argument(
        "--contexts", default=None, help="comma-separated context lengths, e.g. 8192,32768,131072: batch-1 long-context rows only"
    )
    ap.add_argument(
        "--floor",
        action="store_true",
        help="acceptance-floor run only: median of --repeats runs, FLOP floor and measured lower bound",
    )
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per row in --floor / --contexts mode")
    ap.add_argument("--compile", action="store_true", help="in --floor mode also time the draft's pieces under torch.compile")
    args = ap.parse_args()
    assert CUDA or args.small, "this benchmark needs a GPU (or --small for a smoke run)"
    if args.contexts:
        return long_contexts(args)
    if args.floor:
        return floor_run(args)
    setup, t_target, t_draft = build(args)
    model = setup.target.model
    g = torch.Generator().manual_seed(1)
    seqs = torch.randint(10, setup.target.vocab_size - 10, (args.seqs, args.len), generator=g).tolist()
    ids = torch.tensor(seqs, device=setup.target.device)
    rows: dict[str, dict] = {}

    @torch.inference_mode()
    def bare():
        for i in range(0, args.seqs, args.batch):
            model(input_ids=ids[i : i + args.batch], attention_mask=torch.ones_like(ids[i : i + args.batch]))

    t, m, _ = timed(bare)
    rows["bare target forward (logits)"] = {"s": t, "peak": m}
    tokens = args.seqs * args.len

    t, m, res = timed(lambda: compare_hidden(setup, prompt_ids=seqs, max_tokens=None, batch_size=args.batch))
    rows["compare-hidden numeric step"] = {"s": t, "peak": m}
    t, m, _ = timed(lambda: compare_hidden(setup, prompt_ids=seqs, max_tokens=None, batch_size=args.batch, matrix=True), reps=1)
    rows["compare-hidden --matrix (all L+2 points)"] = {"s": t, "peak": m}
    t, m, run = timed(
        lambda: acceptance(setup, prompt_ids=seqs, max_tokens=None, batch_size=args.batch, num_steps=7, continuation="text")
    )
    rows["acceptance K=7 teacher-forced"] = {"s": t, "peak": m}

    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if CUDA else [])
        with profile(activities=acts) as prof:
            acceptance(
                setup, prompt_ids=seqs[: args.batch], max_tokens=None, batch_size=args.batch, num_steps=7, continuation="text"
            )
            sync()
        key = "cuda_time_total" if CUDA else "cpu_time_total"
        Path(args.profile).write_text(prof.key_averages().table(sort_by=key, row_limit=25))

    # reference loop vs the estimator on the same prompts and tokens: the continuation is generated
    # once (timed apart); the estimator is timed over exactly those tokens.
    from eagle3_doctor.model.continuation import greedy_continue

    sub = [s[:64] for s in seqs[: args.ref_prompts]]
    t_cont, _, conts = timed(lambda: greedy_continue(setup.target, sub, args.ref_new, args.batch), reps=1)
    t_est, _, _ = timed(
        lambda: acceptance(setup, prompt_ids=conts, max_tokens=None, batch_size=args.batch, num_steps=7, continuation="text")
    )
    kw = dict(
        prompt_ids=sub, max_tokens=None, batch_size=args.batch, num_steps=7, max_new_tokens=args.ref_new, continuation="greedy"
    )
    t_plain, _, _ = timed(lambda: acceptance(setup, **kw), reps=1)
    t_all, _, est_ref = timed(lambda: acceptance(setup, reference=True, **kw), reps=1)
    t_loop = t_all - t_plain
    rows["greedy continuation (generate, KV cache)"] = {"s": t_cont, "peak": None}
    rows["acceptance estimator over the loop's tokens"] = {"s": t_est, "peak": None}
    rows["reference sequential loop, same prompts"] = {"s": t_loop, "peak": None}

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    starts = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "eagle3_doctor.cli.app", "--help"], capture_output=True, env=env, check=True)
        starts.append(time.perf_counter() - t0)
    t_help = statistics.median(starts)

    bare_s = rows["bare target forward (logits)"]["s"]
    bare_peak = rows["bare target forward (logits)"]["peak"]
    draft_bytes = sum(p.numel() * p.element_size() for p in setup.draft.parameters())
    gpu = torch.cuda.get_device_name(0) if CUDA else "CPU (smoke run, not a result)"
    import transformers

    lines = [
        f"## {dt.date.today().isoformat()} — {gpu}, torch {torch.__version__}, transformers {transformers.__version__}",
        "",
        f"Command: `PYTHONPATH=. python bench/bench_gpu.py --seqs {args.seqs} --len {args.len} --batch {args.batch}`. "
        f"Workload: {args.seqs} x {args.len} = {tokens} tokens, batch {args.batch}, bf16, SDPA. Target build {t_target:.1f} s, "
        f"draft build {t_draft:.1f} s (random weights created on the GPU). Draft weights {draft_bytes / 2**30:.2f} GiB.",
        "",
        "| measurement | time (s) | tokens/s | ratio to bare forward | peak GPU memory, weights included (GiB) |",
        "|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        ratio = r["s"] / bare_s
        tps = f"{tokens / r['s']:.0f}" if "reference" not in name and "loop" not in name and "greedy" not in name else "-"
        peak = "-" if r["peak"] is None or not CUDA else f"{r['peak'] / 2**30:.2f}"
        lines.append(f"| {name} | {r['s']:.3f} | {tps} | {ratio:.3f} | {peak} |")
    ok_ref = est_ref.reference.agrees_with_estimator
    goals = [
        ("compare-hidden <= 1.2x bare forward", rows["compare-hidden numeric step"]["s"] / bare_s, 1.2, "<="),
        ("acceptance <= 1.5x bare forward", rows["acceptance K=7 teacher-forced"]["s"] / bare_s, 1.5, "<="),
        ("reference loop >= 20x the estimator", t_loop / t_est, 20, ">="),
        # the draft is resident during the bare forward too, so bare_peak already counts its weights
        (
            "acceptance peak <= 1.1 x (bare peak + draft weights)",
            rows["acceptance K=7 teacher-forced"]["peak"] / max(bare_peak, 1),
            1.1,
            "<=",
        ),
        ("compare-hidden peak <= 1.1 x bare peak", rows["compare-hidden numeric step"]["peak"] / max(bare_peak, 1), 1.1, "<="),
        ("--help start-up < 0.5 s", t_help, 0.5, "<"),
    ]
    lines += ["", "| goal | measured | met |", "|---|---|---|"]
    for name, v, thr, op in goals:
        met = {"<=": v <= thr, ">=": v >= thr, "<": v < thr}[op]
        lines.append(f"| {name} | {v:.3f} | {'yes' if met else 'NO'} |")
    lines.append(
        f"| reference loop and estimator give identical accepted lengths | "
        f"{est_ref.reference.accepted_lengths} | {'yes' if ok_ref else 'NO'} |"
    )
    lines.append("")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")
    print(json.dumps({"help_s": t_help, "rows": {k: v["s"] for k, v in rows.items()}}))


def measure(fn, reps: int):
    """One warm-up, then reps timed runs: (median s, all times, peak GPU bytes over the timed runs)."""
    fn()
    sync()
    if CUDA:
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, (torch.cuda.max_memory_allocated() if CUDA else 0)


def header(kind: str, cmd: str) -> list[str]:
    import transformers

    gpu = torch.cuda.get_device_name(0) if CUDA else "CPU (smoke run, not a result)"
    return [
        f"## {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}: {kind}, {gpu}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}",
        "",
        f"Command: `{cmd}`",
        "",
    ]


def emit(args, lines: list[str]) -> None:
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")


def set_max_positions(setup, n: int) -> None:
    """The target's max_position_embeddings set to the context (the doctor refuses longer sequences)."""
    setup.target.model.config.max_position_embeddings = n
    setup.target.config["max_position_embeddings"] = n
    setup.draft.config.max_position_embeddings = n


def long_contexts(args) -> None:
    """Batch 1 at each context length: bare forward vs acceptance K=7, time and peak memory."""
    ctxs = [int(c) for c in args.contexts.split(",")]
    setup, _, _ = build(args, max(ctxs))
    model = setup.target.model
    dev = setup.target.device
    lines = header(
        "long contexts, batch 1, Llama-3.1-8B shape" if not args.small else "long contexts (smoke)",
        f"PYTHONPATH=. python bench/bench_gpu.py --contexts {args.contexts} --repeats {args.repeats}",
    )
    lines += [
        "| context (tokens) | bare forward (s) | acceptance K=7 (s) | ratio | bare peak (GiB) | acceptance peak (GiB) "
        "| peak ratio | acceptance <= 1.4x | peak <= bare + 10% | runs (acceptance, s) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n in ctxs:
        set_max_positions(setup, n)
        g = torch.Generator(device=dev).manual_seed(n)
        ids = torch.randint(10, setup.target.vocab_size - 10, (1, n), generator=g, device=dev)
        seq = ids[0].tolist()

        @torch.inference_mode()
        def bare(ids=ids):  # bound now: measured in this iteration
            model(input_ids=ids, attention_mask=torch.ones_like(ids))

        tb, _, pb = measure(bare, args.repeats)
        ta, runs, pa = measure(
            lambda seq=seq: acceptance(setup, prompt_ids=[seq], max_tokens=None, batch_size=1, num_steps=7, continuation="text"),
            args.repeats,
        )
        r, pr = ta / tb, pa / max(pb, 1)
        lines.append(
            f"| {n} | {tb:.3f} | {ta:.3f} | {r:.3f} | {pb / 2**30:.2f} | {pa / 2**30:.2f} | {pr:.3f} | "
            f"{'yes' if r <= 1.4 else 'NO'} | {'yes' if pr <= 1.1 else 'NO'} | {', '.join(f'{x:.3f}' for x in runs)} |"
        )
        print(lines[-1], flush=True)
    emit(
        args,
        lines
        + [
            "",
            "Peak memory is torch.cuda.max_memory_allocated() over the timed runs, weights (target and "
            "draft) included; the bare forward returns the full [1, T, V] logits.",
        ],
    )


def linear_params(mod: torch.nn.Module) -> int:
    return sum(m.weight.numel() for m in mod.modules() if isinstance(m, torch.nn.Linear))


def floor_flops(setup, seq_len: int, n_tokens: int, K: int) -> tuple[float, float]:
    """(target forward FLOPs, K draft steps FLOPs) for n_tokens in sequences of seq_len: 2 per
    multiply-add of every linear layer per token, plus causal attention (QK^T and PV)."""
    cfg = setup.target.model.config
    d = cfg.hidden_size // cfg.num_attention_heads
    n_seq = n_tokens / seq_len
    causal_pairs = seq_len * (seq_len + 1) / 2
    attn = lambda heads: 2 * 2 * heads * d * causal_pairs * n_seq  # noqa: E731
    target = 2 * linear_params(setup.target.model) * n_tokens + cfg.num_hidden_layers * attn(cfg.num_attention_heads)
    dr = setup.draft
    step = 2 * (linear_params(dr.midlayer) + dr.lm_head.weight.numel()) * n_tokens + attn(dr.config.num_attention_heads)
    own = sum(2 * 2 * dr.config.num_attention_heads * d * k * n_tokens for k in range(K))  # own-position keys
    return target, K * step + own + 2 * dr.fc.weight.numel() * n_tokens


def floor_run(args) -> None:
    """Acceptance K=7 against a bare forward, median of --repeats runs, with its floor printed."""
    setup, _, _ = build(args)
    model, draft = setup.target.model, setup.draft
    dev = setup.target.device
    g = torch.Generator(device=dev).manual_seed(1)
    ids = torch.randint(10, setup.target.vocab_size - 10, (args.seqs, args.len), generator=g, device=dev)
    seqs = ids.tolist()
    H = model.config.hidden_size
    K = 7
    aux = torch.randn(args.batch, args.len, 3 * H, generator=g, device=dev, dtype=torch.bfloat16)

    @torch.inference_mode()
    def bare():
        for i in range(0, args.seqs, args.batch):
            model(input_ids=ids[i : i + args.batch], attention_mask=torch.ones_like(ids[i : i + args.batch]))

    @torch.inference_mode()
    def draft_only():  # K teacher-forced steps and their greedy proposals, nothing else
        for i in range(0, args.seqs, args.batch):
            for h in draft.unroll(aux, ids[i : i + args.batch], K):
                draft.logits(h).argmax(-1)

    def acc():
        return acceptance(setup, prompt_ids=seqs, max_tokens=None, batch_size=args.batch, num_steps=K, continuation="text")

    # acceptance's own pieces, timed apart: where the time beyond target + draft goes
    from eagle3_doctor.analyses.acceptance.accumulate import PathAccumulator
    from eagle3_doctor.analyses.acceptance.estimator import unroll_outcomes
    from eagle3_doctor.model.target import capture, make_batch, target_argmax

    spec = setup.serving.spec
    saved = []

    @torch.inference_mode()
    def target_part(keep: bool = False):
        for i in range(0, args.seqs, args.batch):
            batch = make_batch(seqs[i : i + args.batch], 0, dev)
            got, last = capture(setup.target, batch, spec, want_logits=True)
            amax = target_argmax(setup.target, last)
            if keep:
                saved.append((torch.cat([got[p] for p in spec], dim=-1), batch, amax))

    target_part(keep=True)

    @torch.inference_mode()
    def draft_part(outs=None):
        for aux_b, batch, amax in saved:
            o = unroll_outcomes(draft, aux_b, batch.input_ids, lambda k, a=amax: torch.roll(a, -k, dims=1), batch.lengths, K)
            if outs is not None:
                outs.append((o, batch))

    outs: list = []
    draft_part(outs)

    def accumulate():
        a = PathAccumulator("serving", K)
        for o, batch in outs:
            a.add(o, [0] * len(batch.lengths), batch.lengths, walk=False)
        return a.result()

    rows = {}
    rows["bare target forward"] = measure(bare, args.repeats)
    rows["K=7 draft steps alone (teacher-forced unroll + argmax)"] = measure(draft_only, args.repeats)
    rows["acceptance K=7 (eager)"] = measure(acc, args.repeats)
    rows["piece: target part (capture + greedy target tokens)"] = measure(target_part, args.repeats)
    rows["piece: draft part (unroll_outcomes on captured features)"] = measure(draft_part, args.repeats)
    rows["piece: accumulate (PathAccumulator.add + result, CPU)"] = measure(accumulate, args.repeats)
    del saved[:], outs[:]
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if CUDA else [])
        with profile(activities=acts) as prof:
            acceptance(
                setup, prompt_ids=seqs[: args.batch], max_tokens=None, batch_size=args.batch, num_steps=K, continuation="text"
            )
            sync()
        key = "cuda_time_total" if CUDA else "cpu_time_total"
        Path(args.profile).write_text(
            prof.key_averages().table(sort_by=key, row_limit=40)
            + "\n\nBy self CPU time:\n"
            + prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25)
        )
    if args.compile:
        try:
            setup.compile_draft()  # what `acceptance --compile` does
            rows["K=7 draft steps alone, torch.compile"] = measure(draft_only, args.repeats)
            rows["acceptance K=7, draft under torch.compile"] = measure(acc, args.repeats)
        except Exception as e:  # noqa: BLE001 - record why, keep the eager rows
            print(f"torch.compile failed: {type(e).__name__}: {e}"[:2000], flush=True)
    tb = rows["bare target forward"][0]
    f_t, f_d = floor_flops(setup, args.len, args.seqs * args.len, K)
    lb = (tb + rows["K=7 draft steps alone (teacher-forced unroll + argmax)"][0]) / tb
    cmd = (
        f"PYTHONPATH=. python bench/bench_gpu.py --floor --seqs {args.seqs} --len {args.len} --batch {args.batch} "
        f"--repeats {args.repeats}" + (" --compile" if args.compile else "")
    )
    lines = header("acceptance floor, Llama-3.1-8B shape", cmd)
    lines += [
        f"Workload {args.seqs} x {args.len} tokens, batch {args.batch}, bf16. Median of {args.repeats} runs after one warm-up.",
        "",
        "| measurement | median (s) | ratio to bare forward | runs (s) | peak GPU memory (GiB) |",
        "|---|---|---|---|---|",
    ]
    for name, (t, runs, peak) in rows.items():
        lines.append(f"| {name} | {t:.3f} | {t / tb:.3f} | {', '.join(f'{x:.3f}' for x in runs)} | {peak / 2**30:.2f} |")
    best = min(v[0] for k, v in rows.items() if k.startswith("acceptance"))
    lines += [
        "",
        f"FLOP floor: target forward {f_t / 1e12:.1f} TFLOP + {K} draft steps {f_d / 1e12:.1f} TFLOP = "
        f"**{(f_t + f_d) / f_t:.3f}x** a bare forward's FLOPs.",
        f"Measured lower bound (bare forward + the {K} draft steps alone, nothing else): **{lb:.3f}x**.",
        f"Best acceptance: **{best / tb:.3f}x** a bare forward; goal <= 1.35x: {'met' if best / tb <= 1.35 else 'NOT met'}; "
        f"{best / tb / ((f_t + f_d) / f_t):.3f}x the FLOP floor, {best / tb / lb:.3f}x the measured lower bound.",
        f"Bare forward at {f_t / tb / 1e12:.0f} TFLOP/s.",
    ]
    emit(args, lines)


if __name__ == "__main__":
    main()
