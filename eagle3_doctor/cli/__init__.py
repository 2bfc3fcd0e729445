"""The command line: the typer app and error boundary (app), one module per command (commands/),
every option declared once (options), the preflight that rejects bad arguments before heavy imports
(validate, validate_files) and the CI gate (gate, gate_policy, gate_report). Nothing imports this layer.

``run`` is the console script: its first instruction takes SIGINT and SIGTERM, so a signal while
typer, rich or torch are still importing ends the process with the shell's code (130, 143) and one
line, never a traceback. Once a command runs, its error boundary (``app.guarded``) takes them over:
in the console's own process it removes the temporaries a write has staged and exits at once (old
reports kept); in a host process (tests, a library caller) it raises, and the command unwinds.
"""

import os
import signal

EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143  # as core.errors, without importing anything first


def exit_with_signal(signum: int, after: str) -> None:
    """The one line for a signal (``after`` follows "interrupted"), written straight to the descriptor,
    and the end of the process with the shell's code: nothing is raised into whatever was running."""
    what = "interrupted" if signum == signal.SIGINT else "terminated (SIGTERM)"
    try:
        os.write(2, f"eagle3-doctor: {what}{after}\n".encode())
    except OSError:  # stderr closed: the exit code is all that is left
        pass
    os._exit(EXIT_INTERRUPTED if signum == signal.SIGINT else EXIT_TERMINATED)


def _early_exit(signum: int, _frame: object) -> None:
    exit_with_signal(signum, " while starting: nothing was written")


def run() -> None:
    """Console-script entry point (also under its earlier name, ``eagle3_doctor.cli:run``)."""
    signal.signal(signal.SIGINT, _early_exit)
    signal.signal(signal.SIGTERM, _early_exit)
    from .app import run as _run

    _run()
