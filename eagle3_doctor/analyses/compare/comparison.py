"""compare-hidden's result, and the accumulators of one replay (HiddenComparison) turned into it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ...core.findings import Finding
from ...core.taps import CapturePoint, FeatureSpec, format_spec
from ...engines.serving import Serving
from .dump import identify_dump
from .engine_failures import served_state_findings
from .numeric import Matrix, MatrixAccumulator, SlotAccumulator, SlotStats, numeric_findings
from .symbolic import diagnose_specs

SCHEMA = "eagle3-doctor/compare-hidden/1"


@dataclass
class CompareResult:
    target: str
    num_layers: int
    draft: dict[str, Any] | None
    serving: Serving
    train_spec: FeatureSpec
    train_source: str
    findings: list[Finding]
    slots: list[SlotStats] = field(default_factory=list)
    matrix: Matrix | None = None
    dump: dict[str, Any] | None = None
    n_sequences: int = 0
    n_tokens: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def consistent(self) -> bool:
        return not any(f.severity in ("error", "warning") for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        s = self.serving
        return {
            "schema": SCHEMA,
            "target": self.target,
            "num_layers": self.num_layers,
            "draft": self.draft,
            "serving": {
                "engine": s.engine,
                "version": s.version,
                "family": s.family,
                "ids": s.ids,
                "source": s.source,
                "spec": [str(p) for p in s.spec],
                "ignored": s.ignored,
                "dropped": [list(d) for d in s.dropped],
                "notes": s.notes,
            },
            "training": {"spec": [str(p) for p in self.train_spec], "source": self.train_source},
            "consistent": self.consistent,
            "findings": [f.to_dict() for f in self.findings],
            "slots": [x.to_dict() for x in self.slots],
            "matrix": self.matrix.to_dict() if self.matrix is not None else None,
            "dump": self.dump,
            "n_sequences": self.n_sequences,
            "n_tokens": self.n_tokens,
            "notes": self.notes,
        }


class HiddenComparison:
    """compare-hidden's accumulators over the replay (:func:`replay.iter_captures`).

    Training slots come from ``train_spec`` captured in the same forward, or from a training dump
    (``dump``), whose slots are then identified numerically against every capture point.
    """

    def __init__(
        self,
        serving: Serving,
        train_spec: FeatureSpec | None,
        dump: Sequence[Any] | None,
        num_layers: int,
        hidden: int,
        matrix: bool,
    ):
        from ...core.taps import all_points

        self.serving, self.train_spec, self.dump = serving, train_spec, dump
        self.hidden, self.matrix, self.num_layers = hidden, matrix, num_layers
        self.n_slots = dump[0].aux.shape[1] // hidden if dump is not None else len(train_spec or ())
        cols = all_points(num_layers)
        need_all = matrix or dump is not None
        self.points: set[CapturePoint] = set(serving.spec)
        if need_all:
            self.points |= set(cols)
        elif train_spec is not None:
            self.points |= set(train_spec)
        serve_rows = [f"serve slot {i} ({p})" for i, p in enumerate(serving.spec)]
        train_rows = [f"train slot {j}" for j in range(self.n_slots)] if dump is not None else []
        self.mat = MatrixAccumulator(train_rows + (serve_rows if matrix else []), cols) if need_all else None
        self.hs_mat = MatrixAccumulator(["dump hidden_state"], cols) if dump is not None else None
        self.slot_acc: list[SlotAccumulator] = []

    def _train_slots(self, rb: Any) -> list[torch.Tensor]:
        if self.dump is None:
            assert self.train_spec is not None  # compare_hidden refuses a run with neither
            return [rb.captured[p] for p in self.train_spec]
        from ...model.replay import dump_hidden, dump_slots

        H = self.hidden
        aux = dump_slots(self.dump, rb, self.n_slots * H, torch.float32)
        hs = dump_hidden(self.dump, rb, H, torch.float32)
        if hs is not None and self.hs_mat is not None:  # hs_mat: built whenever there is a dump
            self.hs_mat.add([hs], rb.captured, rb.mask)
        return list(aux.split(H, dim=-1))

    def add(self, rb: Any) -> None:
        """One :class:`replay.ReplayBatch` into every accumulator."""
        spec = self.serving.spec
        train_slots = self._train_slots(rb)
        if self.mat is not None:
            rows = list(train_slots) if self.dump is not None else []
            if self.matrix:
                rows += [rb.captured[p] for p in spec]
            self.mat.add(rows, rb.captured, rb.mask)
        if not self.slot_acc:
            for i in range(min(len(spec), len(train_slots))):
                trained = self.train_spec[i] if self.dump is None and self.train_spec is not None else None
                self.slot_acc.append(SlotAccumulator(i, trained, spec[i]))
        for acc in self.slot_acc:
            acc.add(rb.captured[spec[acc.slot]], train_slots[acc.slot], rb.index, rb.tokens, rb.mask)


def comparison_result(cmp: HiddenComparison, setup: Any, src: Any, train_dump: str | None) -> CompareResult:
    """The accumulators' verdict: symbolic findings, then the dump's, then the numbers'."""
    from ...draft.formats import spec_from_info

    tgt, serving, L = setup.target, setup.serving, cmp.num_layers
    notes = list(setup.notes) + src.notes
    matrix_res = cmp.mat.result() if cmp.mat is not None else None
    dump_info, findings = None, []
    train_spec, train_source = setup.train_spec, setup.train_source
    if cmp.dump is not None:
        assert train_dump is not None and matrix_res is not None  # a dump was read from it; a dump builds the matrix
        ident = identify_dump(train_dump, len(cmp.dump), cmp.n_slots, L, matrix_res, cmp.hs_mat)
        train_spec, train_source, dump_info, findings = ident.spec, ident.source, ident.info, ident.findings
        if setup.info is not None:
            declared, where = spec_from_info(setup.info, L, setup.family)
            if tuple(declared) != train_spec:
                notes.append(
                    f"the draft config declares {format_spec(declared)} ({where}) but the dump holds {format_spec(train_spec)}"
                )
    findings = diagnose_specs(train_spec, train_source, serving) + findings
    if setup.draft is not None:  # the draft's fc against the states the engine really feeds, as inspect checks it
        dc = setup.draft.config
        findings += served_state_findings(serving, dc.fc_in_features, tgt.hidden_size, dc.hidden_size)
    slots = [a.finish(tgt.tokenizer) for a in cmp.slot_acc]
    same = [i < len(train_spec) and i < len(serving.spec) and train_spec[i] == serving.spec[i] for i in range(len(slots))]
    findings += numeric_findings(slots, matrix_res if cmp.dump is not None else None, same)
    seqs = src.sequences
    return CompareResult(
        target=tgt.name,
        num_layers=L,
        draft=setup.draft_summary(),
        serving=serving,
        train_spec=train_spec,
        train_source=train_source,
        findings=findings,
        slots=slots,
        matrix=matrix_res,
        dump=dump_info,
        n_sequences=len(seqs),
        n_tokens=sum(len(s) for s in seqs),
        notes=notes,
    )
