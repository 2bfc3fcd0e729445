"""Time `eagle3-doctor --help` and `--version` (goal: under 0.5 s; heavy imports happen inside commands).

python bench/bench_cli_startup.py [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    base = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
        base.append(time.perf_counter() - t0)
    for flag in ("--help", "--version"):
        ts = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "eagle3_doctor.cli.app", flag], capture_output=True, check=True, env=env)
            ts.append(time.perf_counter() - t0)
        print(
            f"eagle3-doctor {flag}: median {statistics.median(ts):.3f} s over {args.runs} runs "
            f"(bare interpreter start {statistics.median(base):.3f} s; ratio {statistics.median(ts) / statistics.median(base):.1f}x) "
            f"on {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs"
        )


if __name__ == "__main__":
    main()
