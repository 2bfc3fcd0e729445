"""Regenerate the reference pages under docs/ that are derived from the code.

python tools/gen_docs.py          # rewrite docs/findings.md (the table and every code's explanation)
python tools/gen_docs.py --check  # exit 1 if it is stale (tests/core/test_findings.py does this)
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HEADER = """# Findings

Generated from the records in `eagle3_doctor/core/findings/` (one module per code family) by `tools/gen_docs.py`;
do not edit by hand. Every finding has a stable code (CI policies and scripts match on it), a default
severity, the evidence that triggered it and a `fix:` line with the exact change for the engine you named.
Where the fix is an edit, the finding also points at it, rustc-style:

```
error[CAP002]: slot 0 is fed the embeddings and slot(s) 1, 2 get the capture point trained one slot earlier
 --> fixtures/draft-sglang/config.json: eagle_config.eagle_aux_hidden_state_layer_ids
```

The arrow names the file the run read: here the config.json of `--draft fixtures/draft-sglang` (a file
below the working directory is shown relative to it, others whole; a hub model's as
`org/name:config.json`, the repository's file). Where the run had no file for it, the arrow names the
file's role instead: `draft/config.json` (the --draft directory's), `draft/*.safetensors`,
`target/config.json`, `server launch command` (the `--serve-config` file when one is given),
`extra_llm_api_options.yaml`, `each chat request`. In `--json` the location keeps the role in `file`
and the file in `path`, and the edit is structured (`edit`: file, path, key, op, value, snippet) beside
the `fix` text. `eagle3-doctor explain CODE` prints the long form below for one code.

| code | severity | meaning |
|---|---|---|
"""


def findings_md() -> str:
    from eagle3_doctor.core.findings.registry import REGISTRY

    rows = [f"| `{code}` | {r.severity} | [{r.summary}](#{code.lower()}) |" for code, r in REGISTRY.items()]
    long = []
    for code, r in REGISTRY.items():
        long += [
            f"### {code}",
            "",
            f"**{r.severity}**: {r.summary}",
            "",
            f"- **What it means.** {r.meaning}",
            f"- **Why acceptance drops.** {r.why}",
            f"- **How to confirm.** {r.confirm}",
            "",
        ]
    return HEADER + "\n".join(rows) + "\n\n## Every code in full\n\n" + "\n".join(long)


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
