"""A command's floor from the machine's measured rates and the work the command cannot avoid.

The floor is a lower bound on a whole process, each part measured on this machine in the same run
(`machine`) or counted from the pair and the prompts (`work`):
- start: a bare process that imports torch and makes a CUDA context (timed whole, from its launch);
- read: the target's safetensors files to the device once, at the best of 4 and 8 threads reading the
  (warm) page cache into pinned buffers and copying them on (the fastest read this script knows);
- prefill: 2 x the target's per-token parameters x the prompt tokens, plus the output head at each prompt's
  last position, at the bf16 matmul rate;
- decode (the commands that continue the prompts): every prompt in one batch, each of new - 1 steps at
  max(weights + the KV cache written so far, over the HBM bandwidth; 2 x parameters x batch, over the matmul
  rate), no step stopped early;
- draft (acceptance and diagnose): K steps of the draft over every continuation position, one feature path
  (2 x the draft's per-token parameters, its fc at step 1 only), at the matmul rate.
Attention's arithmetic, the norms and every other elementwise kernel are left out: the floor only
undercounts. Beside it, "acceptance, kernels in sequence": the decode with the matmuls and attention's KV reads
each at its own bound, one after the other (the floor lets attention hide under the matmuls entirely). `diagnose` is given acceptance's floor (what it adds is judged against `acceptance` itself).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

MACHINE = r"""
import json, os, sys, threading, time
import torch
dev = sys.argv[1]
torch.zeros(1, device=dev)
if dev != "cpu":
    torch.cuda.synchronize()
print("ready", flush=True)  # the parent's clock stops here: the process start

def read(files, threads, chunk=64 << 20):
    jobs = [(f, o, min(chunk, f.stat().st_size - o)) for f in files for o in range(0, f.stat().st_size, chunk)]
    dst = {f: torch.empty(f.stat().st_size, dtype=torch.uint8, device=dev) for f in files}
    pin = dev != "cpu"
    bufs = [[torch.empty(chunk, dtype=torch.uint8, pin_memory=pin) for _ in range(2)] for _ in range(threads)]
    def copy(i):
        stream = torch.cuda.Stream() if pin else None
        done = [None, None]
        for n, (f, o, size) in enumerate(jobs[i::threads]):
            b = n % 2
            if done[b] is not None:
                done[b].synchronize()  # the copy out of this buffer has finished
            with open(f, "rb", buffering=0) as fh:
                got = os.preadv(fh.fileno(), [memoryview(bufs[i][b].numpy())[:size]], o)
            assert got == size
            if pin:
                with torch.cuda.stream(stream):
                    dst[f][o:o + size].copy_(bufs[i][b][:size], non_blocking=True)
                    done[b] = torch.cuda.Event()
                    done[b].record(stream)
            else:
                dst[f][o:o + size].copy_(bufs[i][b][:size])
        if pin:
            stream.synchronize()
    t0 = time.perf_counter()
    ts = [threading.Thread(target=copy, args=(i,)) for i in range(threads)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    return sum(f.stat().st_size for f in files) / (time.perf_counter() - t0)

from pathlib import Path
files = sorted(Path(sys.argv[2]).glob("*.safetensors"))
read_bw = max(read(files, t) for t in (4, 8))
sys.path.insert(0, sys.argv[3])
from pair import flop_rate, hbm_bandwidth
print(json.dumps({"read_gb_s": read_bw / 1e9, "hbm_tb_s": hbm_bandwidth(dev) / 1e12, "tflop_s": flop_rate(dev) / 1e12}))
"""


def machine(tdir: Path, dev: str) -> dict[str, float]:
    """{"start_s", "read_gb_s", "hbm_tb_s", "tflop_s"}: one process, timed from its launch to its CUDA context."""
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-c", MACHINE, dev, str(tdir), str(Path(__file__).parent)],
                         stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert p.stdout is not None
    first = p.stdout.readline()
    start = time.perf_counter() - t0
    rest = p.stdout.read()
    if p.wait() != 0 or first.strip() != "ready":
        raise RuntimeError(f"the machine's rates were not measured (exit {p.returncode})")
    return {"start_s": start, **json.loads(rest.strip().splitlines()[-1])}


def tensor_shapes(d: Path) -> dict[str, list[int]]:
    """Every tensor's shape in the safetensors files of ``d``, from their headers (the doctor's own reader)."""
    from eagle3_doctor.io.safeio import check_safetensors_header

    out: dict[str, list[int]] = {}
    for f in sorted(d.glob("*.safetensors")):
        out.update({k: v["shape"] for k, v in check_safetensors_header(f).items() if k != "__metadata__"})
    return out


def _count(shapes: dict[str, list[int]], pick: Callable[[str], bool]) -> int:
    """Elements of the tensors whose names ``pick`` takes."""
    return sum(math.prod(s) for k, s in shapes.items() if pick(k))


def work(tdir: Path, ddir: Path, prompt_tokens: list[int], new: int, steps: int) -> dict[str, float]:
    """What the commands must compute, in FLOPs and bytes (2 bytes a weight): see the module's docstring."""
    t = tensor_shapes(tdir)
    cfg = json.loads((tdir / "config.json").read_text())
    embed = _count(t, lambda k: "embed_tokens" in k)
    untied = any(k.startswith("lm_head") for k in t)
    head = _count(t, lambda k: k.startswith("lm_head")) if untied else embed  # a tied head is the embedding
    per_token = _count(t, lambda k: "embed_tokens" not in k and not k.startswith("lm_head"))
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    d = tensor_shapes(ddir)

    def is_fc(k: str) -> bool:
        return "fc" in k.split(".")[:-1]

    fc = _count(d, is_fc)
    dstep = _count(d, lambda k: "embed_tokens" not in k and not is_fc(k) and k not in ("d2t", "t2d"))
    b = len(prompt_tokens)
    return {
        "prefill_flops": 2 * per_token * sum(prompt_tokens),
        "head_flops": 2 * head * b,  # each prompt's first new token
        "prompt_tokens_mean": sum(prompt_tokens) / max(b, 1),
        "batch": b,
        "new": new,
        "weights_bytes": 2 * (per_token + head + (embed if untied else 0)),
        "step_bytes": 2 * (per_token + head),  # a decode step reads every weight but the embedding's other rows
        "step_flops": 2 * (per_token + head) * b,
        "kv_bytes_per_token": 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * hd * 2,
        "draft_flops": 2 * b * new * (steps * dstep + fc),
    }


def floors(m: dict[str, float], w: dict[str, float]) -> dict[str, dict[str, float]]:
    """{command: {part: s, ..., "total": s}} for the commands the floor is defined for."""
    hbm, rate = m["hbm_tb_s"] * 1e12, m["tflop_s"] * 1e12
    base = {"start": m["start_s"], "read": w["weights_bytes"] / (m["read_gb_s"] * 1e9), "prefill": w["prefill_flops"] / rate}
    decode = seq = w["head_flops"] / rate
    for s in range(int(w["new"]) - 1):
        kv = w["batch"] * (w["prompt_tokens_mean"] + s) * w["kv_bytes_per_token"]
        decode += max((w["step_bytes"] + kv) / hbm, w["step_flops"] / rate)
        seq += max(w["step_bytes"] / hbm, w["step_flops"] / rate) + kv / hbm
    cont = {**base, "decode": decode, "draft": w["draft_flops"] / rate}
    out = {"compare-hidden": base, "acceptance": cont, "diagnose": cont}
    # the same work with each kernel at its own bound, one after another: the matmuls at the larger of their weights'
    # bytes and their FLOPs, attention's reads of the KV cache at the bandwidth after them. A second figure, not the
    # floor: a decoder that ran attention beside the matmuls (no engine's does in one step) could go under it.
    out["acceptance, kernels in sequence"] = {**cont, "decode": seq}
    return {k: {**{p: round(s, 3) for p, s in v.items()}, "total": round(sum(v.values()), 2)} for k, v in out.items()}
