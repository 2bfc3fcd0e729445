"""The measuring commands and fix on the drafters beside EAGLE-3, chosen from the --draft checkpoint: an MTP
head or a DFlash draft (inspect, compare-hidden, acceptance, diagnose, fix). Options, the launch command and
the exit codes stay each command's own."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ...core.findings import exit_code
from ..output import console, progress, status, write_result
from ..resolve import Resolved, acceptance_options, batch_size_for


def is_mtp(r: Resolved) -> bool:
    from ...draft.drafter import detect_kind

    return r.draft is not None and detect_kind(r.draft)[0] == "mtp"


# options the MTP and DFlash branches do not honour yet: refused in one line rather than ignored
_WHOLE_TARGET = ("device_map", "max_memory", "stream_layers")  # their target loads whole on one device
_NOT_FOR_OTHER_DRAFTERS = ("report", "plot", "matrix", "train_dump", "train_recipe", "layer_ids", "train_data", "requests",
                           "serve_template", "train_template", "server_metrics", "server_log", "compile_draft",
                           *_WHOLE_TARGET)  # fmt: skip


def refuse_unhonoured(a: SimpleNamespace, drafter: str = "MTP heads", run: str = "MTP run") -> None:
    from ...core.errors import BadInput

    given = [o for o in _NOT_FOR_OTHER_DRAFTERS if getattr(a, o, None) not in (None, False, ())]
    if given:
        flag = "--" + given[0].replace("_", "-")
        why = ("the target loads whole on one device" if given[0] in _WHOLE_TARGET
               else f"--json holds every figure the {run} measures")  # fmt: skip
        raise BadInput(f"{flag} is not supported for {drafter} yet", f"drop {flag}: {why}")


def _setup(a: SimpleNamespace, r: Resolved) -> Any:
    from ...analyses.mtp.setup import load_mtp_setup

    refuse_unhonoured(a)
    assert r.draft is not None  # is_mtp
    with status(f"loading target {r.target} and MTP head {r.draft} ...", getattr(a, "quiet", False)):
        return load_mtp_setup(target=r.target, draft=r.draft, engine=r.engine, engine_version=r.engine_version,
                              dtype=r.dtype, device=a.device, trust_remote_code=a.trust_remote_code)  # fmt: skip


def mtp_inspect(a: SimpleNamespace, r: Resolved) -> int:
    from ...analyses.mtp.checks import inspect_mtp
    from ...report.mtp import render_mtp_checks
    from ...report.render import render_findings

    assert r.draft is not None  # is_mtp
    refuse_unhonoured(a)
    checks = inspect_mtp(r.target, r.draft, r.engine, r.engine_version)
    r.locate(checks.findings)
    con = console(stderr=a.json_out == "-")
    render_mtp_checks(con, checks)
    render_findings(con, checks.findings, "the engine hands the MTP head the state it was trained on")
    write_result(a.json_out, checks.to_dict(), False)
    return exit_code(checks.findings, "warning")


def mtp_compare_hidden(a: SimpleNamespace, r: Resolved) -> int:
    from ...analyses.mtp.measure import mtp_compare
    from ...report.mtp import render_mtp_compare

    setup, checks = _setup(a, r)
    res = mtp_compare(setup, checks, a.prompts, a.max_tokens, a.limit, batch_size_for(a.batch_size, setup, a.max_tokens))
    r.locate(res.findings)
    render_mtp_compare(console(stderr=a.json_out == "-"), res)
    write_result(a.json_out, res.to_dict(), a.trust_remote_code)
    return exit_code(res.findings, "warning")


def mtp_acceptance(a: SimpleNamespace, r: Resolved) -> int:
    from ...analyses.mtp.measure import mtp_acceptance as measure
    from ...report.mtp import render_mtp_checks
    from ...report.render import render_acceptance

    setup, checks = _setup(a, r)
    opts = acceptance_options(a, r, setup)
    with progress(a.quiet) as cb:
        run = measure(setup, checks, opts, a.prompts, cb)
    r.locate(run.findings)
    con = console(stderr=a.json_out == "-")
    render_mtp_checks(con, checks)
    render_acceptance(con, run)
    write_result(a.json_out, {**run.to_dict(), "mtp": checks.to_dict()}, a.trust_remote_code)
    if run.reference is not None and not run.reference.agrees_with_estimator:
        console(stderr=True).print("warning: the estimator and the reference loop disagree (see JSON 'reference')", markup=False)
    return exit_code(run.findings, "error")


def mtp_diagnose(a: SimpleNamespace, r: Resolved) -> int:
    from ...analyses.mtp.measure import mtp_diagnose as measure
    from ...report.mtp import render_mtp_diagnosis

    setup, checks = _setup(a, r)
    opts = acceptance_options(a, r, setup)
    with progress(a.quiet) as cb:
        d = measure(setup, checks, opts, a.prompts, cb)
    r.locate(d.findings)
    render_mtp_diagnosis(console(stderr=a.json_out == "-"), d)
    write_result(a.json_out, d.to_dict(), a.trust_remote_code)
    return exit_code(d.findings, "error")


def mtp_fix(a: SimpleNamespace, r: Resolved) -> int:
    from ...analyses.mtp.fix import mtp_fix as fix
    from ...report.render import render_findings

    setup, checks = _setup(a, r)
    opts = acceptance_options(a, r, setup)
    with progress(a.quiet) as cb:
        res = fix(setup, checks, a.out, opts, a.prompts, cb)
    con = console(stderr=a.json_out == "-")
    for line in res.applied or ["nothing to fix: no MTP001"]:
        con.print(line, markup=False, soft_wrap=True)
    for name, v in res.before.items():
        copy = f", {res.after[name]:.3f} (copy)" if res.out and name in res.after else ""
        con.print(f"{name} path: mean acceptance length {v:.3f} (original){copy}", markup=False)
    con.print()
    if res.loses:
        con.print("the folded copy accepts less than the original on the serving state: keep the original and retrain "
                  "the head on final_norm (the fold corrects step 1, and rescales the recycled state hnorm also reads)",
                  markup=False, soft_wrap=True)  # fmt: skip
    render_findings(con, res.findings, "the copy is fed the state it now expects")
    write_result(a.json_out, res.to_dict(), a.trust_remote_code)
    return 1 if res.loses else exit_code(res.findings, "error")


def drafter_kind(r: Resolved) -> str:
    from ...draft.drafter import detect_kind

    return "eagle3" if r.draft is None else detect_kind(r.draft)[0]


def is_dflash(r: Resolved) -> bool:
    return drafter_kind(r) == "dflash"


def target_and_prompts(
    a: SimpleNamespace, r: Resolved, drafter: str = "DFlash drafts", run: str = "DFlash run"
) -> tuple[Any, list[list[int]]]:
    """The target and the prompts' token ids, the options the drafter's commands do not honour refused first."""
    from ...io.prompts import load_prompts
    from ...model.target import load_target

    refuse_unhonoured(a, drafter, run)
    with status(f"loading target {r.target} ...", getattr(a, "quiet", False)):
        tgt = load_target(r.target, dtype=r.dtype, device=a.device, trust_remote_code=a.trust_remote_code)
    prompts = load_prompts(tgt.tokenizer, a.prompts, max_tokens=a.max_tokens, max_positions=tgt.max_positions, limit=a.limit)
    return tgt, [p.ids for p in prompts]


_SERVED_OK = "the engine feeds the DFlash draft the taps it was trained on"


def dflash_run(a: SimpleNamespace, r: Resolved, command: str) -> int:
    """compare-hidden, acceptance, diagnose or fix on a DFlash draft: one target load, the measurement, its
    report, the findings and the JSON document."""
    from ...analyses import dflash_levers as lv
    from ...analyses import dflash_measure as ms
    from ...report import dflash as rep
    from ...report.render import render_findings

    tgt, prompts = target_and_prompts(a, r)
    assert r.draft is not None  # is_dflash
    res: Any
    with progress(a.quiet) as cb:
        if command == "compare-hidden":
            res, show, ok, level = (
                lv.dflash_compare(tgt, r.draft, r.engine, prompts),
                rep.render_dflash_compare,
                _SERVED_OK,
                "warning",
            )
        elif command == "diagnose":
            res = lv.dflash_diagnose(tgt, r.draft, r.engine, prompts, a.max_new_tokens, cb)
            show, ok, level = rep.render_dflash_diagnosis, _SERVED_OK, "error"
        elif command == "fix":
            res = lv.dflash_fix(tgt, r.draft, r.engine, prompts, a.max_new_tokens, a.out, cb)
            show, ok, level = rep.render_dflash_fix, "the copy is fed the taps it was trained on", "error"
        else:
            res = ms.dflash_acceptance(tgt, r.draft, r.engine, prompts, a.max_new_tokens, cb)
            show, ok, level = rep.render_dflash_acceptance, _SERVED_OK, "error"
    r.locate(res.findings)
    con = console(stderr=a.json_out == "-")
    show(con, res)
    render_findings(con, res.findings, ok)
    write_result(a.json_out, res.to_dict(), a.trust_remote_code)
    ref = getattr(res, "reference", None)
    if ref is not None and not (ref["tokens_equal_greedy"] and ref["passes_equal_estimator"]):
        console(stderr=True).print("warning: the estimator and the reference loop disagree (see JSON 'reference')", markup=False)
    return exit_code(res.findings, level)


def dflash_inspect(a: SimpleNamespace, r: Resolved) -> int:
    from ...analyses.dflash import inspect_dflash
    from ...report.render import render_findings

    assert r.draft is not None  # drafter_kind
    checks = inspect_dflash(r.target, r.draft, r.engine)
    r.locate(checks.findings)
    con = console(stderr=a.json_out == "-")
    for name, t in (("trained", checks.trained), ("served", checks.served)):
        spec = "unknown" if t is None or t.spec is None else ", ".join(map(str, t.spec))
        con.print(f"DFlash {name} taps: {spec}  ({t.source if t else ''})", markup=False, soft_wrap=True)
    con.print(
        f"the draft's fc takes {checks.fc_taps if checks.fc_taps is not None else 'an unknown number of'} taps", markup=False
    )
    con.print()
    render_findings(con, checks.findings, "the engine feeds the DFlash draft the taps it was trained on")
    write_result(a.json_out, checks.to_dict(), False)
    return exit_code(checks.findings, "warning")
