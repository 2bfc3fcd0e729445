"""Pieces of a GPU process's start, each timed in a process of its own (the page cache warm from a first round):
``import torch``; the CUDA context torch makes at its first tensor; the same context made by the driver from a
thread while torch imports; Triton's import, its key (a hash of its own library), and the native decoder's fused
kernels' compile and check, under cProfile.

    PYTHONPATH=. python3 bench/check_start.py
"""

from __future__ import annotations

import subprocess
import sys

PIECES = {
    "torch": "import time; t=time.perf_counter(); import torch; print(f'import torch {time.perf_counter()-t:.3f}')",
    "context": (
        "import time; import torch; t=time.perf_counter(); torch.zeros(1, device='cuda'); "
        "print(f'context after torch {time.perf_counter()-t:.3f}')"
    ),
    "context beside": (
        "import time, threading, ctypes\n"
        "t0=time.perf_counter(); box={}\n"
        "def ctx():\n"
        "    t=time.perf_counter(); lib=ctypes.CDLL('libcuda.so.1'); lib.cuInit(0); dev=ctypes.c_int(); lib.cuDeviceGet(ctypes.byref(dev), 0)\n"
        "    c=ctypes.c_void_p(); box['rc']=lib.cuDevicePrimaryCtxRetain(ctypes.byref(c), dev); box['t']=time.perf_counter()-t\n"
        "th=threading.Thread(target=ctx); th.start()\n"
        "import torch\n"
        "t1=time.perf_counter(); th.join(); t2=time.perf_counter(); torch.zeros(1, device='cuda'); t3=time.perf_counter()\n"
        'print(f\'import torch {t1-t0:.3f}, context on the thread {box["t"]:.3f} (rc {box["rc"]}), waited {t2-t1:.3f}, '
        "first tensor after {t3-t2:.3f}, total {t3-t0:.3f}')"
    ),
    "triton": (
        "import time; import torch; torch.zeros(1, device='cuda'); t=time.perf_counter(); import triton, triton.language; "
        "t1=time.perf_counter(); from triton.runtime.cache import triton_key; triton_key(); t2=time.perf_counter(); "
        "print(f'import triton {t1-t:.3f}, triton_key {t2-t1:.3f}')"
    ),
    "fused": (
        "import time, cProfile, pstats, io; import torch; torch.zeros(1, device='cuda'); "
        "from eagle3_doctor.draft.gpu import fused; p=cProfile.Profile(); t=time.perf_counter(); p.enable(); "
        "fused.prepare(torch.device('cuda'), torch.bfloat16); p.disable(); print(f'fused.prepare {time.perf_counter()-t:.3f}'); "
        "s=io.StringIO(); pstats.Stats(p, stream=s).sort_stats('cumulative').print_stats(30); print(s.getvalue()[:6000])"
    ),
}


def main() -> None:
    for rnd in range(2):
        for name, code in PIECES.items():
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
            print(f"[{rnd}] {name}: {out.stdout.strip()}{out.stderr.strip()[-400:]}", flush=True)


if __name__ == "__main__":
    main()
