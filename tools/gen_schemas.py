"""Regenerate the parts of schemas/*.json that are the serialisation of typed results.

The acceptance document's settings, paths, reference and scan are written by the dataclasses in
eagle3_doctor/analyses/results.py; their JSON Schema is generated from the same classes (eagle3_doctor/core/typed_json.py),
so a field added, renamed or retyped there changes the schema here, and the test that validates real
documents against it (tests/test_schemas.py) fails until this is re-run. The rest of the file (title,
tool stamp, findings, the launch command's settings) stays as written by hand.

python tools/gen_schemas.py          # rewrite schemas/acceptance.v1.schema.json
python tools/gen_schemas.py --check  # exit 1 if it is stale (tests/test_schemas.py does this)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ACCEPTANCE = ROOT / "schemas" / "acceptance.v1.schema.json"
HAND_WRITTEN_DEFS = ("finding", "tool", "serve")


def acceptance_schema(current: dict) -> dict:
    """``current`` with its typed parts replaced by the schema of the result classes."""
    from eagle3_doctor.analyses.results import PathResult, ReferenceResult, RunSettings, ScanRow
    from eagle3_doctor.core.typed_json import json_schema

    defs: dict = {}
    props = dict(current["properties"])
    props["settings"] = json_schema(RunSettings, defs)
    props["paths"] = {"type": "object", "additionalProperties": json_schema(PathResult, defs)}
    props["reference"] = {"anyOf": [json_schema(ReferenceResult, defs), {"type": "null"}]}
    props["scan"] = {"anyOf": [{"type": "array", "items": json_schema(ScanRow, defs)}, {"type": "null"}]}
    kept = {k: v for k, v in current["$defs"].items() if k in HAND_WRITTEN_DEFS}
    return {**current, "properties": props, "$defs": {**kept, **dict(sorted(defs.items()))}}


def render(schema: dict) -> str:
    return json.dumps(schema, indent=1) + "\n"


def main(argv: list[str]) -> int:
    text = ACCEPTANCE.read_text()
    new = render(acceptance_schema(json.loads(text)))
    if "--check" in argv:
        if new != text:
            print(f"{ACCEPTANCE.relative_to(ROOT)} is stale: run python tools/gen_schemas.py", file=sys.stderr)
            return 1
        return 0
    ACCEPTANCE.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
