"""eagle3-doctor server-metrics: what the live server measured, from its spec-decode counters."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ...core.errors import EXIT_OK
from ..options import JSON_OUT, SCRAPE_BEFORE, SCRAPE_ENGINE, SCRAPE_METRICS, SERVER_LOG, SERVER_MODEL, options
from ..output import console, write_result


@options(
    metrics=SCRAPE_METRICS, before=SCRAPE_BEFORE, log=SERVER_LOG, engine=SCRAPE_ENGINE, model=SERVER_MODEL, json_out=JSON_OUT
)
def server_metrics_cmd(**given: Any) -> int:
    """What the live server measured: acceptance from its spec-decode counters. No model is loaded."""
    from ..validate import preflight_no_model

    a = SimpleNamespace(**given)
    preflight_no_model(**{k: v for k, v in given.items() if k != "engine"})  # auto|vllm|sglang|llamacpp: checked by the reader
    from ...analyses.server_metrics.measured import load_measured
    from ...report.server_metrics import render_measured

    m = load_measured(a.metrics, a.before, a.log, engine=a.engine, model=a.model)
    render_measured(console(stderr=a.json_out == "-"), m)  # stdout carries the JSON alone
    write_result(a.json_out, m.to_dict, False)
    return EXIT_OK
