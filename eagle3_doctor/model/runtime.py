"""Sizing work to the machine."""

from __future__ import annotations

from typing import Any


def auto_batch_size(target: Any, seq_len: int, *, fraction: float = 0.6, cap: int = 64) -> int:
    """Sequences per forward that fit in ``fraction`` of the free GPU memory (1..cap; 8 on CPU).

    Per sequence and token a forward keeps roughly: the residual stream and attention/MLP
    activations of one layer at a time (~ (4H + 2I) values), the captured states (a few H), the
    last hidden state and a float32 logits chunk (bounded by head_chunks, so not counted here).
    """
    import torch

    if target.device.type != "cuda":
        return 8
    free, _total = torch.cuda.mem_get_info(target.device)
    cfg = target.config
    H = int(cfg.get("hidden_size", 4096))
    inter = int(cfg.get("intermediate_size", 4 * H))
    elt = torch.finfo(target.dtype).bits // 8
    per_token = (4 * H + 2 * inter + 8 * H) * elt
    per_seq = per_token * max(seq_len, 1)
    n = int(free * fraction // per_seq)
    return max(1, min(cap, n))
