"""The gate's result for people: the Markdown summary (also appended to $GITHUB_STEP_SUMMARY) and one
GitHub workflow annotation per finding, at the file and key to change."""

from __future__ import annotations

import os
from pathlib import Path

from ..core.findings import Finding, display_path
from .gate import GateResult


def markdown(res: GateResult, draft: str) -> str:
    from ..report.render import findings_markdown

    head = "PASS" if res.passed else "FAIL"
    lines = [
        f"## eagle3-doctor gate: {head}",
        "",
        f"draft `{draft}`, engine {res.policy.engine}",
        "",
        "| check | value | threshold | result |",
        "|---|---|---|---|",
    ]
    for c in res.checks:
        v = "-" if c.value is None else f"{c.value:.4f}"
        t = "-" if c.threshold is None else f"{c.threshold:.4f}"
        lines.append(f"| {c.name} | {v} | {t} | {'pass' if c.passed else '**fail**'} {c.detail} |")
    serving = res.acceptance.paths.get("serving") if res.acceptance is not None else None
    iv = serving.intervals if serving is not None else None
    lines += [""] + (
        [f"- {x}" for x in iv.lines()]
        if iv is not None
        else [f"mean acceptance length {res.metrics['mean_acceptance_length']:.3f}, tau {res.metrics['tau']:.3f}"]
    )
    if res.fingerprint is not None:
        from ..analyses.fingerprint import fingerprint_markdown

        lines += ["", fingerprint_markdown(res.fingerprint)]
    lines += ["", "### Findings", "", findings_markdown(res.findings)]
    return "\n".join(lines)


def write_summary(text: str, path: str | None) -> None:
    from ..io.outputs import write_output

    if path:
        write_output(path, text.encode())
    gh = os.environ.get("GITHUB_STEP_SUMMARY")
    if gh:  # GitHub appends step summaries; so do we
        from ..io.outputs import append_text

        append_text(gh, text + "\n")


# findings whose fix is a change to the layer-id key in the draft's config.json
_KEY_CODES = ("CAP", "FPR001", "CFG001", "CFG002", "GATE002", "ACC001")


def _escape(text: str) -> str:
    # GitHub workflow commands: % CR LF are escaped in the message, and also , : in properties
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def located(res: GateResult, draft: str) -> list[tuple[Finding, str, int | None]]:
    """Each finding with the file and 1-based line to change: the file its location names (filled by
    findings.locate), else the draft's config.json, at the layer-id key for the codes whose fix is there."""
    cfg = Path(draft) / "config.json"
    dr = (res.compare.draft if res.compare is not None else None) or {}
    ids_line = _key_line(cfg, str(dr["layer_ids_key"])) if dr.get("layer_ids_key") else None
    out: list[tuple[Finding, str, int | None]] = []
    for f in res.findings:
        loc = f.location
        if loc is not None and loc.path and Path(loc.path).is_file():
            line = loc.line if loc.line is not None else _key_line(Path(loc.path), loc.key)
            out.append((f, display_path(loc.path), line))
        else:
            out.append((f, str(cfg), ids_line if f.code.startswith(_KEY_CODES) else None))
    return out


def github_annotations(res: GateResult, draft: str) -> list[str]:
    """`::error file=...,line=...::` workflow commands, one per finding, at the file and key to change."""
    from ..core.findings import by_severity

    where = {id(f): (file, line) for f, file, line in located(res, draft)}
    out = []
    level = {"error": "error", "warning": "warning", "info": "notice"}
    for f in by_severity(res.findings):
        file, line = where[id(f)]
        props = f"file={file}" + (f",line={line}" if line is not None else "")
        if line is not None and f.location is not None and f.location.line == line and f.location.col:
            props += f",col={f.location.col}"
        props += f",title={_escape('eagle3-doctor ' + f.code).replace(',', '%2C').replace(':', '%3A')}"
        msg = f.title + (f" -- fix: {f.fix}" if f.fix else "")
        out.append(f"::{level[f.severity or 'info']} {props}::{_escape(msg)}")
    return out


def write_sarif(res: GateResult, draft: str, path: str | None) -> None:
    """The findings as a SARIF 2.1.0 log (code scanning shows them inline at the key to change)."""
    import json

    from .. import __version__
    from ..io.outputs import write_output
    from ..report.sarif import sarif_log

    if path:
        write_output(path, (json.dumps(sarif_log(located(res, draft), __version__), indent=2) + "\n").encode())


def _key_line(path: Path, dotted: str | None) -> int | None:
    """The 1-based line of a JSON file where the dotted key's last part is written, if it is."""
    if not dotted or not path.is_file():
        return None
    key = f'"{dotted.split(".")[-1]}"'
    try:
        return next((i + 1 for i, t in enumerate(path.read_text(errors="replace").splitlines()) if key in t), None)
    except OSError:
        return None
