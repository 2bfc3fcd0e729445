"""Engine releases: which version strings each engine takes, how a release string is read, and the
newest release the engine table models. Every other engines module asks here which row a version is.
"""

from __future__ import annotations

import re

from ..core.errors import BadInput

ENGINES = ("sglang", "vllm", "trtllm", "modelopt", "eagle", "declared")

# version strings accepted per engine; the first is the default
ENGINE_VERSIONS: dict[str, tuple[str, ...]] = {
    "sglang": ("0.5.23", "0.5.2"),
    "vllm": ("0.33.0", "0.33.0-v2", "0.18.0", "0.10.2"),
    "trtllm": ("1.2", "1.2-two-model"),
    "modelopt": ("0.47",),
    "eagle": ("eagle3",),
    "declared": (),  # the release is the serving description's path (engines/declared.py)
}

NEWEST = {"sglang": "0.5.23", "vllm": "0.33.0"}  # newest release conformance/table.json was executed on
MODELOPT_FIRST = "0.35.0"  # first release whose HF EAGLE plugin captures with forward hooks (executed)
MODELOPT_NEWEST = "0.47.0"
TRTLLM_RELEASE = "1.2"  # the newest TensorRT-LLM release modelled; its point releases map onto it
# every TensorRT-LLM minor series the capture table models (conformance/trtllm_exec.py, executed from excerpts of
# the releases' own files; data/trtllm_capture.json): a release maps to the series it belongs to. From 0.20, the
# last series before Qwen3-MoE's decoder layer captured, so that its missing capture is an answer, not a refusal.
TRTLLM_RELEASES = ("0.20", "0.21", "1.0", "1.1", "1.2")
MINUS_ONE_EMBED = "+minus-one-embed"  # --engine-version suffix: "my sglang build maps -1 to the embeddings"


# a release as pip writes it: numbers, then an optional pre-release (a/b/rc), post-release and dev part;
# a pre-release or dev build of X.Y.Z runs X.Y.Z's code in the making, so it maps to X.Y.Z's row
_RELEASE = re.compile(
    r"^v?(?P<nums>\d+(?:\.\d+)*)(?:[._-]?(?:a|b|c|rc|alpha|beta|pre|preview)[._-]?\d*)?"
    r"(?:[._-]?post[._-]?(?P<post>\d+))?(?:[._-]?dev[._-]?\d*)?$"
)


def _split_version(version: str) -> tuple[str, str]:
    """(release part, the suffix the doctor reads): '0.33.0-v1' -> ('0.33.0', '-v1'); a local version
    ('+g1234abc', a build of that release) is dropped, the '+minus-one-embed' marker is kept."""
    v, suffix = version.strip(), ""
    if v.endswith(MINUS_ONE_EMBED):
        v, suffix = v[: -len(MINUS_ONE_EMBED)], MINUS_ONE_EMBED
    v = v.split("+")[0]
    base, dash, tail = v.partition("-")
    if dash and tail in ("v1", "v2", "two-model"):
        return base, "-" + tail + suffix
    return v, suffix


def _parse(version: str) -> tuple[list[int], int]:
    m = _RELEASE.match(_split_version(version)[0].lower())
    if m is None:
        raise BadInput(
            f"--engine-version {version!r} is not a release number",
            "write e.g. 0.5.23, 0.33, 0.33.1, 0.5.4.post2 or 0.5.10rc0",
        )
    return [int(x) for x in m["nums"].split(".")], int(m["post"]) if m["post"] else -1


def release_key(version: str) -> tuple:
    """'0.5.4.post2' -> (0, 5, 4, 2); '0.33' == '0.33.0'; '0.5.10rc0' and '0.5.10.dev3' == '0.5.10'; a
    '-v1'/'-v2'/'-two-model' suffix and a local '+...' part are ignored."""
    nums, post = _parse(version)
    nums = nums + [0] * (3 - len(nums))
    return (*nums, post)


def release_string(version: str) -> str:
    """The release a version string names, with the suffix the doctor reads kept: '0.11.0rc2.dev45+g1234abc'
    -> '0.11.0', '0.5.4.post2' -> '0.5.4.post2', '0.33.0-v1' -> '0.33.0-v1'."""
    nums, post = _parse(version)
    return ".".join(map(str, nums)) + (f".post{post}" if post >= 0 else "") + _split_version(version)[1]


def covering(rows: list, version: str):
    """The entry of ``rows`` (rows, or (first release, value) pairs, oldest first) that covers ``version``."""
    k = release_key(version)
    hit = rows[0]
    for r in rows:
        if release_key(r[0] if isinstance(r, tuple) else r.first) <= k:
            hit = r
    return hit


def newest_modelled(engine: str) -> str | None:
    """The newest release whose rules the engine table holds (executed, or hand-read for TensorRT-LLM)."""
    return {**NEWEST, "modelopt": MODELOPT_NEWEST, "trtllm": TRTLLM_RELEASE}.get(engine)


def release_label(engine: str, version: str) -> str:
    """How reports name an engine release: "sglang 0.5.23", or a serving description's own engine and release."""
    if engine == "declared":
        from .declared import read_declared

        return read_declared(version).label
    return f"{engine} {version}"


def newer_than_modelled(engine: str, version: str) -> str | None:
    """The newest modelled release, when ``version`` is newer and that release's rules are applied to it;
    None otherwise. TensorRT-LLM point releases (1.2.1) are the 1.2 row, not newer."""
    newest = newest_modelled(engine)
    if newest is None:
        return None
    k, n = release_key(version), release_key(newest)
    if engine == "trtllm":
        k, n = k[:2], n[:2]
    return newest if k > n else None


def rules_release(engine: str, version: str | None) -> str:
    """The release whose rules apply to ``version``: itself, or the newest modelled one for a newer release."""
    v = check_engine(engine, version)
    return ENGINE_VERSIONS[engine][0] if newer_than_modelled(engine, v) else v


def check_engine(engine: str, version: str | None) -> str:
    """Any release string maps to the engine-table row that covers it and comes back as that release
    (0.33 == 0.33.0, 0.5.10rc0 -> 0.5.10, TensorRT-LLM 1.2.1 -> 1.2); a release newer than the newest
    modelled, up to the next minor series, takes the newest row (newer_than_modelled says so)."""
    if engine not in ENGINES:
        raise BadInput(f"unknown --engine {engine!r}", f"use one of {', '.join(ENGINES)}")
    if engine == "declared":
        from .declared import read_declared

        read_declared(version or "")  # refused in one line unless it names a readable, valid description
        return str(version)
    versions = ENGINE_VERSIONS[engine]
    if version is None:
        return versions[0]
    if engine == "eagle":
        if version.strip() not in versions:
            raise BadInput(
                f"--engine-version {version} is not modelled for {engine}",
                f"use one of {', '.join(versions)} (the closest release whose behaviour you run)",
            )
        return version.strip()
    v = release_string(version)
    k, newest = release_key(v), release_key(newest_modelled(engine) or "0")
    suffix = _split_version(v)[1]
    if k[:2] > (newest[0], newest[1] + 1):
        # the next minor series takes the newest row with a warning (ENG005); anything further out is not
        # a release this table can speak for
        raise BadInput(
            f"--engine-version {version} is newer than any {engine} release the engine table covers "
            f"(newest modelled: {newest_modelled(engine)})",
            "add it to conformance/releases.py and run make conformance, or name the closest release",
        )
    dash = suffix.split("+")[0]
    if dash and dash not in {"vllm": ("-v1", "-v2"), "trtllm": ("-two-model",)}.get(engine, ()):
        raise BadInput(
            f"--engine-version {version}: unknown suffix {dash!r} for {engine}",
            "use e.g. 0.33.0, 0.33.0-v1 or 0.33.0-v2 (vLLM runners), 1.2-two-model (TensorRT-LLM)",
        )
    if engine == "modelopt" and k < release_key(MODELOPT_FIRST):
        raise BadInput(
            f"--engine-version {version}: ModelOpt before {MODELOPT_FIRST} captured without forward hooks, "
            "which the engine table does not model",
            f"use {MODELOPT_FIRST} or newer (e.g. 0.47)",
        )
    if engine == "trtllm":
        if k[:2] < release_key(TRTLLM_RELEASES[0])[:2]:
            raise BadInput(
                f"--engine-version {version} is not modelled for {engine}",
                f"use {TRTLLM_RELEASES[0]} or newer (any of {', '.join(TRTLLM_RELEASES)} and their point releases; "
                "-two-model for the two-model EAGLE-3 path)",
            )
        if k[:2] > newest[:2]:  # the next minor series: its own number, the newest row's rules (ENG005)
            return v.split("-")[0] + suffix
        return trtllm_series(v) + suffix
    return v


def trtllm_series(version: str) -> str:
    """The modelled TensorRT-LLM series a release belongs to: '1.0.1' -> '1.0', '1.1.0rc5' -> '1.1', '1.3' -> '1.2'
    (the newest modelled, for a release newer than every series)."""
    k = release_key(version)[:2]
    hit = TRTLLM_RELEASES[0]
    for r in TRTLLM_RELEASES:
        if release_key(r)[:2] <= k:
            hit = r
    return hit
