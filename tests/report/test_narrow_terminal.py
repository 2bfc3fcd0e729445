"""At 80 columns nothing is lost: every column of the compare-hidden, acceptance and gate tables is shown
(split into a second table where one would not fit), no cell is ellipsized, and finding lines are wrapped
between words with a hanging indent instead of being cut by the terminal."""

from __future__ import annotations

import json
import re

from conftest import DRAFTS, DUMP, PROMPTS, TARGET, invoke
from rich.console import Console

from eagle3_doctor.core.findings import Finding
from eagle3_doctor.report.render import MATRIX_COLUMNS, render_findings, render_gate
from eagle3_doctor.report.terminal import Column, fitted_tables, wrap

SLOT_COLUMNS = ("slot", "trained", "served", "cos mean", "cos min", "cos p5", "rel L2 mean", "rel L2 p95", "max |diff|")
BORDERS = "┃│┏┓┗┛┡┩└┘┳┻╇━─┴┬┼"


def _headers(text: str) -> set[str]:
    """Every header cell of every table (headers never wrap, so each sits whole on its one line)."""
    return {cell.strip() for ln in text.splitlines() if ln.startswith("┃") for cell in ln.strip("┃").split("┃")}


def _tokens(text: str) -> set[str]:
    return set(re.sub(f"[{BORDERS}]", " ", text).split())


def _assert_fits(text: str, findings: list[dict]) -> None:
    """No ellipsis, no line over 80 columns, and every word of every finding whole somewhere in the text."""
    assert "…" not in text, text
    long = [ln for ln in text.splitlines() if len(ln) > 80]
    assert not long, "\n".join(long)
    tokens = _tokens(text)
    assert findings, "the run was meant to produce findings"
    for f in findings:
        for part in [f["title"], f["fix"] or "", *f["evidence"]]:
            cut = [w for w in part.split() if w not in tokens]
            assert not cut, f"{f['code']}: words cut or missing at 80 columns: {cut}\n{text}"


def _run80(monkeypatch, tmp_path, *args):
    monkeypatch.setenv("COLUMNS", "80")
    out = tmp_path / "out.json"
    r = invoke(*args, "--json", out, "-q")
    assert r.exit_code in (0, 1), r.output
    return r.output, json.loads(out.read_text())


def test_compare_hidden_keeps_every_slot_column_at_80(monkeypatch, tmp_path):
    text, data = _run80(
        monkeypatch, tmp_path, "compare-hidden", "-t", TARGET, "-d", DRAFTS["sglang"], "--layer-ids=-1,1,3",
        "--prompts", PROMPTS, "--limit", "2",
    )  # fmt: skip
    assert set(SLOT_COLUMNS) <= _headers(text), text
    slot0 = [ln for ln in text.splitlines() if re.match(r"│\s+0 │", ln)]
    figures = [float(x) for ln in slot0 for x in re.findall(r"(?<![\w\[])-?\d+\.\d+", ln)]
    assert len(figures) == 6, slot0  # cos mean, min, p5, rel L2 mean, p95, max |diff|
    # the decisive figure, whole: slot 0's minimum cosine (negative: fed the embeddings)
    assert abs(figures[1] - data["slots"][0]["cos_min"]) < 1e-4, slot0
    _assert_fits(text, data["findings"])


def test_compare_hidden_matrix_keeps_its_columns_and_row_labels_at_80(monkeypatch, tmp_path):
    text, data = _run80(
        monkeypatch, tmp_path, "compare-hidden", "-t", TARGET, "-d", DRAFTS["sglang"], "--layer-ids=-1,1,3",
        "--train-dump", DUMP, "--matrix", "--limit", "2",
    )  # fmt: skip
    points = ["emb", *(f"L{i}" for i in range(data["num_layers"])), "fn"]
    assert {c.strip() for c in MATRIX_COLUMNS} | set(points) <= _headers(text), text
    assert "serve slot 0 (embed)" in text, text  # a row label whole, not "(emb…"
    _assert_fits(text, data["findings"])


def test_acceptance_keeps_every_path_and_finding_whole_at_80(monkeypatch, tmp_path):
    text, data = _run80(
        monkeypatch, tmp_path, "acceptance", "-t", TARGET, "-d", DRAFTS["sglang"], "--layer-ids=-1,1,3",
        "--prompts", PROMPTS, "--limit", "2", "--num-steps", "3", "--max-new-tokens", "8",
    )  # fmt: skip
    assert {"metric", "serving", "training"} <= _headers(text), text
    assert f"{data['paths']['serving']['chain']['mean_acceptance_length']:.3f}" in text
    _assert_fits(text, data["findings"])


def test_the_gate_table_and_its_findings_fit_80_columns():
    from eagle3_doctor.cli.gate import Check, GateResult
    from eagle3_doctor.cli.gate_policy import Policy

    detail = "decided on the lower bound of the 95% interval 0.5426 [0.5053, 0.5851] over 8 prompts"
    finding = Finding(
        "CAP002",
        "slot 0 is fed the embeddings and slot(s) 1, 2 get the capture point trained one slot earlier",
        ["serving side: --layer-ids [-1, 1, 3] (as if written in eagle_config.eagle_aux_hidden_state_layer_ids)"],
        'set "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}   (in the draft\'s config.json)',
        severity="error",
    )
    checks = [
        Check("step-1 accuracy", 0.5053, 0.6, False, detail),
        Check("no findings at or above error", 1.0, 0.0, False, "CAP002"),
    ]
    con = Console(record=True, width=80, color_system=None)
    render_gate(con, GateResult(Policy(), checks, [finding], {}))
    text = con.export_text()
    assert {"check", "value", "threshold", "result"} <= _headers(text) and "0.5053" in text and "0.6000" in text, text
    _assert_fits(text, [{"code": f.code, "title": f.title, "fix": f.fix, "evidence": f.evidence} for f in [finding]])


def test_wrap_breaks_only_between_words_and_keeps_a_json_value_whole():
    text = 'set "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}   (in the draft\'s config.json); or remove it'
    lines = wrap(text, 62, "   = fix: ", " " * 10)
    assert len(lines) == 3 and all(len(ln) <= 62 for ln in lines) and lines[0] == '   = fix: set "eagle_config":', lines
    assert any('{"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}' in ln for ln in lines), lines
    assert " ".join(ln.strip() for ln in lines).replace("=  fix:", "= fix:").split() == ["=", "fix:", *text.split()]
    assert all(ln.startswith(" " * 10) for ln in lines[1:])
    # a word longer than the line overflows on a line of its own rather than being cut
    assert wrap("a " + "x" * 30 + " b", 20, "", "  ") == ["a", "  " + "x" * 30, "  b"]
    assert wrap("one\ntwo three", 80, "| ", "|   ") == ["| one", "|   two three"]


def test_fitted_tables_split_instead_of_dropping_columns():
    columns = [Column("name"), *[Column(f"figure {i}", "right") for i in range(8)]]
    rows = [["row a", *[f"{i}.12345" for i in range(8)]]]
    narrow = Console(record=True, width=60, color_system=None)
    tables = fitted_tables(narrow, "t (what)", columns, rows)
    assert len(tables) > 1 and all(t.columns[0].header == "name" for t in tables)
    assert [c.header for t in tables for c in t.columns[1:]] == [c.header for c in columns[1:]]
    for t in tables:
        narrow.print(t)
    text = narrow.export_text()
    assert "…" not in text and all(len(ln) <= 60 for ln in text.splitlines()) and "t (continued)" in text
    assert len(fitted_tables(Console(width=200), "t", columns, rows)) == 1


def test_findings_wrap_under_their_labels():
    f = Finding("CAP001", "word " * 30, ["evidence " * 12], "fix " * 25, severity="error")
    con = Console(record=True, width=50, color_system=None)
    render_findings(con, [f], "ok")
    lines = con.export_text().splitlines()
    assert all(len(ln) <= 50 for ln in lines), lines
    assert lines[1].startswith(" " * len("error[CAP001]: ") + "word")
    assert any(ln.startswith("   |   evidence") for ln in lines) and any(ln.startswith(" " * 10 + "fix") for ln in lines)
