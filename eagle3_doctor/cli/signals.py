"""The end of the process: on SIGINT or SIGTERM one line and the shell's code, from the first instruction of the
console script on (it imports nothing of the package, so the start-up handler can use it); after a command, at once
(:func:`end`)."""

import os
import signal
import sys
from typing import NoReturn

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


def end(code: object) -> NoReturn:
    """The console process's end once the command has written everything: the exit handlers run, the interpreter's
    teardown does not. That teardown frees every object of every module one by one, torch's among them: 0.2-0.5 s
    on a CPU that nobody waits for on purpose (bench/bench_e2e.py times it as the "exit" phase)."""
    import atexit

    if isinstance(code, str):  # sys.exit("message"): what the interpreter would print, and its code
        print(code, file=sys.stderr)
    status = code if isinstance(code, int) else 0 if code is None else 1
    atexit._run_exitfuncs()  # whatever registered itself for the end (a compile pool's shutdown) still runs
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away (a closed pipe): nothing left to deliver to it
            pass
    os._exit(status)
