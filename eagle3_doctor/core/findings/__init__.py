"""The diagnostic vocabulary: every finding has a stable code, a severity, evidence and a fix.

Codes are stable API: CI policies and users' scripts match on them. Each code is defined once, in one
record (severity, summary, long form) in the module of its family (cap.py, drf.py, ...); registry.py
collects them, explain.py prints them, and tools/gen_docs.py writes docs/findings.md from them
(tests/core/test_findings.py keeps that page in step). This module is the finding itself: its fix, location
and severity order.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .record import INFO, SEVERITY_RANK, WARNING
from .registry import CODES

# the files a fix edits, named by role (see Location)
DRAFT_CONFIG = "draft/config.json"
DRAFT_WEIGHTS = "draft/*.safetensors"
SERVER_COMMAND = "server launch command"
# the key of a finding's data that lists the launch flags (as the engine's argument table names them) whose values the
# finding reads: where a CMD003 of the same run says the release lacks one (or a CMD006 that it refuses its value), that
# server never runs with it, and the finding is withheld (engines/launch.py ``without_refused_flags``)
LAUNCH_FLAGS = "launch_flags"
REQUEST = "each chat request"
FIX_OPS = ("set", "delete", "rewrite")


@dataclass(frozen=True)
class Location:
    """Where a finding points: a file and a dotted key in it, rendered rustc-style as `` --> file: key``.

    ``file`` names the file by role, the same on every machine (JSON consumers, tests and docs match on
    it): ``draft/config.json`` is the config.json of the --draft directory, ``draft/*.safetensors`` its
    weights, ``target/config.json`` the target's, ``server launch command`` the flags the server was
    started with, ``extra_llm_api_options.yaml`` TensorRT-LLM's LLM API options file, ``each chat
    request`` the requests sent. ``path`` is that file as this run used it (filled by :func:`locate`):
    an absolute path for a local directory, ``org/name:config.json`` for a hub model (the repository's
    file: the cached snapshot is not the copy to edit), the --serve-config file for the launch command;
    None where the run never saw the file. It is rendered in place of the role when known (the terminal
    shows a file below the working directory relative to it, as rustc and ruff do).
    """

    file: str
    key: str | None = None
    path: str | None = None
    # 1-based line and column of the key in ``path`` (io/positions.py, for JSON files), rendered ``path:line:col``
    line: int | None = None
    col: int | None = None

    def __str__(self) -> str:
        where = self.path or self.file
        if self.path and self.line is not None:
            where += f":{self.line}:{self.col or 1}"
        return f"{where}: {self.key}" if self.key else where

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "key": self.key, "path": self.path, "line": self.line, "col": self.col}


def display_path(path: str) -> str:
    """A path as rustc and ruff print one: a file below the working directory relative to it, others whole."""
    if os.path.isabs(path):
        try:
            rel = os.path.relpath(path)
        except (OSError, ValueError):  # no working directory, or another drive
            return path
        if rel != os.pardir and not rel.startswith(os.pardir + os.sep):
            return rel
    return path


class Fix(str):
    """A fix as an edit: ``file``, dotted ``key``, the ``value`` to write and the ``snippet`` to paste.

    The instance is also the fix's one-line text (a ``str``), so every reader of ``Finding.fix`` as
    text -- renderers, CI annotations, users' scripts, the JSON ``fix`` field -- keeps working, while
    code that wants the edit reads the attributes instead of parsing the sentence.
    ``op`` says what to do with the key: "set" it to ``value`` (JSON-serialisable), "delete" it, or
    "rewrite" a tensor with the code in ``snippet``. ``file`` is a role and ``path`` the real file, as
    in :class:`Location`.
    """

    file: str
    key: str | None
    value: Any
    snippet: str | None
    op: str
    path: str | None

    def __new__(
        cls,
        text: str,
        *,
        file: str,
        key: str | None = None,
        value: Any = None,
        snippet: str | None = None,
        op: str = "set",
        path: str | None = None,
    ) -> Fix:
        if op not in FIX_OPS:
            raise ValueError(f"unknown fix op {op!r}")
        obj = super().__new__(cls, text)
        obj.file, obj.key, obj.value, obj.snippet, obj.op, obj.path = file, key, value, snippet, op, path
        return obj

    def __reduce__(self) -> Any:  # copies and pickles keep the edit, not only the text
        return (_make_fix, (str(self), self.file, self.key, self.value, self.snippet, self.op, self.path))

    @property
    def location(self) -> Location:
        return Location(self.file, self.key, self.path)

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "key": self.key,
            "op": self.op,
            "value": self.value,
            "snippet": self.snippet,
            "path": self.path,
        }


def _make_fix(text: str, file: str, key: str | None, value: Any, snippet: str | None, op: str, path: str | None = None) -> Fix:
    return Fix(text, file=file, key=key, value=value, snippet=snippet, op=op, path=path)


def json_snippet(dotted: str, value: Any) -> str:
    """'eagle_config.norm_before_fc', True -> '"eagle_config": {"norm_before_fc": true}' (what to paste)."""
    parts = dotted.split(".")
    out = json.dumps(value)
    for p in reversed(parts[1:]):
        out = "{" + f'"{p}": {out}' + "}"
    return f'"{parts[0]}": {out}'


def config_fix(text: str, key: str, value: Any = None, *, op: str = "set", file: str = DRAFT_CONFIG) -> Fix:
    """An edit of one key of a JSON config (the draft's by default), with the snippet to paste."""
    return Fix(text, file=file, key=key, value=value, op=op, snippet=json_snippet(key, value) if op == "set" else None)


@dataclass
class Finding:
    """One diagnostic. ``fix`` is the change to make: a ``Fix`` (a located edit) where the change is
    a config key or a launch flag, plain text otherwise; ``help`` is free-text advice beside it;
    ``location`` defaults to the Fix's file and key."""

    code: str
    title: str
    evidence: list[str] = field(default_factory=list)
    fix: str | None = None
    severity: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    help: str | None = None
    location: Location | None = None

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"unknown finding code {self.code}")
        if self.severity is None:
            self.severity = CODES[self.code][0]
        if self.location is None and isinstance(self.fix, Fix):
            self.location = self.fix.location

    @property
    def edit(self) -> Fix | None:
        """The structured fix, when the fix is an edit."""
        return self.fix if isinstance(self.fix, Fix) else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "title": self.title,
            "evidence": self.evidence,
            "fix": None if self.fix is None else str(self.fix),
            "data": self.data,
            "edit": self.edit.to_dict() if self.edit is not None else None,
            "help": self.help,
            "location": self.location.to_dict() if self.location is not None else None,
        }


def locate(findings: Iterable[Finding], paths: Mapping[str, str]) -> None:
    """Point each finding's location and edit at the file this run used for its role (``paths``: role ->
    path, from ``hub.role_paths``). Done once where a command's findings leave the library, so no
    producer needs to know the paths; roles missing from ``paths`` keep ``path`` None."""
    for f in findings:
        if f.location is not None and f.location.path is None and f.location.file in paths:
            f.location = replace(f.location, path=paths[f.location.file])
        e = f.edit
        if e is not None and e.path is None and e.file in paths:
            e.path = paths[e.file]
        for r in f.data.get("related", []):  # the sightings by_root_cause attached, as plain dicts
            loc = r.get("location")
            if loc and loc.get("path") is None and loc.get("file") in paths:
                loc["path"] = paths[loc["file"]]


# measured consequences or corroboration of a cause that reading the files names: where one shares the cause's
# location and fix, it is that cause's evidence, not a diagnostic of its own
EFFECT_FAMILIES = ("ACC", "FPR", "GATE")


def by_root_cause(findings: list[Finding]) -> list[Finding]:
    """One diagnostic per root cause: findings that point at the same key of the same file and carry the same
    fix are one mistake seen several ways (a wrong id list: the capture points it names, what the weights fit,
    the acceptance it costs). The first that names the cause (not a measured effect) stays, at the group's worst
    severity, with the others attached as ``data["related"]`` (code, severity, title, location); the order
    found is kept. A user-set threshold (THRESHOLD_CODES) always stays a diagnostic of its own."""
    groups: dict[Any, list[Finding]] = {}
    for f in findings:
        loc = f.location
        same = loc is not None and loc.key is not None and f.fix is not None and f.code not in THRESHOLD_CODES
        key = (loc.file, loc.path, loc.key, str(f.fix)) if same and loc is not None else id(f)
        groups.setdefault(key, []).append(f)
    out = []
    for group in groups.values():
        head = next((f for f in group if not f.code.startswith(EFFECT_FAMILIES)), group[0])
        rest = [f for f in group if f is not head]
        if rest:
            head.severity = worst(group)
            related = [*head.data.get("related", []), *(_related(f) for f in rest)]
            head.data = {**head.data, "related": related}
        out.append(head)
    return out


def _related(f: Finding) -> dict[str, Any]:
    return {
        "code": f.code,
        "severity": f.severity,
        "title": f.title,
        "evidence": list(f.evidence),
        "location": f.location.to_dict() if f.location is not None else None,
    }


def worst(findings: list[Finding]) -> str | None:
    if not findings:
        return None
    return max((f.severity for f in findings), key=lambda s: SEVERITY_RANK[s or INFO])


def at_or_above(findings: list[Finding], severity: str) -> list[Finding]:
    return [f for f in findings if SEVERITY_RANK[f.severity or INFO] >= SEVERITY_RANK[severity]]


# a finding raised because a figure crossed a threshold the user set (--min-accept-rate, --min-tau, the gate's
# policy, --max-regression) fails the run whatever its severity: the user asked for exactly that check
THRESHOLD_CODES = frozenset({"ACC003", "GATE001"})


def by_severity(findings: list[Finding]) -> list[Finding]:
    """Errors first, then warnings, then info; the order found is kept within a severity."""
    return sorted(findings, key=lambda f: -SEVERITY_RANK[f.severity or INFO])


def blocking(findings: list[Finding], fail_on: str) -> list[Finding]:
    """The findings that fail a run: at or above ``fail_on``, and any user-set threshold missed."""
    return [f for f in findings if f.code in THRESHOLD_CODES or SEVERITY_RANK[f.severity or INFO] >= SEVERITY_RANK[fail_on]]


def exit_code(findings: list[Finding], fail_on: str = WARNING, *, passed: bool = True) -> int:
    """The exit status of every command: 0 healthy, 1 when a finding blocks (see ``blocking``) or a check
    that raises no finding of its own failed (``passed=False``: the gate's minimum slot cosine)."""
    from ..errors import EXIT_FINDINGS, EXIT_OK

    if fail_on not in SEVERITY_RANK:
        raise ValueError(f"fail_on {fail_on!r} is not a severity")
    return EXIT_FINDINGS if blocking(findings, fail_on) or not passed else EXIT_OK
