"""eagle3-doctor inspect: the draft checkpoint and config audited against the target and engine."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

from ...core.findings import exit_code
from ..options import JSON_OUT, REPORT, SERVED, options
from ..output import console, tool
from ..resolve import RESOLVED_LATER, preflight_given, resolve_serve


@options(**SERVED, json_out=JSON_OUT, report=REPORT)
def inspect_cmd(**given: Any) -> int:
    """Audit the draft checkpoint and config against the target and engine. No forward pass."""
    # read when numpy loads OpenBLAS, so before anything (the preflight too) imports numpy: inspect's
    # matrices are at most 512 a side (tensors.SUBSAMPLE), where one thread is fastest, and OpenBLAS's
    # idle threads spin; on a loaded 2-core machine one 256x128 SVD took 1.4 s of CPU with them, 0.01 s without
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    a = SimpleNamespace(**given)
    preflight_given(a, skip=RESOLVED_LATER)
    r = resolve_serve(a, need_draft=True)  # the launch command is read (and refused) before torch is imported
    from .drafters import is_mtp, mtp_inspect

    if is_mtp(r):
        return mtp_inspect(a, r)
    from .drafters import dflash_inspect, drafter_kind

    if drafter_kind(r) == "dflash":
        return dflash_inspect(a, r)
    if drafter_kind(r) == "peagle":
        from .peagle_cmd import peagle_inspect

        return peagle_inspect(a, r)
    from ...analyses.inspect.inspection import inspect
    from ...io.outputs import write_json
    from ...report.render import render_inspect

    assert r.draft is not None  # need_draft: resolve_serve raised otherwise
    res = inspect(r.target, r.draft, engine=r.engine, engine_version=r.engine_version, draft_format=a.draft_format)
    r.locate(res.findings)
    render_inspect(console(stderr=a.json_out == "-"), res)
    if a.json_out:
        write_json(a.json_out, {**res.to_dict(), "tool": tool(), **({"serve": r.serve.to_dict()} if r.serve else {})})
    if a.report:
        from ...report.render import write_inspect_report

        write_inspect_report(res, a.report)
    return exit_code(res.findings, "warning")
