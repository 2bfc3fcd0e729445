"""No command records autograd's graph: every loaded model's parameters are frozen, so a pass keeps none of its
activations. A draft loaded with trainable parameters ran diagnose's unrolls under autograd, which kept every step's
activations: 73 GB above the replay at 512 prompts x 512 tokens on an H200 (bench/RESULTS.md), where acceptance,
run under inference mode, held 10."""

from __future__ import annotations

import pytest
import torch
from conftest import FIX, PROMPTS, TARGET, invoke

KINDS = {"eagle3": ("draft-sglang", "sglang"), "mtp": ("mtp-speculators", "vllm"), "dflash": ("dflash-draft", "vllm"),
         "peagle": ("peagle-draft", "vllm")}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_diagnose_records_no_graph(kind, monkeypatch):
    folder, engine = KINDS[kind]
    recorded: list[str] = []
    linear = torch.nn.Linear.forward

    def forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
        out = linear(self, x)
        if out.requires_grad:
            recorded.append(type(self).__name__)
        return out

    monkeypatch.setattr(torch.nn.Linear, "forward", forward)
    r = invoke("diagnose", "--target", TARGET, "--draft", FIX / folder, "--engine", engine, "--prompts", PROMPTS,
               "--limit", "5", "--max-new-tokens", "8", "--quiet")  # fmt: skip
    assert r.exit_code in (0, 1), r.output
    assert recorded == [], f"{len(recorded)} linear passes recorded a graph ({sorted(set(recorded))})"
