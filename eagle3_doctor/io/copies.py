"""A new directory that appears whole or not at all (fix's corrected checkpoint), and a checkpoint's files
copied into it without following a link blindly. Every byte goes through outputs' one write point
(``_write_all``, where tests inject disk faults), and a stage is registered in outputs' ``_STAGED``, which the
console's signal handler removes."""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..core.errors import BadInput
from . import outputs


@contextmanager
def new_directory(out: str | os.PathLike, what: str = "--out") -> Iterator[Path]:
    """A directory that appears complete or not at all (a corrected checkpoint): the block writes into a
    temporary sibling, renamed to ``out`` only when the block ends without an error.

    An interruption the process sees (Ctrl-C, SIGTERM, an exception) removes the sibling; one it cannot see
    (SIGKILL) leaves it under a hidden name that is never ``out``, and the next write of ``out`` removes it
    (see remove_leftover_stages). A write the environment refuses (a full disk, ``ulimit -f``) is one
    BadInput naming ``out``. ``out`` must not exist: nothing is ever written over.
    """
    import shutil

    o = Path(out)
    target = f"{what} {out}"
    try:
        o.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise BadInput(f"{target} cannot be created: a parent is a file, not a directory", "pass a path in a directory") from None
    except OSError as e:
        outputs._raise_write_fault(e, target)
        raise BadInput(
            f"cannot create the directory for {target} ({e.strerror})", "pass a path in a writable directory"
        ) from None
    try:
        stage = outputs.stage_beside(o)
    except OSError as e:
        outputs._raise_write_fault(e, target)
        raise BadInput(f"cannot write {target} ({e.strerror})", "pass a path in a writable directory") from None
    try:
        yield stage
        os.chmod(stage, 0o777 & ~outputs._umask())  # mkdtemp's 0700, made what mkdir would give
        # rename(2) would replace an empty directory that appeared meanwhile: look once more, just before
        if os.path.lexists(o):
            raise BadInput(f"{target} appeared while the copy was written", "name a new directory: nothing is written over")
        os.rename(stage, o)
    except BaseException as e:
        shutil.rmtree(stage, ignore_errors=True)
        outputs._raise_write_fault(e, target)
        raise
    finally:
        outputs._STAGED.discard(str(stage))


def write_file(path: str | os.PathLike, data: bytes) -> None:
    """A file of a directory being built (new_directory's stage), through the one point every result's bytes
    pass, so a refused write is the OSError the stage turns into one line."""
    with open(path, "wb") as f:
        outputs._write_all(f, data)


_CHUNK = 1 << 24


def copy_regular_files(src: str | os.PathLike, dst: str | os.PathLike, what: str, skip: Collection[str] = ()) -> list[str]:
    """Copy the regular files at the top of the directory ``src`` into ``dst`` (see regular_files); the names
    copied, sorted."""
    fix = f"remove it from {what} {src}, or copy the checkpoint's own files into a plain directory"
    copied = []
    for p, st in regular_files(src, what, skip):
        _copy_one(p, st, Path(dst) / p.name, what, fix)
        copied.append(p.name)
    return copied


def regular_files(src: str | os.PathLike, what: str, skip: Collection[str] = ()) -> list[tuple[Path, os.stat_result]]:
    """The regular files at the top of the directory ``src`` (names in ``skip`` left out), each with its stat,
    sorted by name: what a copy of a checkpoint holds, checked before anything is written or loaded.

    A checkpoint is read from its top level only, so only that is copied, and never a link blindly: a link to
    a regular file counts as that file (a hub cache snapshot is all links into its blobs), a subdirectory or
    a link to one (``loop -> .``) is left out, and a device, FIFO or socket, or a link to one or to nothing,
    is refused in one line: its bytes are no checkpoint's, and /dev/zero would be copied until the disk is full.
    """
    s = Path(src)
    fix = f"remove it from {what} {src}, or copy the checkpoint's own files into a plain directory"
    try:
        names = sorted(os.listdir(s))
    except OSError as e:
        raise BadInput(f"{what} {src} cannot be listed ({e.strerror})", "fix its permissions (chmod +rx)") from None
    found = []
    for name in names:
        if name in skip:
            continue
        p = s / name
        try:
            st = os.stat(p)
        except FileNotFoundError:
            raise BadInput(f"{what}: {p} is a link to nothing ({os.readlink(p)})", fix) from None
        except OSError as e:  # ELOOP: a link that leads back to itself
            raise BadInput(f"{what}: {p} cannot be followed ({e.strerror})", fix) from None
        if stat.S_ISDIR(st.st_mode):
            continue
        if not stat.S_ISREG(st.st_mode):
            from .safeio import KIND_PHRASE, mode_kind

            link = f" (a link to {os.path.realpath(p)})" if p.is_symlink() else ""
            raise BadInput(f"{what}: {p}{link} is {KIND_PHRASE[mode_kind(st.st_mode)]}, not a regular file", fix)
        found.append((p, st))
    return found


def _copy_one(p: Path, st: os.stat_result, dest: Path, what: str, fix: str) -> None:
    """``p``'s bytes into the new file ``dest``: at most the size it had when looked at, from a descriptor
    checked to be that same regular file (a FIFO swapped in meanwhile is refused, not waited on)."""
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        raise BadInput(f"{what}: {p} cannot be read ({e.strerror})", "fix its permissions (chmod +r)") from None
    with os.fdopen(fd, "rb") as f:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(now.st_mode):
            raise BadInput(f"{what}: {p} changed while it was copied", fix)
        os.set_blocking(fd, True)
        left = now.st_size
        with open(dest, "xb") as out:
            while left > 0:
                try:
                    chunk = f.read(min(_CHUNK, left))
                except OSError as e:
                    raise BadInput(f"{what}: {p} cannot be read ({e.strerror})", "check the disk it is on") from None
                if not chunk:
                    raise BadInput(f"{what}: {p} shrank while it was copied", "copy it again once nothing writes to it")
                outputs._write_all(out, chunk)
                left -= len(chunk)
    os.chmod(dest, 0o666 & ~outputs._umask())
