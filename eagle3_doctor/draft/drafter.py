"""One interface for every drafter that reads the target's hidden states: what it reads, how it runs a
step, how it is served. Which kind a checkpoint is, is the registry's answer (eagle3_doctor/drafters/registry.py).

A drafter **reads** an ordered list of capture points (in the vocabulary of
:mod:`eagle3_doctor.core.taps`: ``embed``, ``layer_out[i]``, ``final_norm``; the pre-norm last hidden state is
``layer_out[L-1]``), concatenated in that order into its step-1 input. It **runs** as a chain: step 1 over
the target's features at position t with token x_{t+1}, step k > 1 over the state step k-1 handed on with its
own proposal, each step's state -> logits over the draft vocabulary -> target ids. Both implementations
satisfy :class:`Drafter`, which is all the acceptance estimator, the sequential reference loop and the tree
code call: :class:`~eagle3_doctor.draft.model.Eagle3Draft` (three taps through ``fc``) and
:class:`~eagle3_doctor.draft.mtp.model.MTPHead` (one tap through ``hnorm``). Two drafters draft a pass in one
forward instead: :class:`~eagle3_doctor.draft.dflash.model.DFlashDraft` (blocks over its own taps) and
:class:`~eagle3_doctor.draft.peagle.model.PEagleDraft` (an Eagle3Draft with parallel mask slots). How each is
**served** per engine release is data beside it: :mod:`eagle3_doctor.draft.served` for EAGLE-3,
:mod:`.mtp.served`, :mod:`.dflash.taps` and :mod:`.peagle.served` for the others.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol


class Drafter(Protocol):
    """What every measurement asks of a drafter (Eagle3Draft and MTPHead both are one): the estimator and the
    reference loop call unroll, extend, logits and to_target_ids; the tree search also runs one step through
    the layers against its own keys."""

    config: Any  # num_aux_states, vocab_size, draft_vocab_size, hidden_size
    kind: str  # the registry's name for it (eagle3_doctor/drafters/registry.py)
    checkpoint_hint: str  # where a checkpoint of this kind with no skill has been broken before

    def unroll(
        self, aux: Any, ids: Any, num_steps: int, positions: Any = None, key_mask: Any = None, from_base: int = 0
    ) -> Iterator[Any]: ...

    def logits(self, state: Any) -> Any: ...

    def to_target_ids(self, draft_ids: Any) -> Any: ...

    def extend(self, h_or_aux: Any, ids: Any, positions: Any, cache: Any, *, from_aux: bool) -> Any: ...

    # one step through every layer against the caller's keys, as the tree search runs it (analyses/tree.py)
    def project_aux(self, aux: Any) -> Any: ...

    def through_layers(self, h: Any, ids: Any, attend: Any) -> Any: ...

    def later_layers(self) -> list[Any]: ...
