"""The symbolic comparison: the capture points the engine feeds against those the draft was trained on,
named as one CAP finding with its fix, and the engine's notes on its ids (CAP007-CAP011)."""

from __future__ import annotations

from typing import Any

from ...core.findings import Finding
from ...core.taps import FeatureSpec, format_spec
from ...engines.fixes import upgrade_fix
from ...engines.serving import Serving
from .engine_failures import engine_failure_finding, newer_release_findings
from .fixes import fix_for, ids_location


def _slot_lines(train: FeatureSpec, serve: FeatureSpec) -> list[str]:
    n = max(len(train), len(serve))
    out = []
    for i in range(n):
        t = str(train[i]) if i < len(train) else "-"
        s = str(serve[i]) if i < len(serve) else "- (not fed)"
        out.append(f"slot {i}: trained {t:16s} served {s}{'' if t == s else '   <-- differs'}")
    return out


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
    elif all(p.is_layer_out() for p in S + T) and len({s.layer_index() - t.layer_index() for s, t in zip(S, T)}) == 1:
        d = S[0].layer_index() - T[0].layer_index()
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
