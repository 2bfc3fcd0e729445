"""One interface for every drafter that reads the target's hidden states: what it reads, how it runs a
step, how it is served.

A drafter **reads** an ordered list of capture points (:class:`Reads`, in the vocabulary of
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

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..core.taps import FeatureSpec

KINDS = ("eagle3", "mtp", "dflash", "peagle")


class Drafter(Protocol):
    """What every measurement asks of a drafter (Eagle3Draft and MTPHead both are one): the estimator and the
    reference loop call unroll, extend, logits and to_target_ids; the tree search also runs one step through
    the layers against its own keys."""

    config: Any  # num_aux_states, vocab_size, draft_vocab_size, hidden_size

    def unroll(self, aux: Any, ids: Any, num_steps: int, positions: Any = None, key_mask: Any = None) -> Iterator[Any]: ...

    def logits(self, state: Any) -> Any: ...

    def to_target_ids(self, draft_ids: Any) -> Any: ...

    def extend(self, h_or_aux: Any, ids: Any, positions: Any, cache: Any, *, from_aux: bool) -> Any: ...

    # one step through every layer against the caller's keys, as the tree search runs it (analyses/tree.py)
    def project_aux(self, aux: Any) -> Any: ...

    def through_layers(self, h: Any, ids: Any, attend: Any) -> Any: ...

    def later_layers(self) -> list[Any]: ...


@dataclass(frozen=True)
class Reads:
    """What a drafter reads from the target, and where that came from."""

    kind: str
    taps: FeatureSpec  # concatenated in this order into step 1
    source: str


def detect_kind(path: str | os.PathLike) -> tuple[str, str]:
    """('mtp' | 'dflash' | 'peagle' | 'eagle3', why) from a checkpoint directory's config.json and tensor names, without torch or the
    tensors themselves; 'eagle3' is what every directory that holds no MTP head is read as."""
    from ..io.safeio import read_json_object
    from .mtp.formats import detect_mtp

    d = Path(path)
    if not (d / "config.json").is_file():
        return "eagle3", "no config.json (the EAGLE-3 reader says what is missing)"
    cfg = read_json_object(d / "config.json", "restore the checkpoint's config.json")
    from .dflash.taps import is_dflash

    if is_dflash(cfg):
        return "dflash", "a DFlash config (dflash_config, DFlashDraftModel or speculators_model_type dflash)"
    names = tensor_names(d)
    from .peagle.formats import peagle_evidence

    parallel = peagle_evidence(cfg, names)
    if parallel is not None:
        return "peagle", f"a P-EAGLE draft: {parallel}"
    found = detect_mtp(cfg, names)
    if found is None:
        return "eagle3", "no MTP head in the checkpoint"
    return "mtp", f"{found[0]} MTP layout: {found[1]}"


def tensor_names(d: Path) -> list[str]:
    """Every tensor name a safetensors directory holds (headers only: a target's shards are never read)."""
    from ..io.hub import tensor_shapes

    return sorted(tensor_shapes(d))


def mtp_reads(head: Any, num_layers: int) -> Reads:
    return Reads("mtp", (head.hidden_point(num_layers),), head.config.hidden_source)


def refuse_other_drafters(draft: str | None, allowed: tuple[str, ...] = ()) -> None:
    """The EAGLE-3 commands on an MTP head or a DFlash draft: one line naming the commands that run it (the
    EAGLE-3 reader would otherwise report keys the other layout does not have)."""
    if draft is None:
        return
    from ..core.errors import BadInput

    kind, why = detect_kind(draft)
    if kind != "eagle3" and kind not in allowed:
        what = {"mtp": "an MTP head", "dflash": "a DFlash draft", "peagle": "a P-EAGLE draft"}[kind]
        raise BadInput(
            f"{draft} is {what} ({why}); this command runs EAGLE-3 drafts",
            "run inspect, compare-hidden, acceptance, diagnose or fix on it",
        )
