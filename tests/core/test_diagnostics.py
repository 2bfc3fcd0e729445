"""Findings as located diagnostics, so CI and editors point at what to change: a structured Fix beside
the text and its location, every code explained, one exit policy.

How a finding is rendered is pinned in tests/report/test_output.py; the edits that remove inspect's
findings, applied by key, in tests/test_finding_cases.py."""

from __future__ import annotations

import copy
import json
import pickle

import pytest
from conftest import ROOT

from eagle3_doctor.core.findings import DRAFT_CONFIG, Finding, Fix, Location, config_fix


def test_plain_text_fix_still_constructs_and_serialises():
    f = Finding("CAP006", "t", ["e"], "do this")
    assert f.fix == "do this" and f.edit is None and f.location is None and f.help is None
    d = f.to_dict()
    assert d["fix"] == "do this" and d["edit"] is None and d["location"] is None and d["help"] is None


def test_fix_is_its_text_and_carries_the_edit():
    fx = config_fix('set "rope_theta": 10000.0 in the draft config', "rope_theta", 10000.0)
    assert isinstance(fx, str) and fx.startswith("set") and json.dumps(fx) == json.dumps(str(fx))
    assert (fx.file, fx.key, fx.op, fx.value, fx.snippet) == (DRAFT_CONFIG, "rope_theta", "set", 10000.0, '"rope_theta": 10000.0')
    for other in (copy.deepcopy(fx), pickle.loads(pickle.dumps(fx))):
        assert isinstance(other, Fix) and other == fx and other.to_dict() == fx.to_dict()
    f = Finding("CFG003", "t", [], fx)
    assert f.location == Location(DRAFT_CONFIG, "rope_theta") and f.edit is fx
    assert f.to_dict()["edit"] == {
        "file": DRAFT_CONFIG,
        "key": "rope_theta",
        "op": "set",
        "value": 10000.0,
        "snippet": '"rope_theta": 10000.0',
        "path": None,
    }
    assert config_fix("nested", "eagle_config.norm_before_fc", True).snippet == '"eagle_config": {"norm_before_fc": true}'
    with pytest.raises(ValueError):
        Fix("x", file=DRAFT_CONFIG, op="move")


# --------------------------------------------------------------------------- every code explained


def test_every_code_has_an_explanation_and_no_explanation_lacks_a_code():
    from eagle3_doctor.core.findings import CODES
    from eagle3_doctor.core.findings.registry import REGISTRY

    assert set(REGISTRY) == set(CODES), sorted(set(REGISTRY) ^ set(CODES))
    for code, r in REGISTRY.items():
        assert all(len(x) > 20 for x in (r.meaning, r.why, r.confirm)), code


# --------------------------------------------------------------------------- one exit policy


def test_exit_code_is_the_one_policy():
    from eagle3_doctor.core.findings import exit_code

    info, warn, err = Finding("CAP010", "i"), Finding("CAP007", "w"), Finding("CAP001", "e")
    assert exit_code([]) == 0 and exit_code([info]) == 0
    assert exit_code([warn]) == 1 and exit_code([warn], "error") == 0 and exit_code([info], "info") == 1
    assert exit_code([err], "error") == 1
    # a threshold the user set fails at any fail_on, whatever its severity
    assert Finding("ACC003", "below").severity == "warning" and exit_code([Finding("ACC003", "below")], "error") == 1
    assert exit_code([info], "error", passed=False) == 1
    with pytest.raises(ValueError):
        exit_code([], "fatal")
    cli_src = (ROOT / "eagle3_doctor" / "cli" / "app.py").read_text()
    assert "EXIT_FINDINGS" not in cli_src  # no command keeps a policy of its own


def test_one_root_cause_is_one_diagnostic_with_its_other_sightings_attached():
    from eagle3_doctor.core.findings import by_root_cause, locate

    key = "eagle_config.eagle_aux_hidden_state_layer_ids"
    fix = config_fix("set the ids", key, [1, 3, 4])
    fpr = Finding("FPR001", "the weights fit [1, 3, 4]", ["log-lik"], fix)
    cap = Finding("CAP002", "slot 0 is fed the embeddings", ["slot 0"], fix)
    acc = Finding("ACC001", "the serving features cost 0.94", [], fix)
    other = Finding("CFG004", "rope differs", [], "set rope_theta", location=Location("target/config.json", "rope_theta"))
    gate = Finding("ACC003", "below --min-tau", [], fix)  # a user-set threshold stays its own diagnostic
    out = by_root_cause([fpr, other, cap, acc, gate])
    assert [f.code for f in out] == ["CAP002", "CFG004", "ACC003"]  # the cause leads, where the group first stood
    assert [r["code"] for r in out[0].data["related"]] == ["FPR001", "ACC001"] and out[0].severity == "error"
    assert out[0].data["related"][0]["evidence"] == ["log-lik"]
    locate(out, {"draft/config.json": "/d/config.json"})
    assert out[0].data["related"][1]["location"]["path"] == "/d/config.json"
    # the same key with another fix is another mistake
    cap2 = Finding("CAP001", "shifted", [], config_fix("other", key, [2, 4, 5]))
    assert len(by_root_cause([Finding("CAP002", "x", [], fix), cap2])) == 2
