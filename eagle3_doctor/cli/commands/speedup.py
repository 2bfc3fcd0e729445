"""eagle3-doctor speedup: predicted tokens per second per speculative setting, and the best one."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ...core.errors import EXIT_OK
from ..options import (
    BATCH_SIZES,
    JSON_OUT,
    LAYER_IDS,
    LOADING,
    PROMPTS,
    QUIET,
    REPEATS,
    REPLAY,
    SERVED,
    SPEED_CONTEXT,
    SPEED_LOOP,
    SPEED_SETTINGS,
    options,
)
from ..output import console, progress, write_result
from ..resolve import RESOLVED_LATER, preflight_given, resolve_serve


@options(
    **SERVED,
    layer_ids=LAYER_IDS,
    prompts=PROMPTS,
    settings=SPEED_SETTINGS,
    batch_sizes=BATCH_SIZES,
    context=SPEED_CONTEXT,
    repeats=REPEATS,
    loop=SPEED_LOOP,
    **REPLAY,
    **LOADING,
    json_out=JSON_OUT,
    quiet=QUIET,
)
def speedup_cmd(**given: Any) -> int:
    """Predicted tokens per second per speculative setting, the best setting, and the speedup over plain decoding."""
    a = SimpleNamespace(**given, continuation="greedy")  # greedy: --max-new-tokens 0 is refused up front
    preflight_given(a, skip=RESOLVED_LATER)
    r = resolve_serve(a, need_draft=True)  # the launch command is read (and refused) before torch is imported
    from ...analyses.speedup import predict_speedup
    from ...drafters.registry import refuse_other_kinds
    from ...drafters.run import load_models
    from ...report.speedup import render_speedup

    refuse_other_kinds(r.draft)
    setup = load_models(r)
    opts = _speedup_options(a, r, setup)
    with progress(a.quiet) as cb:
        res = predict_speedup(setup, opts, prompts_path=a.prompts, progress=cb)
    render_speedup(console(stderr=a.json_out == "-"), res)
    write_result(a.json_out, res.to_dict, a.trust_remote_code)
    return EXIT_OK


def _speedup_options(a: SimpleNamespace, r: Any, setup: Any) -> Any:
    """The grid (--settings, else the engine's default grid), the launch command's setting, the loop's settings."""
    from ...analyses.speedup import SpeedupOptions
    from ...drafters.run import batch_size_for
    from ...engines.spec_settings import current_setting, default_grid, parse_batch_sizes, parse_settings

    grid = parse_settings(a.settings) or default_grid(r.engine)
    current, note = current_setting(r.serve, r.engine)
    if note:
        setup.notes.append(note)
    # the loop times the current chain and a spread of chains, so a ranking can be checked, not one point
    loop = [c for c in grid if c.kind == "chain"][::2] + ([current] if current and current.kind == "chain" else [])
    return SpeedupOptions(
        settings=grid,
        batch_sizes=parse_batch_sizes(a.batch_sizes),
        current=current,
        context=a.context,
        repeats=a.repeats,
        max_new_tokens=a.max_new_tokens,
        max_tokens=a.max_tokens,
        batch_size=batch_size_for(a.batch_size, setup, a.max_tokens + a.max_new_tokens),
        limit=a.limit,
        loop=list(dict.fromkeys(loop)) if a.loop else (),
    )
