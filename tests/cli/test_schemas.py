"""Every --json document has a versioned JSON Schema under schemas/, and what the CLI writes validates
against it, with the tool version and the command line stamped in."""

from __future__ import annotations

import json
import re

import pytest
from conftest import DRAFTS, PROMPTS, ROOT, TARGET, invoke

from eagle3_doctor import __version__

jsonschema = pytest.importorskip("jsonschema")
SCHEMAS = ROOT / "schemas"


def _schema_ids_in_code() -> set[str]:
    ids = set()
    for f in (ROOT / "eagle3_doctor").rglob("*.py"):
        ids |= set(re.findall(r'SCHEMA\s*=\s*"(eagle3-doctor/[a-z0-9-]+/\d+)"', f.read_text()))
    return ids


def _schema(doc_id: str) -> dict:
    name, version = doc_id.split("/")[1:]
    return json.loads((SCHEMAS / f"{name}.v{version}.schema.json").read_text())


def test_every_document_kind_has_a_schema():
    ids = _schema_ids_in_code()
    assert {
        "eagle3-doctor/inspect/1",
        "eagle3-doctor/compare-hidden/1",
        "eagle3-doctor/acceptance/1",
        "eagle3-doctor/server-metrics/1",
        "eagle3-doctor/fingerprint/1",
        "eagle3-doctor/template-diff/1",
        "eagle3-doctor/gate/1",
    } <= ids
    for doc_id in ids:
        sch = _schema(doc_id)
        jsonschema.Draft202012Validator.check_schema(sch)
        assert sch["$id"] == doc_id and sch["properties"]["schema"]["const"] == doc_id


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", "-t", str(TARGET), "-d", str(DRAFTS["sglang"])],
        ["compare-hidden", "-t", str(TARGET), "-d", str(DRAFTS["sglang"]), "--prompts", str(PROMPTS), "--limit", "2", "-q"],
        [
            "acceptance",
            "-t",
            str(TARGET),
            "-d",
            str(DRAFTS["sglang"]),
            "--prompts",
            str(PROMPTS),
            "--limit",
            "1",
            "--max-new-tokens",
            "8",
            "-k",
            "3",
            "--topk",
            "2",
            "--num-draft-tokens",
            "5",
            "-q",
        ],
        [
            "server-metrics",
            "--metrics",
            str(ROOT / "fixtures/serving/vllm-after-healthy.prom"),
            "--before",
            str(ROOT / "fixtures/serving/vllm-before.prom"),
        ],
        ["fingerprint", "-t", str(TARGET), "-d", str(DRAFTS["sglang"]), "--limit", "1", "--max-new-tokens", "4", "-q"],
        [
            "template-diff",
            "-t",
            str(TARGET),
            "--serve-template",
            str(ROOT / "fixtures/templates/chatml.jinja"),
            "--requests",
            str(ROOT / "fixtures/conversations/requests.jsonl"),
        ],
    ],
)
def test_cli_documents_validate(args, tmp_path):
    out = tmp_path / "doc.json"
    r = invoke(*args, "--json", out)
    assert r.exit_code in (0, 1), r.output
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, _schema(doc["schema"]))
    assert doc["tool"]["version"] == __version__
    assert doc["tool"]["command"][:2] == ["eagle3-doctor", args[0]] or doc["tool"]["command"][0] == "eagle3-doctor"


def test_acceptance_schema_is_generated_from_the_result_classes():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_schemas.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr + " (run: python tools/gen_schemas.py)"


def test_acceptance_schema_rejects_what_the_result_classes_do_not_write():
    """The generated parts are closed: a key the dataclasses do not write, or one they always write
    gone missing, fails validation (so the schema cannot drift from the serialisation unnoticed)."""
    from conftest import path_result

    from eagle3_doctor.analyses.results import ChainMetrics, ScanRow
    from eagle3_doctor.core.taps import parse_spec

    schema = _schema("eagle3-doctor/acceptance/1")
    validator = jsonschema.Draft202012Validator(schema)
    defs = {"$defs": schema["$defs"]}
    path = path_result(ChainMetrics(passes=2, mean_acceptance_length=1.5, per_position_rate=[0.5, 0.0]))
    doc = path.to_dict()
    assert not list(validator.evolve(schema={**defs, "$ref": "#/$defs/PathResult"}).iter_errors(doc))
    for bad in ({**doc, "acc_1": 0.4}, {k: v for k, v in doc.items() if k != "chain"}, {**doc, "spec": "layer_out[1]"}):
        assert list(validator.evolve(schema={**defs, "$ref": "#/$defs/PathResult"}).iter_errors(bad))
    row = ScanRow(parse_spec("layer_out[1]"), 0.5, 10, (0.4, 0.6), True, None, True).to_dict()
    assert row["step1_acc_ci"] == [0.4, 0.6] and row["spec"] == ["layer_out[1]"]
    scan_schema = {**defs, "$ref": "#/$defs/ScanRow"}
    assert not list(validator.evolve(schema=scan_schema).iter_errors(row))
    assert list(validator.evolve(schema=scan_schema).iter_errors({**row, "step1_acc_ci": [0.4]}))
