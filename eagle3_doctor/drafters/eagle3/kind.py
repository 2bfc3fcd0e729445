"""EAGLE-3 drafts: three taps through ``fc``, run as a chain or a tree. Every option the five commands declare was
made for this kind, so it honours them all; the other kinds list what they read."""

from __future__ import annotations

from typing import Any

from ..kind import Command, Kind, Outcome
from ..run import Run, acceptance_options, batch_size_for, load_models


def detect(_cfg: dict[str, Any], _names: list[str]) -> str:
    return "no MTP head in the checkpoint"  # read last: every directory that holds no other kind


def inspect(run: Run) -> Outcome:
    from ...analyses.inspect.inspection import inspect as audit
    from ...report.render import render_inspect

    assert run.draft is not None
    res = audit(run.target, run.draft, engine=run.engine, engine_version=run.release, draft_format=run.opt("draft_format"))
    if run.serve is not None:  # the KV dtype the launch serves the draft with: its rule, the cost left to acceptance
        from ...analyses.acceptance.kv_dtype import kv_rule_findings

        res.findings += kv_rule_findings(run.engine, run.release, _draft_config(run.draft), run.serve)
    doc = lambda: {**res.to_dict(), **({"serve": run.serve.to_dict()} if run.serve else {})}  # noqa: E731
    files = None
    if run.opt("report"):
        from ...report.render import write_inspect_report

        files = lambda: write_inspect_report(res, run.opt("report"))  # noqa: E731
    return Outcome(res.findings, doc, lambda con: render_inspect(con, res), level="warning", files=files, trust_remote_code=False)


def compare_hidden(run: Run) -> Outcome:
    from ...analyses.compare.run import compare_hidden as compare
    from ...report.render import render_compare

    setup = load_models(run)
    bs = batch_size_for(run.opt("batch_size"), setup, run.opt("max_tokens"))
    report, plot = run.opt("report"), run.opt("plot")
    with run.progress() as cb:
        res = compare(setup, prompts_path=run.opt("prompts"), train_dump=run.opt("train_dump"), max_tokens=run.opt("max_tokens"),
                      batch_size=bs, matrix=run.opt("matrix") or plot is not None or report is not None, limit=run.opt("limit"),
                      progress=cb)  # fmt: skip
    drift = _reference_drift(run, setup, bs)

    def render(con: Any) -> None:
        render_compare(con, res)
        if drift is not None:
            from ...analyses.quant_drift import drift_lines

            for line in drift_lines(drift):
                con.print(line, markup=False, highlight=False)

    def doc() -> dict[str, Any]:
        out = {**res.to_dict(), **({"serve": run.serve.to_dict()} if run.serve else {})}
        return {**out, "reference_target": drift.to_dict()} if drift is not None else out

    files = None
    if plot or report:
        from ...report.render import write_compare_report

        files = lambda: write_compare_report(res, report, plot)  # noqa: E731
    return Outcome(res.findings, doc, render, level="warning", files=files)


def _reference_drift(run: Run, setup: Any, bs: int) -> Any:
    """--reference-target: the quantized target's features against the 16-bit target's, at every capture point."""
    if not run.opt("reference_target"):
        return None
    from ...analyses.quant_drift import compare_reference, load_reference

    ref = load_reference(setup, run.opt("reference_target"), run.opt("trust_remote_code"))
    return compare_reference(setup, ref, prompts_path=run.opt("prompts"), train_dump=run.opt("train_dump"),
                             max_tokens=run.opt("max_tokens"), limit=run.opt("limit"), batch_size=bs)  # fmt: skip


def acceptance(run: Run) -> Outcome:
    from ...analyses.acceptance.findings import served_figures
    from ...analyses.acceptance.report import FormatRequest, acceptance_report
    from ...report.acceptance_report import acceptance_files, render_acceptance_report

    if run.opt("engine_dump"):
        return _acceptance_from_dump(run)
    setup = load_models(run)
    if run.opt("compile_draft"):
        setup.compile_draft()
    opts = acceptance_options(run, setup)
    o = run.options
    fmt = None
    if o.train_template or o.serve_template or o.train_system_prompt is not None or o.requests:
        fmt = FormatRequest(o.prompts, o.requests, o.train_template, o.serve_template, o.train_system_prompt, o.seed)
    with run.progress() as cb:
        rep = acceptance_report(setup, opts, prompts_path=o.prompts, train_dump=o.train_dump, formats=fmt, serve=run.serve,
                                measured=run.evidence.get("measured"), progress=cb)  # fmt: skip
    both = _both_ways(run, setup, opts, rep)

    def doc() -> dict[str, Any]:
        return {**rep.to_dict(), **({"reference_target": both.to_dict()} if both is not None else {})}

    served = served_figures(rep.run.paths)
    agrees = rep.run.reference is None or rep.run.reference.agrees_with_estimator
    return Outcome(rep.run.findings, doc, lambda con: render_acceptance_report(con, rep, both), served=served, agrees=agrees,
                   files=acceptance_files(rep.run, o.report, o.plot))  # fmt: skip


# what a dump-only run cannot honour: each needs the target's forward (or its config), which is not loaded
_NEEDS_TARGET = {
    "train_dump": "--train-dump", "layer_ids": "--layer-ids", "train_recipe": "--train-recipe",
    "reference_target": "--reference-target", "requests": "--requests", "train_template": "--train-template",
    "serve_template": "--serve-template", "stream_layers": "--stream-layers", "device_map": "--device-map",
    "compile_draft": "--compile",
}  # fmt: skip


def _dump_options(run: Run, extra: dict[str, str]) -> Any:
    """The options of a run on the engine's capture: what needs the target's forward refused in one line."""
    from ...analyses.acceptance.options import AcceptanceOptions, options_from_serve
    from ...core.errors import BadInput

    o = run.options
    for name, flag in {**_NEEDS_TARGET, **extra}.items():
        if getattr(o, name, None) not in (None, False):
            raise BadInput(
                f"{flag} needs the target loaded, and --engine-dump runs the draft alone", f"drop {flag} or --engine-dump"
            )
    if o.continuation != "greedy":
        why = "scores the target's argmax, which a dump does not hold" if o.continuation == "text" else "runs the target"
        raise BadInput(f"--continuation {o.continuation} {why}", "drop --continuation")
    num_steps, topk, ndt = options_from_serve(run.serve, o.num_steps, o.topk, o.num_draft_tokens)
    batch = 8 if o.batch_size == "auto" else int(o.batch_size)
    return AcceptanceOptions(num_steps=num_steps, max_tokens=o.max_tokens, batch_size=batch, temperature=o.temperature,
                             topk=topk, num_draft_tokens=ndt, reference=o.reference_loop, scan=o.scan, limit=o.limit,
                             token_tree=run.serve.token_tree if run.serve is not None else None)  # fmt: skip


def _dump_args(run: Run) -> dict[str, Any]:
    return {"prompts_path": run.opt("prompts"), "target": run.target or None, "draft_format": run.opt("draft_format"),
            "engine": run.engine, "release": run.release, "device": _dump_device(run.opt("device", "auto")),
            "trust_remote_code": run.opt("trust_remote_code", False)}  # fmt: skip


def _diagnose_from_dump(run: Run) -> Outcome:
    """--engine-dump: the judgment, module ablation and the context on the engine's capture, the draft alone."""
    from ...analyses.attribution.from_dump import diagnose_from_dump
    from ...analyses.attribution.result import SCHEMA
    from ...report.diagnosis import render_diagnosis

    extra = {"train_data": "--train-data", "server_metrics": "--server-metrics", "server_log": "--server-log",
             "server_temperature": "--server-temperature"}  # fmt: skip
    opts = _dump_options(run, extra)
    assert run.draft is not None  # diagnose needs a draft (drive)
    with run.progress() as cb:
        d = diagnose_from_dump(run.draft, run.opt("engine_dump"), opts, progress=cb, **_dump_args(run))
    run.amend_verdict(d)
    files = None
    if run.opt("report"):
        from ...report.render import write_diagnosis_report

        files = lambda: write_diagnosis_report(d, run.opt("report"))  # noqa: E731
    return Outcome(d.findings, lambda: {"schema": SCHEMA, **d.to_dict()}, lambda con: render_diagnosis(con, d), files=files)


def _acceptance_from_dump(run: Run) -> Outcome:
    """--engine-dump: the draft alone on the engine's own capture of prompt + greedy continuation; the target is
    never loaded (its embed_tokens are read by header where the draft ships none)."""
    from ...analyses.acceptance.findings import served_figures
    from ...analyses.acceptance.from_dump import acceptance_from_dump
    from ...analyses.acceptance.report import AcceptanceReport
    from ...report.acceptance_report import acceptance_files, render_acceptance_report

    o = run.options
    opts = _dump_options(run, {})
    assert run.draft is not None  # acceptance needs a draft (drive)
    with run.progress() as cb:
        res, _setup = acceptance_from_dump(run.draft, o.engine_dump, opts, progress=cb, **_dump_args(run))
    if run.serve is not None:
        res.settings.serve = run.serve.to_dict()
    server = None
    if (measured := run.evidence.get("measured")) is not None:
        from ...analyses.server_metrics.prediction import compare_to_prediction

        server, found = compare_to_prediction(measured, res.paths, res.settings, None)
        res.findings.extend(found)
    rep = AcceptanceReport(res, server, None)
    return Outcome(res.findings, rep.to_dict, lambda con: render_acceptance_report(con, rep, None),
                   served=served_figures(res.paths), files=acceptance_files(res, o.report, o.plot))  # fmt: skip


def _dump_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _both_ways(run: Run, setup: Any, opts: Any, rep: Any) -> Any:
    """--reference-target: the same measurement with the 16-bit target; QNT006 joins the run's findings."""
    if not run.opt("reference_target"):
        return None
    from ...analyses.quant_drift import acceptance_reference, load_reference

    ref = load_reference(setup, run.opt("reference_target"), run.opt("trust_remote_code"))
    both, found = acceptance_reference(setup, ref, opts, prompts_path=run.opt("prompts"), train_dump=run.opt("train_dump"),
                                       run=rep.run)  # fmt: skip
    rep.run.findings.extend(found)
    return both


def diagnose(run: Run) -> Outcome:
    from ...analyses.attribution.measure import diagnose_gap
    from ...analyses.attribution.result import SCHEMA
    from ...report.diagnosis import render_diagnosis

    if run.opt("engine_dump"):
        return _diagnose_from_dump(run)
    setup = load_models(run)
    opts = acceptance_options(run, setup)
    measured, live = run.evidence.get("measured"), None
    with run.progress() as cb:
        if measured is None:
            d = diagnose_gap(setup, opts, prompts_path=run.opt("prompts"), train_data=run.opt("train_data"), progress=cb,
                             serve=run.serve)  # fmt: skip
        else:  # the live figures: every runtime fault class simulated on this replay, ranked against them
            from ...analyses.faults.run import diagnose_live

            d, live = diagnose_live(setup, opts, measured, prompts_path=run.opt("prompts"), train_data=run.opt("train_data"),
                                    progress=cb, serve=run.serve)  # fmt: skip
    run.amend_verdict(d)
    files = None
    if run.opt("report"):
        from ...report.render import write_diagnosis_report

        files = lambda: write_diagnosis_report(d, run.opt("report"))  # noqa: E731

    def doc() -> dict[str, Any]:
        return {"schema": SCHEMA, **d.to_dict(), **({"runtime_faults": live.to_dict()} if live is not None else {})}

    def render(con: Any) -> None:
        tables = None
        if live is not None and live.ranking is not None:
            from ...report.faults import render_ranking

            tables = lambda c: render_ranking(c, live.ranking, live.measured)  # noqa: E731
        render_diagnosis(con, d, tables)

    return Outcome(d.findings, doc, render, files=files)


def fix(run: Run) -> Outcome:
    from ...analyses.fixing import SCHEMA, fix_draft
    from ...report.diagnosis import render_fix

    setup = load_models(run)
    opts = acceptance_options(run, setup)
    with run.progress() as cb:
        res = fix_draft(setup, opts, run.opt("out"), prompts_path=run.opt("prompts"), draft_format=run.opt("draft_format"),
                        train_recipe=run.opt("train_recipe"), progress=cb)  # fmt: skip
    return Outcome(res.findings, lambda: {"schema": SCHEMA, **res.to_dict()}, lambda con: render_fix(con, res))


KIND = Kind(
    "eagle3",
    "EAGLE-3 drafts",
    "an EAGLE-3 draft",
    detect,
    {name: Command(impl, None) for name, impl in
     (("inspect", inspect), ("compare-hidden", compare_hidden), ("acceptance", acceptance), ("diagnose", diagnose), ("fix", fix))},
    draft_config_checked=True,
)  # fmt: skip


def _draft_config(draft: str) -> dict[str, Any]:
    """The draft's config.json as inspect's preflight accepted it; {} where it cannot be read again."""
    import json
    from pathlib import Path

    try:
        got = json.loads((Path(draft) / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return got if isinstance(got, dict) else {}
