"""The command line: the typer app and error boundary (app), one module per command (commands/),
every option declared once (options), the preflight that rejects bad arguments before heavy imports
(validate, validate_files) and the CI gate (gate, gate_policy, gate_report). Nothing imports this layer.

``main`` is the console script: ``run``, then the process's end at once (``signals.end``: the interpreter's
teardown skipped). ``run``'s first instruction takes SIGINT and SIGTERM, so a signal while
typer, rich or torch are still importing ends the process with the shell's code (130, 143) and one
line, never a traceback. Once a command runs, its error boundary (``app.guarded``) takes them over:
in the console's own process it removes the temporaries a write has staged and exits at once (old
reports kept); in a host process (tests, a library caller) it raises, and the command unwinds.
"""

import signal
from typing import NoReturn

from .signals import end, exit_with_signal


def _early_exit(signum: int, _frame: object) -> None:
    exit_with_signal(signum, " while starting: nothing was written")


def run() -> None:
    """Console-script entry point (also under its earlier name, ``eagle3_doctor.cli:run``)."""
    signal.signal(signal.SIGINT, _early_exit)
    signal.signal(signal.SIGTERM, _early_exit)
    # over `ulimit -f` the kernel's SIGXFSZ would kill the process silently (and dump core); ignored, the
    # write fails with EFBIG instead, which the writers turn into one line naming the file
    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    from .app import run as _run

    _run()


def main() -> NoReturn:
    """The ``eagle3-doctor`` command and ``python -m eagle3_doctor``: :func:`run`, then the process ends at once
    (:func:`signals.end`). ``run`` itself ends by raising SystemExit, for a caller that runs it in its own process."""
    try:
        run()
    except SystemExit as done:
        end(done.code)
    end(0)
