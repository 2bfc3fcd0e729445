"""The joined projections (one matmul over q, k, v's rows and one over gate, up's; ``joined`` in
``EAGLE3_DOCTOR_KERNELS``) on a GPU as the greedy continuation meets them: the same tokens with and without them,
and each continuation's time, on a target saved to disk (bench_e2e.py's pair).

    PYTHONPATH=. python3 bench/check_joined_gpu.py --dir /tmp/e2e [--prompts 512] [--new 64]

Prints one JSON object: each route's seconds, whether every row's tokens are equal, and the read's groups found
side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from eagle3_doctor.model.continuation import greedy_continue  # noqa: E402
from eagle3_doctor.model.native.read import joined_rows  # noqa: E402
from eagle3_doctor.model.target import load_target  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/e2e")
    ap.add_argument("--prompts", type=int, default=512)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    tgt = load_target(str(Path(a.dir) / "target"), dtype="bfloat16", device=a.device)
    layer = tgt.model.model.layers[0]
    side = [joined_rows([m.weight for m in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj)])
            is not None, joined_rows([layer.mlp.gate_proj.weight, layer.mlp.up_proj.weight]) is not None]  # fmt: skip
    lines = (ROOT / "fixtures" / "prompts.jsonl").read_text().splitlines()
    prompts = [tgt.tokenizer(json.loads(x)["messages"][0]["content"] if x.startswith("{") else x)["input_ids"]
               for x in (lines * (a.prompts // len(lines) + 1))[: a.prompts]]  # fmt: skip
    out, secs = {}, {}
    for route in ("all", "attention,fused", "all", "attention,fused"):
        os.environ["EAGLE3_DOCTOR_KERNELS"] = route
        if a.device != "cpu":
            torch.cuda.synchronize()
        t = time.perf_counter()
        got = greedy_continue(tgt, prompts, a.new, len(prompts))
        if a.device != "cpu":
            torch.cuda.synchronize()
        secs.setdefault(route, []).append(round(time.perf_counter() - t, 3))
        out.setdefault(route, got)
    same = sum(x == y for x, y in zip(out["all"], out["attention,fused"]))
    print(json.dumps({"groups side by side": side, "seconds": secs, "rows equal": f"{same}/{len(prompts)}"}))


if __name__ == "__main__":
    main()
