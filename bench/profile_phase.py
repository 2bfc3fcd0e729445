"""Where one phase of a command spends its time on the GPU: the command run in this process, one function of it
(``module:attr``) under ``torch.profiler``; prints the phase's wall, the sum of its kernels' device time (the gap
between them is the host's: launches, synchronisations, Python) and the kernels that took the most of it.

    PYTHONPATH=. python3 bench/profile_phase.py eagle3_doctor.analyses.acceptance.run:measure_acceptance \\
        acceptance --target /tmp/e2e/target --draft /tmp/e2e/draft ... --device cuda

Only the function's first call is profiled; the rest of the command runs as usual.
"""

from __future__ import annotations

import functools
import sys
import time
from typing import Any


def _profiled(name: str, fn: Any) -> Any:
    done = [False]

    @functools.wraps(fn)
    def run(*a: Any, **k: Any) -> Any:
        if done[0]:
            return fn(*a, **k)
        done[0] = True
        import torch
        from torch.profiler import ProfilerActivity, profile

        torch.cuda.synchronize()
        t = time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            out = fn(*a, **k)
            torch.cuda.synchronize()
        wall = time.perf_counter() - t
        events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        busy = sum(e.device_time for e in events) / 1e6  # microseconds
        print(f"profile {name}: wall {wall:.3f} s, kernels {busy:.3f} s ({len(events)} of them)", file=sys.stderr)
        table = prof.key_averages().table(sort_by="device_time_total", row_limit=30, max_name_column_width=70)
        print(table, file=sys.stderr, flush=True)
        return out

    return run


def main() -> None:
    from trace_startup import OnImport  # this script's folder is on the path

    spec, args = sys.argv[1], sys.argv[2:]
    sys.meta_path.insert(0, OnImport([spec], _profiled))
    from eagle3_doctor.cli import run

    sys.argv = ["eagle3-doctor", *args]
    run()


if __name__ == "__main__":
    main()
