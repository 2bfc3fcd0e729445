"""Optional torch.compile of the draft's dense pieces (GPU benchmarking; the doctor runs eager).

Only the per-step pieces that are pure tensor code are compiled: the layer input (embeddings,
norms, concat), q/k/v with RoPE, the layer output (residual, norm, MLP) and the head. The
attention itself stays on the fused kernels of :func:`eagle3_doctor.draft.lse.attention_lse`.
"""

from __future__ import annotations

from typing import Any

import torch

from .model import Eagle3Draft


def compile_draft(draft: Eagle3Draft, **options: Any) -> Eagle3Draft:
    """Replace the draft's step pieces by compiled versions, in place; returns the draft."""
    draft._layer_in = torch.compile(draft._layer_in, **options)  # type: ignore[method-assign]  # compiled in place
    draft._first_out = torch.compile(draft._first_out, **options)  # type: ignore[method-assign]  # compiled in place
    draft._fed_back = torch.compile(draft._fed_back, **options)  # type: ignore[method-assign]  # compiled in place
    draft.logits = torch.compile(draft.logits, **options)  # type: ignore[method-assign]  # compiled in place
    attn = draft.midlayer.self_attn
    attn.qkv = torch.compile(attn.qkv, **options)  # type: ignore[method-assign]  # compiled in place
    return draft
