"""Whole CLI processes as a user runs them, beside a plain transformers script doing the same work.

    PYTHONPATH=. python3 bench/bench_e2e.py --dir /tmp/e2e          # GPU: 8B-shaped pair saved to disk
    PYTHONPATH=. python3 bench/bench_e2e.py --dir /tmp/e2e --quick  # CPU smoke run: the tiny shape

Prompts: `fixtures/prompts.jsonl` repeated `--copies` times (default 4: 64 prompts).

It draws an 8B-shaped Llama target (32 layers, hidden 4096, 32/8 heads, vocabulary 128256) and a matching
EAGLE-3 draft at random on the device, saves both to local disk in their released formats (the target as
`save_pretrained` safetensors with the fixture tokenizer, the draft in the SGLang/SpecForge format), then
times, as separate processes one after another (the page cache warm after the first read):
- `plain_forward`: load with `from_pretrained(device_map=...)` + one forward with `output_hidden_states`;
- `plain_generate`: the same plus greedy `generate` in batches of 8 (the continuation acceptance needs);
- each doctor command on the same prompts and new-token count, as typed (no tuning options), its progress
  lines timestamped as they arrive, which gives its phases (start-up and load until the first phase begins,
  then each phase, then the report); `acceptance` once more on transformers' model
  (`EAGLE3_DOCTOR_FORWARD=transformers`), for what the native decoder saves in the same run; and once with
  `--batch-size 64`, which runs the greedy continuation in forward-sized batches, for what sizing it by its KV
  cache saves in the same run.
Beside each command, its floor (bench/floor.py): a bare process's start, the weights read once to the
device, the prefill, the continuation's decode steps and the draft's K steps, each from rates measured in
this run (the read's bandwidth, the HBM bandwidth, the bf16 matmul rate) and the work counted from the pair
and the prompts.
A change's effect on a whole process is smaller than one host's spread between processes (its bare start varied
3.3-5.5 s in one call, bench/RESULTS.md 2026-12-05): `--repeat N --variant NAME=VALUE` runs each selected doctor
command with and without the variable, in turn, N rounds on the same machine, and prints each one's runs and mean.
Weights are random, so acceptance itself is meaningless here: only the time is measured. Every figure
is a wall-clock time of a whole process measured in this run; the ratios divide two of them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
sys.path.insert(0, str(ROOT / "bench"))
from floor import floors, machine, work  # noqa: E402
from pair import build_pair, fresh_dir  # noqa: E402

PLAIN = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
target, prompts, new, dev = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
per = int(sys.argv[5]) if len(sys.argv) > 5 else 8
t1 = time.perf_counter()
tok = AutoTokenizer.from_pretrained(target)
dtype = torch.bfloat16 if dev != "cpu" else torch.float32
model = AutoModelForCausalLM.from_pretrained(target, dtype=dtype, device_map=dev).eval()
t2 = time.perf_counter()
msgs = [json.loads(l)["messages"] for l in open(prompts)]
texts = [tok.apply_chat_template(m, add_generation_prompt=True, tokenize=False) for m in msgs]
ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
seqs = ids
with torch.inference_mode():
    if new:
        seqs = []
        for i in range(0, len(ids), per):
            chunk = ids[i : i + per]
            L = max(map(len, chunk))
            inp = torch.tensor([[tok.pad_token_id or 0] * (L - len(x)) + x for x in chunk], device=model.device)
            att = (torch.arange(L, device=model.device)[None] >= torch.tensor([L - len(x) for x in chunk], device=model.device)[:, None]).long()
            out = model.generate(input_ids=inp, attention_mask=att, max_new_tokens=new, do_sample=False, min_new_tokens=new)
            seqs += [o[L - len(x):].tolist() for o, x in zip(out, chunk)]
    t3 = time.perf_counter()
    for s in seqs:
        model(input_ids=torch.tensor([s], device=model.device), output_hidden_states=True)
    if dev != "cpu":
        torch.cuda.synchronize()
t4 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "load": t2 - t1, "generate": t3 - t2, "forward": t4 - t3}))
"""


def build(out: Path, quick: bool, dev: str, reuse: bool = False) -> tuple[Path, Path]:
    """The pair (bench/pair.py); ``reuse``: the pair an earlier run saved in ``out``."""
    if reuse and (out / "target").is_dir() and (out / "draft").is_dir():
        return out / "target", out / "draft"
    tdir, ddir, _ = build_pair(fresh_dir(str(out)), quick, dev)
    return tdir, ddir


def prompt_lengths(tdir: Path, prompts: str, cap: int) -> list[int]:
    """Each prompt's tokens as the doctor reads it: the chat template's text, at most ``cap`` tokens."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tdir))
    msgs = [json.loads(line)["messages"] for line in Path(prompts).read_text().splitlines() if line.strip()]
    texts = [tok.apply_chat_template(m, add_generation_prompt=True, tokenize=False) for m in msgs]
    return [min(cap, len(tok(t, add_special_tokens=False)["input_ids"])) for t in texts]


def timed(name: str, cmd: list[str], env: dict[str, str], log: Path) -> dict:
    """One whole process; a doctor's phases from the arrival times of its progress lines on stderr."""
    import threading

    t0 = time.perf_counter()
    # unbuffered, so each line's arrival time is when it was written (the report's last line: where "exit" starts)
    p = subprocess.Popen(cmd, env=dict(env, PYTHONUNBUFFERED="1"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[tuple[float, str]] = []
    out: list[tuple[float, str]] = []
    reader = threading.Thread(target=lambda: lines.extend((time.perf_counter() - t0, x) for x in p.stderr))  # type: ignore[union-attr]
    reader.start()
    mem: list[tuple[float, float]] = []  # (s, GB) the process holds on the GPU, as the driver counts it
    sampler = threading.Thread(target=gpu_memory, args=(p, t0, mem), daemon=True)
    sampler.start()
    out.extend((time.perf_counter() - t0, x) for x in p.stdout)  # type: ignore[union-attr]
    stdout = "".join(x for _, x in out)
    rc = p.wait()
    reader.join()
    sampler.join(timeout=2)
    wall = time.perf_counter() - t0
    # a doctor's report goes to stdout, its warnings to stderr: the last line of either ends the report
    written = max([t for t, _ in out] + [t for t, x in lines if not x.startswith("eagle3-doctor: ")], default=wall)
    log.write_text(stdout + "\n--- stderr ---\n" + "".join(f"{t:8.2f} {x}" for t, x in lines))
    row = {"process": name, "wall_s": round(wall, 2), "rc": rc}
    if mem:
        row["peak_gpu_gb"] = round(max(g for _, g in mem), 1)
    if name.startswith("plain") and rc == 0:
        row["phases"] = json.loads(stdout.strip().splitlines()[-1])
    elif rc in (0, 1):  # 1: findings (random weights make the draft look broken), the run itself complete
        row["phases"] = doctor_phases(lines, wall, written)
        row["phase_peak_gpu_gb"] = phase_peaks(lines, wall, mem, written)
    print(json.dumps(row), flush=True)
    return row


def gpu_memory(p: subprocess.Popen, t0: float, out: list[tuple[float, float]]) -> None:
    """Every 0.25 s until ``p`` ends: the GPU memory the driver counts for its pid (caching allocator included)."""
    while p.poll() is None:
        try:
            q = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                               capture_output=True, text=True, timeout=5).stdout  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            return
        used = sum(float(b) for a, b in (ln.split(",") for ln in q.strip().splitlines() if "," in ln) if int(a) == p.pid)
        out.append((time.perf_counter() - t0, used / 1024))
        time.sleep(0.25)


def phase_peaks(lines: list[tuple[float, str]], wall: float, mem: list[tuple[float, float]], written: float) -> dict[str, float]:
    """The largest GPU memory sampled within each phase of :func:`doctor_phases`."""
    bounds = phase_bounds(lines, wall, written) if mem else {}
    return {k: round(max((g for t, g in mem if a <= t <= b), default=0.0), 1) for k, (a, b) in bounds.items()}


def phase_bounds(lines: list[tuple[float, str]], wall: float, written: float) -> dict[str, tuple[float, float]]:
    """{"start-up and load": (0, s), <phase>: (s, s), ..., "report": (s, written), "exit": (written, wall)} from the
    arrival times of the "eagle3-doctor: LABEL: done/total, ..." lines (a label is its text before the first ": ")
    and of the report's last line (``written``); "exit" is the interpreter's and the driver's teardown."""
    spans: dict[str, list[float]] = {}
    for t, x in lines:
        if x.startswith("eagle3-doctor: ") and ": " in x[15:]:
            label = x[15:].split(": ")[0].split(" (")[0]  # the continuation's plan in parentheses is not its name
            spans.setdefault(label, [t, t])[1] = t
    if not spans:
        return {}
    first = min(a for a, _ in spans.values())
    last = max(b for _, b in spans.values())
    end = min(max(written, last), wall)
    return {
        "start-up and load": (0.0, first),
        **{k: (a, b) for k, (a, b) in spans.items()},
        "report": (last, end),
        "exit": (end, wall),
    }


def doctor_phases(lines: list[tuple[float, str]], wall: float, written: float) -> dict[str, float]:
    """{"start-up and load": s, <phase>: s, ..., "report": s, "exit": s}: each phase's length (:func:`phase_bounds`)."""
    return {k: round(b - a, 2) for k, (a, b) in phase_bounds(lines, wall, written).items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/e2e")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--only", default="", help="comma-separated process names to run (default: all)")
    ap.add_argument("--copies", type=int, default=4, help="fixtures/prompts.jsonl this many times over (4: 64 prompts)")
    ap.add_argument("--reuse", action="store_true", help="the pair an earlier run saved in --dir, not a new one")
    ap.add_argument("--plain-batch", type=int, default=8, help="prompts per generate call of the plain script")
    ap.add_argument("--long", default="", help="NxT: N prompts of about T tokens each instead of the fixture prompts")
    ap.add_argument("--repeat", type=int, default=1, help="each selected process this many times, in turn (A B A B)")
    ap.add_argument(
        "--variant", action="append", default=[], metavar="NAME=VALUE",
        help="each doctor process once more per round with this environment variable set (row 'process NAME=VALUE'): "
        "a change's effect measured in alternating pairs on one machine, whose start-up varies from one process to the next",
    )  # fmt: skip
    args = ap.parse_args()
    dev = "cpu" if args.quick else "cuda"
    out = Path(args.dir)
    t0 = time.perf_counter()
    tdir, ddir = build(out, args.quick, dev, args.reuse)
    print(json.dumps({"built_and_saved_s": round(time.perf_counter() - t0, 1)}), flush=True)
    prompts = str(out / "prompts.jsonl")
    keep: list[str] = []
    if args.long:
        n, t = (int(x) for x in args.long.lower().split("x"))
        Path(prompts).write_text(long_prompts(tdir, n, t))
        keep = ["--max-tokens", str(t + 64)]  # what the truncation note says to pass to keep such a prompt whole
    else:
        Path(prompts).write_text((FIX / "prompts.jsonl").read_text() * args.copies)
    env = dict(os.environ, PYTHONPATH=str(ROOT), TOKENIZERS_PARALLELISM="false")
    # the package byte-compiled, as pip installs it: the device image sets PYTHONDONTWRITEBYTECODE=1, under which a
    # checkout's every process compiled the package's modules from source again (what no installed copy does)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "eagle3_doctor")], check=True, env=env)
    new = str(args.new)
    doc = [sys.executable, "-m", "eagle3_doctor"]
    common = ["--target", str(tdir), "--draft", str(ddir), "--engine", "sglang"]
    gen = ["--prompts", prompts, "--max-new-tokens", new, "--device", dev, *keep]
    runs = {
        "plain_forward": [sys.executable, "-c", PLAIN, str(tdir), prompts, "0", dev],
        "plain_generate": [sys.executable, "-c", PLAIN, str(tdir), prompts, new, dev, str(args.plain_batch)],
        "inspect": [*doc, "inspect", *common],
        "compare-hidden": [*doc, "compare-hidden", *common, "--prompts", prompts, "--device", dev, *keep],
        "acceptance-speculative": [*doc, "acceptance", *common, *gen, "--continuation", "speculative"],
        "acceptance": [*doc, "acceptance", *common, *gen],
        "acceptance-transformers-forward": [*doc, "acceptance", *common, *gen],
        # the continuation in forward-sized batches (at most 64 sequences), as before it was sized by its KV cache
        "acceptance-forward-batches": [*doc, "acceptance", *common, *gen, "--batch-size", "64"],
        "fingerprint": [*doc, "fingerprint", *common, *gen],
        "diagnose": [*doc, "diagnose", *common, *gen],
    }
    only = set(filter(None, args.only.split(",")))
    # the same command on transformers' model (EAGLE3_DOCTOR_FORWARD): what the native decoder saves
    envs = {"acceptance-transformers-forward": dict(env, EAGLE3_DOCTOR_FORWARD="transformers")}
    cap = int(keep[1]) if keep else 512  # the doctor's --max-tokens
    rates = machine(tdir, dev)
    need = work(tdir, ddir, prompt_lengths(tdir, prompts, cap), args.new, steps=7)  # K: the doctor's default
    fl = floors(rates, need)
    print(json.dumps({"machine": {k: round(v, 3) for k, v in rates.items()}, "work": need, "floor_s": fl}), flush=True)
    chosen = [(n, c, envs.get(n, env)) for n, c in runs.items() if not only or n in only]
    for v in args.variant:  # a doctor process again beside itself, with one variable set
        key, _, value = v.partition("=")
        chosen += [(f"{n} {v}", c, dict(e, **{key: value})) for n, c, e in chosen if c[:3] == doc and "=" not in n]
    rows = [timed(n, c, e, out / f"{n.replace(' ', '_')}-{r}.log") for r in range(args.repeat) for n, c, e in chosen]
    table(rows, fl)


def long_prompts(tdir: Path, n: int, tokens: int) -> str:
    """n one-message conversations of about ``tokens`` tokens each: the fixture prompts' texts, each prompt
    starting at another one, joined until the tokenizer counts enough."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tdir))
    texts = [m["content"] for line in (FIX / "prompts.jsonl").read_text().splitlines() for m in json.loads(line)["messages"]]
    per = max(1, sum(len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts) // len(texts))
    out = []
    for i in range(n):
        body = " ".join(texts[(i + j) % len(texts)] for j in range(tokens // per + 1))
        ids = tok(body, add_special_tokens=False)["input_ids"][:tokens]
        out.append(json.dumps({"messages": [{"role": "user", "content": tok.decode(ids)}]}) + "\n")
    return "".join(out)


def table(rows: list[dict], floor: dict[str, dict[str, float]]) -> None:
    print("\n| process | wall (s) | phases (s) | floor (s) | wall / floor | / kernels in sequence |")
    print("|---|---|---|---|---|---|")
    seq = floor.get("acceptance, kernels in sequence", {}).get("total")
    for r in rows:
        ph = ", ".join(f"{k} {v:.1f}" for k, v in (r.get("phases") or {}).items())
        bound = floor.get(r["process"].split(" ")[0], {}).get("total")
        fl = f"{bound:.1f}" if bound else "-"
        ratio = f"{r['wall_s'] / bound:.2f}" if bound else "-"
        in_seq = f"{r['wall_s'] / seq:.2f}" if seq and r["process"].split(" ")[0] in ("acceptance", "diagnose") else "-"
        print(f"| {r['process']} (rc {r['rc']}) | {r['wall_s']:.1f} | {ph} | {fl} | {ratio} | {in_seq} |")
    for k, v in floor.items():
        print(f"floor of {k}: " + ", ".join(f"{p} {s:.2f}" for p, s in v.items()))
    walls: dict[str, list[float]] = {}
    for r in rows:
        walls.setdefault(r["process"], []).append(r["wall_s"])
    for name, ws in walls.items():
        if len(ws) > 1:  # --repeat: each process's runs, in the order they alternated
            print(f"{name}: " + ", ".join(f"{w:.2f}" for w in ws) + f" s (mean {sum(ws) / len(ws):.2f})")
    gen = next((r["wall_s"] for r in rows if r["process"] == "plain_generate"), None)
    acc = next((r["wall_s"] for r in rows if r["process"] == "acceptance"), None)
    if gen and acc:
        print(f"\nacceptance / plain generate script: {acc / gen:.2f}")


if __name__ == "__main__":
    main()
