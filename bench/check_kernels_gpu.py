"""The native decoder's own kernels on a GPU as commands meet them: the start-up probes (compiled, checked against
PyTorch, no warning); the fused kernels' bits against PyTorch's ops at an 8B shape in bf16 (the residual add, RoPE
and SiLU x up compared element by element, the norm within rounding, a row's norm in a pass of 1 and of 6 tokens);
and the fixture pair's `acceptance` (plain and speculative continuation, the estimator held to the reference decode
loop) and `diagnose` in bf16 under ``EAGLE3_DOCTOR_KERNELS=all`` and ``=torch``.

    PYTHONPATH=. python3 bench/check_kernels_gpu.py

Prints one JSON object per check: the probes' seconds and results; each bit check; each command's exit code, wall
seconds and its lines naming acceptance (the verdict and the per-position rates), route beside route.
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

from eagle3_doctor.draft.gpu import fused  # noqa: E402
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
    t0 = time.perf_counter()
    say(probe="fused", usable={k: fused._runs(dev, torch.bfloat16, k) for k in ("norm", "rope", "gated")},
        seconds=round(time.perf_counter() - t0, 2))  # fmt: skip
    bits(dev)
    for name, args in RUNS.items():
        for route in ("all", "torch"):
            env = dict(os.environ, EAGLE3_DOCTOR_KERNELS=route, PYTHONPATH=str(ROOT))
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, "-m", "eagle3_doctor", *args], capture_output=True, text=True, env=env)
            lines = [x for x in (p.stdout + p.stderr).splitlines() if "accept" in x.lower() or "warn" in x.lower()]
            say(run=name, route=route, rc=p.returncode, seconds=round(time.perf_counter() - t0, 1), lines=lines[:14])


def bits(dev: torch.device) -> None:
    """The fused kernels against PyTorch's ops on activations of an 8B shape (4096 wide, 32 + 8 heads of 128)."""
    from eagle3_doctor.draft.rope import rope_cos_sin, rotate

    g = torch.Generator(device=dev).manual_seed(0)
    bf = torch.bfloat16
    x, r = (torch.randn(512, 6, 4096, generator=g, device=dev).to(bf) for _ in range(2))
    w = (1 + torch.randn(4096, generator=g, device=dev) / 4).to(bf)
    total, normed = fused.add_rms_norm(x, r, w, 1e-5)
    h = x + r
    h32 = h.float()
    want = w * (h32 * torch.rsqrt(h32.pow(2).mean(-1, keepdim=True) + 1e-5)).to(bf)

    def diff(a: torch.Tensor, b: torch.Tensor) -> dict:
        return {"equal": bool(torch.equal(a, b)), "elements_differing": float((a != b).float().mean()),
                "max_abs": float((a.float() - b.float()).abs().max())}  # fmt: skip

    say(check="residual add", **diff(total, h))
    say(check="rms norm", **diff(normed, want))
    one = torch.cat([fused.add_rms_norm(x[:, i : i + 1], r[:, i : i + 1], w, 1e-5)[1] for i in range(6)], 1)
    say(check="norm of a row in a pass of 1 and of 6", **diff(one, normed))
    gate, up = (torch.randn(512, 14336, generator=g, device=dev).to(bf) for _ in range(2))
    say(check="silu x up", **diff(fused.silu_mul(gate, up), torch.nn.functional.silu(gate) * up))
    for heads in (32, 8):
        q = torch.randn(512, 6, heads, 128, generator=g, device=dev).to(bf)
        pos = torch.randint(0, 30000, (512, 6), generator=g, device=dev)
        cos, sin = rope_cos_sin(pos, 1.0 / 500000 ** (torch.arange(0, 128, 2, device=dev).float() / 128), 1.0, bf)
        got = fused.rope(q, cos, sin).transpose(1, 2)
        say(check=f"rope, {heads} heads", **diff(got, rotate(q.transpose(1, 2), cos, sin)))


if __name__ == "__main__":
    main()
