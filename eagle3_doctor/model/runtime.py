"""Sizing work to the machine."""

from __future__ import annotations

from typing import Any


def plan_free_attention(device: Any) -> None:
    """On a CUDA device, keep PyTorch's attention off its cuDNN backend, process-wide (as TF32 is).

    cuDNN's fused attention builds an execution plan for every new shape, and every forward of a
    decode loop or a greedy continuation meets a KV length it has not met before. Measured on an H200
    with the 8B shape (bench/RESULTS.md): a cached verify forward at a new length took 73-117 ms with
    the backend allowed against 22-28 ms without it, and the draft's own attention 69-78 ms against
    3 ms. The flash and memory-efficient kernels plan nothing; engines serve through kernels of that
    kind (with CUDA graphs), so what the doctor times is then what serving pays."""
    import torch

    if getattr(device, "type", None) == "cuda" and hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
        torch.backends.cuda.enable_cudnn_sdp(False)


# tokens per replayed batch under --batch-size auto; see token_capped
REPLAY_TOKENS = 32768


def token_capped(batch: int, longest: int) -> int:
    """An auto-sized replay batch held to :data:`REPLAY_TOKENS` tokens of its longest sequence. Why: the auto size
    is taken from --max-tokens before the greedy continuation adds its tokens, and a diagnose replay keeps every
    path's and lever's work per batch; on an H200 diagnose ran out of memory at 64 sequences of about 1,100 tokens
    (1024 x 1024) where 64 of about 600 (512 x 512) fit (bench/RESULTS.md)."""
    return max(1, min(batch, REPLAY_TOKENS // max(1, longest)))


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
