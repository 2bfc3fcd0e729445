"""The ranking over live profiles at several batch sizes: each prediction fitted to every profile, the fits summed.

Most fault classes do what they do to each sequence alone: one simulation predicts every profile. A batched class
(``classes.py``: the wrong-sequence gather) reaches only the requests that share their batch with another: a request
alone has no other sequence to read. Its prediction at batch size B is modelled as a gather offset by one request
that runs out at the batch's end: every request of a full batch reads the next one's rows except the batch's last,
which reads its own, so (B - 1) / B of the requests are fed another sequence's rows. Where a request sits in its
batch is the server's scheduling, not the prompt's, so the prediction is the expectation: each prompt's counts
(B - 1) / B of its passes read from another sequence (the class's simulation) and 1 / B of its passes fault-free
(the modelled prediction). At batch 1 that is the modelled prediction itself; it falls toward the class's own
simulation as the batch grows.

The profiles are independent workloads, so each candidate's chi-squares over the profiles add up, and so do
their degrees of freedom (``attribute.py``); the verdict is decided on the sums exactly as for one profile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...core.stats import chi2_sf
from .attribute import Candidate, Fit, Ranking, decide, fit, separating, widest

if TYPE_CHECKING:
    from ..server_metrics.measured import Measured


@dataclass
class BatchProfile:
    """One live profile and the batch size its workload ran at (the sequences decoded side by side)."""

    batch: int
    measured: Measured

    def to_dict(self) -> dict[str, Any]:
        return {"batch_size": self.batch, **self.measured.to_dict()}


def at_batch(c: Candidate, batch: int, modelled: Candidate) -> Candidate:
    """``c``'s prediction at ``batch`` sequences a batch: itself unless its class is batched (the module's model)."""
    if c.fault is None or not c.fault.batched:
        return c
    wrong = (batch - 1) / batch
    return Candidate(c.name, c.label, c.accepted, c.fault, mixture=[(1 - wrong, modelled.accepted), (wrong, c.accepted)])


def joint_fit(c: Candidate, profiles: list[BatchProfile], K: int, modelled: Candidate) -> Fit:
    """``c`` fitted to every profile at its batch size; chi-square and degrees of freedom summed over them."""
    parts = [(p.batch, fit(at_batch(c, p.batch, modelled), p.measured, K)) for p in profiles]
    chi2 = sum(f.chi2 for _, f in parts)
    dof = sum(f.dof for _, f in parts)
    worst = max(parts, key=lambda bf: bf[1].chi2)[1].worst
    first = parts[0][1]
    return Fit(c, first.mean, first.rates, chi2, dof, chi2_sf(chi2, dof), worst, parts=parts)


def rank_batches(cands: list[Candidate], profiles: list[BatchProfile], K: int, modelled: Candidate) -> Ranking:
    """Every candidate's joint fit over the profiles, best first, and the verdict (``attribute.decide``);
    ``modelled``: the fault-free prediction a batched class reduces to at batch 1."""
    joint = []
    for c in cands:
        if c.fault is not None and c.fault.batched:
            if all(p.batch == 1 for p in profiles):  # alone in every batch: the fault-free prediction itself
                c = Candidate(c.name, c.label, modelled.accepted, c.fault, same_as=modelled.name)
            else:  # its own prediction wherever a batch holds two: one of its own, whatever it shares at any size
                c = Candidate(c.name, c.label, list(c.accepted), c.fault)
        joint.append(c)
    fits = [joint_fit(c, profiles, K, modelled) for c in joint]
    r = decide(fits, K, lambda a, b: joint_separating(a, b, profiles))
    r.batches = [p.batch for p in profiles]
    first = 0  # where the notes on the profiles go: before the ranking's own
    if len(profiles) > 1:
        first = 1
        sizes = ", ".join(str(p.batch) for p in profiles)
        r.notes.insert(0, f"live profiles at batch sizes {sizes}: each prediction fitted to every profile, chi-square "
                          "and positions summed")  # fmt: skip
    for c in cands:
        if c.fault is not None and c.fault.batched:
            r.notes.insert(first, f"{c.name} at batch size B: (B - 1) / B of the requests read another sequence's rows "
                              "(the batch's last reads its own); at batch 1 it is the fault-free prediction")  # fmt: skip
    return r


def joint_separating(a: Fit, b: Fit, profiles: list[BatchProfile]) -> dict[str, Any]:
    """Where a and b differ most over every profile's positions: that profile's ``separating``, its batch size named."""
    assert a.parts is not None and b.parts is not None  # joint fits
    i = max(range(len(profiles)), key=lambda j: widest(a.parts[j][1], b.parts[j][1])[1])  # type: ignore[index]
    out = separating(a.parts[i][1], b.parts[i][1], profiles[i].measured)
    out["batch_size"] = profiles[i].batch
    return out
