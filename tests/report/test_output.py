"""Output people can trust: findings as located diagnostics (rustc style, errors first), 80-column tables
that keep capture points whole, titled plots with the trained/configured cells, no hint contradicting a
finding, the gate's table. Progress lines and --help are the CLI's (tests/cli/test_progress.py)."""

from __future__ import annotations

import re

import pytest
from conftest import DRAFTS, PROMPTS, TARGET, invoke
from rich.console import Console

from eagle3_doctor.analyses.compare.symbolic import diagnose_specs
from eagle3_doctor.core.findings import Finding
from eagle3_doctor.core.taps import layer_out
from eagle3_doctor.engines.serving import resolve_serving
from eagle3_doctor.report.render import findings_markdown, render_findings


def _render(findings) -> str:
    con = Console(record=True, width=200, color_system=None)
    render_findings(con, findings, "ok")
    return con.export_text()


def test_tables_fit_80_columns_without_cutting_capture_points(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    r = invoke(
        "compare-hidden", "-t", TARGET, "-d", DRAFTS["sglang"], "--layer-ids=-1,1,3", "--prompts", PROMPTS, "--limit", "2", "-q"
    )
    assert r.exit_code == 1, r.output
    table = [ln for ln in r.output.splitlines() if ln.startswith(("┃", "│", "┏", "┡", "└"))]
    assert table and all(len(ln) <= 80 for ln in table), "\n".join(table)
    rows = [ln for ln in table if re.match(r"│\s*\d", ln)]
    assert any("embed" in ln and "layer_out[1]" in ln for ln in rows), "\n".join(rows)
    assert any("layer_out[3]" in ln and "layer_out[4]" in ln for ln in rows), "\n".join(rows)


def _run(findings, hints):
    from conftest import path_result

    from eagle3_doctor.analyses.results import AcceptanceRun, ChainMetrics, RunSettings
    from eagle3_doctor.core.taps import parse_spec

    chain = ChainMetrics(passes=2, mean_acceptance_length=1.5, per_position_rate=[0.4, 0.1])
    settings = RunSettings(
        target="fixtures/target",
        draft=None,
        engine="sglang 0.5.23",
        num_steps=2,
        continuation="greedy",
        max_new_tokens=8,
        temperature=0.0,
        temperature_mode=None,
        topk=1,
        num_draft_tokens=None,
        dtype="float32",
        device="cpu",
        compiled=False,
        sequences=2,
        tokens=16,
        serving_spec=parse_spec("embed,layer_out[1],layer_out[3]"),
        serving_source="fixture",
        training_spec=parse_spec("layer_out[1],layer_out[3],layer_out[4]"),
        training_source="fixture",
    )
    return AcceptanceRun({"serving": path_result(chain, triage=hints)}, settings, findings, [])


def test_no_healthy_hint_above_an_error(tmp_path):
    pytest.importorskip("matplotlib")
    from eagle3_doctor.report.render import write_acceptance_report

    bad = Finding("ACC001", "the serving features cost 30 points", ["x"], "set ids")
    write_acceptance_report(_run([bad], []), str(tmp_path / "a"), None)
    text = (tmp_path / "a" / "acceptance.md").read_text()
    assert "looks healthy" not in text and "ACC001" in text.split("## Triage hints")[1].split("## Findings")[0]
    write_acceptance_report(_run([], []), str(tmp_path / "b"), None)
    assert "looks healthy" in (tmp_path / "b" / "acceptance.md").read_text()


def test_plots_are_titled_and_mark_the_trained_and_configured_cells(tmp_path):
    pytest.importorskip("matplotlib")
    from eagle3_doctor.doctor import compare_hidden, load_setup
    from eagle3_doctor.report.plots import _acceptance_title, _compare_marks

    t = _acceptance_title(_run([], []))
    assert "fixtures/target" in t and "served embed, layer_out[1], layer_out[3]" in t and "trained layer_out[1]" in t
    setup = load_setup(target=str(TARGET), draft=str(DRAFTS["sglang"]), layer_ids=[-1, 1, 3], dtype="float32", device="cpu")
    res = compare_hidden(setup, prompts_path=str(PROMPTS), limit=2, matrix=True)
    marks, title = _compare_marks(res)
    assert "trained layer_out[1], layer_out[3], layer_out[4]" in title and "configured embed, layer_out[1], layer_out[3]" in title
    serve_rows = [i for i, r in enumerate(res.matrix.rows) if r.startswith("serve slot")]
    assert [str(marks["configured"][i]) for i in serve_rows] == ["embed", "layer_out[1]", "layer_out[3]"]
    assert [str(marks["trained"][i]) for i in serve_rows] == ["layer_out[1]", "layer_out[3]", "layer_out[4]"]
    from eagle3_doctor.report.render import write_compare_report

    write_compare_report(res, str(tmp_path), None)
    assert (tmp_path / "heatmap.png").stat().st_size > 1000


# ----------------------------------------------------------------------------- findings as located diagnostics


def test_location_is_rendered_rustc_style_between_title_and_evidence():
    f = diagnose_specs(
        (layer_out(1), layer_out(3), layer_out(4)), "trained", resolve_serving("sglang", None, "llama", 8, {}, [-1, 1, 3])
    )[0]
    assert f.code == "CAP002"
    lines = _render([f]).splitlines()
    assert lines[0].startswith("error[CAP002]: ")
    assert lines[1] == " --> draft/config.json: eagle_config.eagle_aux_hidden_state_layer_ids"
    assert lines[2].startswith("   | ")
    md = findings_markdown([f])
    assert "`draft/config.json: eagle_config.eagle_aux_hidden_state_layer_ids`" in md
    assert '"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}' in md
    # help is its own line, after the fix
    h = Finding("CAP006", "t", ["e"], "the fix", help="why it helps")
    assert _render([h]).splitlines()[-3:-1] == ["   = fix: the fix", "   = help: why it helps"]


def test_findings_are_rendered_errors_first():
    fs = [
        Finding("CAP010", "info one"),
        Finding("CAP001", "error one"),
        Finding("CAP007", "warning one"),
        Finding("CAP006", "error two"),
    ]
    text = _render(fs)
    heads = [ln.split(":")[0] for ln in text.splitlines() if ln[:1] in "eiw" and "[" in ln]
    assert heads == ["error[CAP001]", "error[CAP006]", "warning[CAP007]", "info[CAP010]"]
    md = findings_markdown(fs)
    assert md.index("CAP001") < md.index("CAP006") < md.index("CAP007") < md.index("CAP010")
    assert [f.code for f in fs] == ["CAP010", "CAP001", "CAP007", "CAP006"]  # the caller's list is not reordered


def test_gate_table_is_rendered_by_report():
    from eagle3_doctor.cli.gate import Check, GateResult
    from eagle3_doctor.cli.gate_policy import Policy
    from eagle3_doctor.report.render import render_gate

    res = GateResult(
        Policy(),
        [Check("no findings at or above error", 1.0, 0.0, False, "CAP001"), Check("min slot cosine", 0.99, 0.98, True)],
        [Finding("CAP001", "shifted", ["e"], "set ids")],
        {},
    )
    con = Console(record=True, width=200, color_system=None)
    render_gate(con, res)
    text = con.export_text()
    assert "gate: FAIL" in text and "FAIL CAP001" in text and "0.9900" in text and "pass" in text
    assert text.index("gate: FAIL") < text.index("error[CAP001]: shifted")
