"""The gate's findings as SARIF 2.1.0: the structure the standard requires (checked against its schema's
required properties, types and enums), one rule per code, results at the file and line to change."""

from __future__ import annotations

import json
from types import SimpleNamespace

import jsonschema
import pytest
from conftest import DRAFTS, PROMPTS, ROOT, TARGET, invoke

from eagle3_doctor.core.findings import Finding, Location


def _obj(required: list[str], **props) -> dict:
    # additionalProperties false, as the SARIF schema has it for these objects: a misspelt key fails
    return {"type": "object", "required": required, "properties": props, "additionalProperties": False}


TEXT = _obj(["text"], text={"type": "string", "minLength": 1})
LEVEL = {"enum": ["none", "note", "warning", "error"]}
REGION = _obj(["startLine"], startLine={"type": "integer", "minimum": 1}, startColumn={"type": "integer", "minimum": 1})
ARTIFACT = _obj(["uri"], uri={"type": "string", "minLength": 1}, uriBaseId={"type": "string"})
PHYSICAL = _obj(["artifactLocation"], artifactLocation=ARTIFACT, region=REGION)
LOCATION = _obj(["physicalLocation"], physicalLocation=PHYSICAL)
# a related location (SARIF 3.27.22): an id unique in the result (an integer >= -1) and the message saying why
RELATED = _obj(["physicalLocation"], id={"type": "integer", "minimum": -1}, physicalLocation=PHYSICAL, message=TEXT)
RULE = _obj(
    ["id"], id={"type": "string"}, shortDescription=TEXT, fullDescription=TEXT, help=TEXT,
    defaultConfiguration=_obj([], level=LEVEL),
)  # fmt: skip
RESULT = _obj(
    ["message"], ruleId={"type": "string"}, ruleIndex={"type": "integer", "minimum": 0}, level=LEVEL, message=TEXT,
    locations={"type": "array", "items": LOCATION}, relatedLocations={"type": "array", "items": RELATED},
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


# GitLab code quality: an array of issues, each with these (docs.gitlab.com/ci/testing/code_quality, report format)
CODE_QUALITY = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["description", "check_name", "fingerprint", "severity", "location"],
        "properties": {
            "description": {"type": "string", "minLength": 1},
            "check_name": {"type": "string", "minLength": 1},
            "fingerprint": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "severity": {"enum": ["info", "minor", "major", "critical", "blocker"]},
            "location": {
                "type": "object",
                "required": ["path", "lines"],
                "properties": {
                    "path": {"type": "string", "minLength": 1},
                    "lines": {
                        "type": "object",
                        "required": ["begin"],
                        "properties": {"begin": {"type": "integer", "minimum": 1}},
                    },
                },
            },
        },
    },
}
SMALL = ["--prompts", str(PROMPTS), "--limit", "2"]
MEASURED = [*SMALL, "--max-new-tokens", "8"]


def _incident(tmp_path):
    import shutil

    d = tmp_path / "incident"
    shutil.copytree(DRAFTS["sglang"], d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [-1, 1, 3]
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    return d


# every command that reports findings, as a CI job would run it on the seed incident
REPORTING = {
    "inspect": lambda d, tmp: ["inspect", "-t", TARGET, "-d", d, "--engine", "vllm"],
    "compare-hidden": lambda d, tmp: ["compare-hidden", "-t", TARGET, "-d", d, "--train-recipe", "specforge:1,3,4", *SMALL],
    "acceptance": lambda d, tmp: ["acceptance", "-t", TARGET, "-d", d, "-k", "2", *MEASURED],
    "diagnose": lambda d, tmp: ["diagnose", "-t", TARGET, "-d", d, "-k", "2", *MEASURED],
    "fix": lambda d, tmp: ["fix", "-t", TARGET, "-d", d, "--out", tmp / "fixed", "-k", "2", *MEASURED],
    "fingerprint": lambda d, tmp: ["fingerprint", "-t", TARGET, "-d", d, *MEASURED],
    "gate": lambda d, tmp: ["gate", "-t", TARGET, "-d", d, "--policy", _policy(tmp), "--prompts", PROMPTS],
    "template-diff": lambda d, tmp: [
        "template-diff",
        "-t",
        TARGET,
        "--serve-template",
        ROOT / "fixtures/templates/chatml.jinja",
        "--requests",
        ROOT / "fixtures/conversations/requests.jsonl",
    ],
}


def _policy(tmp, limit=2, max_new_tokens=8):
    p = tmp / "policy.toml"
    p.write_text(
        f"[gate]\nlimit = {limit}\nmax_new_tokens = {max_new_tokens}\nnum_steps = 2\n\n"
        '[training]\nrecipe = "specforge"\nids = [1, 3, 4]\n'
    )
    return p


def test_every_command_that_reports_findings_is_covered():
    from eagle3_doctor.cli.app import COMMANDS
    from eagle3_doctor.cli.options import FORMAT

    with_format = {n for n, fn in COMMANDS if any(p.annotation is FORMAT.annotation for p in _params(fn))}
    assert with_format == set(REPORTING), with_format ^ set(REPORTING)


def _params(fn):
    import inspect

    return inspect.signature(fn).parameters.values()


@pytest.mark.parametrize("name", list(REPORTING))
def test_format_sarif_is_a_valid_sarif_log_for_every_reporting_command(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative paths in the log are relative to the checkout the job runs in
    inc = _incident(tmp_path)
    argv = [str(a) for a in REPORTING[name](inc, tmp_path)]
    r = invoke(*argv, "--format", "sarif", env={"COLUMNS": "100"})
    assert r.exit_code in (0, 1), r.output
    log = json.loads(r.stdout)  # stdout holds the log alone: the report went to stderr
    jsonschema.validate(log, SARIF_2_1_0)
    results = log["runs"][0]["results"]
    assert results, f"{name}: no findings in the log"
    for res in results:  # a result at a key of the config the run read carries its line and column
        for loc in res.get("locations", []):
            region = loc["physicalLocation"].get("region")
            if loc["physicalLocation"]["artifactLocation"]["uri"].endswith("incident/config.json") and region:
                text = (inc / "config.json").read_text().splitlines()[region["startLine"] - 1]
                assert text[region["startColumn"] - 1] == '"', (name, region, text)
    if name in ("inspect", "gate"):
        r = invoke(*argv, "--format", "gitlab", env={"COLUMNS": "100"})
        jsonschema.validate(json.loads(r.stdout), CODE_QUALITY)


def test_the_incident_gate_is_one_error_with_its_other_sightings_related(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    inc = _incident(tmp_path)
    # as the shipped policy measures it: 8 prompts, enough for the fingerprint and acceptance to decide
    pol = _policy(tmp_path, limit=8, max_new_tokens=48)
    r = invoke(
        "gate", "-t", TARGET, "-d", inc, "--policy", pol, "--prompts", PROMPTS, "--format", "sarif", env={"COLUMNS": "100"}
    )
    assert r.exit_code == 1, r.output
    results = json.loads(r.stdout)["runs"][0]["results"]
    errors = [x for x in results if x["level"] == "error"]
    assert [x["ruleId"] for x in errors] == ["CAP002"], errors
    related = [x["message"]["text"][:6] for x in errors[0].get("relatedLocations", [])]
    assert "FPR001" in related and "ACC001" in related, related
    region = errors[0]["locations"][0]["physicalLocation"]["region"]
    lines = (inc / "config.json").read_text().splitlines()
    assert lines[region["startLine"] - 1][region["startColumn"] - 1 :].startswith('"eagle_aux_hidden_state_layer_ids"')


def test_format_refuses_an_unknown_name_and_a_shared_stdout():
    r = invoke("inspect", "-t", TARGET, "-d", DRAFTS["sglang"], "--format", "xml")
    assert r.exit_code == 2 and "unknown --format 'xml'" in r.output
    r = invoke("inspect", "-t", TARGET, "-d", DRAFTS["sglang"], "--format", "sarif", "--json", "-")
    assert r.exit_code == 2 and "both write to standard output" in r.output
