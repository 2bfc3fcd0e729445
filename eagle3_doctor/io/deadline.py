"""A wall-clock bound on work that runs user-supplied logic (a chat template is a program), so a
hostile or broken input ends in one clear line instead of a hang.

Python code can be interrupted between bytecodes by a signal: an ITIMER_REAL timer raises inside the
work when the bound passes. Signals reach the main thread only; elsewhere (a library caller's worker
thread) the bound is not enforced and the work runs as it would have.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class DeadlinePassed(Exception):
    """The work outran its bound."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def _fire(signum: int, frame: object) -> None:
        raise DeadlinePassed()

    old = signal.signal(signal.SIGALRM, _fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
