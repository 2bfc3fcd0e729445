"""What a drafter kind is to the doctor: how it is recognised, which options each command honours, and the
command implementations, each ending in one :class:`Outcome` that the one tail renders, writes and exits on.

A kind honours an option or the run refuses it (exit 2, one line) before anything is loaded: an option is
never read by one kind and silently dropped by another. ``SHARED`` is what every kind reads in every command
it runs (the models, the engine, the prompts, the output); a kind lists the rest per command.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Optional

from ..core.findings import Finding
from .run import Run

# read by every kind in every command it runs: where the models are, which engine serves them, what to
# replay and how much of it, where the results go
SHARED = frozenset(
    {
        "target", "draft", "draft_format", "engine", "serve_cmd", "serve_config", "revision", "draft_revision",
        "prompts", "limit", "max_tokens", "max_new_tokens", "device", "dtype", "trust_remote_code",
        "json_out", "format", "quiet", "out",
    }
)  # fmt: skip


# why an option is refused where more can be said than "this command does not read it on this kind"
WHY_NOT = {
    **dict.fromkeys(("device_map", "max_memory", "stream_layers"), "the target loads whole on one device for this kind"),
    **dict.fromkeys(("report", "plot", "matrix"), "--json holds every figure this kind's run measures"),
}


@dataclass
class Outcome:
    """One command's result on one kind, as the tail needs it.

    ``document``: makes the JSON document (the tool stamp is added by the tail); ``render``: prints the terminal
    report (findings included) on the console it is given; ``level``: the severity at or above which a
    finding fails the run; ``served``: the served path's (mean acceptance length, first-position rate) where
    the command measured them (the --min-tau / --min-accept-rate gate reads them); ``agrees``: False where a
    sequential loop ran and disagrees with the estimator; ``files``: writes after the JSON (reports, plots);
    ``exit``: the command's own exit code where it overrides the findings' (a fixed copy that loses)."""

    findings: list[Finding]
    document: Callable[[], dict[str, Any]]  # built after the tail's gate has joined the findings
    render: Callable[[Any], None]
    level: str = "error"
    served: Optional[tuple[float, Optional[float]]] = None
    agrees: bool = True
    files: Optional[Callable[[], None]] = None
    exit: Optional[int] = None
    trust_remote_code: Optional[bool] = None  # None: as the run's option says; False: the command loads no code


Implementation = Callable[[Run], Outcome]


@dataclass(frozen=True)
class Command:
    """One command on one kind: the options it reads beyond ``SHARED``, and the implementation."""

    run: Implementation
    honours: Optional[frozenset[str]] = frozenset()  # None: every option the command declares


@dataclass(frozen=True)
class Kind:
    """A drafter kind: ``detect(config, tensor_names)`` says why a checkpoint is this kind, or None."""

    name: str
    label: str  # "DFlash drafts": the kind's name in a sentence
    one: str  # "a DFlash draft"
    detect: Callable[[dict[str, Any], list[str]], Optional[str]]
    commands: Mapping[str, Command]
    draft_config_checked: bool = False  # its config.json is an EAGLE-3 draft config (the preflight checks it as one)
    # the preflight's own checks of this kind's config (cfg, its layer's config, the weights' headers, the file)
    preflight: Optional[Callable[[dict[str, Any], dict[str, Any], dict[str, Any], str], None]] = None

    def why_not(self, command: str, option: str) -> str:
        """Why ``option`` is refused for ``command`` on this kind (one clause, for the error's fix)."""
        if command not in self.commands:
            return f"{command} does not run {self.label}"
        return WHY_NOT.get(option) or f"{command} on {self.label} does not read it"

    def honours(self, command: str, option: str) -> bool:
        cmd = self.commands.get(command)
        return cmd is not None and (cmd.honours is None or option in SHARED or option in cmd.honours)
