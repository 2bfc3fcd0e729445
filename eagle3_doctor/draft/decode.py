"""The draft as a speculative decode loop runs it: a static KV cache, a catch-up over the verified tokens,
a chain of K proposals on the device; each shape a CUDA graph on a GPU, as engines capture their draft.

The arithmetic is :meth:`Eagle3Draft.through_layers`, the one every draft path runs; only where the keys
live differs from :class:`DraftCache` (fixed buffers written at a slot counter, the unwritten tail masked).
A chain's K proposals run as one call with the feedback (argmax, vocabulary map, next step) on the device,
so the loop reads the host once per pass, not once per token.
"""

from __future__ import annotations

import torch

from ..core.graphs import Graphs, slots
from .model import DraftAttention, Eagle3Draft


class DraftDecoder:
    """B rows over ``max_len`` slots; positions 0..length-1 hold the draft's keys of processed inputs."""

    def __init__(self, draft: Eagle3Draft, batch: int, max_len: int):
        p = next(draft.parameters())
        self.draft, self.batch, self.max_len = draft, batch, slots(max_len)
        self.dev = p.device
        self.slot = torch.zeros((), dtype=torch.long, device=self.dev)
        # on the device once: a graph capture cannot copy from the host, and eager would copy every call
        self.inv_freq = draft.inv_freq.to(self.dev)
        self.d2t = draft.d2t.to(self.dev)
        self.length = 0
        self._kv: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # layer -> [B, nkv, L, d] keys, values
        self._graphs = Graphs(self.dev, lambda: self.length, self._set_slot)

    @property
    def graphed(self) -> bool:
        return self._graphs.on

    def _set_slot(self, n: int) -> None:
        self.slot.fill_(n)

    def crop(self, length: int) -> None:
        """Keep the first ``length`` positions: later writes overwrite the rest, which the mask hides."""
        self._set_slot(length)
        self.length = length

    def _attend(self, i: int, attn: DraftAttention, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        q, k, v = attn.qkv(x, pos, self.inv_freq)
        K, V = self._buffers(i, k)
        n = x.shape[1]
        at = self.slot + torch.arange(n, device=self.dev)
        K.index_copy_(2, at, k)
        V.index_copy_(2, at, v)
        mask = torch.arange(self.max_len, device=self.dev)[None, :] <= at[:, None]  # [n, L]: query i sees <= slot + i
        return attn.attend(q, K, V, mask)

    def _buffers(self, i: int, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer i's key and value buffers [B, kv heads, slots, dim], made at its first write."""
        if i not in self._kv:
            shape = (self.batch, k.shape[1], self.max_len, k.shape[3])
            self._kv[i] = (k.new_zeros(shape), k.new_zeros(shape))
        return self._kv[i]

    def _extend(self, h: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """h [B, n, H] (fed-back states or projected features) with their tokens ids [B, n] at the next n slots."""
        n = ids.shape[1]
        pos = (self.slot + torch.arange(n, device=self.dev)).expand(ids.shape[0], n)
        out = self.draft.through_layers(h, ids, lambda i, attn, x: self._attend(i, attn, x, pos))
        self.slot.add_(n)
        return out

    def _catch_up(self, aux: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return self._extend(self.draft.project_aux(aux), ids)

    def _chain(self, h: torch.Tensor, k: int) -> torch.Tensor:
        """K greedy proposals in target ids [B, K] from the last state h [B, 1, H], K - 1 steps written."""
        d = self.draft
        toks = []
        for j in range(k):
            best = d.logits(h).argmax(-1)  # [B, 1] draft ids
            t = best + self.d2t[best]  # target ids (Eagle3Draft.to_target_ids, with the map on the device)
            toks.append(t)
            if j + 1 < k:
                h = self._extend(h, t)
        return torch.cat(toks, dim=1)

    @torch.inference_mode()
    def catch_up(self, aux: torch.Tensor, ids: torch.Tensor, *, once: bool = False) -> torch.Tensor:
        """The extend over newly verified positions: target features aux [B, n, ...] with the tokens after
        them ids [B, n] -> the states [B, n, H]. ``once``: a shape met once (a prompt) runs eager."""
        n = ids.shape[1]
        self._check(n)
        out = self._catch_up(aux, ids) if once else self._graphs.run(("catch-up", n), self._catch_up, aux, ids)
        self.length += n
        return out

    @torch.inference_mode()
    def propose(self, h: torch.Tensor, k: int) -> torch.Tensor:
        """K chain proposals [B, K] (target ids, on the device) after the last state h [B, 1, H]."""
        self._check(k - 1)
        out = self._graphs.run(("chain", k), lambda x: self._chain(x, k), h)
        self.length += k - 1
        return out

    def _check(self, n: int) -> None:
        if self.length + n > self.max_len:
            raise ValueError(f"the draft's static cache holds {self.max_len} slots; {self.length + n} asked")


class RaggedDraftDecoder(DraftDecoder):
    """The draft beside :class:`model.ragged.RaggedDecoder`: left-padded rows (``pad``), each writing at its own
    slot ``at[b]`` (the target's tensor, shared: the draft's entry for a position sits at the target's slot for
    it) and numbering positions from its first real token. A catch-up writes at ``at`` and a chain's steps
    after it; neither moves ``at`` (the loop advances it by what each row kept), so every graphed call can be
    replayed as it is. A query sees its row's slots from ``pad`` up to its own (and itself, so a pad row's
    query is never left with no key: its output is unused, but a NaN from an empty softmax would reach the
    next layer's keys).
    """

    def __init__(self, draft: Eagle3Draft, at: torch.Tensor, pad: torch.Tensor, max_len: int):
        super().__init__(draft, at.shape[0], max_len)
        self.at, self.pad = at, pad
        self._step = 0  # slots written so far by the call in progress (a host count: a graph bakes it in)

    def _attend(self, i: int, attn: DraftAttention, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        q, k, v = attn.qkv(x, pos, self.inv_freq)
        K, V = self._buffers(i, k)
        n = x.shape[1]
        at = self.at[:, None] + (self._step + torch.arange(n, device=self.dev))[None, :]  # [B, n]
        b = torch.arange(at.shape[0], device=self.dev)[:, None]
        K[b, :, at] = k.transpose(1, 2)
        V[b, :, at] = v.transpose(1, 2)
        j = torch.arange(self.max_len, device=self.dev)[None, None, :]
        q_at = at[:, :, None]
        ok = ((j <= q_at) & (j >= self.pad[:, None, None])) | (j == q_at)
        return attn.attend(q, K, V, ok[:, None])

    def _extend(self, h: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        n = ids.shape[1]
        pos = self.at[:, None] + (self._step + torch.arange(n, device=self.dev))[None, :] - self.pad[:, None]
        out = self.draft.through_layers(h, ids, lambda i, attn, x: self._attend(i, attn, x, pos.clamp(min=0)))
        self._step += n
        return out

    def _catch_up(self, aux: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        self._step = 0
        return super()._catch_up(aux, ids)

    def _chain(self, h: torch.Tensor, k: int) -> torch.Tensor:
        self._step = 0
        return super()._chain(h, k)

    def _check(self, n: int) -> None:
        """The loop bounds ``at`` on the host (the cache is sized for the longest row's end)."""
