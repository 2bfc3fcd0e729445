"""The one place files are read from users and written for them: safetensors checked, pickles never
executed; results (JSON, reports, summaries) written atomically, complete or absent."""

from __future__ import annotations

import errno
import gzip
import json
import os
import stat
import struct
import sys
from pathlib import Path
from typing import Any

from ..core.errors import BadInput

_MAX_HEADER = 100 * 1024 * 1024  # the safetensors spec caps the JSON header at 100 MB


def read_json_object(path: Path, missing_fix: str) -> dict[str, Any]:
    """A JSON object from a file, or one clear BadInput (missing, not JSON, not an object)."""
    if not path.is_file():
        if path.exists():  # a directory, FIFO or device: say so, and never open it (a FIFO would block)
            raise BadInput(f"{path} is not a regular file", missing_fix)
        raise BadInput(f"{path} not found", missing_fix)
    try:
        data = loads_json(read_regular_bytes(path, "file", missing_fix, 64 << 20).decode("utf-8"), str(path), missing_fix)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadInput(f"{path} is not valid JSON ({e})", "restore the file from the original checkpoint") from None
    if not isinstance(data, dict):
        raise BadInput(
            f"{path} holds a JSON {type(data).__name__}, not an object", "restore the file from the original checkpoint"
        )
    return data


def check_safetensors_header(path: Path) -> dict[str, Any]:
    """Validate the header before handing the file to the library: clearer errors, no huge reads."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise BadInput(f"{path} cannot be read ({e.strerror})", "re-download or re-export the file") from None
    if not stat.S_ISREG(st.st_mode):
        what = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (a pipe or device)"
        raise BadInput(f"{path} is {what}, not a safetensors file", "replace it with the real weights file")
    size = st.st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise BadInput(f"{path} is truncated ({size} bytes, no safetensors header)", "re-download or re-export the file")
        (n,) = struct.unpack("<Q", head)
        if n > _MAX_HEADER or n + 8 > size:
            raise BadInput(
                f"{path} has a corrupt safetensors header (declares {n} header bytes, file has {size})",
                "re-download or re-export the file",
            )
        raw = f.read(n)
    try:
        header = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise BadInput(f"{path} has a corrupt safetensors header (not JSON)", "re-download or re-export the file") from None
    if not isinstance(header, dict):
        raise BadInput(f"{path} has a corrupt safetensors header", "re-download or re-export the file")
    end = 0
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        try:
            end = max(end, int(meta["data_offsets"][1]))
        except (KeyError, TypeError, ValueError, IndexError):
            raise BadInput(f"{path}: tensor {name!r} has a malformed header entry", "re-export the file") from None
    if 8 + n + end > size:
        raise BadInput(
            f"{path} is truncated: its header needs {8 + n + end} bytes, the file has {size}",
            "re-download or re-export the file",
        )
    return header


def load_file(path: str | os.PathLike, device: str = "cpu") -> dict[str, Any]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file as st_load

    p = Path(path)
    check_safetensors_header(p)
    try:
        return st_load(str(p), device=device)
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise BadInput(f"{p} cannot be read as safetensors ({e})", "re-download or re-export the file") from None


def load_pickle(path: str | os.PathLike) -> Any:
    """torch.load with ``weights_only=True`` only; ``.gz`` is decompressed first."""
    import pickle
    import warnings

    import torch

    p = Path(path)
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols on stderr; the error says enough
            warnings.simplefilter("ignore")
            if p.suffix == ".gz":
                with gzip.open(p, "rb") as f:
                    return torch.load(f, map_location="cpu", weights_only=True)
            return torch.load(p, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        first = next(
            (ln for ln in lines if "Unsupported global" in ln or "unsupported" in ln.lower()),
            lines[0] if lines else "unpickling refused",
        )
        raise BadInput(
            f"{p} was refused by the safe loader (weights_only=True): {first[:160]}",
            "only plain tensors and containers are loaded; re-save the dump with torch.save of tensors, or as safetensors",
        ) from None
    except (EOFError, OSError, RuntimeError, gzip.BadGzipFile, ValueError) as e:
        raise BadInput(f"{p} cannot be read ({type(e).__name__}: {str(e)[:160]})", "re-create the file") from None


# ----------------------------------------------------------------------------- writing outputs

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


def _write_into_special(p: Path, st: os.stat_result, data: bytes) -> None:
    """A device or FIFO is written into; a FIFO without a reader is refused rather than waited on."""
    flags = os.O_WRONLY | (os.O_NONBLOCK if stat.S_ISFIFO(st.st_mode) else 0)
    try:
        fd = os.open(p, flags)
    except OSError as e:
        raise BadInput(f"cannot write into {p} ({e.strerror})", "give a regular file path, or start the reader first") from None
    try:
        with os.fdopen(fd, "wb") as f:
            if stat.S_ISFIFO(st.st_mode):
                os.set_blocking(fd, True)  # opened without waiting; now let the reader take it at its pace
            f.write(data)
    except OSError as e:  # /dev/full, a FIFO whose reader left
        _raise_write_fault(e, p)
        raise


def write_json(path: str | os.PathLike, data: dict[str, Any]) -> None:
    """A --json document: ``-`` is stdout; anything else is written atomically (see write_output)."""
    write_output(path, (json.dumps(data, indent=2, sort_keys=True, default=str, allow_nan=True) + "\n").encode())


def append_text(path: str | os.PathLike, text: str) -> None:
    """Append to a file others append to too ($GITHUB_STEP_SUMMARY): never replaced, only extended."""
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        _raise_write_fault(e, path)
        raise


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
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError as e:
        _raise_write_fault(e, path)
        raise BadInput(f"cannot write {path} ({e.strerror})", "pass a path in a writable directory") from None
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
                self._stage = Path(tempfile.mkdtemp(dir=self.dir.parent, prefix=f".{self.dir.name}.tmp-"))
            else:
                self._stage = Path(tempfile.mkdtemp(dir=self.dir, prefix=".eagle3-doctor-tmp-"))
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

    def __enter__(self) -> OutputSet:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()


# ----------------------------------------------------------------------------- reading inputs, bounded

MAX_JSON_DEPTH = 100  # configs nest 3-5 levels, chat requests with tool schemas ~20; deeper is not data
MAX_YAML_ALIASES = 20  # a launch config needs none; n aliases can expand a value about e**(n/e) times ("billion laughs")


def mode_kind(mode: int) -> str:
    """What a stat mode is: 'file', 'dir', 'fifo', 'device', 'socket' or 'special file' (checks.kind
    and the readers here name a path's type from this one table)."""
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "special file"


KIND_PHRASE = {
    "dir": "a directory",
    "fifo": "a named pipe (FIFO)",
    "device": "a device",
    "socket": "a socket",
    "special file": "a special file",
}


def read_regular_bytes(path: str | os.PathLike, what: str, fix: str, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``, or one BadInput that says what it is instead.

    The file is opened non-blocking and checked again on the open descriptor, so a FIFO (or one
    swapped in after the first look) is refused at once instead of waiting for a writer forever.
    """
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise BadInput(f"{what} {p} does not exist", fix) from None
    except NotADirectoryError:
        raise BadInput(f"{what} {p} cannot exist: a parent is a file, not a directory", fix) from None
    except IsADirectoryError:
        raise BadInput(f"{what} {p} is a directory, not a file", fix) from None
    except OSError as e:
        raise BadInput(f"{what} {p} cannot be read ({e.strerror})", fix) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # Linux opens a directory read-only without complaint
        os.close(fd)
        if stat.S_ISDIR(st.st_mode):
            raise BadInput(f"{what} {p} is a directory, not a file", fix)
        raise BadInput(f"{what} {p} is {KIND_PHRASE[mode_kind(st.st_mode)]}, not a regular file", fix)
    with os.fdopen(fd, "rb") as f:
        if st.st_size > max_bytes:
            raise BadInput(f"{what} {p} is {st.st_size} bytes, over the {max_bytes >> 20} MiB this tool reads", fix)
        os.set_blocking(fd, True)
        try:
            data = f.read(max_bytes + 1)
        except OSError as e:
            raise BadInput(f"{what} {p} cannot be read ({e.strerror})", fix) from None
    if len(data) > max_bytes:  # grew since the stat (a log still being written)
        raise BadInput(f"{what} {p} is over the {max_bytes >> 20} MiB this tool reads", fix)
    return data


def read_regular_text(path: str | os.PathLike, what: str, fix: str, max_bytes: int) -> str:
    """read_regular_bytes decoded as UTF-8 (a BOM dropped), or one BadInput naming the first bad byte."""
    raw = read_regular_bytes(path, what, fix, max_bytes)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise BadInput(f"{what} {path} is not UTF-8 text (byte {e.start})", "save it as UTF-8") from None


def json_depth(value: Any) -> int:
    """How deeply lists and objects nest in a parsed JSON value (a scalar is 0), without recursion."""
    depth, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        kids = v.values() if isinstance(v, dict) else v if isinstance(v, list) else None
        if kids is None:
            continue
        depth = max(depth, d)
        stack.extend((k, d + 1) for k in kids if isinstance(k, (dict, list)))
    return depth


def loads_json(text: str | bytes, where: str, fix: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """json.loads with nesting bounded: deeper than ``max_depth`` is one BadInput, never a RecursionError.

    json.JSONDecodeError passes through, so each caller words its own "not valid JSON" line.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        raise BadInput(f"{where} nests deeper than {max_depth} levels", fix) from None
    if json_depth(value) > max_depth:
        raise BadInput(f"{where} nests deeper than {max_depth} levels", fix)
    return value


def load_yaml(text: str, where: str, fix: str, max_aliases: int = MAX_YAML_ALIASES) -> Any:
    """YAML with the safe loader (no Python objects), aliases bounded, nesting bounded like JSON."""
    import yaml

    class _Bounded(yaml.SafeLoader):
        aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > max_aliases:
                    raise BadInput(f"{where} uses more than {max_aliases} YAML aliases (*name)", fix)
            return super().compose_node(parent, index)

    try:
        value = yaml.load(text, Loader=_Bounded)  # noqa: S506 (a SafeLoader subclass)
    except RecursionError:
        raise BadInput(f"{where} nests deeper than {MAX_JSON_DEPTH} levels", fix) from None
    except yaml.YAMLError as e:
        raise BadInput(f"{where} is not valid YAML ({str(e).splitlines()[0][:120]})", fix) from None
    if isinstance(value, (dict, list)):
        _yaml_depth(value, where, fix, {}, set(), 1)
    return value


def _yaml_depth(v: Any, where: str, fix: str, memo: dict[int, int], active: set[int], level: int) -> int:
    """How deeply a YAML value nests, each shared node measured once; a node inside itself is refused."""
    if level > MAX_JSON_DEPTH:
        raise BadInput(f"{where} nests deeper than {MAX_JSON_DEPTH} levels", fix)
    key = id(v)
    if key in memo:
        return memo[key]
    if key in active:  # `&a [*a]`: whatever walks it next would never finish
        raise BadInput(f"{where} holds a YAML alias that contains itself", fix)
    active.add(key)
    kids = v.values() if isinstance(v, dict) else v
    d = 1 + max((_yaml_depth(k, where, fix, memo, active, level + 1) for k in kids if isinstance(k, (dict, list))), default=0)
    active.discard(key)
    memo[key] = d
    return d
