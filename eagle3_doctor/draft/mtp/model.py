"""The MTP head: one DeepSeek-V3 style multi-token-prediction module, run as a chain drafter.

One step (vLLM ``model_executor/models/deepseek_mtp.py`` ``DeepSeekMultiTokenPredictorLayer.forward``,
SGLang ``srt/models/deepseek_nextn.py`` ``DeepseekModelNextN.forward``, speculators
``models/mtp/model_definitions.py`` ``MTPLayerMixin.forward``; the names are DeepSeek's):

    x     = eh_proj(concat(enorm(embed(ids)), hnorm(h)))   # [B, T, 2H] -> [B, T, H], the embedding first
    out   = decoder_layer(x)                               # a plain pre-norm layer (residual from x)
    logit = shared_head.head(shared_head.norm(out))        # the target's vocabulary

Step 1 reads the target's state ``h`` (``config.hidden``: ``layer_out[L-1]`` or ``final_norm``); step k > 1
reads the state step k-1 handed on (``config.recycle``: ``out`` itself, or ``shared_head.norm(out)``).
The token paired with the state at position t is x_{t+1}, as for EAGLE-3, so the teacher-forced unroll and
the KV-cache forward are EAGLE-3's own (:mod:`eagle3_doctor.draft.model`), with this step in place of
the EAGLE-3 layer: the estimator and the sequential loop run it unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
from torch import nn

from ...core.taps import CapturePoint, final_norm, layer_out
from ..model import DecoderLayer, DraftAttention, DraftCache, RMSNorm, extend_cached, unroll_steps
from ..rope import rope_tables
from .config import MTPConfig


class SharedHead(nn.Module):
    def __init__(self, cfg: MTPConfig):
        super().__init__()
        H = cfg.hidden_size
        self.norm = RMSNorm(H, cfg.layer.rms_norm_eps)
        self.head = nn.Linear(H, cfg.vocab_size, bias=False)


class MTPHead(nn.Module):
    """One MTP module; parameter names follow DeepSeek-V3's ``model.layers.{L}.*`` (the decoder layer as ``layer``)."""

    kind = "mtp"
    checkpoint_hint = "check the head's key map (enorm/hnorm/eh_proj, shared_head) and that it belongs to this target"
    d2t: torch.Tensor  # zeros: the head predicts over the target's vocabulary (the estimator reads d2t of any drafter)
    inv_freq: torch.Tensor

    def __init__(self, cfg: MTPConfig):
        super().__init__()
        self.config = cfg
        H, eps = cfg.hidden_size, cfg.layer.rms_norm_eps
        self.enorm = RMSNorm(H, eps)
        self.hnorm = RMSNorm(H, eps)
        self.eh_proj = nn.Linear(2 * H, H, bias=False)
        self.layer = DecoderLayer(cfg.layer)
        self.shared_head = SharedHead(cfg)
        self.embed_tokens: nn.Embedding | None = None
        self.register_buffer("d2t", torch.zeros(cfg.vocab_size, dtype=torch.long), persistent=False)
        inv_freq, self.layer.self_attn.rope_scale = rope_tables(cfg.layer)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def set_embeddings(self, weight: torch.Tensor) -> None:
        """The target's embeddings: every MTP layout shares them (DeepSeek-V3 report; speculators loads the verifier's)."""
        self.embed_tokens = nn.Embedding(weight.shape[0], weight.shape[1], _weight=weight, _freeze=True)

    def hidden_point(self, num_layers: int) -> CapturePoint:
        """The capture point the head was trained on, in the shared vocabulary."""
        return layer_out(num_layers - 1) if self.config.hidden == "layer_out_last" else final_norm()

    # ------------------------------------------------------------------ one step
    def step(self, h: torch.Tensor, ids: torch.Tensor, attend: Callable[[int, DraftAttention, torch.Tensor], torch.Tensor]):
        """State h [B, n, H] and tokens ids [B, n] -> the state handed to the next step (``config.recycle``)."""
        if self.embed_tokens is None:
            raise RuntimeError("the MTP head has no embeddings: call set_embeddings() with the target's embed_tokens")
        e = self.embed_tokens(ids).to(h.dtype)
        x = self.eh_proj(torch.cat([self.enorm(e), self.hnorm(h)], dim=-1))
        out = self.layer.finish(x, attend(0, self.layer.self_attn, self.layer.input_layernorm(x)))
        return self.shared_head.norm(out) if self.config.recycle == "post_norm" else out

    # the step as the tree search calls it on any drafter (analyses/tree.py): one decoder layer, no fc
    def project_aux(self, aux: torch.Tensor) -> torch.Tensor:
        """The target state as step 1 reads it: the state itself (the head has no fc; hnorm is inside the step)."""
        return aux.to(self.eh_proj.weight.dtype)

    def through_layers(
        self, h: torch.Tensor, ids: torch.Tensor, attend: Callable[[int, DraftAttention, torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        return self.step(h, ids, attend)

    def later_layers(self) -> list[DecoderLayer]:
        return []  # the one layer is the step's own

    def logits(self, state: torch.Tensor) -> torch.Tensor:
        """A step's handed-on state -> logits over the target vocabulary (normed once, whichever state is recycled)."""
        if self.config.recycle == "post_norm":
            return self.shared_head.head(state)
        return self.shared_head.head(self.shared_head.norm(state))

    def to_target_ids(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids

    # ------------------------------------------------------------------ the drafter's two ways to run K steps
    def unroll(
        self,
        aux: torch.Tensor,
        ids: torch.Tensor,
        num_steps: int,
        positions: torch.Tensor | None = None,
        key_mask: torch.Tensor | None = None,
        from_base: int = 0,
    ) -> Iterator[torch.Tensor]:
        """Teacher-forced K steps at every position at once; aux [B, T, H] is the target state of x_t,
        ids[:, t] = x_{t+1}. Exactly :meth:`Eagle3Draft.unroll`'s schedule (step k at t reads x_{t+k},
        RoPE position t + k - 1, attends to the step-1 keys of positions <= t and its own steps 2..k at t;
        steps 2..K at the bases from ``from_base`` on)."""
        return unroll_steps(self, aux, ids, num_steps, positions, key_mask, from_base)

    def extend(
        self, h_or_aux: torch.Tensor, ids: torch.Tensor, positions: torch.Tensor, cache: DraftCache, *, from_aux: bool
    ) -> torch.Tensor:
        """New inputs against everything in ``cache`` (appended to it): target states (from_aux) or recycled
        ones, the same tensor either way (the head has no fc); returns the states handed on."""
        return extend_cached(self, h_or_aux, ids, positions, cache, from_aux=from_aux)
