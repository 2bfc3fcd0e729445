"""What defines a finding code, in one record: its severity, its one-line summary and its long form.

Each family of codes (the letters of a code: CAP, DRF, ...) is one module of this package holding its
records; :mod:`.registry` collects them in the order docs/findings.md and `explain` list them.
"""

from __future__ import annotations

from dataclasses import dataclass

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITY_RANK = {INFO: 0, WARNING: 1, ERROR: 2}


@dataclass(frozen=True)
class Code:
    code: str  # stable API: CI policies and users' scripts match on it
    severity: str  # the default severity
    summary: str  # what it means, in one line (the table in docs/findings.md, `explain` with no code)
    meaning: str  # what the finding says is wrong, in full
    why: str  # why the draft then accepts fewer tokens (or why it matters at all)
    confirm: str  # how the user checks it for themselves
