"""A block-FP8 target (DeepSeek-V3's format) against the bf16 target it was quantized from, through the doctor.

    PYTHONPATH=. python3 bench/check_fp8.py --dir /tmp/fp8            # GPU (8B shape), < 4 minutes
    PYTHONPATH=. python3 bench/check_fp8.py --dir /tmp/fp8 --quick    # CPU smoke run: the tiny shape

Draws an 8B-shaped Llama target and an EAGLE-3 draft at random on the device and saves the target twice:
in bf16 (`save_pretrained`) and quantized on the device to fine-grained block FP8 (every decoder linear as
float8_e4m3fn with a float32 `weight_scale_inv` per 128x128 block, config.json `quantization_config`
{"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}).
Then, as whole processes: `compare-hidden --target FP8 --reference-target BF16` (the drift at every capture
point) and `acceptance --target FP8 --reference-target BF16 --continuation text` (acceptance both ways, QNT006
if the quantization costs acceptance). The notes say whether transformers' own FP8 kernels ran or the
emulation. Random weights: drift and acceptance figures are those of random weights; only that the FP8
target loads, runs and is measured both ways is checked. One JSON summary line last.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from pair import build_pair as build  # noqa: E402  (the benchmarks' 8B-shaped pair)
from pair import fresh_dir  # noqa: E402

B = 128


def quantize(src: Path, dst: Path, dev: str) -> dict:
    """``src`` (a save_pretrained directory) as block FP8 in ``dst``, quantized on ``dev``."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    from eagle3_doctor.model.quantized import block_fp8_config, quantize_block_e4m3

    dst.mkdir(parents=True)
    out: dict = {}
    for f in sorted(src.glob("*.safetensors")):
        with safe_open(str(f), framework="pt", device=dev) as g:
            for k in g.keys():
                w = g.get_tensor(k)
                if ".layers." in k and k.endswith("_proj.weight"):
                    q, scale = quantize_block_e4m3(w, B)
                    out[k], out[k + "_scale_inv"] = q.cpu().contiguous(), scale.cpu()
                else:
                    out[k] = w.cpu()
    save_file(out, str(dst / "model.safetensors"))
    for f in src.iterdir():
        if f.suffix != ".safetensors" and f.name != "model.safetensors.index.json":
            shutil.copy(f, dst / f.name)
    cfg = json.loads((dst / "config.json").read_text())
    cfg["quantization_config"] = block_fp8_config(B)
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    return {"fp8_gib": round(sum(t.numel() * t.element_size() for t in out.values()) / 2**30, 2)}


def timed(name: str, cmd: list[str], env: dict, log: Path, limit: int) -> dict:
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=limit)
        out, err, rc = r.stdout, r.stderr, r.returncode
    except subprocess.TimeoutExpired as e:
        out, err, rc = str(e.stdout or ""), str(e.stderr or ""), 124
    log.write_text(out + "\n--- stderr ---\n" + err)
    row = {"process": name, "wall_s": round(time.perf_counter() - t0, 2), "rc": rc}
    if rc not in (0, 1):
        row["tail"] = (out + err).strip().splitlines()[-3:]
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/fp8")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    dev = "cpu" if args.quick else "cuda"
    out = fresh_dir(args.dir)
    t0 = time.perf_counter()
    bf16, ddir, nbytes = build(out, args.quick, dev)
    fp8 = out / "target-fp8"
    q = quantize(bf16, fp8, dev)
    built = round(time.perf_counter() - t0, 1)
    print(json.dumps({"built_quantized_and_saved_s": built, "bf16_gib": round(nbytes / 2**30, 2), **q}), flush=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT), TOKENIZERS_PARALLELISM="false")
    doc = [sys.executable, "-m", "eagle3_doctor"]
    common = ["--target", str(fp8), "--draft", str(ddir), "--engine", "sglang", "--quiet", "--device", dev]
    common += ["--prompts", str(ROOT / "fixtures" / "prompts.jsonl"), "--reference-target", str(bf16)]
    if dev == "cpu":
        common += ["--dtype", "float32"]
    rows = [
        timed("compare_fp8_vs_bf16", [*doc, "compare-hidden", *common, "--json", str(out / "c.json")], env, out / "c.log", 150),
        timed(
            "acceptance_both_ways",
            [*doc, "acceptance", *common, "--continuation", "text", "-k", "4", "--json", str(out / "a.json")],
            env,
            out / "a.log",
            150,
        ),
    ]
    print(json.dumps(_summary(out, rows, dev, built)))


def _summary(out: Path, rows: list[dict], dev: str, built: float) -> dict:
    c = json.loads((out / "c.json").read_text()) if (out / "c.json").is_file() else None
    a = json.loads((out / "a.json").read_text()) if (out / "a.json").is_file() else None
    drift = c["reference_target"] if c else None
    notes = [n for n in (c or {}).get("notes", []) if "FP8" in n]
    return {
        "summary": "check_fp8",
        "device": dev,
        "built_s": built,
        "walls_s": {r["process"]: r["wall_s"] for r in rows},
        "rcs": {r["process"]: r["rc"] for r in rows},
        "fp8_ran_as": notes[0] if notes else None,
        "drift_per_point": {
            p["point"]: {k: round(p[k], 5) for k in ("cos_mean", "rel_l2_mean", "rel_l2_p95")} for p in drift["points"]
        }
        if drift
        else None,
        "served_points": [p["point"] for p in drift["points"] if p["served"]] if drift else None,
        "acceptance_both_ways": a.get("reference_target") if a else None,
        "findings": [f["code"] for f in a["findings"]] if a else None,
        "checks_pass": bool(c and a and all(r["rc"] in (0, 1) for r in rows) and notes and a.get("reference_target")),
    }


if __name__ == "__main__":
    main()
