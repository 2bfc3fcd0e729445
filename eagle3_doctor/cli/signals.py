"""The end of the process on SIGINT or SIGTERM: one line and the shell's code, from the first instruction
of the console script on (it imports nothing of the package, so the start-up handler can use it)."""

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
