"""User-facing errors: one line, a fix, a distinct exit code, never a traceback."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_BAD_INPUT = 2
EXIT_BUG = 3  # an exception nobody anticipated: never 1, which CI reads as "findings"
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # SIGTERM, as a shell reports a process it killed


def one_line(text: str) -> str:
    """Control characters (a newline in a path) escaped, so one message stays one terminal line."""
    return "".join(ch if ch.isprintable() or ch == " " else repr(ch)[1:-1] for ch in str(text))


class DoctorError(Exception):
    """An input or environment problem the user can fix.

    ``str(err)`` is the one line shown to the user: what is wrong, then how to fix it.
    """

    exit_code = EXIT_BAD_INPUT

    def __init__(self, what: str, fix: str | None = None):
        self.what = what
        self.fix = fix
        super().__init__(what if fix is None else f"{what} -- fix: {fix}")


class BadInput(DoctorError):
    """A file, option or value the user supplied is unusable."""


class ResourceError(DoctorError):
    """The machine cannot do what was asked (no GPU, out of memory)."""
