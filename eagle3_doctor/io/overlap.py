"""Outputs never land on inputs: checked once, before anything is written or loaded.

Every output a command was given (--json, --plot, --summary, --write-template, the files --report
writes, $GITHUB_STEP_SUMMARY) is resolved with symbolic links followed and refused when it is, or lies
inside, a file or directory the run reads, and when two outputs are the same file. A result file
written over the draft's config.json or the prompts it was computed from would destroy the evidence
the result is about; an atomic rename does not help, since the rename is what replaces the input.

Pure path arithmetic: nothing here opens a file, so nothing here can block or be slow.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.errors import BadInput

# (option name as the command's parameter, flag as the user typed it): everything a run may read
INPUTS: tuple[tuple[str, str], ...] = (
    ("target", "--target"),
    ("draft", "--draft"),
    ("prompts", "--prompts"),
    ("train_data", "--train-data"),
    ("serve_config", "--serve-config"),
    ("policy", "--policy"),
    ("baseline", "--baseline"),
    ("train_dump", "--train-dump"),
    ("engine_dump", "--engine-dump"),
    ("server_metrics", "--server-metrics"),
    ("server_metrics_before", "--server-metrics-before"),
    ("server_log", "--server-log"),
    ("metrics", "--metrics"),
    ("before", "--before"),
    ("log", "--server-log"),
    ("train_template", "--train-template"),
    ("serve_template", "--serve-template"),
    ("train_data", "--train-data"),
    ("requests", "--requests"),
    ("train_tokenizer", "--train-tokenizer"),
)
OUTPUT_FILES: tuple[tuple[str, str], ...] = (
    ("json_out", "--json"),
    ("plot", "--plot"),
    ("summary", "--summary"),
    ("sarif", "--sarif"),
    ("write_template", "--write-template"),
    ("out", "--out"),  # fix: the corrected copy of the draft
)
# the names report.py writes into a --report directory (OutputSet.add)
REPORT_FILES = (
    "compare-hidden.md",
    "heatmap.png",
    "acceptance.md",
    "acceptance.png",
    "inspect.md",
    "diagnose.png",
    "diagnose.md",
)
_NOT_PATHS = ("target",)  # --train-template target: the target tokenizer's own, a keyword


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(path))


def _inside(child: str, parent: str) -> bool:
    return child == parent or child.startswith(parent.rstrip(os.sep) + os.sep)


def _inputs(opts: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(flag, as given, resolved) of every input option that names an existing local path."""
    out = []
    for key, flag in INPUTS:
        given = opts.get(key)
        for v in given if isinstance(given, list) else [given]:  # a repeatable input: diagnose's scrapes
            if not isinstance(v, (str, os.PathLike)) or not str(v).strip() or str(v) in _NOT_PATHS or "://" in str(v):
                continue
            if os.path.lexists(v):
                out.append((flag, str(v), _real(str(v))))
    return out


def _outputs(opts: Mapping[str, Any], env_summary: str | None) -> list[tuple[str, str, str]]:
    """(flag, as given, resolved) of every output file, the report's files named one by one."""
    out = []
    for key, flag in OUTPUT_FILES:
        v = opts.get(key)
        if isinstance(v, (str, os.PathLike)) and str(v).strip() and str(v) != "-":
            out.append((flag, str(v), _real(str(v))))
    rep = opts.get("report")
    if isinstance(rep, (str, os.PathLike)) and str(rep).strip():
        out.append(("--report", str(rep), _real(str(rep))))
        out.extend(("--report", os.path.join(str(rep), n), _real(os.path.join(str(rep), n))) for n in REPORT_FILES)
    if env_summary:
        out.append(("$GITHUB_STEP_SUMMARY", env_summary, _real(env_summary)))
    return out


def _is_device(real: str) -> bool:
    # /dev/stdout and friends are written into, never replaced: they are nobody's input
    return real.startswith(("/dev/", "/proc/"))


def check_outputs_apart(opts: Mapping[str, Any], env_summary: str | None = None) -> None:
    """Refuse (BadInput) an output that is, or lies inside, an input, or that another output also names.

    ``opts``: the command's options by parameter name (unknown keys ignored); ``env_summary``: the
    $GITHUB_STEP_SUMMARY file a gate appends to, when set.
    """
    inputs = _inputs(opts)
    outputs = [o for o in _outputs(opts, env_summary) if not _is_device(o[2])]
    for oflag, opath, oreal in outputs:
        for iflag, ipath, ireal in inputs:
            if _inside(oreal, ireal):
                where = "is" if oreal == ireal else "lies inside"
                link = "" if os.path.abspath(opath) == oreal else f" (resolves to {oreal})"
                raise BadInput(
                    f"{oflag} {opath}{link} {where} {iflag} {ipath}: writing it would overwrite an input",
                    f"write {oflag} to a path outside the inputs, e.g. ./{os.path.basename(opath) or 'out'}",
                )
    _check_no_collision(outputs)


def _check_no_collision(outputs: Iterable[tuple[str, str, str]]) -> None:
    seen: dict[str, tuple[str, str]] = {}
    for oflag, opath, oreal in outputs:
        prev = seen.get(oreal)
        if prev is not None and prev[0] != oflag:
            raise BadInput(
                f"{oflag} {opath} and {prev[0]} {prev[1]} are the same file: one would overwrite the other",
                f"give {oflag} and {prev[0]} different paths",
            )
        seen.setdefault(oreal, (oflag, opath))
