"""The decoders' attention kernel on a GPU as commands meet it: the start-up probe per shape (compiled, checked
against SDPA, no warning), and the fixture pair's `acceptance` (plain and speculative continuation, the estimator
held to the reference decode loop) and `diagnose` in bf16, with the kernel and with ``EAGLE3_DOCTOR_ATTENTION=sdpa``.

    PYTHONPATH=. python3 bench/check_spans_gpu.py

Prints one JSON object per check: the probe's seconds and result; each command's exit code, wall seconds and its
lines naming acceptance (the verdict and the per-position rates), the kernel's and the masked route's side by side.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from eagle3_doctor.model.native import spans  # noqa: E402

F = ROOT / "fixtures"
COMMON = ["--target", str(F / "target"), "--draft", str(F / "draft-sglang"), "--engine", "sglang", "--layer-ids=-1,1,3",
          "--prompts", str(F / "prompts.jsonl"), "--limit", "8", "--max-new-tokens", "64", "--device", "cuda",
          "--dtype", "bfloat16"]  # fmt: skip
RUNS = {
    "acceptance": ["acceptance", *COMMON, "--num-steps", "5", "--reference-loop"],
    "acceptance-speculative": ["acceptance", *COMMON, "--num-steps", "3", "--continuation", "speculative"],
    "diagnose": ["diagnose", *COMMON],
}


def say(**kw) -> None:
    print(json.dumps(kw), flush=True)


def main() -> None:
    dev = torch.device("cuda")
    for dtype, head, groups, n in ((torch.bfloat16, 128, 4, 1), (torch.bfloat16, 128, 4, 6), (torch.bfloat16, 32, 2, 1),
                                   (torch.float16, 64, 8, 4)):  # fmt: skip
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t0 = time.perf_counter()
            ok = spans.usable(dev, dtype, head, groups, n)
            say(probe=[str(dtype), head, groups, n], usable=ok, seconds=round(time.perf_counter() - t0, 2),
                warnings=[str(w.message) for w in caught])  # fmt: skip
    for name, args in RUNS.items():
        for route in ("kernel", "sdpa"):
            env = dict(os.environ, EAGLE3_DOCTOR_ATTENTION="sdpa" if route == "sdpa" else "", PYTHONPATH=str(ROOT))
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, "-m", "eagle3_doctor", *args], capture_output=True, text=True, env=env)
            lines = [x for x in (p.stdout + p.stderr).splitlines() if "accept" in x.lower() or "warn" in x.lower()]
            say(run=name, route=route, rc=p.returncode, seconds=round(time.perf_counter() - t0, 1), lines=lines[:14])


if __name__ == "__main__":
    main()
