"""--help that reads: options in panels by purpose, the rare ones behind --help-all, and text fitted to
the terminal's width.

Every option's panel is stated once, below, by its flag (``PANEL_OF``), apart from its declaration in
options.py, so adding an option there needs no edit here: an option this table does not name lands in
``DEFAULT_PANEL``, which the short --help leaves out and --help-all shows. The short --help gives each
option the first sentence of its help; --help-all gives all of it.

The app sets ``rich_markup_mode=None`` (help texts hold brackets that are not markup), so this is click's
plain formatter, given the terminal's width instead of click's fixed 80-column cap.
"""

from __future__ import annotations

import re
import shutil
from typing import Any

import typer

_click: Any = getattr(typer.core, "_click", None)
if _click is None:  # typer < 0.26 uses click itself
    import click as _click

DIAGNOSE = "What to diagnose"
SERVING = "Serving"
MEASUREMENT = "Measurement"
OUTPUT = "Output"
ADVANCED = "Advanced"
# the panels in the order --help prints them; the last is shown by --help-all only
PANELS = (DIAGNOSE, SERVING, MEASUREMENT, OUTPUT, ADVANCED)
SHOWN = frozenset({DIAGNOSE, SERVING, MEASUREMENT, OUTPUT})
DEFAULT_PANEL = ADVANCED

PANEL_OF: dict[str, str] = {
    # the models, what training fed, and what to replay
    "--target": DIAGNOSE,
    "--draft": DIAGNOSE,
    "--layer-ids": DIAGNOSE,
    "--train-recipe": DIAGNOSE,
    "--train-dump": DIAGNOSE,
    "--prompts": DIAGNOSE,
    "--train-data": DIAGNOSE,
    "--engine-dump": DIAGNOSE,
    "--reference-target": ADVANCED,
    "--policy": DIAGNOSE,
    "--baseline": DIAGNOSE,
    "--out": DIAGNOSE,
    "--metrics": DIAGNOSE,
    "--before": DIAGNOSE,
    "--train-template": DIAGNOSE,
    "--serve-template": DIAGNOSE,
    "--requests": DIAGNOSE,
    "--train-tokenizer": DIAGNOSE,
    "--num-layers": ADVANCED,
    # acceptance compares the prompt format only when asked: template-diff's own options there
    "acceptance --train-template": ADVANCED,
    "acceptance --serve-template": ADVANCED,
    "acceptance --requests": ADVANCED,
    "acceptance --train-system-prompt": ADVANCED,
    "acceptance --train-data": ADVANCED,
    "diagnose --train-data": MEASUREMENT,
    # how the server runs the draft, and what it counted
    "--serve-cmd": SERVING,
    "--serve-config": SERVING,
    "--engine": SERVING,
    "--engine-version": SERVING,
    "--num-steps": SERVING,
    "--topk": SERVING,
    "--num-draft-tokens": SERVING,
    "--server-metrics": SERVING,
    "--server-log": SERVING,
    "--server-metrics-before": ADVANCED,
    "--server-model": ADVANCED,
    "--server-temperature": ADVANCED,
    "--settings": SERVING,
    "--batch-sizes": SERVING,
    "--train-system-prompt": SERVING,
    "--train-template-kwargs": ADVANCED,
    "--serve-template-kwargs": ADVANCED,
    "--train-add-special-tokens": ADVANCED,
    # how much to measure, and the bars a CI run holds it to
    "--limit": MEASUREMENT,
    "--max-tokens": ADVANCED,
    "--max-new-tokens": MEASUREMENT,
    "--continuation": ADVANCED,
    "--temperature": MEASUREMENT,
    "--temperature-mode": ADVANCED,
    "--reference-loop": ADVANCED,
    "--scan": ADVANCED,
    "--matrix": MEASUREMENT,
    "--min-accept-rate": MEASUREMENT,
    "--min-tau": MEASUREMENT,
    "--min-cosine": MEASUREMENT,
    "--min-step1-accuracy": MEASUREMENT,
    "--max-regression": MEASUREMENT,
    "--fail-on": MEASUREMENT,
    "--loop": MEASUREMENT,
    "--context": ADVANCED,
    "--repeats": ADVANCED,
    "--seed": ADVANCED,
    # what a command writes
    "--json": OUTPUT,
    "--format": OUTPUT,
    "--report": OUTPUT,
    "--plot": OUTPUT,
    "--sarif": OUTPUT,
    "--summary": OUTPUT,
    "--quiet": OUTPUT,
    "--write-template": OUTPUT,
    # where and how the target loads, and the hub: right by default
    "--revision": ADVANCED,
    "--draft-revision": ADVANCED,
    "--draft-format": ADVANCED,
    "--dtype": ADVANCED,
    "--device": ADVANCED,
    "--device-map": ADVANCED,
    "--max-memory": ADVANCED,
    "--stream-layers": ADVANCED,
    "--trust-remote-code": ADVANCED,
    "--batch-size": ADVANCED,
    "--compile": ADVANCED,
}

# the commands a user needs first, in the order to try them; the rest follow in registration order
FIRST_COMMANDS = ("diagnose", "inspect", "compare-hidden", "acceptance", "fix")

# a sentence ends at ". " before a capital or an opening bracket; "e.g. 1,3,4" and "0.5.10" do not end one
_SENTENCE_END = re.compile(r"(?<=[A-Za-z0-9)'\]])\.\s+(?=[A-Z(])")
# what click appends to an option's help: its default, or that it is required
_EXTRA = re.compile(r"\s+(\[(?:default|required|env var)[^\]]*\])+$")


def panel_of(param: Any, command: str = "") -> str:
    """The panel an option belongs in: by ``"COMMAND --flag"`` where one command files it apart, else by
    its flag (``--stream-layers/--no-...`` by its first), else ``DEFAULT_PANEL``."""
    flags = list(getattr(param, "opts", ()))
    for key in [f"{command} {f}" for f in flags] + flags:
        if key in PANEL_OF:
            return PANEL_OF[key]
    return DEFAULT_PANEL


_ASIDE = re.compile(r"\s*\([^()]*\)")


def first_sentence(text: str) -> str:
    """What the short --help says of an option: the first sentence of its help, its first clause where
    a semicolon follows, without the asides in brackets (--help-all gives the whole text)."""
    m = _EXTRA.search(text)
    extra = "  " + m.group(0).strip() if m else ""
    text = text[: m.start()] if m else text
    head = _SENTENCE_END.split(text.strip(), maxsplit=1)[0].rstrip(".")
    head = head.split("; ")[0]
    short = _ASIDE.sub("", head).strip()
    return (short or head) + "." + extra


def help_width() -> int:
    """The width help is written at: the terminal's (COLUMNS where set, as on a terminal), no wider
    than 100 columns (a longer line is hard to read), the whole of it used below 80."""
    cols = shutil.get_terminal_size(fallback=(80, 24)).columns
    return max(min(cols, 100) - 1, 30)


def summary(cmd: Any) -> str:
    """A command's one-line summary: the first paragraph of its docstring, whole (click cuts it at 45)."""
    text = (cmd.help or "").strip()
    return " ".join(text.split("\n\n")[0].split())


HELP_ALL = ("--help-all", "Show every option, with its full help, and exit.")


class _Formatter(_click.formatting.HelpFormatter):
    """click's formatter with the doctor's line breaking: only at spaces, never inside a hyphenated word
    (``hf-hidden-states:I,J,K``) or a bracketed group that fits on a line (``[0.61, 0.74]``)."""

    def write_dl(self, rows: Any, col_max: int = 30, col_spacing: int = 2) -> None:
        from ..core.text import wrap

        rows = list(rows)
        first_col = min(max((len(a) for a, _ in rows), default=0), col_max) + col_spacing
        pad = " " * (first_col + self.current_indent)
        text_width = max(self.width - first_col - 2, 10)
        for first, second in rows:
            head = " " * self.current_indent + first
            if not second:
                self.write(head + "\n")
                continue
            lines = [" ".join(p.split()) for p in second.split("\n\n")]
            wrapped = [ln for para in lines for ln in wrap(para, text_width)]
            if len(first) <= first_col - col_spacing:
                self.write(head + " " * (first_col - len(first)) + wrapped[0] + "\n")
                wrapped = wrapped[1:]
            else:
                self.write(head + "\n")
            for ln in wrapped:
                self.write(pad + ln + "\n")

    def write_text(self, text: str) -> None:
        from ..core.text import wrap

        indent = " " * self.current_indent
        paras = [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]
        self.write("\n\n".join("\n".join(wrap(p, self.width, indent, indent)) for p in paras) + "\n")


class _Context(_click.core.Context):
    def make_formatter(self) -> Any:
        return _Formatter(width=help_width(), max_width=help_width() + 2)


class PanelCommand(typer.core.TyperCommand):
    """A command whose --help shows its options by panel, the Advanced ones behind --help-all."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # --help-all is read here rather than declared as a parameter: it must answer before any
        # required option is missed, as --help does, and it is never passed to the command
        words = args[: args.index("--")] if "--" in args else args
        if HELP_ALL[0] in words:
            ctx.meta["eagle3_doctor.help_all"] = True
            print(ctx.get_help())
            ctx.exit()
        return super().parse_args(ctx, args)

    context_class = _Context

    def format_options(self, ctx: Any, formatter: Any) -> None:
        full = bool(ctx.meta.get("eagle3_doctor.help_all"))
        rows: dict[str, list[tuple[str, str]]] = {"Arguments": [], **{p: [] for p in PANELS}}
        hidden = 0
        for param in self.get_params(ctx):
            rec = param.get_help_record(ctx)
            if rec is None:
                continue
            if param.param_type_name == "argument":
                where = "Arguments"
            elif param.name == "help":
                continue  # said once, in the closing line
            else:
                where = panel_of(param, ctx.info_name or "")
            if not full and where in PANELS and where not in SHOWN:
                hidden += 1
                continue
            name, text = rec
            rows[where].append((name, text if full else first_sentence(text)))
        for panel, dl in rows.items():
            if dl:
                with formatter.section(panel):
                    formatter.write_dl(dl)
        formatter.write_paragraph()
        if hidden:
            formatter.write_text(f"{HELP_ALL[0]} shows {hidden} more options and each option's whole help.")
        else:
            formatter.write_text(f"{HELP_ALL[0]} shows each option's whole help.")


class FirstCommandsGroup(typer.core.TyperGroup):
    """The app's --help: the five commands to start with first, each with its whole summary."""

    context_class = _Context

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        names = [n for n in self.list_commands(ctx) if not self.commands[n].hidden]
        first = [n for n in FIRST_COMMANDS if n in names]
        rest = [n for n in names if n not in first]
        for title, group in (("Start here", first), ("More commands", rest)):
            if group:
                with formatter.section(title):
                    formatter.write_dl([(n, summary(self.commands[n])) for n in group])
