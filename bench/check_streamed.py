"""A target larger than the GPU, replayed layer by layer (--stream-layers), against the same run loaded whole.

    PYTHONPATH=. python3 bench/check_streamed.py --dir /tmp/streamed            # GPU (8B shape), < 5 minutes
    PYTHONPATH=. python3 bench/check_streamed.py --dir /tmp/streamed --quick    # CPU smoke run: the tiny shape

Draws an 8B-shaped Llama target (32 layers, hidden 4096, vocabulary 128256) and a matching EAGLE-3 draft
at random on the GPU, saves both to local disk (safetensors, the draft in the SGLang format), then runs
whole processes one after another (the page cache is warm after the save; said in the summary):
- `plain`: `from_pretrained(device_map="cuda")` + one forward of every sequence in one batch (load and forward timed);
- `read`: every stored tensor read with `safe_open` onto the GPU, nothing else (the disk-read floor);
- `compare_whole`: `compare-hidden` with the target loaded whole, uncapped, all sequences in one batch;
- `compare_streamed`: `compare-hidden --stream-layers` with the process's GPU memory capped
  (`torch.cuda.set_per_process_memory_fraction`) below the weights' size;
- `compare_auto`: the same cap, no flag: the doctor must choose streaming itself;
- `compare_whole_capped`: `--no-stream-layers` under the cap: must fail with one line, exit 2;
- `acceptance_whole` / `acceptance_streamed`: acceptance on the given text (`--continuation text`), uncapped / capped.
Checks: findings and slot figures equal between whole and streamed, acceptance's per-prompt accepted
lengths equal, the weights read once (the run's own note), and the streamed wall against the `plain`
process (read + forward). Prints one JSON summary line last. Random weights: the figures mean nothing,
only their equality and the times are measured.
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
from pair import build_pair as build  # noqa: E402  (the benchmarks' 8B-shaped pair)
from pair import fresh_dir  # noqa: E402

# the doctor's own CLI in a process whose GPU memory is capped first; its peak allocation printed at exit
CAPPED = r"""
import atexit, json, sys
frac = float(sys.argv[1])
if frac < 1:
    import torch
    torch.cuda.set_per_process_memory_fraction(frac, 0)
    atexit.register(lambda: print("PEAK " + json.dumps({"max_allocated_gib": torch.cuda.max_memory_allocated(0) / 2**30}), file=sys.stderr))
sys.argv = ["eagle3-doctor", *sys.argv[2:]]
from eagle3_doctor.cli import run
run()
"""

PLAIN = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
target, prompts, dev = sys.argv[1], sys.argv[2], sys.argv[3]
t1 = time.perf_counter()
tok = AutoTokenizer.from_pretrained(target)
dtype = torch.bfloat16 if dev != "cpu" else torch.float32
model = AutoModelForCausalLM.from_pretrained(target, dtype=dtype, device_map=dev).eval()
if dev != "cpu":
    torch.cuda.synchronize()
t2 = time.perf_counter()
msgs = [json.loads(l)["messages"] for l in open(prompts)]
ids = [tok(tok.apply_chat_template(m, add_generation_prompt=True, tokenize=False), add_special_tokens=False)["input_ids"] for m in msgs]
T = max(map(len, ids))
inp = torch.tensor([x + [0] * (T - len(x)) for x in ids], device=model.device)
att = torch.tensor([[1] * len(x) + [0] * (T - len(x)) for x in ids], device=model.device)
with torch.inference_mode():
    model.model(input_ids=inp, attention_mask=att, output_hidden_states=True)
    if dev != "cpu":
        torch.cuda.synchronize()
t3 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "load": t2 - t1, "forward": t3 - t2, "sequences": len(ids), "tokens": sum(map(len, ids))}))
"""

READ = r"""
import json, sys, time
from pathlib import Path
t0 = time.perf_counter()
import torch
from safetensors import safe_open
t1 = time.perf_counter()
n = 0
for f in sorted(Path(sys.argv[1]).glob("*.safetensors")):
    with safe_open(str(f), framework="pt", device="cpu") as g:
        for k in g.keys():
            t = g.get_tensor(k).to(sys.argv[2])
            n += t.numel() * t.element_size()
            del t
if sys.argv[2] != "cpu":
    torch.cuda.synchronize()
t2 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "read": t2 - t1, "gib": n / 2**30}))
"""


def timed(name: str, cmd: list[str], env: dict[str, str], log: Path, limit: int) -> dict:
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=limit)
        out, err, rc = r.stdout, r.stderr, r.returncode
    except subprocess.TimeoutExpired as e:
        out, err, rc = str(e.stdout or ""), str(e.stderr or ""), 124
    wall = time.perf_counter() - t0
    log.write_text(out + "\n--- stderr ---\n" + err)
    row: dict = {"process": name, "wall_s": round(wall, 2), "rc": rc}
    if name in ("plain", "read") and rc == 0:
        row["phases"] = json.loads(out.strip().splitlines()[-1])
    peak = [ln for ln in err.splitlines() if ln.startswith("PEAK ")]
    if peak:
        row["peak_gib"] = round(json.loads(peak[-1][5:])["max_allocated_gib"], 2)
    lines = [ln for ln in err.splitlines() if "error" in ln.lower()]
    if rc not in (0, 1) and lines:
        row["error"] = lines[-1][:300]
    print(json.dumps(row), flush=True)
    return row


def _json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _compare(out: Path, a: str, b: str) -> dict:
    ja, jb = _json(out / f"{a}.json"), _json(out / f"{b}.json")
    if ja is None or jb is None:
        return {"compared": False}
    streamed_notes = [n for n in jb.get("notes", []) if "layer-streamed replay" in n]
    res = {
        "compared": True,
        "findings_equal": ja["findings"] == jb["findings"],
        "finding_codes": [f["code"] for f in ja["findings"]],
        "streamed_note": streamed_notes[-1] if streamed_notes else None,
        "read_once": bool(streamed_notes) and "read from disk 1 time(s)" in streamed_notes[-1],
    }
    if "slots" in ja:
        res["slots_equal"] = ja["slots"] == jb["slots"]
    if "paths" in ja:
        res["accepted_lengths_equal"] = all(
            ja["paths"][p]["accepted_lengths"] == jb["paths"][p]["accepted_lengths"] for p in ja["paths"]
        )
        res["acc_k_equal"] = all(ja["paths"][p]["acc_k"] == jb["paths"][p]["acc_k"] for p in ja["paths"])
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/streamed")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--copies", type=int, default=4, help="the fixture prompts this many times (64 sequences)")
    ap.add_argument("--cap", type=float, default=0.6, help="GPU memory cap as a fraction of the weights' size")
    ap.add_argument("--skip-acceptance", action="store_true")
    args = ap.parse_args()
    dev = "cpu" if args.quick else "cuda"
    out = fresh_dir(args.dir)
    t0 = time.perf_counter()
    tdir, ddir, nbytes = build(out, args.quick, dev)
    built = time.perf_counter() - t0
    print(json.dumps({"built_and_saved_s": round(built, 1), "weights_gib": round(nbytes / 2**30, 2)}), flush=True)
    prompts = out / "prompts.jsonl"
    prompts.write_text((FIX / "prompts.jsonl").read_text() * args.copies)
    n = sum(1 for ln in prompts.read_text().splitlines() if ln.strip())
    frac = 1.0
    if dev == "cuda":
        import torch

        frac = args.cap * nbytes / torch.cuda.get_device_properties(0).total_memory
    env = dict(os.environ, PYTHONPATH=str(ROOT), TOKENIZERS_PARALLELISM="false")
    doc = [sys.executable, "-c", CAPPED]
    common = ["--target", str(tdir), "--draft", str(ddir), "--engine", "sglang", "--quiet", "--device", dev]
    common += ["--prompts", str(prompts), "--dtype", "bfloat16" if dev == "cuda" else "float32"]
    shifted = ["--layer-ids", f"0,{13 if not args.quick else 2},{27 if not args.quick else 3}"]  # off by one: CAP002
    ch = [*common, *shifted]
    acc = [*common, "--continuation", "text", "-k", "4"]
    capped = f"{frac:.4f}"

    def j(name: str) -> list[str]:
        return ["--json", str(out / f"{name}.json")]

    runs: dict[str, tuple[list[str], int]] = {
        "plain": ([sys.executable, "-c", PLAIN, str(tdir), str(prompts), dev], 120),
        "read": ([sys.executable, "-c", READ, str(tdir), dev], 90),
        "compare_whole": ([*doc, "1", "compare-hidden", *ch, "--batch-size", str(n), *j("compare_whole")], 150),
        "compare_streamed": ([*doc, capped, "compare-hidden", *ch, "--stream-layers", *j("compare_streamed")], 150),
    }
    if dev == "cuda":
        runs["compare_auto"] = ([*doc, capped, "compare-hidden", *ch, *j("compare_auto")], 150)
        runs["compare_whole_capped"] = ([*doc, capped, "compare-hidden", *ch, "--no-stream-layers"], 90)
    if not args.skip_acceptance:
        runs["acceptance_whole"] = ([*doc, "1", "acceptance", *acc, "--batch-size", str(n), *j("acceptance_whole")], 150)
        runs["acceptance_streamed"] = ([*doc, capped, "acceptance", *acc, "--stream-layers", *j("acceptance_streamed")], 150)
    rows = {name: timed(name, cmd, env, out / f"{name}.log", lim) for name, (cmd, lim) in runs.items()}
    summary = _summary(rows, out, nbytes, frac, dev, n, built, args.skip_acceptance)
    print(json.dumps(summary))


def _summary(rows: dict, out: Path, nbytes: int, frac: float, dev: str, n: int, built: float, skip_acc: bool) -> dict:
    plain, streamed = rows["plain"], rows["compare_streamed"]
    checks = {"compare": _compare(out, "compare_whole", "compare_streamed")}
    if "compare_auto" in rows:
        checks["compare_auto"] = _compare(out, "compare_whole", "compare_auto")
        capped_whole = rows["compare_whole_capped"]
        checks["whole_load_fails_under_cap"] = capped_whole["rc"] == 2 and "error" in capped_whole
    if not skip_acc:
        checks["acceptance"] = _compare(out, "acceptance_whole", "acceptance_streamed")
    ok = all(
        v if isinstance(v, bool) else all(x for k, x in v.items() if isinstance(x, bool) and k != "compared") and v["compared"]
        for v in checks.values()
    )
    ratio = streamed["wall_s"] / plain["wall_s"] if plain["rc"] == 0 else None
    return {
        "summary": "check_streamed",
        "device": dev,
        "sequences": n,
        "weights_gib": round(nbytes / 2**30, 2),
        "gpu_cap_gib": round(frac * _total(dev) / 2**30, 2) if dev == "cuda" else None,
        "page_cache": "warm (the weights were just written)",
        "built_and_saved_s": round(built, 1),
        "walls_s": {k: r["wall_s"] for k, r in rows.items()},
        "rcs": {k: r["rc"] for k, r in rows.items()},
        "peaks_gib": {k: r["peak_gib"] for k, r in rows.items() if "peak_gib" in r},
        "plain_phases": plain.get("phases"),
        "read_phases": rows["read"].get("phases"),
        "streamed_over_plain_load_plus_forward": round(ratio, 3) if ratio else None,
        "streamed_over_whole_compare": round(streamed["wall_s"] / rows["compare_whole"]["wall_s"], 3),
        "within_1_5x": ratio is not None and ratio <= 1.5,
        "checks": checks,
        "all_checks_pass": ok,
    }


def _total(dev: str) -> int:
    import torch

    return torch.cuda.get_device_properties(0).total_memory


if __name__ == "__main__":
    main()
