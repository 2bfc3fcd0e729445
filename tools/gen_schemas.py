"""Regenerate the parts of schemas/*.json that are the serialisation of typed results.

The acceptance document's settings, paths, reference and scan are written by the dataclasses in
eagle3_doctor/analyses/results.py; their JSON Schema is generated from the same classes (eagle3_doctor/core/typed_json.py),
so a field added, renamed or retyped there changes the schema here, and the test that validates real
documents against it (tests/cli/test_schemas.py) fails until this is re-run. The rest of the file (title,
tool stamp, findings, the launch command's settings) stays as written by hand.

python tools/gen_schemas.py          # rewrite schemas/acceptance, speedup, diagnose and fix .v1.schema.json
python tools/gen_schemas.py --check  # exit 1 if it is stale (tests/cli/test_schemas.py does this)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ACCEPTANCE = ROOT / "schemas" / "acceptance.v1.schema.json"
SPEEDUP = ROOT / "schemas" / "speedup.v1.schema.json"
DIAGNOSE = ROOT / "schemas" / "diagnose.v1.schema.json"
FIX = ROOT / "schemas" / "fix.v1.schema.json"
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


def speedup_schema() -> dict:
    """The speedup document: wholly the serialisation of SpeedupResult, plus the stamps every document has."""
    from eagle3_doctor.analyses.speedup import SCHEMA, SpeedupResult
    from eagle3_doctor.core.typed_json import json_schema

    defs: dict = {}
    json_schema(SpeedupResult, defs)
    top = defs.pop("SpeedupResult")
    tool = json.loads(ACCEPTANCE.read_text())["$defs"]["tool"]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA,
        "title": "eagle3-doctor speedup --json document, version 1",
        "description": "Written by `eagle3-doctor speedup --json PATH`: predicted tokens per second per speculative "
        "setting, from exact acceptance per setting and measured forward costs. Generated from the result classes "
        "(tools/gen_schemas.py).",
        "type": "object",
        "required": ["schema", "tool", *top["required"]],
        "properties": {"schema": {"const": SCHEMA}, "tool": {"$ref": "#/$defs/tool"}, "trust_remote_code": {"type": "boolean"},
                       **top["properties"]},
        "additionalProperties": False,
        "$defs": {"tool": tool, **dict(sorted(defs.items()))},
    }  # fmt: skip


def result_schema(cls: type, schema_id: str, title: str, description: str) -> dict:
    """A document that is wholly one result class's serialisation, with the stamps every document has and
    the hand-written finding definition the acceptance schema keeps."""
    from eagle3_doctor.core.typed_json import json_schema

    defs: dict = {}
    json_schema(cls, defs)
    top = defs.pop(cls.__name__)
    hand = json.loads(ACCEPTANCE.read_text())["$defs"]
    hand_props = json.loads(ACCEPTANCE.read_text())["properties"]  # the stamps the dispatch writes (cli/drive.py)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": schema_id,
        "title": title,
        "description": description + " Generated from the result classes (tools/gen_schemas.py).",
        "type": "object",
        "required": ["schema", "tool", *top["required"]],
        "properties": {"schema": {"const": schema_id}, "tool": {"$ref": "#/$defs/tool"}, "trust_remote_code": {"type": "boolean"},
                       "engine_release": hand_props["engine_release"], **top["properties"]},
        "additionalProperties": False,
        "$defs": {"tool": hand["tool"], "finding": hand["finding"], **dict(sorted(defs.items()))},
    }  # fmt: skip


def diagnose_schema() -> dict:
    from eagle3_doctor.analyses.attribution.result import SCHEMA, Diagnosis

    doc = result_schema(
        Diagnosis,
        SCHEMA,
        "eagle3-doctor diagnose --json document, version 1",
        "Written by `eagle3-doctor diagnose --json PATH`: where the acceptance gap lives, with the levers, module "
        "ablations and context buckets it was measured on.",
    )
    # with --server-metrics only: the live figures and every prediction's fit (analyses/faults/run.py LiveAttribution)
    doc["properties"]["runtime_faults"] = {
        "type": "object",
        "required": ["measured", "ranking", "notes"],
        "properties": {
            "measured": {"type": "object"},
            "ranking": {"anyOf": [{"type": "object"}, {"type": "null"}]},
            "notes": {"type": "array", "items": {"type": "string"}},
        },
    }
    return doc


def fix_schema() -> dict:
    from eagle3_doctor.analyses.fixing import SCHEMA, FixResult

    return result_schema(
        FixResult,
        SCHEMA,
        "eagle3-doctor fix --json document, version 1",
        "Written by `eagle3-doctor fix --json PATH`: the edits written into the corrected copy of the draft and "
        "the acceptance measured before and after.",
    )


def render(schema: dict) -> str:
    return json.dumps(schema, indent=1) + "\n"


def main(argv: list[str]) -> int:
    text = ACCEPTANCE.read_text()
    docs = {
        ACCEPTANCE: render(acceptance_schema(json.loads(text))),
        SPEEDUP: render(speedup_schema()),
        DIAGNOSE: render(diagnose_schema()),
        FIX: render(fix_schema()),
    }
    if "--check" in argv:
        stale = [f for f, new in docs.items() if not f.exists() or f.read_text() != new]
        for f in stale:
            print(f"{f.relative_to(ROOT)} is stale: run python tools/gen_schemas.py", file=sys.stderr)
        return 1 if stale else 0
    for f, new in docs.items():
        f.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
