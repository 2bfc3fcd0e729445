"""ENG001-ENG005: the engine refuses, crashes, feeds a tensor that is no capture point, is not modelled
or is newer than the table; and the draft's fc against the states the engine really feeds (DRF005)."""

from __future__ import annotations

from typing import Any

from ...core.findings import Finding
from ...core.taps import FeatureSpec, format_spec
from ...engines.serving import Serving
from ...engines.table import engine_row
from .fixes import _served_count_fix, fix_for, ids_location


def engine_failure_finding(serving: Serving, train: FeatureSpec) -> Finding:
    """ENG001/ENG002: the engine's own error, where it is raised, and a fix that runs."""
    from ...engines.fixes import first_working_release

    f = serving.failure
    assert f is not None
    if f.when == "undetermined":
        return _unmodelled_finding(serving)
    code = {"start-up": "ENG001", "serving": "ENG003"}.get(f.when, "ENG002")
    evidence = [
        f"engine error: {f.message}",
        f"raised by: {serving.engine} {f.source}"
        + ("" if "not executed" in f.source else " (engine table, executed by make conformance)"),
        f"ids in effect: {serving.source}",
    ]
    if f.internal is not None:
        evidence.append(f"the engine's own index list after its rule: {f.internal}")
    fix_text, ids = fix_for(serving, tuple(train))
    if not fix_text and code == "ENG003":  # no ids help: the engine release itself captures the wrong tensor
        from ...engines.fixes import earlier_working_rows, first_working_release

        adds = first_working_release("trtllm", serving.family, serving.version.split("-")[0])
        if serving.engine == "trtllm" and adds:  # the release's decoder layer captures nothing: no ids help
            fix_text = (
                f"serve with TensorRT-LLM {adds[0]} or newer, where {adds[1]} hands the residual stream to "
                "maybe_capture_hidden_states, or serve this target with another engine"
            )
        elif serving.engine == "trtllm":
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
    where = ids_location(serving) if code == "ENG003" and serving.engine == "trtllm" and f.internal is not None else None
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
    from ...engines.serving import fc_feed_failure, uncaptured_ids

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


def _unmodelled_finding(serving: Serving) -> Finding:
    """ENG004: no rule for this family, so the serving side is not predicted (never another family's rule)."""
    from ...engines.families import MODELLED_FAMILIES

    f = serving.failure
    assert f is not None
    title = (
        f"undetermined: {serving.engine} {serving.version} serves the {serving.family} family with capture code the "
        "engine table does not model"
        if serving.family in MODELLED_FAMILIES
        else f"undetermined: the {serving.family} family is not modelled for {serving.engine} {serving.version}"
    )
    return Finding(
        "ENG004",
        title,
        [
            f.message,
            f"the engine table models {len(MODELLED_FAMILIES)} families, enumerated from the releases' own code "
            "(eagle3_doctor/data/engine_families.json lists the served classes it cannot match, with why)",
            f"ids in effect: {serving.source}",
        ],
        "measure what the engine feeds instead: dump its aux hidden states and run compare-hidden --engine-dump "
        "(docs/serving-evidence.md), or add the family to conformance/ and run make conformance",
        data={"when": f.when, "family": serving.family, "source": f.source},
    )


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
