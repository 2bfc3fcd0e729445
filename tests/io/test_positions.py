"""path:line:col for a config key: the line and column of the key in the file the run read."""

from __future__ import annotations

import json

import pytest

from eagle3_doctor.core.findings import Finding, Location
from eagle3_doctor.io.positions import key_offsets, key_position, line_col, place

CONFIG = '{\n  "architectures": ["X"],\n  "eagle_config": {\n    "eagle_aux_hidden_state_layer_ids": [-1, 1, 3],\n    "x": {"y": "a\\"}b"}\n  },\n  "draft_vocab_size": 256\n}\n'


def test_every_key_at_its_opening_quote():
    offs = key_offsets(CONFIG)
    assert line_col(CONFIG, offs[("eagle_config", "eagle_aux_hidden_state_layer_ids")]) == (4, 5)
    assert line_col(CONFIG, offs[("eagle_config",)]) == (3, 3)
    assert line_col(CONFIG, offs[("draft_vocab_size",)]) == (7, 3)  # past a string holding an escaped quote and brace
    assert ("eagle_config", "x", "y") in offs
    assert set(json.loads(CONFIG)) == {k[0] for k in offs if len(k) == 1}


@pytest.mark.parametrize("bad", ['{"a": }', '{"a" 1}', "[1, 2", '{"a": tru}'])
def test_text_that_is_not_json_is_refused(bad):
    with pytest.raises(ValueError):
        key_offsets(bad)


def test_a_finding_gets_the_line_and_column_of_its_key(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(CONFIG)
    f = Finding(
        "CAP002",
        "t",
        [],
        "fix",
        location=Location("draft/config.json", "eagle_config.eagle_aux_hidden_state_layer_ids", str(cfg)),
    )
    missing = Finding("CFG004", "t", [], "fix", location=Location("draft/config.json", "eagle_config.norm_before_fc", str(cfg)))
    elsewhere = Finding("CFG004", "t", [], "fix", location=Location("draft/config.json", "rope_theta", None))
    place([f, missing, elsewhere])
    assert (f.location.line, f.location.col) == (4, 5)
    assert str(f.location) == f"{cfg}:4:5: eagle_config.eagle_aux_hidden_state_layer_ids"
    assert (missing.location.line, missing.location.col) == (3, 3)  # a key to add: where its object starts
    assert elsewhere.location.line is None and str(elsewhere.location) == "draft/config.json: rope_theta"


def test_no_position_where_the_file_is_not_json(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    assert key_position(str(tmp_path / "config.json"), "a") is None
    assert key_position(str(tmp_path / "absent.json"), "a") is None
    (tmp_path / "x.yaml").write_text("a: 1\n")
    assert key_position(str(tmp_path / "x.yaml"), "a") is None
