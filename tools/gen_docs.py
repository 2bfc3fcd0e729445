"""Regenerate the reference pages under docs/ that are derived from the code.

    python tools/gen_docs.py          # rewrite docs/findings.md
    python tools/gen_docs.py --check  # exit 1 if it is stale (tests/test_findings.py does this)
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HEADER = """# Findings

Generated from `eagle3_doctor/findings.py` by `tools/gen_docs.py`; do not edit by hand.
Every finding has a stable code (CI policies and scripts match on it), a default severity, the evidence
that triggered it and a `fix:` line with the exact change for the engine you named.

| code | severity | meaning |
|---|---|---|
"""


def findings_md() -> str:
    from eagle3_doctor.findings import CODES

    rows = [f"| `{code}` | {sev} | {meaning} |" for code, (sev, meaning) in CODES.items()]
    return HEADER + "\n".join(rows) + "\n"


def main(argv: list[str]) -> int:
    out = ROOT / "docs" / "findings.md"
    text = findings_md()
    if "--check" in argv:
        if not out.is_file() or out.read_text() != text:
            print(f"{out} is stale: run python tools/gen_docs.py", file=sys.stderr)
            return 1
        return 0
    out.write_text(text)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
