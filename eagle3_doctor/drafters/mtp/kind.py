"""MTP heads (DeepSeek's and speculators' layouts): one tap through ``hnorm``, run as a chain by the shared
estimator, so every acceptance option the EAGLE-3 chain honours reaches it too."""

from __future__ import annotations

from typing import Any, Optional

from ..kind import Command, Kind, Outcome
from ..run import Run, acceptance_options

_OK = "the engine hands the MTP head the state it was trained on"
_MEASURE = frozenset({"engine_version", "batch_size", "num_steps", "continuation"})
_SAMPLING = frozenset(
    {"temperature", "temperature_mode", "topk", "num_draft_tokens", "reference_loop", "min_tau", "min_accept_rate"}
)


def detect(cfg: dict[str, Any], names: list[str]) -> Optional[str]:
    from ...draft.mtp.formats import detect_mtp

    found = detect_mtp(cfg, names)
    return None if found is None else f"{found[0]} MTP layout: {found[1]}"


def preflight(_cfg: dict[str, Any], layer: dict[str, Any], weights: dict[str, Any], where: str) -> None:
    from ...io.checks import check_sizes_against_weights

    check_sizes_against_weights(layer, weights, where)  # no finding names it, and the head is built at the config's size


def _setup(run: Run) -> Any:
    from .setup import load_mtp_setup

    assert run.draft is not None  # every measuring command needs the draft
    with run.status(f"loading target {run.target} and MTP head {run.draft} ..."):
        return load_mtp_setup(target=run.target, draft=run.draft, engine=run.engine, engine_version=run.release,
                              dtype=run.dtype, device=run.opt("device"), trust_remote_code=run.opt("trust_remote_code"))  # fmt: skip


def inspect(run: Run) -> Outcome:
    from ...report.render import render_findings
    from .checks import inspect_mtp
    from .render import render_mtp_checks

    assert run.draft is not None
    checks = inspect_mtp(run.target, run.draft, run.engine, run.release)

    def render(con: Any) -> None:
        render_mtp_checks(con, checks)
        render_findings(con, checks.findings, _OK)

    return Outcome(checks.findings, checks.to_dict, render, level="warning", trust_remote_code=False)


def compare_hidden(run: Run) -> Outcome:
    from ..run import batch_size_for
    from .measure import mtp_compare
    from .render import render_mtp_compare

    setup, checks = _setup(run)
    bs = batch_size_for(run.opt("batch_size"), setup, run.opt("max_tokens"))
    res = mtp_compare(setup, checks, run.opt("prompts"), run.opt("max_tokens"), run.opt("limit"), bs)
    return Outcome(res.findings, res.to_dict, lambda con: render_mtp_compare(con, res), level="warning")


def acceptance(run: Run) -> Outcome:
    from ...analyses.acceptance.findings import served_figures
    from ...report.render import render_acceptance
    from .measure import mtp_acceptance
    from .render import render_mtp_checks

    setup, checks = _setup(run)
    opts = acceptance_options(run, setup)
    with run.progress() as cb:
        res = mtp_acceptance(setup, checks, opts, run.opt("prompts"), cb)

    def render(con: Any) -> None:
        render_mtp_checks(con, checks)
        render_acceptance(con, res)

    agrees = res.reference is None or res.reference.agrees_with_estimator
    doc = lambda: {**res.to_dict(), "mtp": checks.to_dict()}  # noqa: E731
    return Outcome(res.findings, doc, render, served=served_figures(res.paths), agrees=agrees)


def diagnose(run: Run) -> Outcome:
    from .measure import mtp_diagnose
    from .render import render_mtp_diagnosis

    setup, checks = _setup(run)
    opts = acceptance_options(run, setup)
    with run.progress() as cb:
        d = mtp_diagnose(setup, checks, opts, run.opt("prompts"), cb)
    run.amend_verdict(d)
    return Outcome(d.findings, d.to_dict, lambda con: render_mtp_diagnosis(con, d))


def fix(run: Run) -> Outcome:
    from .fix import mtp_fix
    from .render import render_mtp_fix

    setup, checks = _setup(run)
    opts = acceptance_options(run, setup)
    with run.progress() as cb:
        res = mtp_fix(setup, checks, run.opt("out"), opts, run.opt("prompts"), cb)
    return Outcome(res.findings, res.to_dict, lambda con: render_mtp_fix(con, res), exit=1 if res.loses else None)


KIND = Kind(
    "mtp",
    "MTP heads",
    "an MTP head",
    detect,
    {
        "inspect": Command(inspect, frozenset({"engine_version"})),
        "compare-hidden": Command(compare_hidden, frozenset({"engine_version", "batch_size"})),
        "acceptance": Command(acceptance, _MEASURE | _SAMPLING),
        "diagnose": Command(diagnose, _MEASURE),
        "fix": Command(fix, _MEASURE),
    },
    preflight=preflight,
)
