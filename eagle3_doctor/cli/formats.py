"""--format: the findings of a run in the form a CI system or an editor reads, on stdout (the terminal report
then goes to stderr, as with ``--json -``): ``text`` (the default, the report itself), ``sarif`` (SARIF 2.1.0:
GitHub code scanning, editors) or ``gitlab`` (GitLab code quality)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Optional

from ..core.errors import BadInput
from ..core.findings import Finding

FORMATS = ("text", "sarif", "gitlab")


def check_format(fmt: Optional[str], json_out: Optional[str] = None) -> str:
    """The --format asked for, lower-cased; BadInput for an unknown one, or where --json - holds stdout already,
    or for a project settings file that is wrong (read here, at the start of every command that reports findings)."""
    from ..io.project_config import load

    load()  # the project's settings file, refused now (before anything loads) if it is wrong
    f = (fmt or "text").lower()
    if f not in FORMATS:
        raise BadInput(f"unknown --format {fmt!r}", f"pass one of {', '.join(FORMATS)}")
    if f != "text" and json_out == "-":
        raise BadInput(f"--format {f} and --json - both write to standard output", "write the JSON to a file: --json FILE")
    return f


def report_to_stderr(fmt: Optional[str], json_out: Optional[str]) -> bool:
    """Whether the terminal report goes to stderr: stdout carries a document (--json -, or --format sarif|gitlab)."""
    return json_out == "-" or (fmt or "text").lower() != "text"


def drop_ignored(findings: list[Finding]) -> list[Finding]:
    """``findings`` without the codes the project's settings ignore (io/project_config.py), saying on stderr
    which were dropped and by which file, so an ignored error never passes unseen."""
    from ..io.project_config import load
    from .output import fail

    cfg = load()
    if not cfg.ignore:
        return findings
    gone = [f.code for f in findings if f.code in cfg.ignore]
    if gone:
        counts = ", ".join(f"{c} ({gone.count(c)})" for c in sorted(set(gone)))
        fail(f"note: ignored {counts}, as {cfg.source} says")
    return [f for f in findings if f.code not in cfg.ignore]


def document(fmt: str, findings: Sequence[Finding]) -> Optional[dict[str, Any] | list[Any]]:
    """The findings as the document ``fmt`` names; None for text."""
    from .. import __version__
    from ..report.sarif import located

    if fmt == "sarif":
        from ..report.sarif import sarif_log

        return sarif_log(located(findings), __version__)
    if fmt == "gitlab":
        from ..report.codequality import code_quality

        return code_quality(located(findings))
    return None


def emit(fmt: Optional[str], findings: Sequence[Finding]) -> None:
    """Print the findings in ``fmt`` on stdout (nothing for text)."""
    doc = document((fmt or "text").lower(), findings)
    if doc is not None:
        print(json.dumps(doc, indent=2), flush=True)
