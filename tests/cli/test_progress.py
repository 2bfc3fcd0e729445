"""What the command line shows while it works and when asked: plain progress lines in logs, and the
choices --help lists, equal to the library's."""

from __future__ import annotations

from conftest import invoke

from eagle3_doctor.cli import options, output


def test_help_lists_the_choices_and_they_match_the_library():
    from eagle3_doctor.draft.formats import FORMATS
    from eagle3_doctor.engines.releases import ENGINES

    assert options.ENGINE_CHOICES == ENGINES and options.FORMAT_CHOICES == FORMATS
    r = invoke("acceptance", "--help-all", env={"COLUMNS": "120"})
    assert "[" + "|".join(ENGINES) + "]" in r.output
    assert "[eagle|sglang|speculators]" in r.output and "[greedy|speculative|text]" in r.output and "[sampled|argmax]" in r.output
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
