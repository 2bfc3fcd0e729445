"""One command's run, resolved once, and what every kind's implementation starts from.

``Run`` is what the CLI hands a kind: the models as local directories, the engine and its release (read from
--serve-cmd or the options, checked once), the launch command's own findings, the command's options by name
with the structured ones already parsed, and the two ways a run shows it is working (a status line while a
slow step starts, progress bars while it measures). The loading helpers below turn a run into the loaded
target and draft (``load_models``) and the acceptance options (``acceptance_options``).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager as ContextManager
from types import SimpleNamespace
from typing import Any, Optional

from ..core.findings import Finding, locate

Progress = Callable[[str, int, int], None]


@contextlib.contextmanager
def _silent_progress() -> Iterator[Progress]:
    yield lambda *_: None


def _no_status(_text: str) -> ContextManager[None]:
    return contextlib.nullcontext()


@dataclasses.dataclass
class Run:
    """A command's run: ``release`` is the engine release as the run applies it, resolved once from
    --engine-version, the launch command or the newest modelled release (engines/releases.check_engine), and
    stated in every document the run writes (``engine_release``)."""

    target: str  # "" only where no target was given and the run measures on the engine's own capture (--engine-dump)
    draft: Optional[str]
    engine: str
    release: str
    dtype: str
    serve: Any = None  # engines.launch.ServeConfig, when a launch command was given
    paths: dict[str, str] = dataclasses.field(default_factory=dict)  # finding roles -> the files this run used
    findings: list[Finding] = dataclasses.field(default_factory=list)  # what the launch command alone shows
    options: SimpleNamespace = dataclasses.field(default_factory=SimpleNamespace)
    evidence: dict[str, Any] = dataclasses.field(default_factory=dict)  # inputs read before torch (server metrics)
    status: Callable[[str], ContextManager[None]] = _no_status
    progress: Callable[[], ContextManager[Progress]] = _silent_progress

    def opt(self, name: str, default: Any = None) -> Any:
        """An option's value; ``default`` where the command does not offer it."""
        return getattr(self.options, name, default)

    def amend_verdict(self, diagnosis: Any) -> None:
        """A kind's ``diagnosis`` (its ``verdict``, and its ``branch`` where it keeps one) amended by the launch
        command's findings, which join the report only at its end (analyses.judgment.with_launch): every kind's
        diagnose calls it, so none says "healthy offline" beside a launch that never runs the draft."""
        from ..analyses.judgment import SUPERSEDED, branch_of, with_launch

        was = getattr(diagnosis, "branch", None) or branch_of(diagnosis.verdict)
        branch, diagnosis.verdict = with_launch(was, diagnosis.verdict, self.findings)
        if hasattr(diagnosis, "branch"):
            diagnosis.branch = branch
        if branch != was:  # the superseded branch's own statement goes with it
            diagnosis.findings[:] = [f for f in diagnosis.findings if f.code not in SUPERSEDED]

    def locate(self, findings: list[Finding]) -> None:
        """The launch command's findings first in a command's list (they are read before anything is
        measured), less any that reads a flag a CMD003 or CMD006 says the release refuses (its server never runs),
        each fix that sets a launch flag the run's release lacks saying so, and every finding pointed at the file this
        run used, at its key's line and column."""
        from ..engines.launch import fixes_within_release, without_refused_flags
        from ..io.positions import place

        findings[:0] = [f for f in self.findings if f not in findings]
        if self.serve is not None:
            findings[:] = without_refused_flags(findings, self.serve.engine)
        fixes_within_release(findings, self.engine, self.release)
        locate(findings, self.paths)
        place(findings)


def load_models(run: Run) -> Any:
    """Target and draft loaded as ``run`` resolved them, with its loading options; the draft is read as an
    EAGLE-3 draft (a P-EAGLE draft as the EAGLE-3 draft it extends), so the caller has asked the registry first."""
    stream, note = _stream_layers(run)
    with run.status(f"loading target {run.target}" + (f" and draft {run.draft}" if run.draft else "") + " ..."):
        from ..model.setup import load_setup

        setup = load_setup(
            target=run.target,
            draft=run.draft,
            draft_format=run.opt("draft_format"),
            engine=run.engine,
            engine_version=run.release,
            layer_ids=run.opt("layer_ids"),
            train_recipe=run.opt("train_recipe"),
            dtype=run.dtype,
            device=run.opt("device", "auto"),
            trust_remote_code=run.opt("trust_remote_code", False),
            device_map=run.opt("device_map"),
            max_memory=run.opt("max_memory"),
            stream_layers=stream,
        )
    if note:
        setup.notes.append(note)
    return setup


def _stream_layers(run: Run) -> tuple[bool, Optional[str]]:
    """--stream-layers as given; not given, on when the target would not fit the device and the command
    replays given sequences only (no greedy continuation, no reference loop, no --device-map)."""
    asked = run.opt("stream_layers", False)
    if asked is not None:
        return bool(asked), None
    generates = run.opt("continuation", "text") in ("greedy", "speculative") and not run.opt("train_dump")
    if generates or run.opt("reference_loop", False) or run.opt("device_map") is not None:
        return False, None
    from ..model.stream import should_stream

    return should_stream(run.target, run.dtype, run.opt("device", "auto"))


def batch_size_for(text: str, setup: Any, max_tokens: int) -> int:
    """--batch-size as the run uses it: a number as given (checked by the preflight), or ``auto``: as many
    sequences as memory allows for ``max_tokens``."""
    if text == "auto" and getattr(setup.target, "streamer", None) is not None:
        # a pass reads every weight: each replay takes as many sequences per pass as memory allows for its own
        # lengths (replay_batch_size); this figure is only the bound for the longest input
        setup.target.auto_groups = True
        from ..model.stream import group_size

        return group_size(setup.target, max_tokens)
    if text == "auto":
        from ..model.runtime import auto_batch_size

        return auto_batch_size(setup.target, max_tokens)
    return int(text)


def acceptance_options(run: Run, setup: Any) -> Any:
    """How to measure: explicit options first, then the launch command's speculative settings (the run's
    options hold every sampling option, at its default where the command does not offer it)."""
    from ..analyses.acceptance.options import AcceptanceOptions, options_from_serve

    a = run.options
    num_steps, topk, num_draft_tokens = options_from_serve(run.serve, a.num_steps, a.topk, a.num_draft_tokens)
    return AcceptanceOptions(
        num_steps=num_steps,
        # the same greedy tokens either way: how they are generated is the run's business, not the measurement's
        continuation="greedy" if a.continuation == "speculative" else a.continuation,
        speculative=a.continuation == "speculative",
        max_new_tokens=a.max_new_tokens,
        max_tokens=a.max_tokens,
        batch_size=batch_size_for(a.batch_size, setup, a.max_tokens + a.max_new_tokens),
        # a streamed target refuses generation; everywhere else the continuation sizes its own batch under auto
        continuation_auto=a.batch_size == "auto" and getattr(setup.target, "streamer", None) is None,
        temperature=a.temperature,
        temp_mode=a.temperature_mode,
        topk=topk,
        num_draft_tokens=num_draft_tokens,
        reference=a.reference_loop,
        scan=a.scan,
        limit=a.limit,
        token_tree=run.serve.token_tree if run.serve is not None else None,
    )
