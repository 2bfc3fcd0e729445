"""Findings as a SARIF 2.1.0 log: what GitHub code scanning, GitLab and editors read to show a finding
inline, at the file and line to change. One rule per finding code (its summary, meaning and how to
confirm it, from the registry), one result per finding.

The format: https://docs.oasis-open.org/sarif/sarif/v2.1.0/sarif-v2.1.0.html
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional
from urllib.parse import quote

from ..core.findings import Finding, by_severity, display_path
from ..core.findings.registry import REGISTRY

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
# SARIF has no "info": its levels are error, warning, note and none
LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def _uri(path: str) -> dict[str, str]:
    """A relative path as a relative URI against the checkout (%SRCROOT%); an absolute one as file://."""
    p = Path(path)
    if p.is_absolute():
        return {"uri": p.as_uri()}
    return {"uri": quote(p.as_posix()), "uriBaseId": "%SRCROOT%"}


def _physical(file: str, line: Optional[int], col: Optional[int]) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": _uri(file)}
    if line is not None:
        physical["region"] = {"startLine": line, **({"startColumn": col} if col else {})}
    return physical


def _local_file(path: Optional[str]) -> bool:
    """A path a viewer can open: a file on this machine (not a role, a hub file or a launch command)."""
    return bool(path) and os.path.isfile(str(path))


def located(findings: Sequence[Finding]) -> list[tuple[Finding, Optional[str], Optional[int]]]:
    """Each finding with the file it points at (as rustc prints it) and the 1-based line of its key, where the
    run read a local file for it; (finding, None, None) otherwise."""
    out: list[tuple[Finding, Optional[str], Optional[int]]] = []
    for f in findings:
        loc = f.location
        if loc is not None and _local_file(loc.path):
            out.append((f, display_path(str(loc.path)), loc.line))
        else:
            out.append((f, None, None))
    return out


def _rule(code: str) -> dict[str, Any]:
    r = REGISTRY[code]
    return {
        "id": code,
        "shortDescription": {"text": r.summary},
        "fullDescription": {"text": r.meaning},
        "help": {"text": f"{r.why}\n\nConfirm: {r.confirm}\n\nLong form: eagle3-doctor explain {code}"},
        "defaultConfiguration": {"level": LEVEL[r.severity]},
    }


def sarif_log(located: Sequence[tuple[Finding, Optional[str], Optional[int]]], version: str) -> dict[str, Any]:
    """The log for findings each with the file (relative to the checkout, or absolute) and 1-based line
    to change, either unknown (None)."""
    order = {f.code: i for i, (f, _, _) in enumerate(located)}
    findings = by_severity([f for f, _, _ in located])
    where = {id(f): (file, line) for f, file, line in located}
    codes = sorted({f.code for f in findings}, key=lambda c: order[c])
    results = []
    for f in findings:
        file, line = where[id(f)]
        text = f.title + (f" -- fix: {f.fix}" if f.fix else "")
        result: dict[str, Any] = {
            "ruleId": f.code,
            "ruleIndex": codes.index(f.code),
            "level": LEVEL[f.severity or "info"],
            "message": {"text": text},
        }
        if file:
            col = f.location.col if f.location is not None and f.location.line == line else None
            result["locations"] = [{"physicalLocation": _physical(file, line, col)}]
        related = [r for r in f.data.get("related", []) if _local_file((r.get("location") or {}).get("path"))]
        if related:  # the same root cause seen by other checks (core.findings.by_root_cause): SARIF's related locations
            result["relatedLocations"] = [
                {
                    "id": i,
                    "physicalLocation": _physical(
                        display_path(r["location"]["path"]), r["location"].get("line"), r["location"].get("col")
                    ),
                    "message": {"text": f"{r['code']}: {r['title']}"},
                }
                for i, r in enumerate(related)
            ]
        results.append(result)
    driver = {"name": "eagle3-doctor", "version": version, "rules": [_rule(c) for c in codes]}
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [{"tool": {"driver": driver}, "results": results}]}
