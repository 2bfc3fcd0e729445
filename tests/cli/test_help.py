"""--help that reads at 80 columns, and every text fitted to the terminal's width (or left unwrapped in a log)."""

from __future__ import annotations

import re

import pytest
import typer
from conftest import DRAFTS, SERVING, TARGET, invoke

from eagle3_doctor.cli.app import COMMANDS
from eagle3_doctor.cli.help import ADVANCED, FIRST_COMMANDS, PANELS, PanelCommand, first_sentence

NAMES = [name for name, _ in COMMANDS]
AT_80 = {"COLUMNS": "80"}
# an interval or id list broken at its comma: "[0.61," at a line's end
BROKEN_GROUP = re.compile(r"\[[^\]]*,$")


def too_wide(text: str, width: int = 80) -> list[str]:
    return [ln for ln in text.splitlines() if len(ln) > width or BROKEN_GROUP.search(ln)]


@pytest.mark.parametrize("name", NAMES)
def test_every_command_help_fits_80_columns_in_under_60_lines(name):
    r = invoke(name, "--help", env=AT_80)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert len(lines) < 60, f"{name} --help is {len(lines)} lines:\n{r.output}"
    assert not too_wide(r.output), too_wide(r.output)
    full = invoke(name, "--help-all", env=AT_80)
    assert full.exit_code == 0 and not too_wide(full.output), too_wide(full.output)
    # nothing is lost: every flag the command takes is in --help-all, and the short help says where the rest is
    cmd = typer.main.get_command(__import__("eagle3_doctor.cli.app", fromlist=["app"]).app).commands[name]
    for p in cmd.params:
        for flag in p.opts:
            if flag.startswith("--"):
                assert flag in full.output, (name, flag)
    assert "--help-all" in r.output


def test_acceptance_help_groups_options_by_purpose_and_hides_the_rare_ones():
    short = invoke("acceptance", "--help", env=AT_80).output
    full = invoke("acceptance", "--help-all", env=AT_80).output
    heads = [ln[:-1] for ln in short.splitlines() if ln.endswith(":") and not ln.startswith(" ")]
    assert heads == ["What to diagnose", "Serving", "Measurement", "Output"], heads
    assert f"{ADVANCED}:" in full and "--device-map" in full and "--device-map" not in short
    n = int(re.search(r"--help-all shows (\d+) more options", short).group(1))

    def rows(text):  # an option's row starts at the panel's indent; its wrapped help is indented further
        return sum(1 for ln in text.splitlines() if re.match(r"  -", ln))

    assert n == rows(full) - rows(short)
    # the short form is the first sentence, the long form all of it
    assert "Default: built-in prompts." in full and "Default: built-in prompts." not in short


def test_an_option_no_panel_names_lands_in_the_advanced_panel():
    app = typer.Typer(rich_markup_mode=None)

    @app.command(cls=PanelCommand)
    def cmd(
        target: str = typer.Option("x", "--target", help="The target."),
        brand_new: str = typer.Option("y", "--brand-new-option", help="Nobody filed it yet."),
    ) -> None:
        pass

    @app.command("other")
    def other() -> None:  # a second command, so the app is a group and `cmd` is addressed by name
        pass

    from typer.testing import CliRunner

    short = CliRunner().invoke(app, ["cmd", "--help"], env=AT_80).output
    full = CliRunner().invoke(app, ["cmd", "--help-all"], env=AT_80).output
    assert "--brand-new-option" not in short and "1 more option" in short.replace("1 more options", "1 more option")
    advanced = full.split(f"{ADVANCED}:")[1]
    assert "--brand-new-option" in advanced and "--target" in full.split(f"{ADVANCED}:")[0]
    assert PANELS[-1] == ADVANCED


def test_app_help_lists_the_first_commands_first_with_whole_summaries():
    out = invoke("--help", env=AT_80).output
    assert not too_wide(out), too_wide(out)
    start = out.index("Start here:")
    more = out.index("More commands:")
    listed = [m.group(1) for m in re.finditer(r"^  ([a-z-]+) ", out[start:more], re.M)]
    assert tuple(listed) == FIRST_COMMANDS
    flat = " ".join(out.split())
    for name, fn in COMMANDS:  # the whole first paragraph of each docstring, never cut at 45 characters
        first = " ".join((fn.__doc__ or "").strip().split("\n\n")[0].split())
        assert first in flat, (name, first)


def test_first_sentence_keeps_what_click_appends():
    assert first_sentence("Tokens per prompt (greedy).  [default: 128]") == "Tokens per prompt.  [default: 128]"
    assert first_sentence("Try ids, e.g. 1,3,4. More text.") == "Try ids, e.g. 1,3,4."
    assert first_sentence("Engine release: any release (0.5.10); vllm -v1 picks.") == "Engine release: any release."


def test_diagnostic_text_fits_80_columns_and_is_not_wrapped_in_a_log():
    outs = {
        "inspect": invoke("inspect", "-t", TARGET, "-d", DRAFTS["sglang"], env=AT_80),
        "explain": invoke("explain", "CAP002", env=AT_80),
        "explain list": invoke("explain", env=AT_80),
        "server-metrics": invoke("server-metrics", "--metrics", SERVING / "vllm-after-healthy.prom", env=AT_80),
    }
    for what, r in outs.items():
        assert r.exit_code in (0, 1), (what, r.output)
        assert not too_wide(r.output), (what, too_wide(r.output))
    # a CI log: no terminal, no COLUMNS: a paragraph is one line, whatever its length, not cut at a fixed width
    r = invoke("explain", "CAP002", env={"COLUMNS": None})
    assert max(map(len, r.output.splitlines())) > 160
    r = invoke("inspect", "-t", TARGET, "-d", DRAFTS["sglang"], env={"COLUMNS": None})
    assert any(ln.startswith("not looked at") and ln.endswith("run eagle3-doctor diagnose") for ln in r.output.splitlines())


def test_soft_wrapped_lines_break_between_words_and_keep_intervals_whole():
    import io

    from rich.console import Console

    from eagle3_doctor.cli.output import _fitted

    text = "  verdict: the lever recovers 0.40 of the gap, 95% interval [0.61, 0.74] over 8 prompts, decided"
    buf = io.StringIO()
    Console(file=buf, width=60, soft_wrap=False).print(_fitted(text, 60, None), soft_wrap=True)
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2 and all(len(ln) <= 60 for ln in lines), lines
    assert "[0.61, 0.74]" in lines[1] and lines[1].startswith("    ")  # a hanging indent past the line's own
    assert " ".join(" ".join(lines).split()) == " ".join(text.split())
