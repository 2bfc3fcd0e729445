"""The acceptance command's library entry: the run (or both prompt formats), the launch command's settings, and
the server's own figures against the prediction. The --min-tau / --min-accept-rate gate is every kind's, applied
where every kind's run ends (``findings.threshold_findings`` for a library caller)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...core.errors import BadInput
from ...model.setup import Setup
from ..results import AcceptanceRun
from .findings import acc_fix
from .options import AcceptanceOptions, Progress, _no_progress
from .run import measure_acceptance


@dataclass
class FormatRequest:
    """Replay conversations rendered the training way and the serving way: what the prompt format costs."""

    prompts: str | None
    requests: str | None
    train_template: str | None
    serve_template: str | None
    train_system_prompt: str | None
    seed: int = 0


@dataclass
class AcceptanceReport:
    """The acceptance command's result: the run, plus the server's figures and the prompt-format table."""

    run: AcceptanceRun
    server: Any = None  # serving.ServingComparison
    formats: Any = None  # templates.FormatComparison

    def to_dict(self) -> dict[str, Any]:
        doc = self.run.to_dict()
        if self.server is not None:
            doc["server"] = self.server.to_dict()
        if self.formats is not None:
            doc["prompt_format"] = self.formats.to_dict()
        return doc


def format_acceptance(setup: Setup, req: FormatRequest, opts: AcceptanceOptions, progress: Progress = _no_progress) -> Any:
    """Acceptance with the same conversations in both prompt formats (templates.acceptance_by_format)."""
    from ...io.conversations import load_dataset, load_requests
    from ..templates.by_format import acceptance_by_format
    from ..templates.chat_template import load_template

    if req.requests:
        convs = load_requests(req.requests)
    elif req.prompts:
        convs = load_dataset(req.prompts, "prompts file").conversations
    else:
        raise BadInput(
            "the prompt-format comparison needs conversations", "pass --prompts FILE or --requests FILE (chat messages)"
        )
    if not convs:
        raise BadInput("no chat conversations to render in two formats", "pass --prompts or --requests with messages")
    convs = convs[: opts.limit] if opts.limit else convs
    tok, tdir = setup.target.tokenizer, setup.target.name
    train = load_template(req.train_template, tdir, tok, side="train", system_prompt=req.train_system_prompt)
    serve = load_template(req.serve_template, tdir, tok, side="serve")
    return acceptance_by_format(setup, convs, train, serve, opts, seed=req.seed, progress=progress)


def acceptance_report(
    setup: Setup,
    opts: AcceptanceOptions,
    *,
    prompts_path: str | None = None,
    train_dump: str | None = None,
    formats: FormatRequest | None = None,
    serve: Any = None,
    measured: Any = None,
    progress: Progress = _no_progress,
) -> AcceptanceReport:
    """The acceptance command: the run (or both prompt formats), the launch command's settings, and the server's
    own figures against the prediction."""
    fmt = None
    if formats is not None:
        fmt = format_acceptance(setup, formats, opts, progress)
        run = fmt.serve
        run.findings = fmt.findings + run.findings
    else:
        run = measure_acceptance(setup, opts, prompts_path=prompts_path, train_dump=train_dump, progress=progress, serve=serve)
    if serve is not None:
        run.settings.serve = serve.to_dict()
    server = None
    if measured is not None:
        from ..server_metrics.prediction import compare_to_prediction

        server, srv_findings = compare_to_prediction(
            measured, run.paths, run.settings, acc_fix(setup) if "training" in run.paths else None
        )
        run.findings.extend(srv_findings)
    return AcceptanceReport(run, server, fmt)
