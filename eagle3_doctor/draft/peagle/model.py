"""The P-EAGLE draft: an EAGLE-3 draft (:class:`~eagle3_doctor.draft.model.Eagle3Draft`) plus ``mask_hidden``, a
learned placeholder for the target features, and a mask token, so that one forward drafts K tokens.

As speculators trains it (``models/peagle/core.py`` ``PEagleDraftModel.forward``) and vLLM serves it
(``v1/spec_decode/llm_base_proposer.py``: the parallel slots' token is the config's mask token and their state
``combine_hidden_states(mask_hidden)``; ``v1/spec_decode/utils.py`` ``copy_and_expand_eagle_inputs_kernel``:
slot j of a request sits at position ``start_pos + j``), a pass whose last verified hidden state is h_a drafts:

- depth 0: the EAGLE-3 step, token x_{a+1} with fc(taps at a), at position a, attending the context slots <= a;
- depth d = 1..K-1: the mask token with fc(mask_hidden) at position a + d ("offset"), attending the context slots
  <= a and the same pass's slots of depth < d (speculators ``models/peagle/attention.py``: depth-0 keys causal in
  the anchor, the same rollout's keys in depth order).

Depth d's output predicts x_{a+d+2}. Positions "anchor" put every slot at a: the layout a trainer whose
``position_ids`` were ignored taught its draft, measured as an alternative by ``diagnose``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from ..model import DraftAttention, Eagle3Draft

POSITIONS = ("offset", "anchor")


@dataclass
class PEagleDraft:
    """``draft`` the EAGLE-3 module (its fc, layers, norm, head and vocabulary map), ``mask_hidden`` [fc_in] in the
    concatenated-taps space, ``mask_token_id`` the parallel slots' token, ``depths`` the K it was trained to draft."""

    kind: ClassVar[str] = "peagle"
    checkpoint_hint: ClassVar[str] = (
        "check mask_hidden and the mask token (inspect, DRF014) and the key map of the EAGLE-3 layers"
    )
    draft: Eagle3Draft
    mask_hidden: torch.Tensor
    mask_token_id: int
    depths: int

    @property
    def config(self):  # the EAGLE-3 config: num_aux_states, draft_vocab_size, hidden_size
        return self.draft.config

    def slot_logits(
        self, aux: torch.Tensor, ids: torch.Tensor, slots: torch.Tensor, k: int, positions: str = "offset"
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(context [T, V_draft], parallel [A, k-1, V_draft]) logits of one sequence: aux [T, F] the taps at each
        position, ids [T] with ids[t] = x_{t+1} (the EAGLE-3 pairing), ``slots`` [A] the context slot each pass
        drafts from. Every pass is drafted in one forward: the T context slots (each one's depth 0), then k - 1
        parallel slots per pass, under one mask."""
        d = self.draft
        T, A, dev = ids.shape[0], slots.shape[0], ids.device
        extra = (k - 1) * A
        mask_h = d.project_aux(self.mask_hidden.to(aux.dtype)[None, None]).expand(1, extra, -1)
        h = torch.cat([d.project_aux(aux[None]), mask_h], 1)
        toks = torch.cat([ids, torch.full((extra,), self.mask_token_id, dtype=ids.dtype, device=dev)])[None]
        depth = torch.arange(1, k, device=dev).repeat(A)  # slot-major: pass p's depths 1..k-1 together
        anchor = slots.repeat_interleave(k - 1)
        pos = torch.cat([torch.arange(T, device=dev), anchor + (depth if positions == "offset" else 0)])[None]
        mask = _mask(T, anchor, depth)

        def attend(i: int, attn: DraftAttention, x: torch.Tensor) -> torch.Tensor:  # every layer: the same keys and mask
            q, kk, v = attn.qkv(x, pos, d.inv_freq)
            return attn.attend(q, kk, v, mask)

        state = d.through_layers(h, toks, attend)
        logits = d.logits(state[0])
        return logits[:T], logits[T:].view(A, k - 1, -1)

    @torch.inference_mode()
    def parallel(
        self, aux: torch.Tensor, ids: torch.Tensor, slots: torch.Tensor, k: int, positions: str = "offset"
    ) -> torch.Tensor:
        """Target-vocabulary proposals [A, k]: depth 0 from each pass's context slot, depths 1..k-1 from its
        parallel slots (see :meth:`slot_logits`)."""
        ctx, rest = self.slot_logits(aux, ids, slots, k, positions)
        return self.draft.to_target_ids(torch.cat([ctx[slots][:, None], rest], 1).argmax(-1))


def _mask(T: int, anchor: torch.Tensor, depth: torch.Tensor) -> torch.Tensor:
    """[N, N] True = attend, N = T + parallel slots: the context causal; a parallel slot attends the context up to
    its anchor and its own pass's parallel slots of lower or equal depth (itself included)."""
    dev = anchor.device
    n = anchor.shape[0]
    ctx = torch.arange(T, device=dev)
    top = torch.cat([ctx[None] <= ctx[:, None], torch.zeros(T, n, dtype=torch.bool, device=dev)], 1)
    to_ctx = ctx[None] <= anchor[:, None]
    same = (anchor[None] == anchor[:, None]) & (depth[None] <= depth[:, None])
    return torch.cat([top, torch.cat([to_ctx, same], 1)], 0)
