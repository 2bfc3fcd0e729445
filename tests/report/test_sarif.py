"""The gate's findings as SARIF 2.1.0: the structure the standard requires (checked against its schema's
required properties, types and enums), one rule per code, results at the file and line to change."""

from __future__ import annotations

import json
from types import SimpleNamespace

import jsonschema
from conftest import DRAFTS, TARGET, invoke

from eagle3_doctor.core.findings import Finding, Location


def _obj(required: list[str], **props) -> dict:
    # additionalProperties false, as the SARIF schema has it for these objects: a misspelt key fails
    return {"type": "object", "required": required, "properties": props, "additionalProperties": False}


TEXT = _obj(["text"], text={"type": "string", "minLength": 1})
LEVEL = {"enum": ["none", "note", "warning", "error"]}
REGION = _obj(["startLine"], startLine={"type": "integer", "minimum": 1})
ARTIFACT = _obj(["uri"], uri={"type": "string", "minLength": 1}, uriBaseId={"type": "string"})
LOCATION = _obj(["physicalLocation"], physicalLocation=_obj(["artifactLocation"], artifactLocation=ARTIFACT, region=REGION))
RULE = _obj(
    ["id"], id={"type": "string"}, shortDescription=TEXT, fullDescription=TEXT, help=TEXT,
    defaultConfiguration=_obj([], level=LEVEL),
)  # fmt: skip
RESULT = _obj(
    ["message"], ruleId={"type": "string"}, ruleIndex={"type": "integer", "minimum": 0}, level=LEVEL, message=TEXT,
    locations={"type": "array", "items": LOCATION},
)  # fmt: skip
DRIVER = _obj(["name"], name={"type": "string"}, version={"type": "string"}, rules={"type": "array", "items": RULE})
RUN = _obj(["tool"], tool=_obj(["driver"], driver=DRIVER), results={"type": "array", "items": RESULT})
SARIF_2_1_0 = _obj(
    ["version", "runs"], **{"$schema": {"type": "string"}}, version={"const": "2.1.0"},
    runs={"type": "array", "minItems": 1, "items": RUN},
)  # fmt: skip


def _gate_result(tmp_path, monkeypatch):
    from eagle3_doctor.cli.gate import GateResult
    from eagle3_doctor.cli.gate_policy import Policy

    target, draft = tmp_path / "target", tmp_path / "draft"
    target.mkdir()
    draft.mkdir()
    (target / "config.json").write_text('{\n  "hidden_size": 64,\n  "rope_theta": 10000.0\n}\n')
    (draft / "config.json").write_text('{\n  "eagle_config": {\n    "eagle_aux_hidden_state_layer_ids": [-1, 1, 3]\n  }\n}\n')
    rope = Finding("CFG004", "rope differs", [], "set rope_theta")
    rope.location = Location("target/config.json", "rope_theta", path=str(target / "config.json"))  # as locate() fills it
    cap = Finding("CAP002", "slot shift", ["slot 0: trained layer_out[1] served embed"], "set ids")
    fpr = Finding("FPR003", "undetermined", [], None)
    compare = SimpleNamespace(draft={"layer_ids_key": "eagle_config.eagle_aux_hidden_state_layer_ids"})
    monkeypatch.chdir(tmp_path)
    return GateResult(Policy(), [], [fpr, rope, cap], {}, compare=compare), draft  # type: ignore[arg-type]


def test_the_gate_writes_a_valid_sarif_log_at_the_keys_to_change(tmp_path, monkeypatch):
    from eagle3_doctor.cli.gate_report import write_sarif

    res, draft = _gate_result(tmp_path, monkeypatch)
    write_sarif(res, "draft", "gate.sarif")
    log = json.loads((tmp_path / "gate.sarif").read_text())
    jsonschema.validate(log, SARIF_2_1_0)
    run = log["runs"][0]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    results = run["results"]
    assert sorted(rules) == ["CAP002", "CFG004", "FPR003"] and [r["ruleId"] for r in results] == ["CAP002", "CFG004", "FPR003"]
    assert all(rules[r["ruleIndex"]] == r["ruleId"] for r in results)  # the index names the result's own rule
    assert [r["level"] for r in results] == ["error", "warning", "note"]  # info is SARIF's note
    cap, rope, fpr = results
    assert cap["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "draft/config.json", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 3},  # the layer-id key's line
    }
    assert rope["locations"][0]["physicalLocation"]["region"] == {"startLine": 3}
    assert "fix: set ids" in cap["message"]["text"] and "fix" not in fpr["message"]["text"]
    assert "eagle3-doctor explain CAP002" in run["tool"]["driver"]["rules"][rules.index("CAP002")]["help"]["text"]


def test_the_structure_check_rejects_what_sarif_does_not_allow(tmp_path, monkeypatch):
    """The schema above is strict enough to matter: SARIF has no level "info" and no line 0."""
    import pytest

    from eagle3_doctor.cli.gate_report import located
    from eagle3_doctor.report.sarif import sarif_log

    res, _ = _gate_result(tmp_path, monkeypatch)
    log = sarif_log(located(res, "draft"), "0")
    jsonschema.validate(log, SARIF_2_1_0)
    for bad in (
        {"level": "info"},
        {"locations": [{"physicalLocation": {"artifactLocation": {"uri": "x"}, "region": {"startLine": 0}}}]},
    ):
        broken = json.loads(json.dumps(log))
        broken["runs"][0]["results"][0].update(bad)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, SARIF_2_1_0)


def test_sarif_into_a_directory_is_one_line_exit_2(tmp_path):
    r = invoke("gate", "--target", TARGET, "--draft", DRAFTS["sglang"], "--sarif", tmp_path)
    assert r.exit_code == 2 and "--sarif" in r.output and "Traceback" not in r.output, r.output
