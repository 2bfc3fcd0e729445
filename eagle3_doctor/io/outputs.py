"""The one place results are written for users: JSON, reports and summaries written atomically,
complete or absent; a write the environment refuses is one clear BadInput naming the path."""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

from ..core.errors import BadInput

# Temporary files and stage directories a write has made and not yet renamed or removed. The console's
# signal handler ends the process without unwinding (see cli/app.py), so it removes these itself.
_STAGED: set[str] = set()


def remove_staged() -> None:
    """Remove every staged temporary (the signal handler's cleanup: no imports, no exceptions)."""
    for path in list(_STAGED):
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                for root, dirs, files in os.walk(path, topdown=False):
                    for name in files:
                        os.unlink(os.path.join(root, name))
                    for name in dirs:
                        os.rmdir(os.path.join(root, name))
                os.rmdir(path)
            else:
                os.unlink(path)
        except OSError:  # already renamed into place, or removed: nothing left to clean
            pass
        _STAGED.discard(path)


def _host() -> str:
    import socket

    return re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:32] or "host"


def stage_prefix(name: str) -> str:
    """The name a write stages ``name`` under before its rename: hidden, and naming the host and process that
    staged it, so a later write can tell what a killed process (SIGKILL, a power cut) left behind."""
    return f".{name}.partial-{_host()}-{os.getpid()}-"


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's process: alive
        return False
    return False


def remove_leftover_stages(parent: Path, name: str) -> None:
    """Remove what an earlier write of ``name`` staged in ``parent`` and never renamed because its process was
    killed. Only this host's stages whose process is gone are touched: a concurrent run's stage, or one another
    machine is writing on a shared filesystem, is left alone (and is never mistaken for the output, whose name
    it does not have)."""
    import shutil

    head, host = f".{name}.partial-", _host()
    try:
        entries = [e for e in os.listdir(parent) if e.startswith(head)]
    except OSError:
        return
    for e in entries:
        parts = e[len(head) :].rsplit("-", 2)  # host-pid-random: the random part (tempfile's) holds no "-"
        if len(parts) != 3 or parts[0] != host or not parts[1].isdigit() or not _process_gone(int(parts[1])):
            continue
        path = os.path.join(parent, e)
        try:
            if stat.S_ISDIR(os.lstat(path).st_mode):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except OSError:  # removed meanwhile, or not ours to remove: it stays ignored
            pass


def stage_beside(target: Path) -> Path:
    """A hidden directory beside ``target`` to build it in before one rename: what killed runs left for that name
    removed first, and the stage registered so the console's signal handler removes it (OSError to the caller)."""
    import tempfile

    remove_leftover_stages(target.parent, target.name)
    stage = Path(tempfile.mkdtemp(dir=target.parent, prefix=stage_prefix(target.name)))
    _STAGED.add(str(stage))
    return stage


# the environment refusing a write: (what happened, how to fix it); everything else stays a bug
_WRITE_FAULTS = {
    errno.ENOSPC: ("no space left on the device", "free space there, or write to another filesystem"),
    errno.EDQUOT: ("disk quota exceeded", "free space within the quota, or write to another filesystem"),
    errno.EFBIG: ("the file is over the size limit (ulimit -f)", "raise the limit (ulimit -f unlimited) or write elsewhere"),
    errno.EROFS: ("read-only file system", "write to a writable location"),
    errno.EACCES: ("permission denied", "write to a directory you can write to, or fix its permissions"),
    errno.EPERM: ("operation not permitted", "write to a directory you can write to, or fix its permissions"),
    errno.EISDIR: ("it is a directory", "pass a file path"),
    errno.EPIPE: ("the reader closed the pipe", "keep the reading end open until eagle3-doctor exits"),
}


def write_fault(e: BaseException, target: str | os.PathLike, verb: str = "cannot write") -> BadInput | None:
    """A write the environment refused, as one BadInput naming ``target``; None when it is something else."""
    if not isinstance(e, OSError) or e.errno not in _WRITE_FAULTS:
        return None
    what, fix = _WRITE_FAULTS[e.errno]
    return BadInput(f"{verb} {target}: {what} ({errno.errorcode[e.errno]})", fix)


def _raise_write_fault(e: BaseException, target: str | os.PathLike) -> None:
    err = write_fault(e, target)
    if err is not None:
        raise err from None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _new_file_mode(existing: Path | None) -> int:
    """What `open(path, 'w')` would give: an existing file keeps its mode, a new one 0666 minus the umask."""
    if existing is not None:
        try:
            return stat.S_IMODE(os.stat(existing).st_mode)
        except OSError:
            pass
    return 0o666 & ~_umask()


def write_output(path: str | os.PathLike, data: bytes) -> None:
    """Write a result file so a reader never sees half of it, and nothing but a regular file is replaced.

    ``-`` is stdout. A device or pipe (``/dev/stdout``, a FIFO) is written into, never renamed over;
    a FIFO without a reader is refused rather than waited on. A symbolic link to a regular file keeps
    the link: the file it points at is replaced. Regular files are written to a temporary file
    beside them and renamed, with the mode a plain open() would give (the umask respected).
    """
    if str(path) == "-":
        _write_stdout(data)
        return
    p = Path(path)
    st = _stat_target(p)
    if st is not None and _write_into_own_stream_or_kernel_file(p, st, data):
        return
    if st is not None and not stat.S_ISREG(st.st_mode):
        _write_into_special(p, st, data)
        return
    if p.is_symlink():
        p = Path(os.path.realpath(p))
    atomic_write_bytes(p, data)


def _write_stdout(data: bytes) -> None:
    """``-``: the bytes to stdout, through its binary buffer when it has one."""
    out = sys.stdout.buffer if hasattr(sys.stdout, "buffer") else None
    try:
        if out is not None:
            out.write(data)
            out.flush()
        else:  # a text-only stdout (a test runner's capture)
            sys.stdout.write(data.decode("utf-8", "replace"))
            sys.stdout.flush()
    except BrokenPipeError:
        raise  # the error boundary's own line: the reader went away
    except OSError as e:
        _raise_write_fault(e, "standard output")
        raise


def _stat_target(p: Path) -> os.stat_result | None:
    """The output path's stat (None when it does not exist yet); a directory or a file parent is refused."""
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        raise BadInput(f"{p} cannot be created: a parent is a file, not a directory", "pass a path in a directory") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise BadInput(f"{p} is a directory", "pass a file path")
    return st


def _write_into_own_stream_or_kernel_file(p: Path, st: os.stat_result, data: bytes) -> bool:
    """Append to our own stdout/stderr file or a kernel-provided regular file; True when written."""
    # /dev/stdout (or /proc/self/fd/N) redirected to a file: append through our own descriptor;
    # replacing or truncating that file would lose what was already written to it
    for fd, stream in ((1, sys.stdout), (2, sys.stderr)):
        try:
            own = os.fstat(fd)
        except OSError:
            continue
        if (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino):
            if stream is not None:
                stream.flush()
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(fd, view) :]
            except OSError as e:
                _raise_write_fault(e, p)
                raise
            return True
    if os.path.realpath(p).startswith(("/proc/", "/dev/")):
        st = os.stat(p)  # a kernel-provided path is written into, never renamed over
        if stat.S_ISREG(st.st_mode):
            try:
                with open(p, "r+b") as f:
                    f.seek(0, os.SEEK_END)
                    f.write(data)
            except OSError as e:
                _raise_write_fault(e, p)
                raise
            return True
    return False


# A FIFO's reader that takes nothing for this long has stopped reading: the write is refused, not waited on.
STALL_SECONDS = 30.0


def open_nonblocking(p: str | os.PathLike, flags: int, mode: int = 0o666) -> int:
    """open(2) for writing that cannot wait: a FIFO without a reader is ENXIO at once instead of a block until one
    comes, and a path swapped for a FIFO after it was looked at is no different. Regular files ignore the flag."""
    return os.open(p, flags | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0), mode)


def write_nonblocking(fd: int, data: bytes, p: str | os.PathLike) -> None:
    """All of ``data`` to a descriptor opened by open_nonblocking, at the reader's pace: a reader that takes nothing
    for STALL_SECONDS is one BadInput instead of a wait without end."""
    import select

    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
            continue
        except BlockingIOError:
            pass
        if not select.select([], [fd], [], STALL_SECONDS)[1]:
            raise BadInput(
                f"cannot write into {p}: its reader took nothing for {STALL_SECONDS:g} s",
                "read the pipe while the command runs, or give a regular file path",
            )


def _open_refused(p: str | os.PathLike, e: OSError) -> BadInput:
    if e.errno == errno.ENXIO:
        return BadInput(
            f"cannot write into {p}: it is a named pipe (FIFO) with no reader",
            "start the reader first, or give a regular file path",
        )
    return BadInput(f"cannot write into {p} ({e.strerror})", "give a regular file path, or start the reader first")


def _write_into_special(p: Path, st: os.stat_result, data: bytes) -> None:
    """A device or FIFO is written into; a FIFO without a reader, or one that stops reading, is refused rather
    than waited on."""
    try:
        fd = open_nonblocking(p, os.O_WRONLY)
    except OSError as e:
        raise _open_refused(p, e) from None
    try:
        write_nonblocking(fd, data, p)
    except OSError as e:  # /dev/full, a FIFO whose reader left
        _raise_write_fault(e, p)
        raise
    finally:
        os.close(fd)


def write_json(path: str | os.PathLike, data: dict[str, Any]) -> None:
    """A --json document: ``-`` is stdout; anything else is written atomically (see write_output).

    A figure with nothing to measure (acc_k past the last position any prompt reached) is NaN in the
    results and null here: NaN is not JSON, and jq and most parsers refuse the whole document over it."""
    text = json.dumps(_finite(data), indent=2, sort_keys=True, default=str, allow_nan=False)
    write_output(path, (text + "\n").encode())


def _finite(v: Any) -> Any:
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    return v


def append_text(path: str | os.PathLike, text: str) -> None:
    """Append to a file others append to too ($GITHUB_STEP_SUMMARY): never replaced, only extended; a FIFO there is
    written without blocking, as every other output."""
    try:
        fd = open_nonblocking(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)  # 0666 less the umask, as open()
    except OSError as e:
        if e.errno in (errno.ENXIO, errno.EAGAIN):
            raise _open_refused(path, e) from None
        _raise_write_fault(e, path)
        raise
    try:
        write_nonblocking(fd, text.encode("utf-8"), path)
    except OSError as e:
        _raise_write_fault(e, path)
        raise
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Temporary file beside ``path``, then rename: complete or absent, mode as open() would give."""
    import tempfile

    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise BadInput(f"{path} cannot be created: a parent is a file, not a directory", "pass a path in a directory") from None
    except OSError as e:
        raise BadInput(f"cannot create the directory for {path} ({e.strerror})", "pass a path in a writable directory") from None
    mode = _new_file_mode(path if path.exists() else None)
    try:
        remove_leftover_stages(path.parent, path.name)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=stage_prefix(path.name))
    except OSError as e:
        _raise_write_fault(e, path)
        raise BadInput(f"cannot write {path} ({e.strerror})", "pass a path in a writable directory") from None
    _STAGED.add(tmp)
    try:
        with os.fdopen(fd, "wb") as f:
            _write_all(f, data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as e:  # the old file stays as it was: only the temporary one is removed
        if os.path.exists(tmp):
            os.unlink(tmp)
        _raise_write_fault(e, path)
        raise
    finally:
        _STAGED.discard(tmp)


def _write_all(f: Any, data: bytes) -> None:
    """The one place a result's bytes reach a temporary file (tests inject disk faults here)."""
    f.write(data)


class OutputSet:
    """Files that belong together (a report: Markdown + PNGs): all of them appear, or none does.

    A new directory is built under a temporary name beside it and renamed into place. In a
    directory that already exists, every file is written under a temporary name first and the
    renames happen only once all are written, the Markdown (which links the PNGs) last.
    """

    def __init__(self, directory: str | os.PathLike):
        import tempfile

        self.dir = Path(directory)
        self._fresh = not self.dir.exists()
        try:
            if self._fresh:
                self.dir.parent.mkdir(parents=True, exist_ok=True)
                self._stage = stage_beside(self.dir)
            else:
                self._stage = Path(tempfile.mkdtemp(dir=self.dir, prefix=".eagle3-doctor-tmp-"))
                _STAGED.add(str(self._stage))
        except (FileExistsError, NotADirectoryError):
            raise BadInput(f"--report {self.dir} cannot be created: a parent is a file", "pass a directory path") from None
        except OSError as e:
            raise BadInput(
                f"cannot write the report into {self.dir} ({e.strerror})", "pass a writable --report directory"
            ) from None
        self._names: list[str] = []

    def add(self, name: str, data: bytes) -> None:
        try:
            with open(self._stage / name, "wb") as f:
                _write_all(f, data)
        except OSError as e:
            _raise_write_fault(e, self.dir / name)
            raise
        os.chmod(self._stage / name, 0o666 & ~_umask())
        self._names.append(name)

    def commit(self) -> None:
        if self._fresh:
            os.chmod(self._stage, 0o777 & ~_umask())
            try:
                os.rename(self._stage, self.dir)
                _STAGED.discard(str(self._stage))
                return
            except OSError:  # someone created it meanwhile: fall through to file-by-file
                self._fresh = False
        order = sorted(self._names, key=lambda n: n.endswith(".md"))  # the Markdown links the rest: last
        for n in order:
            os.replace(self._stage / n, self.dir / n)
        self.discard()

    def discard(self) -> None:
        import shutil

        shutil.rmtree(self._stage, ignore_errors=True)
        _STAGED.discard(str(self._stage))

    def __enter__(self) -> OutputSet:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()
