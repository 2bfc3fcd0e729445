"""Findings as a GitLab code quality report: the JSON array GitLab's merge request widget and the
``artifacts:reports:codequality`` keyword read, one issue per finding, at the file and line to change.

The format: https://docs.gitlab.com/ci/testing/code_quality/#code-quality-report-format
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Optional

from ..core.findings import Finding, by_severity

# GitLab's severities are info, minor, major, critical and blocker
SEVERITY = {"error": "critical", "warning": "major", "info": "info"}


def _fingerprint(f: Finding, file: str) -> str:
    """Stable across runs of the same mistake: the code, the file and the key (the title carries figures
    that move between runs, so it is used only where there is no key to tell two findings apart)."""
    key = f.location.key if f.location is not None and f.location.key else f.title
    return hashlib.sha256(f"{f.code}\0{file}\0{key}".encode()).hexdigest()


def code_quality(located: Sequence[tuple[Finding, Optional[str], Optional[int]]]) -> list[dict[str, Any]]:
    """One issue per finding (``located``: each with its file and line, or None where the run had no file:
    GitLab needs a path, so the finding's role names it, at line 1)."""
    where = {id(f): (file, line) for f, file, line in located}
    out = []
    for f in by_severity([f for f, _, _ in located]):
        file, line = where[id(f)]
        path = file or (f.location.file if f.location is not None else "eagle3-doctor")
        also = "".join(f"; also {r['code']}: {r['title']}" for r in f.data.get("related", []))
        out.append(
            {
                "type": "issue",
                "check_name": f.code,
                "description": f"{f.code}: {f.title}{also}" + (f" -- fix: {f.fix}" if f.fix else ""),
                "categories": ["Bug Risk"],
                "severity": SEVERITY[f.severity or "info"],
                "fingerprint": _fingerprint(f, path),
                "location": {"path": path, "lines": {"begin": line or 1}},
            }
        )
    return out
