"""inspect, acceptance, diagnose and fix on a P-EAGLE draft (chosen from the --draft checkpoint). compare-hidden
runs the EAGLE-3 command unchanged: the draft's taps and their paths are EAGLE-3's."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ...core.findings import exit_code
from ..output import console, progress, write_result
from ..resolve import Resolved
from .drafters import drafter_kind, target_and_prompts

_OK = "the engine runs the P-EAGLE draft as it was trained"


def is_peagle(r: Resolved) -> bool:
    return drafter_kind(r) == "peagle"


def peagle_inspect(a: SimpleNamespace, r: Resolved) -> int:
    from ...analyses.peagle import inspect_peagle
    from ...report.peagle import render_peagle_inspect
    from ...report.render import render_findings

    assert r.draft is not None  # is_peagle
    res = inspect_peagle(r.target, r.draft, r.engine, r.engine_version)
    r.locate(res.findings)
    con = console(stderr=a.json_out == "-")
    render_peagle_inspect(con, res)
    render_findings(con, res.findings, _OK)
    write_result(a.json_out, res.to_dict(), False)
    return exit_code(res.findings, "warning")


def peagle_run(a: SimpleNamespace, r: Resolved, command: str) -> int:
    """acceptance, diagnose or fix on a P-EAGLE draft: one target load, the measurement, its report, the findings
    and the JSON document."""
    from ...analyses import peagle as pa
    from ...analyses import peagle_levers as lv
    from ...report import peagle as rep
    from ...report.render import render_findings

    tgt, prompts = target_and_prompts(a, r, "P-EAGLE drafts", "P-EAGLE run")
    assert r.draft is not None  # is_peagle
    res: Any
    args = (tgt, r.draft, r.engine, r.engine_version, prompts, a.max_new_tokens)
    # the tokens a pass the launch line asks for (num_speculative_tokens), else the draft config's
    k = getattr(a, "num_steps", None) or (r.serve.num_steps if r.serve is not None and r.serve.num_steps else None)
    with progress(a.quiet) as cb:
        if command == "diagnose":
            res, show, ok = lv.peagle_diagnose(*args, cb, k=k), rep.render_peagle_diagnosis, _OK
        elif command == "fix":
            res, show, ok = lv.peagle_fix(*args, a.out, cb, k=k), rep.render_peagle_fix, "the copy runs as the draft was trained"
        else:
            res, show, ok = pa.peagle_acceptance(*args, cb, k=k), rep.render_peagle_acceptance, _OK
    r.locate(res.findings)
    con = console(stderr=a.json_out == "-")
    show(con, res)
    render_findings(con, res.findings, ok)
    write_result(a.json_out, res.to_dict(), a.trust_remote_code)
    runs = [res] if command == "acceptance" else []  # diagnose runs no sequential loop
    if command == "fix":
        runs = [x for x in (res.before, res.after) if x is not None]
    if any(not (x.reference["tokens_equal_greedy"] and x.reference["passes_equal_estimator"]) for x in runs):
        console(stderr=True).print("warning: the estimator and the reference loop disagree (see JSON 'reference')", markup=False)
    return exit_code(res.findings, "error")
