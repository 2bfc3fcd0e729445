"""On the GPU: the unroll's fused attention (flash + log-sum-exp merge) against the explicit
[T, K*T] mask it replaced, at real head sizes (32 heads of 128, 8 KV heads), bf16 and float32.

    PYTHONPATH=. python bench/check_unroll_gpu.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "draft")]

from test_unroll_attention import masked_unroll  # noqa: E402

from eagle3_doctor.draft.config import DraftConfig  # noqa: E402
from eagle3_doctor.draft.model import Eagle3Draft  # noqa: E402


def main() -> None:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    out = {}
    for dtype in (torch.bfloat16, torch.float32):
        cfg = DraftConfig(
            hidden_size=4096,
            intermediate_size=1024,
            num_attention_heads=32,
            num_key_value_heads=8,
            vocab_size=4000,
            draft_vocab_size=2000,
        )
        torch.manual_seed(0)
        with torch.device(dev):
            d = Eagle3Draft(cfg).to(dtype).eval()
            d.set_embeddings(torch.randn(4000, 4096, dtype=dtype), own=True)
        g = torch.Generator(device=dev).manual_seed(1)
        T = 2048 if dev == "cuda" else 64
        aux = torch.randn(2, T, 3 * 4096, generator=g, device=dev, dtype=dtype)
        ids = torch.randint(0, 4000, (2, T), generator=g, device=dev)
        with torch.inference_mode():
            new = list(d.unroll(aux, ids, 7))
            old = masked_unroll(d, aux, ids, 7) if dev == "cpu" else _masked_on(d, aux, ids, dev)
            rel = [float((a.float() - b.float()).norm() / b.float().norm()) for a, b in zip(new, old)]
            agree = [float((d.logits(a).argmax(-1) == d.logits(b).argmax(-1)).float().mean()) for a, b in zip(new, old)]
        out[str(dtype)] = {"rel_l2_per_step": [f"{r:.2e}" for r in rel], "argmax_agreement_per_step": agree}
    print(json.dumps(out, indent=1))


def _masked_on(d, aux, ids, dev):
    # the test's reference builds its masks on the CPU: run it with tensors on dev by patching the
    # mask helpers' device through a default-device context
    with torch.device(dev):
        return masked_unroll(d, aux, ids, 7)


if __name__ == "__main__":
    main()
