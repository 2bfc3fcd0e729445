"""What a command writes: the terminal console, progress lines, the one-line error, the --json document.

rich is imported only when a console is made, so ``--help`` answers at once.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, Optional

from .. import __version__
from ..core.errors import one_line


def console(stderr: bool = False):
    from rich.console import Console
    from rich.text import Text

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich's own handler exits 1, which CI reads as "findings": let the error boundary say it
            silence_stdout()
            raise BrokenPipeError(32, "standard output was closed")

        def print(self, *objects: Any, **kw: Any) -> None:
            # soft_wrap leaves a long line to the terminal, which cuts it mid-word (mid-interval): every
            # renderer's one-line prints are broken here instead, between words, with a hanging indent
            if kw.get("soft_wrap") and self.width < UNWRAPPED and objects and all(isinstance(o, (str, Text)) for o in objects):
                objects = tuple(_fitted(o, self.width, kw.get("markup")) for o in objects)
            super().print(*objects, **kw)

    # piped output (CI logs) has no width: rich would assume 80 columns, too narrow for the slot tables, and
    # any fixed width hard-wraps lines the log viewer would fold itself; so a line there is as long as it is
    return _Console(stderr=stderr, highlight=False, soft_wrap=False, width=None if has_width() else UNWRAPPED)


# the width of a stream that has none: wider than any line the doctor writes, so nothing is wrapped
UNWRAPPED = 10_000


def has_width() -> bool:
    """A terminal, or COLUMNS set (a CI job asking for a width): text is fitted to it. Otherwise it is not wrapped."""
    try:
        tty = sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced or closed stdout
        tty = False
    return tty or "COLUMNS" in os.environ


def text_width() -> int | None:
    """The width plain text (explain) is wrapped at: the terminal's, or None (unwrapped) without one."""
    import shutil

    return shutil.get_terminal_size().columns if has_width() else None


def _fitted(obj: Any, width: int, markup: Optional[bool]) -> Any:
    """A str or Text printed with soft_wrap, its lines longer than ``width`` broken between words (never
    inside an interval or an id list, core/text.py), each continuation indented two past its line's indent."""
    from rich.text import Text

    from ..core.text import wrap

    if isinstance(obj, str):
        try:  # the text as rich would print it: markup read unless the caller said markup=False
            obj = Text(obj) if markup is False else Text.from_markup(obj)
        except Exception:  # not markup after all (rich raises its own MarkupError): rich prints it as given
            return obj
    if all(len(line) <= width for line in obj.plain.split("\n")):
        return obj
    out = Text()
    for n, line in enumerate(obj.split("\n", allow_blank=True)):
        if n:
            out.append("\n")
        plain = line.plain
        if len(plain) <= width:
            out.append_text(line)
            continue
        indent = " " * (len(plain) - len(plain.lstrip(" ")))
        rest = indent + "  "
        pos = 0
        for k, piece in enumerate(wrap(plain, width, "", rest)):
            body = piece[len(rest) :] if k else piece
            at = plain.find(body, pos)
            if at < 0:  # wrap kept every word: not reached, but never lose text
                return obj
            if k:
                out.append("\n" + rest)
            out.append_text(line[at : at + len(body)] if k else line[: at + len(body)])
            pos = at + len(body)
    return out


def fail(line: str) -> None:
    # plain print, not rich: one line must stay one line whatever the terminal width; a newline
    # inside a path is escaped for the same reason
    stream = sys.stderr if sys.stderr is not None else sys.__stderr__
    if stream is None:
        return
    try:
        print(f"eagle3-doctor: {one_line(line)}", file=stream, flush=True)
    except (OSError, ValueError):  # stderr closed too: the exit code is all that is left
        pass


def silence_stdout() -> None:
    """stdout's reader went away: point fd 1 at /dev/null so the final flush cannot raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass


def flush_stdout() -> None:
    if sys.stdout is not None:
        sys.stdout.flush()


@contextlib.contextmanager
def progress(quiet: bool) -> Iterator[Callable[[str, int, int], None]]:
    """Yield a progress callback (label, done, total).

    On a terminal: rich bars with elapsed time and ETA. Otherwise (CI logs, pipes): one plain line
    per phase when it starts, then at most one every EAGLE3_DOCTOR_PROGRESS_EVERY seconds (default 10)
    and one when it completes, each with done/total, elapsed and ETA.
    """
    if quiet:
        yield lambda *_: None
        return
    if not sys.stderr.isatty():
        import time

        every = float(os.environ.get("EAGLE3_DOCTOR_PROGRESS_EVERY", "10"))
        state: dict[str, list[float]] = {}

        def plain(label: str, done: int, total: int) -> None:
            now = time.monotonic()
            st = state.setdefault(label, [now, -1.0])
            start, last = st
            if done < total and last >= 0 and now - last < every:
                return
            if done >= total and last == -2.0:
                return
            el = now - start
            eta = f", eta {el / done * (total - done):.0f}s" if 0 < done < total else ""
            pct = f" ({100 * done / total:.0f}%)" if total else ""
            print(f"eagle3-doctor: {label}: {done}/{total}{pct}, {el:.0f}s elapsed{eta}", file=sys.stderr, flush=True)
            st[1] = -2.0 if done >= total else now

        yield plain
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    prog = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console(stderr=True),
        transient=True,
    )
    tasks: dict[str, Any] = {}

    def cb(label: str, done: int, total: int) -> None:
        if label not in tasks:
            tasks[label] = prog.add_task(label, total=total)
        prog.update(tasks[label], completed=done, total=total)

    with prog:
        yield cb


@contextlib.contextmanager
def status(text: str, quiet: bool) -> Iterator[None]:
    """A line the moment a slow step starts (loading, first import): a spinner on a terminal."""
    if quiet or not sys.stderr.isatty():
        yield
        return
    with console(stderr=True).status(text):
        yield


def tool() -> dict:
    """Stamped into every --json document (schemas/*.schema.json): which tool, which command line."""
    return {"name": "eagle3-doctor", "version": __version__, "command": ["eagle3-doctor", *sys.argv[1:]]}


def write_result(path: Optional[str], data: Callable[[], dict], trust_remote_code: bool, **stamps: Any) -> None:
    """The document ``data()`` builds at ``path`` ('-': stdout), with the stamps every document carries and the
    run's own; built only where it is written (a large run's per-prompt lists take a while to convert)."""
    if path:
        from ..io.outputs import write_json

        write_json(path, {**data(), "tool": tool(), "trust_remote_code": trust_remote_code, **stamps})
