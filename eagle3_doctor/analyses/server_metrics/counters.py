"""The server's own counters, read from a Prometheus scrape (a saved file or the live /metrics URL) and
reduced to the ones that define acceptance.

Metric names and meanings come from the engines' source at the versions in the engine table:

vLLM 0.33.0 (``vllm/v1/spec_decode/metrics.py``):
- ``SpecDecodingStats.observe_draft`` (lines 41-49): per request and scheduler step, one draft;
  ``num_draft_tokens`` proposed, ``num_accepted_tokens`` accepted (bonus token NOT counted:
  ``vllm/v1/core/sched/scheduler.py:2354`` ``num_accepted = len(generated_token_ids) - num_sampled``),
  and ``num_accepted_tokens_per_pos[i] += 1`` for every i < accepted.
- ``SpecDecodingProm.__init__`` (lines 228-264): Prometheus counters
  ``vllm:spec_decode_num_drafts``, ``vllm:spec_decode_num_draft_tokens``,
  ``vllm:spec_decode_num_accepted_tokens`` and ``vllm:spec_decode_num_accepted_tokens_per_pos``
  (extra label ``position``, 0-based), each exposed with ``_total``, labels ``model_name`` and
  ``engine`` (``vllm/v1/metrics/loggers.py:499``).
- Its docstring (lines 180-195) defines the derived figures used here: acceptance rate =
  accepted / draft tokens; mean acceptance length = 1 + accepted / drafts; per-position rate k =
  accepted_per_pos[k] / drafts (unconditional).

SGLang 0.5.23:
- ``sglang/srt/observability/metrics_collector.py:1865`` counter ``sglang:spec_verify_calls_total``
  (verify passes, incremented per finished request by its ``spec_verify_ct``, line 2111) and
  line 1860 ``sglang:generation_tokens_total`` (completion tokens), line 1940
  ``sglang:num_requests_total``; lines 511-531 gauges ``sglang:spec_accept_length`` /
  ``sglang:spec_accept_rate`` hold only the last logging interval (not a workload figure).
- ``sglang/srt/managers/tokenizer_manager.py:3166``: a request's ``spec_accept_length`` is
  ``completion_tokens / spec_verify_ct`` (bonus included). Pooled over a workload, from two
  scrapes: delta generation tokens / delta verify calls.
- Server log, ``sglang/srt/managers/scheduler_components/metrics_reporter.py:1005``:
  ``Decode batch, #running-req: N, ... accept len: X.XX, accept rate: Y.YY, ...``; each line
  covers the decode forwards since the previous line (``decode_log_interval``), accept len =
  accepted tokens (bonus in) / forward count (line 973), accept rate = correct drafts /
  (forward count x (num_draft_tokens - 1)) (lines 974-982).

llama.cpp (ggml-org/llama.cpp 0c1e57098bba43ac29e6e3b677cdceebdd22334f, the commit llama-cpp-python 0.3.36 vendors;
``llama-server --metrics``):
- ``tools/server/server-task.cpp:1523-1616`` ``server_task_result_metrics::to_metrics``: counters
  ``llamacpp:spec_decode_num_draft_tokens_total``, ``llamacpp:spec_decode_num_accepted_tokens_total``,
  ``llamacpp:spec_decode_num_drafts_total`` (verification steps), unlabelled, each value a double streamed at the
  stream's default 6 significant digits; then, once a speculative request has finished, the labelled
  ``llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="i"}`` (0-based, exact integers).
- ``tools/server/server-context.cpp:3952-3970``: per verify step ``n_draft_accepted += n_accepted`` (bonus not
  counted: ``ids.size() - 1``), ``n_draft_verif_steps += 1`` and ``n_accepted_per_pos[i]++`` for every
  i < n_accepted; line 3034 ``n_draft_tokens += draft.size()``; ``metrics_on_prediction`` (lines 4110-4131) adds a
  request's counts to the totals when its generation ends. The same figures as vLLM's, read the same way.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ...core.errors import BadInput

# vllm/v1/spec_decode/metrics.py:229-231, 255 (names as exposed: prometheus_client adds _total)
VLLM_DRAFTS = "vllm:spec_decode_num_drafts_total"


VLLM_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"


VLLM_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"


VLLM_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


# llama.cpp tools/server/server-task.cpp:1554-1564, 1607-1612 (0c1e57098bba)
LLAMACPP_DRAFTS = "llamacpp:spec_decode_num_drafts_total"


LLAMACPP_DRAFT_TOKENS = "llamacpp:spec_decode_num_draft_tokens_total"


LLAMACPP_ACCEPTED = "llamacpp:spec_decode_num_accepted_tokens_total"


LLAMACPP_PER_POS = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"


# engines that count drafts, draft tokens, accepted tokens and accepted per position: those four names, in that order
PER_PASS: dict[str, tuple[str, str, str, str]] = {
    "vllm": (VLLM_DRAFTS, VLLM_DRAFT_TOKENS, VLLM_ACCEPTED, VLLM_PER_POS),
    "llamacpp": (LLAMACPP_DRAFTS, LLAMACPP_DRAFT_TOKENS, LLAMACPP_ACCEPTED, LLAMACPP_PER_POS),
}


# sglang/srt/observability/metrics_collector.py:1855-1869, 1940, 511-521
SGL_VERIFY = "sglang:spec_verify_calls_total"


SGL_GEN = "sglang:generation_tokens_total"


SGL_REQS = "sglang:num_requests_total"


SGL_ACCEPT_LEN = "sglang:spec_accept_length"


SGL_ACCEPT_RATE = "sglang:spec_accept_rate"


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


MAX_SCRAPE = 256 << 20  # a /metrics page is kilobytes to a few MB; larger is not a scrape


MAX_LOG = 4 << 30  # server logs of long runs are big, but they are read into memory whole


# A live /metrics page is kilobytes and answers in milliseconds, even from a busy server; the whole
# answer (connecting, headers, body) gets this long, so a server that trickles bytes cannot keep the
# run waiting, and this much, so one that never ends its body cannot fill the memory.
URL_SECONDS = 5.0


MAX_URL_BODY = 64 << 20


def read_source(src: str, what: str = "metrics") -> str:
    """Text of a saved scrape/log file, or of an http(s) URL (a live /metrics endpoint)."""
    if re.match(r"^https?://", src):
        from ...io.netread import read_url

        fix = "check the server address and port (vLLM and SGLang serve /metrics on the API port), or pass a saved scrape"
        return read_url(src, what, MAX_URL_BODY, URL_SECONDS, fix).decode("utf-8", errors="replace")
    from ...io.safeio import read_regular_bytes

    fix = "pass a saved scrape (curl -s http://HOST:PORT/metrics > FILE) or the URL"
    if what == "log":
        fix = "pass the server's log file (or only its lines: grep 'accept len' server.log > FILE)"
    raw = read_regular_bytes(src, f"{what} file", fix, MAX_LOG if what == "log" else MAX_SCRAPE)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"{what} file {src} is not readable text ({e})", "pass the plain-text Prometheus scrape") from None


def parse_prometheus(text: str, src: str) -> Samples:
    """Every sample of a Prometheus text exposition, keyed by (sample name, sorted labels)."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:  # pragma: no cover - declared dependency
        raise BadInput(
            "prometheus_client is not installed", "pip install 'prometheus_client>=0.17' (the serving extra)"
        ) from None
    out: Samples = {}
    try:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                key = (s.name, tuple(sorted(s.labels.items())))
                out[key] = float(s.value)
                _check_count(s.name, out[key], fam.type, src)
    except (ValueError, TypeError, IndexError, KeyError) as e:
        raise BadInput(
            f"{src} is not Prometheus text exposition format ({str(e).splitlines()[0][:120]})",
            "save the raw /metrics response (curl -s http://HOST:PORT/metrics > FILE)",
        ) from None
    return out


_COUNT_SUFFIXES = ("_total", "_count", "_bucket")


def _check_count(name: str, value: float, family_type: str, src: str) -> None:
    """A counter (or a histogram's count) is a finite number >= 0: anything else is a broken scrape,
    and acceptance computed from it would be NaN or negative without saying why."""
    counts = name.endswith(_COUNT_SUFFIXES) and family_type in ("counter", "histogram", "unknown", "untyped")
    if counts and not (math.isfinite(value) and value >= 0):
        raise BadInput(
            f"{src}: counter {name} is {value:g}; counters are finite and never negative",
            "take the scrape again from the running server (curl -s http://HOST:PORT/metrics > FILE)",
        )


def _select(samples: Samples, name: str, model: str | None) -> dict[tuple[tuple[str, str], ...], float]:
    got = {lab: v for (n, lab), v in samples.items() if n == name}
    if model is not None:
        got = {lab: v for lab, v in got.items() if dict(lab).get("model_name") == model}
    return got


def _models(samples: Samples, prefix: str) -> set[str]:
    return {dict(lab).get("model_name", "") for (n, lab) in samples if n.startswith(prefix)}


def _sum(samples: Samples, name: str, model: str | None) -> float | None:
    got = _select(samples, name, model)
    return sum(got.values()) if got else None


@dataclass
class Counters:
    """One scrape, reduced to the counters that define acceptance (summed over engines/ranks)."""

    engine: str  # vllm | sglang | llamacpp
    source: str
    values: dict[str, float]
    per_pos: list[float] | None = None  # vLLM and llama.cpp only
    gauges: dict[str, float] = field(default_factory=dict)
    model: str | None = None


def detect_engine(samples: Samples, src: str) -> str:
    names = {n for n, _ in samples}
    if any(n.startswith("vllm:spec_decode_") for n in names):
        return "vllm"
    if SGL_VERIFY in names or any(n.startswith("sglang:spec_") for n in names):
        return "sglang"
    if any(n.startswith("llamacpp:spec_decode_") for n in names):
        return "llamacpp"
    if any(n.startswith("llamacpp:") for n in names):
        raise BadInput(
            f"{src} has llama.cpp metrics but no llamacpp:spec_decode_* counters",
            "scrape a llama-server whose /metrics exports them (ggml-org/llama.cpp 0c1e57098bba does) with a draft model",
        )
    if any(n.startswith("vllm:") for n in names):
        raise BadInput(
            f"{src} has vLLM metrics but no vllm:spec_decode_* counters",
            "start vLLM with --speculative-config (and without --disable-log-stats), then scrape /metrics",
        )
    if any(n.startswith("sglang:") for n in names):
        raise BadInput(
            f"{src} has SGLang metrics but no speculative counters (sglang:spec_verify_calls_total)",
            "start SGLang with --enable-metrics and --speculative-algorithm EAGLE3, then scrape /metrics",
        )
    raise BadInput(
        f"{src} holds no vLLM, SGLang or llama.cpp speculative-decoding metrics",
        "scrape the serving engine's own /metrics endpoint (vLLM, SGLang with --enable-metrics, llama-server --metrics)",
    )


def counters_from_text(text: str, src: str, engine: str | None = None, model: str | None = None) -> Counters:
    samples = parse_prometheus(text, src)
    found = detect_engine(samples, src)
    if engine not in (None, "auto") and engine != found:
        raise BadInput(f"{src} holds {found} metrics, not {engine}", f"pass --engine {found} or the {engine} server's scrape")
    prefix = {"vllm": "vllm:spec_decode_", "llamacpp": "llamacpp:spec_decode_"}.get(found, "sglang:")
    models = _models(samples, prefix) - {""}
    if model is None and len(models) > 1:
        raise BadInput(
            f"{src} holds metrics of several models ({', '.join(sorted(models))})", "pass --server-model NAME to pick one"
        )
    if model is not None and model not in models:
        raise BadInput(
            f"{src} has no metrics labelled model_name={model!r} (found: {', '.join(sorted(models)) or 'none'})",
            "pass the served model name exactly as the server reports it",
        )
    if found in PER_PASS:
        *totals, per_pos_name = PER_PASS[found]
        vals = {}
        for key in totals:
            v = _sum(samples, key, model)
            if v is None:
                raise BadInput(f"{src} lacks {key}", "save the complete /metrics response of a server with speculative decoding")
            vals[key] = v
        pos: dict[int, float] = {}
        for lab, v in _select(samples, per_pos_name, model).items():
            d = dict(lab)
            try:
                k = int(d["position"])
            except (KeyError, ValueError):
                raise BadInput(
                    f"{src}: {per_pos_name} has a sample without an integer position label",
                    "save the raw /metrics response unchanged",
                ) from None
            pos[k] = pos.get(k, 0.0) + v
        if pos and sorted(pos) != list(range(len(pos))):
            raise BadInput(
                f"{src}: {per_pos_name} positions {sorted(pos)} are not 0..K-1", "save the raw /metrics response unchanged"
            )
        per_pos = [pos[k] for k in range(len(pos))] if pos else None
        return Counters(found, src, vals, per_pos, model=model)
    vals = {}
    for key in (SGL_VERIFY, SGL_GEN, SGL_REQS):
        v = _sum(samples, key, model)
        if v is not None:
            vals[key] = v
    for key in (SGL_VERIFY, SGL_GEN):
        if key not in vals:
            raise BadInput(f"{src} lacks {key}", "start SGLang with --enable-metrics and save the complete /metrics response")
    gauges = {}
    for key in (SGL_ACCEPT_LEN, SGL_ACCEPT_RATE):
        got = _select(samples, key, model)
        if got:
            gauges[key] = sum(got.values()) / len(got)
    return Counters("sglang", src, vals, None, gauges, model)


def load_counters(src: str, engine: str | None = None, model: str | None = None) -> Counters:
    return counters_from_text(read_source(src), src, engine, model)
