"""The one place files are read from users: safetensors checked, pickles never executed, every other
input bounded (regular files only, a size cap, JSON and YAML nesting capped). What the tool writes
goes through outputs.py."""

from __future__ import annotations

import gzip
import json
import math
import os
import stat
import struct
from pathlib import Path
from typing import IO, Any, cast

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


def load_arrays(path: str | os.PathLike) -> dict[str, Any]:
    """A safetensors file as {name: StoredArray}, read with numpy alone: the header checked as for
    load_file, the file read once, each tensor a view of those bytes."""
    p = Path(path)
    header = check_safetensors_header(p)
    data = _read_span(p, 0, None)
    return {name: _array(p, name, meta, data, 0) for name, meta in header.items() if name != "__metadata__"}


def read_array(path: str | os.PathLike, name: str) -> Any:
    """One tensor of a safetensors file as a StoredArray (only its bytes read), or None if the file lacks it."""
    p = Path(path)
    header = check_safetensors_header(p)
    meta = header.get(name) if name != "__metadata__" else None
    if meta is None:
        return None
    start, end = _offsets(p, name, meta)
    return _array(p, name, meta, _read_span(p, start, end), start)


def _read_span(p: Path, start: int, end: int | None) -> Any:
    """Bytes start..end of the data section (after the header), mapped rather than read: a private
    copy-on-write mapping (writable, so torch takes its arrays without a copy; nothing is ever written
    back to the file), whose pages come from the page cache only where a tensor is read. Reading an 8B
    draft's 0.8 GB into a buffer first was a third of inspect's wall."""
    import mmap

    try:
        with open(p, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            off = 8 + n + start
            size = os.fstat(f.fileno()).st_size
            length = (size - off) if end is None else (end - start)
            if length <= 0:
                return bytearray()
            base = off - off % mmap.ALLOCATIONGRANULARITY  # a mapping starts on the granularity
            mm = mmap.mmap(f.fileno(), length + off - base, access=mmap.ACCESS_COPY, offset=base)
            return memoryview(mm)[off - base :]  # the view keeps the mapping alive as long as any array
    except (OSError, ValueError) as e:
        raise BadInput(f"{p} cannot be read ({getattr(e, 'strerror', None) or e})", "re-download or re-export the file") from None


def _offsets(p: Path, name: str, meta: Any) -> tuple[int, int]:
    try:
        start, end = (int(x) for x in meta["data_offsets"])
    except (KeyError, TypeError, ValueError):
        raise BadInput(f"{p}: tensor {name!r} has a malformed header entry", "re-export the file") from None
    return start, end


def tensor_layout(path: str | os.PathLike) -> tuple[int, dict[str, tuple[int, int, tuple[int, ...], str]]]:
    """Where each tensor of a safetensors file lies, every header entry checked as for :func:`load_arrays`:
    (the data section's first byte in the file, {name: (start, end, shape, torch dtype name)}), the offsets
    within the data section. For readers that move the bytes themselves (``model.native.read``)."""
    p = Path(path)
    header = check_safetensors_header(p)
    with open(p, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
    return 8 + n, {name: _entry(p, name, meta, 0) for name, meta in header.items() if name != "__metadata__"}


def _entry(p: Path, name: str, meta: Any, base: int) -> tuple[int, int, tuple[int, ...], str]:
    """(start, end, shape, torch dtype name) of one header entry, refused unless its span is what its shape and
    dtype need and lies at or after ``base``."""
    import numpy as np

    from .arrays import SAFETENSORS_DTYPES

    code = meta.get("dtype") if isinstance(meta, dict) else None
    if code not in SAFETENSORS_DTYPES:
        raise BadInput(f"{p}: tensor {name!r} has dtype {code}, which the doctor cannot read", "re-export it as bf16, f16 or f32")
    torch_name, np_name = SAFETENSORS_DTYPES[code]
    itemsize = np.dtype(np_name).itemsize
    start, end = _offsets(p, name, meta)
    try:
        shape = tuple(int(x) for x in meta["shape"])
    except (KeyError, TypeError, ValueError):
        raise BadInput(f"{p}: tensor {name!r} has a malformed header entry", "re-export the file") from None
    count = math.prod(shape)
    if min(shape, default=0) < 0 or start < base or end - start != count * itemsize:
        raise BadInput(
            f"{p}: tensor {name!r} spans {end - start} bytes, its shape and dtype need {count * itemsize}",
            "re-export the file",
        )
    return start, end, shape, torch_name


def _array(p: Path, name: str, meta: Any, data: Any, base: int) -> Any:
    """The StoredArray a header entry describes, from ``data`` holding the data section from byte ``base``."""
    import numpy as np

    from .arrays import SAFETENSORS_DTYPES, StoredArray

    start, _, shape, torch_name = _entry(p, name, meta, base)
    dt = np.dtype(SAFETENSORS_DTYPES[meta["dtype"]][1])
    arr = np.frombuffer(data, dtype=dt, count=math.prod(shape), offset=start - base)
    if (start - base) % dt.itemsize:  # safetensors does not promise alignment, and torch refuses misaligned views
        arr = arr.copy()
    return StoredArray(arr.reshape(shape), torch_name)


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
                    # cast: typeshed's GzipFile is no IO[bytes], though it has every method torch.load calls
                    return torch.load(cast(IO[bytes], f), map_location="cpu", weights_only=True)
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


def jsonl_lines(text: str) -> list[tuple[int, str]]:
    """(1-based line number, line) for each non-blank line of JSONL text.

    Split on "\n" alone: str.splitlines() also breaks at U+2028, U+0085 and the other Unicode line
    boundaries, which JSON allows raw inside a string, and would cut one record in two. A CRLF line's
    "\r" is JSON whitespace, so it is left for the parser."""
    return [(i + 1, ln) for i, ln in enumerate(text.split("\n")) if ln.strip()]


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
