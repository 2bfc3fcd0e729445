"""The one dispatch point of the five commands every drafter kind runs (inspect, compare-hidden, acceptance,
diagnose, fix): preflight -> resolve -> the kind, detected once -> refuse what the kind does not honour ->
the kind's implementation -> one tail (the acceptance gate, findings located, the report, the JSON, the files,
the reference loop's word, the exit code). No kind is named here: the registry says what each reads."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, Optional

from ..core.errors import BadInput
from .formats import check_format, drop_ignored, emit, report_to_stderr
from .output import console, write_result
from .resolve import RESOLVED_LATER, preflight_given, resolve_serve


def given_options(fn: Callable[..., Any], a: SimpleNamespace) -> list[str]:
    """The options of command ``fn`` set to something other than their default, in --help order."""
    params = inspect.signature(fn).parameters
    return [n for n, p in params.items() if getattr(a, n, p.default) != p.default and p.default is not inspect.Parameter.empty]


def flag_of(fn: Callable[..., Any], name: str) -> str:
    """The option's long flag as the user types it (``compile_draft`` is ``--compile``), from its typer declaration."""
    ann = inspect.signature(fn).parameters[name].annotation
    for meta in getattr(ann, "__metadata__", ()):
        # typer.Option("--compile", ...) keeps its first flag as ``default`` (the place a default once went)
        for decl in (getattr(meta, "default", None), *(getattr(meta, "param_decls", None) or ())):
            if isinstance(decl, str) and decl.startswith("--"):
                return decl.split("/")[0]
    return "--" + name.replace("_", "-")


def refuse_unhonoured(kind: Any, command: str, fn: Callable[..., Any], a: SimpleNamespace) -> None:
    """An option this kind's command does not read: exit 2 with one line, before anything is loaded."""
    for name in given_options(fn, a):
        if not kind.honours(command, name):
            flag = flag_of(fn, name)
            raise BadInput(f"{flag} is not supported for {kind.label}", f"drop {flag}: {kind.why_not(command, name)}")


def drive(
    command: str,
    fn: Callable[..., Any],
    a: SimpleNamespace,
    *,
    need_draft: bool = True,
    need_target: bool = True,
    evidence: Optional[dict[str, Any]] = None,
    check: Optional[Callable[[Any], None]] = None,
    preflighted: bool = False,
) -> int:
    """Run ``command`` (its typer function ``fn``, its options ``a``) on the kind of draft it names;
    ``preflighted``: the command has checked its options already (it reads an input before the run)."""
    from ..drafters.registry import kind_of

    check_format(getattr(a, "format", None), getattr(a, "json_out", None))
    if not preflighted:
        preflight_given(a, skip=RESOLVED_LATER)
    run = resolve_serve(
        a, need_draft=need_draft, need_target=need_target
    )  # the launch command is read (and refused) before torch is imported
    kind, _why = kind_of(run.draft)
    refuse_unhonoured(kind, command, fn, a)
    if run.engine == "declared" and not kind.honours(command, "serving_description"):
        # --engine declared reaches here as a shared option: the kind would meet an engine it has no table for
        raise BadInput(
            f"a serving description (--engine declared) is not supported for {kind.label}",
            f"name the engine that serves it with --engine: {kind.why_not(command, 'serving_description')}",
        )
    if check is not None:
        check(run)
    if run.serve is not None:  # the launch's algorithm against the draft's kind: every kind, every command
        from ..engines.drafter_algorithms import finding as kind_finding

        run.findings += kind_finding(run.serve, kind.name, kind.one, run.draft, run.findings)
    run.evidence = evidence or {}
    gpu_ahead(command, run)
    tokenize_ahead(command, run)
    if command != "inspect" and run.draft is not None:  # inspect names them (DRF009); the others cannot measure
        from ..analyses.inspect.tensors import refuse_nonfinite

        refuse_nonfinite(run.draft, run.target)
    outcome = kind.commands[command].run(run)
    return finish(run, outcome)


def gpu_ahead(command: str, run: Any) -> None:
    """The CUDA context made, and Triton readied for the fused kernels, on a thread while torch imports
    (model.ahead): for the commands that load the target on one device."""
    if command == "inspect" or not run.target or run.opt("device_map"):
        return
    from ..model.ahead import start

    start(run.opt("device"), kernels=run.opt("dtype") != "float32")


def tokenize_ahead(command: str, run: Any) -> None:
    """The target's tokenizer loaded, and the run's prompts tokenized, by a helper process while this one imports
    torch and reads the weights (model.tokenizer): for the commands that read no more of it than the prompts' ids
    and a few facts (compare-hidden prints tokens as text: it would load the tokenizer again at its end), on a local
    target that the native decoder will read whole (no --device-map, no --stream-layers, no remote code)."""
    if command not in ("acceptance", "diagnose", "fix") or not run.target:
        return
    if any(run.opt(o) for o in ("device_map", "stream_layers", "trust_remote_code")):
        return
    from ..model.tokenizer import start

    start(run.target, run.opt("prompts"), run.opt("limit"))


# In bf16 the loop's cached decode and the estimator's one forward round differently, and on a near-tie the greedy
# token flips (the fixture pair on an H200, bench/RESULTS.md 2026-12-03); in float32 every kind's two are equal
# (tests/analyses, tests/drafters), so there a disagreement is the doctor's own bug.
DISAGREE = (
    "warning: the estimator and the reference loop disagree (see JSON 'reference'): in 16 bits the loop's cached decode "
    "and the estimator's forward round differently and a near-tie can flip a token; rerun with --dtype float32, where "
    "the two agree, and report a disagreement there as a bug"
)


def finish(run: Any, outcome: Any) -> int:
    """The tail every kind's command ends in."""
    from ..analyses.acceptance.findings import gate_findings
    from ..analyses.judgment import settle
    from ..core.findings import exit_code

    min_rate, min_tau = run.opt("min_accept_rate"), run.opt("min_tau")
    if outcome.served is not None and (min_rate is not None or min_tau is not None):
        tau, rate1 = outcome.served
        outcome.findings.extend(gate_findings(tau, rate1, min_rate, min_tau))
    outcome.findings[:] = drop_ignored(outcome.findings)  # in place: the document and the render read this list
    run.locate(outcome.findings)  # the launch command's findings join here, after the kind's judgment
    # no healthy verdict beside an error or a warning from the gate or the launch (a refused flag value): in place
    outcome.findings[:] = settle(outcome.findings)
    json_out, fmt = run.opt("json_out"), run.opt("format")
    outcome.render(console(stderr=report_to_stderr(fmt, json_out)))  # `--json -` or --format sarif|gitlab owns stdout
    trust = run.opt("trust_remote_code", False) if outcome.trust_remote_code is None else outcome.trust_remote_code
    write_result(json_out, outcome.document, trust, engine_release=run.release)
    emit(fmt, outcome.findings)
    if outcome.files is not None:
        outcome.files()
    if not outcome.agrees:
        console(stderr=True).print(DISAGREE, markup=False)
    return outcome.exit if outcome.exit is not None else exit_code(outcome.findings, outcome.level)
