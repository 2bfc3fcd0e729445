"""Every write to a path that can block is opened without blocking and written at the reader's pace, or refused:
$GITHUB_STEP_SUMMARY pointing at a FIFO nobody reads used to block the gate forever (the summary was opened with
a plain open(..., "a")), and a --json FIFO whose reader stops reading blocked once the pipe's buffer was full."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

import eagle3_doctor.io.outputs as outputs
from eagle3_doctor.core.errors import BadInput


class Hung(BaseException):
    """Raised by the watchdog: the write waited instead of answering."""


@contextmanager
def watchdog(seconds: int) -> Iterator[None]:
    def fire(*_):
        raise Hung(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture()
def fifo(tmp_path):
    p = tmp_path / "summary.md"
    os.mkfifo(p)
    return p


def test_a_step_summary_fifo_without_a_reader_is_refused_at_once(fifo, monkeypatch):
    from eagle3_doctor.cli.gate_report import write_summary

    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(fifo))
    with watchdog(5), pytest.raises(BadInput) as e:
        write_summary("## gate\n", None)
    assert "named pipe (FIFO) with no reader" in str(e.value) and str(fifo) in str(e.value), str(e.value)


@pytest.mark.parametrize("write", ["append", "output"])
def test_a_fifo_whose_reader_stops_reading_is_refused_not_waited_on(write, fifo, monkeypatch):
    """The reader opens the pipe and never reads: 1 MiB does not fit the pipe's buffer."""
    monkeypatch.setattr(outputs, "STALL_SECONDS", 0.5, raising=False)  # absent before: the write blocked
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with watchdog(10), pytest.raises(BadInput) as e:
            if write == "append":
                outputs.append_text(fifo, "x" * (1 << 20))
            else:
                outputs.write_output(fifo, b"x" * (1 << 20))
    finally:
        os.close(reader)
    assert "its reader took nothing for 0.5 s" in str(e.value), str(e.value)


@pytest.mark.parametrize("write", ["append", "output"])
def test_a_fifo_with_a_reader_gets_every_byte(write, fifo):
    data = bytes(range(256)) * 4096  # 1 MiB: many times the pipe's buffer
    want = data.decode("latin-1").encode() if write == "append" else data
    got = bytearray()
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # there before the write opens the pipe, as a reader is

    def read() -> None:
        os.set_blocking(reader, True)
        while len(got) < len(want):
            chunk = os.read(reader, 1 << 16)
            if not chunk:  # no writer yet (or any more)
                time.sleep(0.01)
            got.extend(chunk)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    try:
        with watchdog(20):
            if write == "append":
                outputs.append_text(fifo, data.decode("latin-1"))
            else:
                outputs.write_output(fifo, data)
        t.join(10)
    finally:
        os.close(reader)
    assert bytes(got) == want


def test_the_summary_is_still_appended_to_a_regular_file(tmp_path, monkeypatch):
    from eagle3_doctor.cli.gate_report import write_summary

    s = tmp_path / "summary.md"
    s.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(s))
    write_summary("## gate", None)
    assert s.read_text() == "earlier step\n## gate\n"
