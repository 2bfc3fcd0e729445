"""Reading a URL the user named (a live /metrics endpoint) with a bound on the whole answer: a total
deadline and a byte limit, not a per-read timeout.

A per-read timeout is kept alive by a server that sends one byte a second, and neither bound holds
while the name is resolved or the headers are read. So the request runs in a worker thread and the
caller waits for it at most the deadline; the worker stops reading at the byte limit and at the
deadline too, and as a daemon it never holds the process open after the caller has given up.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ..core.errors import BadInput

CHUNK = 64 << 10


class _Fetch:
    """One request's outcome, filled in by the worker thread."""

    def __init__(self) -> None:
        self.body: bytes | None = None
        self.error: BaseException | None = None
        self.over_limit = False


def _fetch(url: str, limit: int, until: float, out: _Fetch) -> None:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=max(0.1, until - time.monotonic())) as r:  # noqa: S310 (the user's own server)
            parts: list[bytes] = []
            size = 0
            while time.monotonic() < until:
                part = r.read1(CHUNK) if hasattr(r, "read1") else r.read(CHUNK)
                if not part:
                    out.body = b"".join(parts)
                    return
                size += len(part)
                if size > limit:
                    out.over_limit = True
                    return
                parts.append(part)
    except BaseException as e:  # handed to the caller, which names it in one line
        out.error = e


def read_url(url: str, what: str, limit: int, seconds: float, fix: str) -> bytes:
    """The body of ``url``, or one BadInput: no complete answer within ``seconds`` (connecting,
    headers and body together), a body over ``limit`` bytes, or the error the request ended in."""
    out = _Fetch()
    worker = threading.Thread(target=_fetch, args=(url, limit, time.monotonic() + seconds, out), daemon=True)
    worker.start()
    worker.join(seconds + 0.5)  # the worker checks the same deadline: this only covers a read that blocks past it
    if out.over_limit:
        raise BadInput(f"{what} from {url} is over {limit >> 20} MiB: no /metrics page is that large", fix)
    if out.body is not None:
        return out.body
    if out.error is not None and not _is_timeout(out.error):
        raise BadInput(f"cannot read {what} from {url} ({_short(out.error)})", fix)
    raise BadInput(f"cannot read {what} from {url}: no complete answer within {seconds:g} s", fix)


def _is_timeout(e: BaseException) -> bool:
    import socket

    reason: Any = getattr(e, "reason", e)  # urllib wraps a connect timeout in URLError
    return isinstance(e, (TimeoutError, socket.timeout)) or isinstance(reason, (TimeoutError, socket.timeout))


def _short(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return text if len(text) <= 200 else text[:200] + "..."
