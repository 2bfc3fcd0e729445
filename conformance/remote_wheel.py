"""Read single members of a wheel on the package index without downloading the wheel.

A wheel is a zip: its central directory sits at the end of the file and names every member's offset
and compressed size. With HTTP range requests the harness reads that directory, then only the byte
ranges of the members it keeps (merged where they lie close together), and inflates them with the
standard `zipfile` module, which verifies each member's CRC as usual. A vLLM wheel is ~330 MB; the
files the harness executes are ~5 MB of it.

The wheel is found through the index's JSON API (PEP 691), whose file entries carry the wheel's
sha256: the cache is stamped with it, so a re-uploaded file under the same version is noticed.
"""

from __future__ import annotations

import io
import json
import re
import urllib.request
import zipfile
from typing import Any

INDEX = "https://pypi.org/simple"
GAP = 1 << 20  # members closer than this are read in one request
TIMEOUT = 60


def _get(url: str, headers: dict[str, str] | None = None) -> bytes:
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
        return r.read()


def pick_wheel(project: str, version: str, index: str = INDEX) -> dict[str, Any] | None:
    """The index entry of the release's wheel for CPython 3.11 on x86_64 Linux (or a pure wheel)."""
    data = json.loads(_get(f"{index}/{project}/", {"Accept": "application/vnd.pypi.simple.v1+json"}))
    norm = re.sub(r"[-_.]+", "_", project).lower()
    best: tuple[int, dict[str, Any]] | None = None
    for f in data["files"]:
        m = re.match(r"^([^-]+)-([^-]+)-([^-]+)-([^-]+)-(.+)\.whl$", f["filename"])
        if not m or m.group(1).lower() != norm or m.group(2) != version or f.get("yanked"):
            continue
        py, abi, plat = m.group(3), m.group(4), m.group(5)
        if not any(t in py.split(".") for t in ("cp311", "cp38", "py3", "py311")) and "abi3" not in abi:
            continue
        rank = 2 if "x86_64" in plat and "manylinux" in plat else 1 if plat == "any" else 0
        if rank and (best is None or rank > best[0]):
            best = (rank, f)
    return best[1] if best else None


class RangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file: reads come from prefetched ranges, or a range request."""

    def __init__(self, url: str, size: int):
        self.url, self.size, self.pos = url, size, 0
        self.chunks: list[tuple[int, bytes]] = []
        self.requests = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 else self.size + offset
        return self.pos

    def fetch(self, start: int, end: int) -> None:
        """Bring bytes [start, end) into memory with one request."""
        start, end = max(0, start), min(self.size, end)
        if start >= end:
            return
        body = _get(self.url, {"Range": f"bytes={start}-{end - 1}"})
        self.requests += 1
        if len(body) != end - start:
            raise OSError(f"{self.url}: asked for {end - start} bytes at {start}, got {len(body)} (no range support?)")
        self.chunks.append((start, body))

    def readinto(self, b: Any) -> int:
        n = min(len(b), self.size - self.pos)
        if n <= 0:
            return 0
        for start, body in self.chunks:
            if start <= self.pos and self.pos + n <= start + len(body):
                off = self.pos - start
                b[:n] = body[off : off + n]
                self.pos += n
                return n
        self.fetch(self.pos, self.pos + max(n, 1 << 16))
        return self.readinto(b)


def extract(url: str, size: int, keep: Any) -> tuple[dict[str, bytes], int]:
    """The members whose names ``keep(name)`` accepts, {name: bytes}, and the number of requests made."""
    f = RangeFile(url, size)
    f.fetch(size - min(size, 1 << 16), size)  # the end of central directory and usually the directory itself
    with zipfile.ZipFile(f) as z:
        want = [i for i in z.infolist() if keep(i.filename)]
        # each member: its local header (30 bytes + name + extra, the extra at most a few hundred) and data
        spans = sorted((i.header_offset, i.header_offset + 30 + len(i.filename) + 1024 + i.compress_size) for i in want)
        merged: list[list[int]] = []
        for a, e in spans:
            if merged and a - merged[-1][1] < GAP:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([a, e])
        for a, e in merged:
            f.fetch(a, e)
        return {i.filename: z.read(i) for i in want}, f.requests
