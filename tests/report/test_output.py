"""Progress and output people can trust: plain progress lines in logs, 80-column tables that keep capture
points whole, choices in --help, titled plots with the trained/configured cells, no hint contradicting a finding."""

from __future__ import annotations

import re

import pytest
from conftest import DRAFTS, PROMPTS, TARGET, invoke

from eagle3_doctor.cli import options, output
from eagle3_doctor.core.findings import Finding


def test_help_lists_the_choices_and_they_match_the_library():
    from eagle3_doctor.draft.formats import FORMATS
    from eagle3_doctor.engines.releases import ENGINES

    assert options.ENGINE_CHOICES == ENGINES and options.FORMAT_CHOICES == FORMATS
    r = invoke("acceptance", "--help", env={"COLUMNS": "120"})
    assert "[sglang|vllm|trtllm|modelopt|eagle]" in r.output
    assert "[eagle|sglang|speculators]" in r.output and "[greedy|text]" in r.output and "[sampled|argmax]" in r.output
    r = invoke("--help", env={"COLUMNS": "120"})
    assert "--install-completion" in r.output and "--show-completion" in r.output  # shell completion


def test_plain_progress_lines_when_stderr_is_not_a_terminal(monkeypatch, capsys):
    monkeypatch.setenv("EAGLE3_DOCTOR_PROGRESS_EVERY", "0")
    with output.progress(False) as cb:
        for i in range(5):
            cb("greedy continuation", i, 4)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("eagle3-doctor: greedy continuation: 0/4 (0%)")
    assert any("eta" in ln for ln in err) and err[-1].startswith("eagle3-doctor: greedy continuation: 4/4 (100%)")
    monkeypatch.setenv("EAGLE3_DOCTOR_PROGRESS_EVERY", "3600")
    with output.progress(False) as cb:
        for i in range(101):
            cb("scan", i, 100)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2, err  # the start and the end; nothing in between within the interval
    with output.progress(True) as cb:
        cb("x", 1, 2)
    assert capsys.readouterr().err == ""


def test_greedy_continuation_reports_per_token(target):
    from eagle3_doctor.model.target import greedy_continue

    seen = []
    greedy_continue(target, [[1, 2, 3], [4, 5]], 6, 1, progress=lambda d, n: seen.append((d, n)))
    assert seen[-1] == (12, 12) and len(seen) >= 10
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


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
