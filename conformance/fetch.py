"""Download engine releases with `pip download --no-deps` and keep only the files that decide capture.

Each wheel is opened as a zip, the capture-relevant members (CAPTURE_FILES) are copied into
conformance/.cache/src/<engine>/<version>/, and the wheel is deleted: a vLLM wheel is ~300 MB, the
files we execute are ~1 MB. A release whose extracted tree exists is not downloaded again, so a rerun
is offline and fast.
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

from releases import CAPTURE_FILE_PATTERNS, RELEASES

CACHE = Path(os.environ.get("CONFORMANCE_CACHE", Path(__file__).resolve().parent / ".cache"))


def src_dir(engine: str, version: str) -> Path:
    return CACHE / "src" / engine / version


def fetch(engine: str, version: str) -> tuple[str, str, str]:
    dest = src_dir(engine, version)
    stamp = hashlib.sha256(repr(CAPTURE_FILE_PATTERNS[engine]).encode()).hexdigest()[:12]
    done = dest / ".complete"
    if done.exists() and stamp in done.read_text():
        return engine, version, "cached"
    pats = [re.compile(p) for p in CAPTURE_FILE_PATTERNS[engine]]
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
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        n = 0
        with zipfile.ZipFile(whls[0]) as z:
            for name in z.namelist():
                if any(p.search(name) for p in pats):
                    out = dest / name
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(z.read(name))
                    n += 1
        done.write_text(f"{whls[0].name} {stamp}\n")
        return engine, version, f"{n} files from {whls[0].name}"


def main() -> None:
    CACHE.mkdir(parents=True, exist_ok=True)
    todo = [(e, v) for e, vs in RELEASES.items() for v in vs]
    # a few downloads at once: pip mostly waits on the network
    with ThreadPoolExecutor(max_workers=int(os.environ.get("CONFORMANCE_JOBS", "3"))) as ex:
        for e, v, msg in ex.map(lambda ev: fetch(*ev), todo):
            print(f"fetch {e} {v}: {msg}", flush=True)


if __name__ == "__main__":
    main()
