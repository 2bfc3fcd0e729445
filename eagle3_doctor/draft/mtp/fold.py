"""A head trained on ``layer_out[L-1]`` made to read ``final_norm`` instead: the target's final norm folded
into ``hnorm``.

The engine hands the head s = g * x / rms(x) (g: the target's final-norm weight) where it was trained on x.
hnorm(s) with weight w / g is w * x / rms(g * x); scaled by rms(g) it is w * x / rms(x) * (rms(g) rms(x) /
rms(g * x)): the trained input up to one scalar per token, exactly 1 when x spreads over the channels as
g does. The scalar touches only the hidden half of ``eh_proj``'s input, so step 1 is close, not exact.

Steps 2..K are another matter: hnorm also reads the state the head recycles, which no final norm scaled,
and the fold rescales that by 1 / g. Where g is nearly uniform this costs nothing; where it spreads, the
fold takes back step 1 and loses the later steps (fixtures/README.md measures both on a synthetic
spread), so ``fix`` measures the copy against the original and says so, exit 1, where it accepts less.
"""

from __future__ import annotations

import copy
from typing import Any

import torch


def fold_weight(hnorm: torch.Tensor, final_norm: torch.Tensor) -> torch.Tensor:
    """hnorm / g * rms(g), in float32 then cast back; channels where g is 0 keep their weight (no information to undo)."""
    g = final_norm.float()
    safe = torch.where(g.abs() < 1e-12, torch.ones_like(g), g)
    return (hnorm.float() / safe * g.pow(2).mean().sqrt()).to(hnorm.dtype)


def folded_copy(head: Any, final_norm: torch.Tensor) -> Any:
    """A copy of the head that reads final_norm (its config says so); the original is untouched."""
    out = copy.deepcopy(head)
    with torch.no_grad():
        out.hnorm.weight.copy_(fold_weight(head.hnorm.weight.detach(), final_norm.to(head.hnorm.weight.device)))
    out.config.hidden = "final_norm"
    out.config.hidden_source = "folded by eagle3-doctor fix (MTP001): hnorm divided by the target's final-norm weight"
    return out
