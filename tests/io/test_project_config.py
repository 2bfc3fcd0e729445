"""The project's settings file: [tool.eagle3-doctor] ignore in pyproject.toml or .eagle3-doctor.toml, found upward."""

from __future__ import annotations

import json

import pytest
from conftest import DRAFTS, TARGET, invoke

from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.io.project_config import load


def test_found_from_the_working_directory_up_and_the_own_file_wins(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.eagle3-doctor]\nignore = ["cap007"]\n')
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    cfg = load(str(sub))
    assert cfg.ignore == {"CAP007"} and cfg.source == str(tmp_path / "pyproject.toml")
    (tmp_path / ".eagle3-doctor.toml").write_text('ignore = ["FPR003"]\n')
    assert load(str(sub)).ignore == {"FPR003"}
    assert load(str(tmp_path.parent / "elsewhere-that-does-not-exist")).ignore == frozenset()


@pytest.mark.parametrize(
    "body, needle",
    [
        ('ignore = ["CAP999"]\n', "unknown finding code(s) CAP999"),
        ('ignore = "CAP007"\n', "not a list of finding codes"),
        ('ignroe = ["CAP007"]\n', "unknown key(s) ignroe"),
        ("ignore = [\n", "not valid TOML"),
    ],
)
def test_a_wrong_settings_file_is_one_line_exit_2(tmp_path, monkeypatch, body, needle):
    (tmp_path / ".eagle3-doctor.toml").write_text(body)
    with pytest.raises(BadInput, match=r"\.eagle3-doctor\.toml"):
        load(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    r = invoke("inspect", "-t", TARGET, "-d", DRAFTS["sglang"])
    assert r.exit_code == 2 and needle in r.output and "Traceback" not in r.output, r.output


def test_an_ignored_code_leaves_the_report_the_document_and_the_exit_code(tmp_path, monkeypatch):
    import shutil

    d = tmp_path / "incident"
    shutil.copytree(DRAFTS["sglang"], d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [-1, 1, 3]
    (d / "config.json").write_text(json.dumps(cfg))
    monkeypatch.chdir(tmp_path)
    argv = ["inspect", "-t", TARGET, "-d", d, "--engine", "vllm", "--json", tmp_path / "i.json"]
    r = invoke(*argv)
    codes = {f["code"] for f in json.loads((tmp_path / "i.json").read_text())["findings"]}
    assert r.exit_code == 1 and "CFG001" in codes, r.output
    (tmp_path / ".eagle3-doctor.toml").write_text('[tool.eagle3-doctor]\nignore = ["CFG001"]\n')
    r = invoke(*argv)
    codes = {f["code"] for f in json.loads((tmp_path / "i.json").read_text())["findings"]}
    assert r.exit_code == 0 and "CFG001" not in codes and "CFG001" not in r.stdout, r.output
    assert "note: ignored CFG001 (1), as" in r.stderr and ".eagle3-doctor.toml says" in r.stderr
