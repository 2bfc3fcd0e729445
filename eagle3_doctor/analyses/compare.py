"""Training features vs serving features: symbolically, then numerically, into findings.

Matching is on relative L2 error (magnitude-aware), with cosine reported beside it: adjacent
layers of a trained model have cosine 0.90-0.98, and final_norm vs layer_out[L-1] can reach
0.999 while still costing the draft several points (fixtures/README.md: final_norm in the last
slot costs 3.6 points of step-1 accuracy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..core.findings import DRAFT_CONFIG, Finding, Fix, Location
from ..core.taps import CapturePoint, FeatureSpec, format_spec
from ..engines.capture import default_spec_llama
from ..engines.fixes import fix_snippet, ids_to_serve, upgrade_fix
from ..engines.serving import Serving
from ..engines.table import engine_row

SCHEMA = "eagle3-doctor/compare-hidden/1"
DRIFT_REL = 1e-3  # relative L2 above which a matching capture point is reported as drifting
WARN_REL = 0.02  # ... and above which the drift is a warning (bf16 rounding alone stays below)
MATCH_REL = 0.5  # relative L2 above which a dump slot matches no capture point at all


# --------------------------------------------------------------------------- symbolic


def _slot_lines(train: FeatureSpec, serve: FeatureSpec) -> list[str]:
    n = max(len(train), len(serve))
    out = []
    for i in range(n):
        t = str(train[i]) if i < len(train) else "-"
        s = str(serve[i]) if i < len(serve) else "- (not fed)"
        out.append(f"slot {i}: trained {t:16s} served {s}{'' if t == s else '   <-- differs'}")
    return out


def fix_for(serving: Serving, train: FeatureSpec) -> tuple[str, list[int] | None]:
    """The config change that makes ``serving`` feed ``train`` (text, ids), or ('', None)."""
    ids = ids_to_serve(serving.engine, serving.version, serving.family, serving.num_layers, train)
    up = upgrade_fix(serving, train)  # the same config on a later release of the user's engine
    if ids is None:
        return up, None
    text = f"set {fix_snippet(serving.engine, serving.version, ids)}"
    if tuple(train) == default_spec_llama(serving.num_layers) and serving.engine in ("sglang", "vllm", "modelopt", "trtllm"):
        text += f"; or remove the ids so {serving.engine} uses its default, which is what was trained"
    if up:
        text += f"; or {up}"
    where = ids_location(serving)
    if where is None:
        return text, ids
    from ..engines.keys import key_rule
    from ..engines.releases import check_engine

    snippet = key_rule(serving.engine, check_engine(serving.engine, serving.version)).snippet(ids)
    return Fix(text, file=where.file, key=where.key, value=ids, snippet=snippet), ids


def ids_location(serving: Serving) -> Location | None:
    """The file and key the engine reads layer ids from (where a fix to them goes), or None: nowhere."""
    from ..engines.keys import key_rule
    from ..engines.releases import check_engine

    kr = key_rule(serving.engine, check_engine(serving.engine, serving.version))
    if not kr.keys:
        return None
    if serving.engine == "trtllm":  # the LLM API options file, not the checkpoint
        return Location("extra_llm_api_options.yaml", f"speculative_config.{kr.keys[0]}")
    return Location(DRAFT_CONFIG, kr.keys[0])


def engine_failure_finding(serving: Serving, train: FeatureSpec) -> Finding:
    """ENG001/ENG002: the engine's own error, where it is raised, and a fix that runs."""
    from ..engines.fixes import first_working_release

    f = serving.failure
    assert f is not None
    if f.when == "undetermined":
        return _unmodelled_finding(serving)
    code = {"start-up": "ENG001", "serving": "ENG003"}.get(f.when, "ENG002")
    evidence = [
        f"engine error: {f.message}",
        f"raised by: {serving.engine} {f.source} (engine table, executed by make conformance)",
        f"ids in effect: {serving.source}",
    ]
    if f.internal is not None:
        evidence.append(f"the engine's own index list after its rule: {f.internal}")
    fix_text, ids = fix_for(serving, tuple(train))
    if not fix_text and code == "ENG003":  # no ids help: the engine release itself captures the wrong tensor
        from ..engines.fixes import earlier_working_rows

        if serving.engine == "trtllm":
            fix_text = (
                f"write ids that each name an existing layer once (0..{serving.num_layers - 1}, or -1 for the "
                "final state) in eagle3_layers_to_capture"
            )
        else:
            old = earlier_working_rows(serving.engine, serving.family, serving.version.split("-")[0])
            fix_text = (
                f"serve with {serving.engine} >= {old[0]} and < {old[1]}, which captures the residual stream "
                f"for this target, or with another engine"
                if old
                else "serve this target with another engine"
            ) + f"; in {serving.engine} itself the fix is to capture `hidden_states + residual` in {f.source}"
    if not fix_text:
        nxt = first_working_release(serving.engine, serving.family, serving.version.split("-")[0])
        fix_text = (
            f"use {serving.engine} {nxt[0]} or newer, whose {nxt[1]} supports EAGLE-3 for this target"
            if nxt
            else f"serve this target with another engine: no {serving.engine} release covered by the engine table runs it"
        )
    what = {
        "ENG001": "refuses to start",
        "ENG002": "crashes on the first forward",
        "ENG003": "feeds the draft a tensor that is not a residual-stream capture point",
    }[code]
    title = f"{serving.label} {what}: {f.message.split(' (')[0]}"
    # trtllm's ENG003 fix is a rewrite of its id list: point at it even where no single list is printed
    where = ids_location(serving) if code == "ENG003" and serving.engine == "trtllm" else None
    return Finding(code, title, evidence, fix_text, data={"when": f.when, "fix_ids": ids, "source": f.source}, location=where)


def served_state_findings(serving: Serving, fc_in: int, target_hidden: int, draft_hidden: int) -> list[Finding]:
    """The draft's fc against the states the engine feeds after its rule, de-duplication and range, not
    against the number of ids written: an id that captures nothing leaves the fc short of a state.

    ENG002 (ENG003 where SGLang skips the fc) when the engine's capture is what falls short; DRF005 when
    the fc itself does not fit the states the engine feeds.
    """
    if not target_hidden or serving.failure is not None or serving.aux_off:
        return []  # no capture to count: the engine's own failure, or capture turned off, is reported already
    fed = len(serving.spec)
    if fed * target_hidden == fc_in:
        return []
    from ..engines.serving import fc_feed_failure, uncaptured_ids

    lost = uncaptured_ids(serving)
    f = fc_feed_failure(serving, fc_in, target_hidden, draft_hidden)
    if f is None or not (lost or serving.ids == []):
        return [
            Finding(
                "DRF005",
                f"fc takes {fc_in} inputs, {serving.label} feeds {fed} aux state(s) x target hidden {target_hidden} = "
                f"{fed * target_hidden}",
                [
                    f"fc.weight [{draft_hidden}, {fc_in}], target hidden_size {target_hidden}",
                    f"{serving.label} feeds {format_spec(serving.spec) or 'nothing'} ({serving.source})",
                ],
                "this draft was trained for another target, or its fc was cut; re-export the trained fc",
            )
        ]
    return [_served_count_finding(serving, f, lost, fc_in, target_hidden)]


def _served_count_finding(serving: Serving, f: Any, lost: list[tuple[int, str]], fc_in: int, th: int) -> Finding:
    """ENG002/ENG003 for an id list the engine captures fewer states from than the fc takes."""
    n_fc, fed = fc_in // th, len(serving.spec)
    code = "ENG003" if f.when == "serving" else "ENG002"
    evidence = [
        f"engine error: {f.message}" if code == "ENG002" else f"engine behaviour: {f.message}",
        f"{'raised' if code == 'ENG002' else 'decided'} by: {serving.engine} {f.source}",
        f"captured by: {serving.engine} {engine_row(serving.engine, serving.version, serving.family).src} (engine table)",
        f"the draft's fc takes {fc_in} inputs = {n_fc} state(s) x target hidden {th}; {serving.label} feeds {fed}: "
        f"{format_spec(serving.spec) or 'nothing'}",
        f"ids in effect: {serving.source}",
    ]
    evidence += [f"id {k}: {why}" for k, why in lost]
    if serving.internal is not None:
        evidence.append(f"the engine's own index list after its rule: {serving.internal}")
    fix, ids = _served_count_fix(serving, n_fc)
    what = "crashes on the first forward" if code == "ENG002" else "runs the draft without its fc"
    title = f"{serving.label} {what}: the draft's fc takes {n_fc} state(s), the engine feeds {fed}"
    repeats = [str(k) for k, why in lost if "repeats" in why]
    if lost:
        gone = [str(k) for k, why in lost if "repeats" not in why]
        title += (
            f" (id {', '.join(gone)} captures nothing)" if gone else f" (id {', '.join(dict.fromkeys(repeats))} repeats a layer)"
        )
    elif serving.ids == []:
        title += " (the id list is empty)"
    data = {"when": f.when, "source": f.source, "fed": fed, "fc_states": n_fc, "uncaptured_ids": [k for k, _ in lost]}
    return Finding(code, title, evidence, fix, data={**data, "fix_ids": ids}, location=ids_location(serving))


def _served_count_fix(serving: Serving, n_fc: int) -> tuple[str, list[int] | None]:
    """The ids that feed the points the written ids name (what a trainer reading them at face value fed),
    else ids that each capture a state, else another engine that captures them."""
    from ..engines.fixes import ids_to_serve
    from ..engines.keys import key_rule
    from ..engines.releases import check_engine
    from ..engines.serving import as_written

    L = serving.num_layers
    written = as_written(serving.engine, serving.ids, L) if serving.ids else None
    if written is not None and len(written) == n_fc:
        text, ids = fix_for(serving, written)
        more = f" (the {n_fc} capture points the written ids name: {format_spec(written)})"
        if isinstance(text, Fix):
            return Fix(text + more, file=text.file, key=text.key, value=text.value, snippet=text.snippet), ids
        if text:
            return text + more, ids
        others = []
        for eng in ("vllm", "trtllm"):
            if eng != serving.engine:
                alt = ids_to_serve(eng, None, serving.family, L, written)
                if alt is not None:
                    others.append(f"{eng} {check_engine(eng, None)} with ids {alt}")
        return (
            f"no {serving.label} id list feeds {format_spec(written)} (what the written ids name): retrain on ids "
            f"{serving.engine} captures ({_span(serving)} here)" + (f", or serve with {' or '.join(others)}" if others else ""),
            None,
        )
    span = _span(serving)
    where = ids_location(serving)
    kr = key_rule(serving.engine, serving.version)
    if serving.ids == [] and where is not None:
        dflt = resolve_default(serving)
        return Fix(
            f"delete the empty {where.key} so {serving.engine} captures its default ({dflt}), if that is what the draft "
            f"was trained on; otherwise write the {n_fc} ids it was trained on ({serving.engine} ids that capture a "
            f"state here: {span})",
            file=where.file,
            key=where.key,
            op="delete",
        ), None
    return f"write {n_fc} distinct ids that each capture a state ({serving.engine} ids {span} here) in {kr.where}", None


def _span(serving: Serving) -> str:
    """The ids that capture a state on this release, as a range when they are one."""
    from ..engines.serving import capturing_ids

    ok = capturing_ids(serving.engine, serving.version, serving.family, serving.num_layers)
    if not ok:
        return "none"
    return f"{ok[0]}..{ok[-1]}" if ok == list(range(ok[0], ok[-1] + 1)) else ", ".join(map(str, ok))


def resolve_default(serving: Serving) -> str:
    """What the engine release captures with no ids configured, as text."""
    from ..engines.capture import RULES

    return format_spec(RULES[serving.engine](serving.version, serving.family, serving.num_layers, None).spec)


def _unmodelled_finding(serving: Serving) -> Finding:
    """ENG004: no rule for this family, so the serving side is not predicted (never another family's rule)."""
    from ..engines.families import MODELLED_FAMILIES

    f = serving.failure
    assert f is not None
    return Finding(
        "ENG004",
        f"undetermined: the {serving.family} family is not modelled for {serving.engine} {serving.version}",
        [
            f.message,
            f"families the engine table models: {', '.join(sorted(MODELLED_FAMILIES))}",
            f"ids in effect: {serving.source}",
        ],
        "measure what the engine feeds instead: dump its aux hidden states and run compare-hidden --engine-dump "
        "(docs/serving-evidence.md), or add the family to conformance/ and run make conformance",
        data={"when": f.when, "family": serving.family, "source": f.source},
    )


def _engine_notes(serving: Serving, fix_text: str | None, harmless: bool) -> list[Finding]:
    """CAP007 (an ids key the engine ignores) and the engine's notes (CAP008/CAP010/CAP011), raised
    whether or not the capture points match: they hold for the next draft too."""
    found: list[Finding] = []
    for key, key_ids in serving.ignored.items():
        found.append(
            Finding(
                "CAP007",
                f"{serving.label} does not read layer ids from {key}"
                + (" (harmless here: its default is what was trained)" if harmless else ""),
                [f"{key} = {key_ids} is ignored; {serving.engine} uses: {serving.source}"],
                fix_text or f"move the ids to the key {serving.engine} reads",
                severity="info" if harmless else None,
                location=ids_location(serving),
            )
        )
    for note in serving.notes:
        code = "CAP008" if "CUDA graph" in note else "CAP010" if "sort" in note else "CAP011"
        fix = {
            "CAP008": "upgrade SGLang past PR #22836, or run with --disable-cuda-graph",
            "CAP010": "write the ids in ascending order so every engine concatenates them the same way",
            "CAP011": "write ids with this rule in mind; the fix lines above already do",
        }[code]
        found.append(
            Finding(
                code,
                note,
                [f"ids in effect: {serving.source}"],
                fix,
                location=ids_location(serving) if code == "CAP010" else None,
            )
        )
    return found


def newer_release_findings(serving: Serving) -> list[Finding]:
    """ENG005: a release newer than the table models is served by the newest modelled release's rules."""
    if serving.rules_of is None:
        return []
    return [
        Finding(
            "ENG005",
            f"{serving.engine} {serving.version} is newer than any release the engine table models: "
            f"the rules of {serving.engine} {serving.rules_of} were applied",
            [
                f"--engine-version {serving.version}; newest modelled {serving.engine} release: {serving.rules_of}",
                f"capture rule, id keys and draft forward of {serving.rules_of} are assumed unchanged in {serving.version}",
            ],
            f"add {serving.version.split('-')[0].split('+')[0]} to conformance/releases.py and run make conformance "
            f"(then commit conformance/table.json), or pin --engine-version {serving.rules_of} if your build runs its code",
            data={"version": serving.version, "rules_of": serving.rules_of},
        )
    ]


def diagnose_specs(train: FeatureSpec, train_source: str, serving: Serving) -> list[Finding]:
    """Name the mismatch between what was trained and what the engine feeds, with the fix."""
    return newer_release_findings(serving) + _diagnose_specs(train, train_source, serving)


def _diagnose_specs(train: FeatureSpec, train_source: str, serving: Serving) -> list[Finding]:
    if serving.failure is not None:
        return [engine_failure_finding(serving, train)]
    S, T = tuple(serving.spec), tuple(train)
    harmless = S == T
    fix_text, ids = fix_for(serving, T)
    found = _engine_notes(serving, fix_text, harmless)
    if harmless:
        return found
    evidence = _slot_lines(T, S) + [f"training side: {train_source}", f"serving side: {serving.source}"]
    evidence += [f"id {i}: {why}" for i, why in serving.dropped]
    data: dict[str, Any] = {"trained": [str(p) for p in T], "served": [str(p) for p in S], "fix_ids": ids}
    code, title = _mismatch(S, T, serving.label, data)
    if ids is None:
        fix_text = (f"{fix_text}; on {serving.label} itself " if fix_text else "") + (
            f"no layer-id list makes {serving.label} feed {format_spec(T)}: retrain the draft on capture "
            "points this engine can serve, or serve it with an engine that captures them"
        )
    found.append(Finding(code, title, evidence, fix_text, data=data))
    if ids is None:
        found.append(
            Finding(
                "CAP009",
                f"{serving.label} cannot feed {format_spec(T)} with any layer-id list",
                [
                    f"trained: {format_spec(T)}",
                    "SGLang's Llama path captures embed..layer_out[L-2]; vLLM, TensorRT-LLM "
                    "and ModelOpt sort ids; only TensorRT-LLM's -1 reaches final_norm",
                ],
                (f"{up}; or " if (up := upgrade_fix(serving, T)) else "")
                + "retrain on capture points the engine can serve (e.g. the engine's default)",
                data={"trained": data["trained"]},
            )
        )
    return found


def _mismatch(S: FeatureSpec, T: FeatureSpec, label: str, data: dict[str, Any]) -> tuple[str, str]:
    """(code, title) of the way ``S`` (served) differs from ``T`` (trained); a CAP001 shift goes into data."""
    if len(S) != len(T):
        code, title = "CAP005", f"{label} feeds {len(S)} slot(s), the draft was trained on {len(T)}"
    elif sorted(S, key=str) == sorted(T, key=str):
        code, title = "CAP004", f"{label} feeds the trained capture points in another order"
    elif all(p.is_layer_out() for p in S + T) and len({s.layer - t.layer for s, t in zip(S, T)}) == 1:  # type: ignore[operator]
        d = S[0].layer - T[0].layer  # type: ignore[operator]
        way = "later" if d > 0 else "earlier"
        code, title = "CAP001", f"every slot is {abs(d)} layer(s) {way} than trained"
        data["shift"] = d
    elif any(s.is_embed() and not t.is_embed() for s, t in zip(S, T)):
        slots = [i for i, (s, t) in enumerate(zip(S, T)) if s.is_embed() and not t.is_embed()]
        shifted = [i for i in range(1, len(S)) if S[i] == T[i - 1]]
        title = f"slot {slots[0]} is fed the embeddings"
        if shifted:
            title += f" and slot(s) {', '.join(map(str, shifted))} get the capture point trained one slot earlier"
        code = "CAP002"
    elif any(s.is_final_norm() != t.is_final_norm() for s, t in zip(S, T)):
        i = next(i for i, (s, t) in enumerate(zip(S, T)) if s.is_final_norm() != t.is_final_norm())
        code = "CAP003"
        title = (
            f"slot {i} is fed final_norm but was trained on the pre-norm {T[i]}"
            if S[i].is_final_norm()
            else f"slot {i} is fed the pre-norm {S[i]} but was trained on final_norm"
        )
    else:
        code, title = "CAP006", f"{sum(s != t for s, t in zip(S, T))} slot(s) are fed other capture points than trained"
    return code, title


# --------------------------------------------------------------------------- numeric


def position_metrics(a: torch.Tensor, b: torch.Tensor) -> dict[str, torch.Tensor]:
    """a (served), b (reference): [..., H] -> per-position cosine, relative L2, max |a-b| (float32)."""
    a32, b32 = a.float(), b.float()
    diff = a32 - b32
    nb = b32.norm(dim=-1).clamp_min(1e-12)
    return {
        "cos": torch.nn.functional.cosine_similarity(a32, b32, dim=-1, eps=1e-12),
        "rel": diff.norm(dim=-1) / nb,
        "maxabs": diff.abs().amax(dim=-1),
    }


@dataclass
class SlotStats:
    slot: int
    trained: CapturePoint | None  # None: a training dump's slot (identified numerically: see the matrix)
    served: CapturePoint | None  # None: a capture point an engine dump does not name
    n: int
    cos_mean: float
    cos_min: float
    cos_p05: float
    rel_mean: float
    rel_p95: float
    maxabs: float
    worst: list[dict[str, Any]] = field(default_factory=list)

    @property
    def trained_label(self) -> str:
        return str(self.trained) if self.trained is not None else f"dump slot {self.slot}"

    @property
    def served_label(self) -> str:
        return str(self.served) if self.served is not None else "?"

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "trained": self.trained_label, "served": self.served_label}


class SlotAccumulator:
    """Per-position metrics of one slot over all batches, kept as small 1-D arrays on the CPU."""

    def __init__(self, slot: int, trained: CapturePoint | None, served: CapturePoint | None):
        self.slot, self.trained, self.served = slot, trained, served
        self.cos: list[torch.Tensor] = []
        self.rel: list[torch.Tensor] = []
        self.maxabs: list[torch.Tensor] = []
        self.where: list[tuple[int, int, int]] = []  # (sequence, position, token)

    def add(
        self, served: torch.Tensor, ref: torch.Tensor, seq_ids: Sequence[int], tokens: torch.Tensor, mask: torch.Tensor
    ) -> None:
        m = position_metrics(served, ref)
        sel = mask.bool()
        for k, store in (("cos", self.cos), ("rel", self.rel), ("maxabs", self.maxabs)):
            store.append(m[k][sel].cpu())
        b_idx, t_idx = sel.nonzero(as_tuple=True)
        toks = tokens[sel].cpu().tolist()
        for b, t, tok in zip(b_idx.tolist(), t_idx.tolist(), toks):
            self.where.append((seq_ids[b], t, tok))

    def finish(self, tokenizer: Any = None, worst: int = 3) -> SlotStats:
        cos, rel, mx = torch.cat(self.cos), torch.cat(self.rel), torch.cat(self.maxabs)
        order = torch.argsort(rel, descending=True)[:worst].tolist()
        w = []
        for i in order:
            s, t, tok = self.where[i]
            text = tokenizer.decode([tok]) if tokenizer is not None else str(tok)
            w.append(
                {"sequence": s, "position": t, "token": text, "cos": round(float(cos[i]), 6), "rel_l2": round(float(rel[i]), 6)}
            )
        return SlotStats(
            self.slot,
            self.trained,
            self.served,
            int(cos.numel()),
            float(cos.mean()),
            float(cos.min()),
            float(torch.quantile(cos, 0.05)),
            float(rel.mean()),
            float(torch.quantile(rel, 0.95)),
            float(mx.max()),
            w,
        )


@dataclass
class MatrixBest:
    """One row's closest column, and its margin over the runner-up (how sure the match is)."""

    row: str
    best: CapturePoint | str  # a capture point; a training slot's label in dump-vs-dump
    rel_l2: float
    cos: float
    runner_up: CapturePoint | str
    runner_up_rel_l2: float

    @property
    def margin(self) -> float:
        return self.runner_up_rel_l2 - self.rel_l2

    def to_dict(self) -> dict[str, Any]:
        return {
            "row": self.row,
            "best": str(self.best),
            "rel_l2": self.rel_l2,
            "cos": self.cos,
            "runner_up": str(self.runner_up),
            "runner_up_rel_l2": self.runner_up_rel_l2,
            "margin": self.margin,
        }


@dataclass
class Matrix:
    """Mean relative L2 and cosine of every row tensor (a slot) against every column (a capture point)."""

    rows: list[str]
    cols: list[CapturePoint] | list[str]  # capture points; training slots' labels in dump-vs-dump
    rel_l2: list[list[float]]
    cos: list[list[float]]
    best: list[MatrixBest]

    @classmethod
    def of(cls, rows: list[str], cols: Sequence[Any], rel: Any, cos: Any, names: Sequence[Any] | None = None) -> Matrix:
        """Each row's best column and runner-up by relative L2; rel and cos are [rows, cols] (nested lists or a
        tensor); ``names``: what the best/runner-up entries call each column (default: the column itself)."""
        rel, cos = [list(map(float, r)) for r in rel], [list(map(float, r)) for r in cos]
        names = cols if names is None else names
        best = []
        for i, name in enumerate(rows):
            order = sorted(range(len(cols)), key=lambda j: rel[i][j])
            b, s = order[0], order[1] if len(order) > 1 else order[0]
            best.append(MatrixBest(name, names[b], rel[i][b], cos[i][b], names[s], rel[i][s]))
        return cls(list(rows), list(cols), rel, cos, best)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "cols": [str(c) for c in self.cols],
            "rel_l2": self.rel_l2,
            "cos": self.cos,
            "best": [b.to_dict() for b in self.best],
        }


class MatrixAccumulator:
    """Mean relative L2 and cosine of each row tensor against every capture point."""

    def __init__(self, rows: list[str], cols: list[CapturePoint]):
        self.rows, self.cols = rows, cols
        self.rel = torch.zeros(len(rows), len(cols), dtype=torch.float64)
        self.cos = torch.zeros(len(rows), len(cols), dtype=torch.float64)
        self.n = 0

    def add(self, row_tensors: list[torch.Tensor], captured: dict[CapturePoint, torch.Tensor], mask: torch.Tensor) -> None:
        sel = mask.bool()
        for i, r in enumerate(row_tensors):
            for j, c in enumerate(self.cols):
                m = position_metrics(r[sel], captured[c][sel])
                self.rel[i, j] += float(m["rel"].double().sum())
                self.cos[i, j] += float(m["cos"].double().sum())
        self.n += int(sel.sum())

    def result(self) -> Matrix:
        rel, cos = self.rel / max(self.n, 1), self.cos / max(self.n, 1)
        return Matrix.of(self.rows, self.cols, rel.tolist(), cos.tolist())


# --------------------------------------------------------------------------- the whole comparison


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


def numeric_findings(slots: list[SlotStats], matrix: Matrix | None, symbolic_equal: list[bool]) -> list[Finding]:
    """Findings the numbers add on top of the symbolic step."""
    out: list[Finding] = []
    best = {b.row: b for b in matrix.best} if matrix is not None else {}
    drifting = []
    for st, same in zip(slots, symbolic_equal):
        if not same or st.rel_mean <= DRIFT_REL:
            continue
        b = best.get(f"train slot {st.slot}")
        if b is not None and b.best != st.served:
            out.append(
                Finding(
                    "NUM002",
                    f"slot {st.slot}: the training features best match {b.best}, not {st.served_label}",
                    [f"rel L2 to {st.served_label}: {st.rel_mean:.4f}; to {b.best}: {b.rel_l2:.4f} (cos {b.cos:.4f})"],
                    "check how the training features were produced (layer ids, norm, model revision)",
                )
            )
        else:
            drifting.append(st)
    if drifting:
        worst = max(s.rel_mean for s in drifting)
        out.append(
            Finding(
                "NUM001",
                "the capture points match but their values drift: "
                + ", ".join(f"slot {s.slot} rel L2 {s.rel_mean:.4f} (cos {s.cos_mean:.5f})" for s in drifting),
                [
                    f"slot {s.slot} ({s.served_label}): mean rel L2 {s.rel_mean:.4f}, p95 {s.rel_p95:.4f}, min cos {s.cos_min:.5f}, "
                    f"max |diff| {s.maxabs:.4g}"
                    for s in drifting
                ]
                + [f"reported above mean relative L2 {DRIFT_REL}; a warning above {WARN_REL} (bf16 rounding alone stays below)"],
                "make the training features and the serving target agree: same checkpoint revision, dtype "
                "(--dtype) and quantisation; a bf16-vs-fp32 gap alone is usually harmless, check acceptance",
                severity="warning" if worst > WARN_REL else "info",
            )
        )
    return out


# --------------------------------------------------------------------------- one replayed comparison


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
        from ..core.taps import all_points

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
            return [rb.captured[p] for p in self.train_spec]  # type: ignore[union-attr]
        from ..model.replay import dump_slots

        H = self.hidden
        aux = dump_slots(self.dump, rb, self.n_slots * H, torch.float32)
        hs = dump_slots(self.dump, rb, H, torch.float32, hidden=True)
        if hs is not None:
            self.hs_mat.add([hs], rb.captured, rb.mask)  # type: ignore[union-attr]
        return list(aux.split(H, dim=-1))  # type: ignore[union-attr]

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
                trained = self.train_spec[i] if self.dump is None else None  # type: ignore[index]
                self.slot_acc.append(SlotAccumulator(i, trained, spec[i]))
        for acc in self.slot_acc:
            acc.add(rb.captured[spec[acc.slot]], train_slots[acc.slot], rb.index, rb.tokens, rb.mask)


@dataclass
class DumpIdentity:
    """What a training dump holds, recovered numerically: each slot's best-matching capture point."""

    spec: FeatureSpec
    source: str
    info: dict[str, Any]
    findings: list[Finding]


def identify_dump(
    path: str, files: int, n_slots: int, num_layers: int, matrix: Matrix, hs_mat: MatrixAccumulator | None
) -> DumpIdentity:
    """NUM004 for slots that match nothing, NUM003 for a hidden_state that is not final_norm."""
    from ..core.taps import final_norm

    best = matrix.best[:n_slots]
    spec: FeatureSpec = tuple(b.best for b in best)  # type: ignore[misc]  (the columns are capture points here)
    unmatched = [j for j in range(n_slots) if best[j].rel_l2 > MATCH_REL]
    info: dict[str, Any] = {
        "path": path,
        "files": files,
        "slots": n_slots,
        "inferred_spec": [str(p) for p in spec],
        "best": [b.to_dict() for b in best],
    }
    findings = []
    if unmatched:
        findings.append(
            Finding(
                "NUM004",
                f"dump slot(s) {unmatched} match no capture point of this target",
                [f"slot {j}: best {best[j].best} at rel L2 {best[j].rel_l2:.3f}" for j in unmatched],
                "the dump was made with another model, revision or tokenizer; pass that target",
            )
        )
    if hs_mat is not None and hs_mat.n:
        hb = hs_mat.result()
        rel = hb.rel_l2[0][hb.cols.index(final_norm())]  # type: ignore[arg-type]
        hbest = hb.best[0]
        info["hidden_state"] = {"rel_l2_to_final_norm": rel, "best": str(hbest.best), "best_rel_l2": hbest.rel_l2}
        if rel > 0.05:
            findings.append(
                Finding(
                    "NUM003",
                    f"the dump's hidden_state is not final_norm (rel L2 {rel:.3f}); it best matches {hbest.best}",
                    [f"rel L2 to final_norm {rel:.4f}; to {hbest.best} {hbest.rel_l2:.4f}"],
                    "SpecForge trains against target logits computed from hidden_state: re-dump it after the final norm",
                )
            )
    source = f"dump {path}: slots identified numerically as {format_spec(spec)}"
    return DumpIdentity(spec, source, info, findings)


def comparison_result(cmp: HiddenComparison, setup: Any, src: Any, train_dump: str | None) -> CompareResult:
    """The accumulators' verdict: symbolic findings, then the dump's, then the numbers'."""
    from ..draft.formats import spec_from_info

    tgt, serving, L = setup.target, setup.serving, cmp.num_layers
    notes = list(setup.notes) + src.notes
    matrix_res = cmp.mat.result() if cmp.mat is not None else None
    dump_info, findings = None, []
    train_spec, train_source = setup.train_spec, setup.train_source
    if cmp.dump is not None:
        ident = identify_dump(train_dump, len(cmp.dump), cmp.n_slots, L, matrix_res, cmp.hs_mat)  # type: ignore[arg-type]
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
