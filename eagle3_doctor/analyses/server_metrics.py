"""Serving evidence: what a live server measured (acceptance counters) and captured (hidden states).

Everything else in the doctor *simulates* serving: it runs the target itself and applies an
engine's capture rule. This module reads the real thing, so the doctor can say "the wiring is
right and the draft is good: the engine is losing acceptance".

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
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.errors import BadInput
from ..core.findings import Finding

if TYPE_CHECKING:
    from .results import PathResult, RunSettings

SCHEMA = "eagle3-doctor/server-metrics/1"

# vllm/v1/spec_decode/metrics.py:229-231, 255 (names as exposed: prometheus_client adds _total)
VLLM_DRAFTS = "vllm:spec_decode_num_drafts_total"
VLLM_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
VLLM_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
VLLM_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
# sglang/srt/observability/metrics_collector.py:1855-1869, 1940, 511-521
SGL_VERIFY = "sglang:spec_verify_calls_total"
SGL_GEN = "sglang:generation_tokens_total"
SGL_REQS = "sglang:num_requests_total"
SGL_ACCEPT_LEN = "sglang:spec_accept_length"
SGL_ACCEPT_RATE = "sglang:spec_accept_rate"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
MAX_SCRAPE = 256 << 20  # a /metrics page is kilobytes to a few MB; larger is not a scrape
MAX_LOG = 4 << 30  # server logs of long runs are big, but they are read into memory whole


# --------------------------------------------------------------------------- reading


def read_source(src: str, what: str = "metrics") -> str:
    """Text of a saved scrape/log file, or of an http(s) URL (a live /metrics endpoint)."""
    if re.match(r"^https?://", src):
        import urllib.error
        import urllib.request

        try:
            with urllib.request.urlopen(src, timeout=30) as r:  # noqa: S310 (the user's own server)
                return r.read().decode("utf-8", errors="replace")
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise BadInput(
                f"cannot read {what} from {src} ({e})",
                "check the server address and port (vLLM and SGLang serve /metrics on the API port)",
            ) from None
    from ..io.safeio import read_regular_bytes

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
        raise BadInput("prometheus_client is not installed", "pip install 'eagle3-doctor[serving]'") from None
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

    engine: str  # vllm | sglang
    source: str
    values: dict[str, float]
    per_pos: list[float] | None = None  # vLLM only
    gauges: dict[str, float] = field(default_factory=dict)
    model: str | None = None


def detect_engine(samples: Samples, src: str) -> str:
    names = {n for n, _ in samples}
    if any(n.startswith("vllm:spec_decode_") for n in names):
        return "vllm"
    if SGL_VERIFY in names or any(n.startswith("sglang:spec_") for n in names):
        return "sglang"
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
        f"{src} holds no vLLM or SGLang speculative-decoding metrics",
        "scrape the serving engine's own /metrics endpoint (vLLM, or SGLang with --enable-metrics)",
    )


def counters_from_text(text: str, src: str, engine: str | None = None, model: str | None = None) -> Counters:
    samples = parse_prometheus(text, src)
    found = detect_engine(samples, src)
    if engine not in (None, "auto") and engine != found:
        raise BadInput(f"{src} holds {found} metrics, not {engine}", f"pass --engine {found} or the {engine} server's scrape")
    prefix = "vllm:spec_decode_" if found == "vllm" else "sglang:"
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
    if found == "vllm":
        vals = {}
        for key in (VLLM_DRAFTS, VLLM_DRAFT_TOKENS, VLLM_ACCEPTED):
            v = _sum(samples, key, model)
            if v is None:
                raise BadInput(
                    f"{src} lacks {key}", "save the complete /metrics response of a vLLM server with speculative decoding"
                )
            vals[key] = v
        pos: dict[int, float] = {}
        for lab, v in _select(samples, VLLM_PER_POS, model).items():
            d = dict(lab)
            try:
                k = int(d["position"])
            except (KeyError, ValueError):
                raise BadInput(
                    f"{src}: {VLLM_PER_POS} has a sample without an integer position label",
                    "save the raw /metrics response unchanged",
                ) from None
            pos[k] = pos.get(k, 0.0) + v
        if pos and sorted(pos) != list(range(len(pos))):
            raise BadInput(
                f"{src}: {VLLM_PER_POS} positions {sorted(pos)} are not 0..K-1", "save the raw /metrics response unchanged"
            )
        per_pos = [pos[k] for k in range(len(pos))] if pos else None
        return Counters("vllm", src, vals, per_pos, model=model)
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


# --------------------------------------------------------------------------- measured figures


def wilson(k: float, n: float, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a proportion k/n (95% by default)."""
    if n <= 0:
        return (float("nan"), float("nan"))
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, mid - half), min(1.0, mid + half))


@dataclass
class Measured:
    """Acceptance the server itself counted over a workload (after - before when two scrapes)."""

    engine: str
    source: str
    passes: float  # vLLM drafts / SGLang verify calls
    mean_acceptance_length: float  # bonus included (vLLM 1 + accepted/drafts; SGLang accept_len)
    mean_acceptance_length_ci: tuple[float, float] | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    draft_acceptance_rate: float | None = None
    per_position_rate: list[float] | None = None
    per_position_ci: list[tuple[float, float]] | None = None
    num_spec_tokens: int | None = None
    requests: float | None = None
    counters: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["schema"] = SCHEMA
        return d


def measure(after: Counters, before: Counters | None = None) -> Measured:
    """The workload's own figures: counters of ``after`` minus ``before`` (when given)."""
    if before is not None:
        if before.engine != after.engine:
            raise BadInput(
                f"{before.source} is a {before.engine} scrape but {after.source} is {after.engine}",
                "take both scrapes from the same server",
            )
        if (before.per_pos is None) != (after.per_pos is None) or (
            before.per_pos is not None and len(before.per_pos) != len(after.per_pos or [])
        ):
            raise BadInput(
                f"{before.source} and {after.source} disagree on the number of draft positions",
                "take both scrapes from the same server, without a restart in between",
            )
    vals, per_pos, notes = _difference(after, before)
    src = after.source if before is None else f"{before.source} -> {after.source}"
    if after.engine == "vllm":
        return _vllm_measured(vals, per_pos, src, notes)
    return _sglang_measured(vals, src, notes, after.gauges)


def _difference(after: Counters, before: Counters | None) -> tuple[dict[str, float], list[float] | None, list[str]]:
    """Counters after minus before, refused where a counter went down (a restart between the scrapes)."""
    notes: list[str] = []
    vals = dict(after.values)
    per_pos = list(after.per_pos) if after.per_pos is not None else None
    if before is not None:
        for k in vals:
            b = before.values.get(k, 0.0)
            if vals[k] < b:
                raise BadInput(
                    f"counter {k} went down between {before.source} and {after.source} ({b:g} -> {vals[k]:g})",
                    "the server restarted between the scrapes: scrape again before and after one workload",
                )
            vals[k] -= b
        if per_pos is not None:
            per_pos = [a - b for a, b in zip(per_pos, before.per_pos or [])]
            if min(per_pos) < 0:
                raise BadInput(
                    f"per-position counters went down between {before.source} and {after.source}",
                    "the server restarted between the scrapes: scrape again",
                )
        notes.append(f"workload figures: {after.source} minus {before.source}")
    else:
        notes.append("one scrape: figures cover everything since the server started (pass a --before scrape for one workload)")
    return vals, per_pos, notes


def _vllm_measured(vals: dict[str, float], per_pos: list[float] | None, src: str, notes: list[str]) -> Measured:
    drafts, drafted, acc = vals[VLLM_DRAFTS], vals[VLLM_DRAFT_TOKENS], vals[VLLM_ACCEPTED]
    if drafts <= 0:
        raise BadInput(
            f"no speculative drafts were counted in {src}", "run a workload between the scrapes (or check that speculation is on)"
        )
    if acc > drafted or (per_pos is not None and any(p > drafts for p in per_pos)):
        raise BadInput(
            f"{src}: accepted tokens exceed drafted tokens (or drafts): not one server's counters",
            "take the scrapes from one vLLM server, unedited",
        )
    rates = [p / drafts for p in per_pos] if per_pos is not None else None
    cis = [wilson(p, drafts) for p in per_pos] if per_pos is not None else None
    if per_pos is not None and abs(sum(per_pos) - acc) > 0.5:
        notes.append(f"sum of per-position accepted ({sum(per_pos):g}) differs from accepted tokens ({acc:g})")
    mal = 1.0 + acc / drafts
    ci = None
    if per_pos is not None and drafts > 1:
        # per_pos[k] = passes with more than k accepted, so the counters hold the whole histogram
        # of accepted lengths: #(A = j) = per_pos[j-1] - per_pos[j]; its spread gives the interval
        K = len(per_pos)
        ge = [drafts] + per_pos + [0.0]
        hist = [ge[j] - ge[j + 1] for j in range(K + 1)]
        mean = sum(j * h for j, h in enumerate(hist)) / drafts
        var = sum(h * (j - mean) ** 2 for j, h in enumerate(hist)) / (drafts - 1)
        half = 1.96 * math.sqrt(var / drafts)
        ci = (1.0 + mean - half, 1.0 + mean + half)
    return Measured(
        "vllm",
        src,
        drafts,
        mal,
        ci,
        drafted,
        acc,
        acc / drafted if drafted else None,
        rates,
        cis,
        len(per_pos) if per_pos is not None else None,
        None,
        vals,
        notes,
    )


def _sglang_measured(vals: dict[str, float], src: str, notes: list[str], gauges: dict[str, float]) -> Measured:
    verify, gen = vals[SGL_VERIFY], vals[SGL_GEN]
    if verify <= 0:
        raise BadInput(
            f"no verify passes were counted in {src} ({SGL_VERIFY})",
            "run a workload between the scrapes (with speculative decoding on)",
        )
    reqs = vals.get(SGL_REQS)
    # tokenizer_manager.py:3166: SGLang's own accept_length = completion_tokens / spec_verify_ct
    # (bonus in). Each request's first completion token comes from the prefill, not a verify
    # pass, so tokens per verify pass are (completion - requests) / verify when requests are known.
    own = gen / verify
    mal = (gen - reqs) / verify if reqs else own
    notes.append(
        f"SGLang's own accept_length (completion tokens / verify calls) {own:.3f}"
        + (
            f"; without each request's prefill token {mal:.3f} (compared below)"
            if reqs
            else f"; {SGL_REQS} missing, so the prefill token of each request is counted in"
        )
    )
    if gauges:
        notes.append(
            "sglang:spec_accept_length/_rate gauges cover only the last logging interval: "
            f"{', '.join(f'{k}={v:.3f}' for k, v in gauges.items())}"
        )
    return Measured("sglang", src, verify, mal, None, None, None, None, None, None, None, reqs, vals, notes)


# --------------------------------------------------------------------------- SGLang server log


_SGL_LINE = re.compile(r"Decode batch.*?#running-req:\s*(\d+).*?accept len:\s*([0-9.]+),\s*accept rate:\s*([0-9.]+)")


def measure_sglang_log(text: str, src: str) -> Measured:
    """Pool SGLang's ``Decode batch ... accept len: X, accept rate: Y`` log lines.

    Each line covers ``decode_log_interval`` decode forwards (metrics_reporter.py:932) of the
    batch running then; its forward count (requests x forwards) is not printed, so lines are
    weighted by ``#running-req`` as the nearest printed proxy, and the interval is over lines.
    """
    rows = [(int(m.group(1)), float(m.group(2)), float(m.group(3))) for m in _SGL_LINE.finditer(text)]
    if not rows:
        raise BadInput(
            f"{src} has no SGLang 'Decode batch ... accept len: ..., accept rate: ...' lines",
            "pass the SGLang server's log (speculative decoding on, default --log-level info)",
        )
    w = [max(r, 1) for r, _, _ in rows]
    W = float(sum(w))
    mal = sum(wi * a for wi, (_, a, _) in zip(w, rows)) / W
    rate = sum(wi * b for wi, (_, _, b) in zip(w, rows)) / W
    ci = None
    if len(rows) >= 2:
        vals = [a for _, a, _ in rows]
        mu = sum(vals) / len(vals)
        sd = math.sqrt(sum((v - mu) ** 2 for v in vals) / (len(vals) - 1))
        half = 1.96 * sd / math.sqrt(len(vals))
        ci = (mal - half, mal + half)
    notes = [
        f"{len(rows)} 'Decode batch' log lines pooled, weighted by #running-req; "
        f"SGLang accept_rate (correct drafts / (passes x (num_draft_tokens - 1))) {rate:.3f}"
    ]
    return Measured(
        "sglang", src, float(len(rows)), mal, ci, None, None, rate, None, None, None, None, {"log_lines": float(len(rows))}, notes
    )


def load_measured(
    after: str | None, before: str | None = None, log: str | None = None, engine: str | None = None, model: str | None = None
) -> Measured:
    """Measured acceptance from a scrape (optionally minus an earlier one) or an SGLang log."""
    if after is None and log is None:
        raise BadInput(
            "no server evidence given", "pass --server-metrics FILE|URL (and --server-metrics-before) or --server-log FILE"
        )
    if after is None:
        if before is not None:
            raise BadInput("--server-metrics-before needs --server-metrics", "pass the scrape taken after the workload too")
        return measure_sglang_log(read_source(log, "log"), log)  # type: ignore[arg-type]
    a = load_counters(after, engine, model)
    b = load_counters(before, a.engine, model) if before else None
    m = measure(a, b)
    if log is not None:
        lm = measure_sglang_log(read_source(log, "log"), log)
        m.notes.append(f"server log {log}: accept len {lm.mean_acceptance_length:.3f} ({lm.notes[0]})")
    return m


# --------------------------------------------------------------------------- prediction vs measurement

# Public reports of an engine runtime losing acceptance while wiring and draft were right
# (the cases issue 16 starts from); listed with the engine verdict as leads, not as diagnoses.
RUNTIME_REPORTS = {
    "vllm": ["vllm PR #20190 (spec-decode runtime fix)", "vllm issue #26191 (acceptance lower than expected)"],
    "sglang": [
        "sglang issue #10059 (acceptance lower than expected)",
        "SGLang 0.5.2: CUDA-graph decode used the default layer ids (PR #22836); run with --disable-cuda-graph to test",
    ],
    "trtllm": ["TensorRT-LLM PR #5146 (spec-decode runtime fix)"],
}
MIN_GAP = 0.10  # mean acceptance length: smaller gaps are not worth a verdict whatever the intervals


def bootstrap_prediction(accepted_lengths: list[list[int]], num_steps: int, n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Predicted figures with 95% intervals, resampling prompts (a workload is a set of prompts)."""
    import numpy as np

    reqs = [np.asarray(r, dtype=np.int64) for r in accepted_lengths if len(r)]
    if not reqs:
        raise BadInput("the prediction has no verify passes", "use prompts long enough for at least one draft")
    n = np.array([r.size for r in reqs], dtype=np.float64)
    s = np.array([r.sum() for r in reqs], dtype=np.float64)
    ge = np.array([[(r >= k).sum() for k in range(1, num_steps + 1)] for r in reqs], dtype=np.float64)  # [R, K]
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(reqs), size=(n_boot, len(reqs)))
    N = n[idx].sum(axis=1)
    mal_b = 1.0 + s[idx].sum(axis=1) / N
    pos_b = ge[idx].sum(axis=1) / N[:, None]
    lo, hi = np.percentile(mal_b, [2.5, 97.5])
    plo, phi = np.percentile(pos_b, [2.5, 97.5], axis=0)
    return {
        "passes": int(n.sum()),
        "requests": len(reqs),
        "mean_acceptance_length": float(1.0 + s.sum() / n.sum()),
        "mean_acceptance_length_ci": (float(lo), float(hi)),
        "per_position_rate": (ge.sum(axis=0) / n.sum()).tolist(),
        "per_position_ci": [(float(a), float(b)) for a, b in zip(plo, phi)],
    }


def _below(measured: Measured, pred: dict[str, Any] | None) -> bool:
    """The measurement itself rules the prediction out (its interval lies wholly below)."""
    if pred is None:
        return False
    hi = measured.mean_acceptance_length_ci[1] if measured.mean_acceptance_length_ci else measured.mean_acceptance_length
    return hi < pred["mean_acceptance_length_ci"][0]


def _relation(m: float, mci: tuple[float, float] | None, p: float, pci: tuple[float, float]) -> str:
    """below / above / agree / unclear: measured vs predicted, by their 95% intervals."""
    mlo, mhi = mci if mci is not None else (m, m)
    if mhi < pci[0] and p - m >= MIN_GAP:
        return "below"
    if mlo > pci[1] and m - p >= MIN_GAP:
        return "above"
    if pci[0] <= m <= pci[1] or (mlo <= p <= mhi) or abs(m - p) < MIN_GAP:
        return "agree"
    return "unclear"


@dataclass
class ServingComparison:
    verdict: str | None  # engine | wiring | draft | undetermined | None (measurement agrees)
    measured: Measured
    predicted: dict[str, Any]  # path name -> bootstrap_prediction
    relation: str
    settings: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "relation": self.relation,
            "measured": self.measured.to_dict(),
            "predicted": self.predicted,
            "settings": self.settings,
            "notes": self.notes,
        }


def compare_to_prediction(
    measured: Measured, paths: dict[str, PathResult], settings: RunSettings, capture_fix: str | None = None
) -> tuple[ServingComparison, list[Any]]:
    """The doctor's predicted acceptance (per feature path) against what the server counted.

    paths: the acceptance run's ``paths`` (``serving`` = the engine's own capture points,
    ``training`` = what the draft was trained on, when they differ). Returns the comparison and
    its findings: SRV001 engine, SRV002 wiring, SRV003 draft, SRV004 undetermined; none when the
    server measured what the doctor predicts for healthy wiring.
    """
    K = settings.num_steps
    if measured.num_spec_tokens is not None and measured.num_spec_tokens != K:
        raise BadInput(
            f"the server drafted {measured.num_spec_tokens} tokens per pass (per-position counters) but the "
            f"prediction used --num-steps {K}",
            f"rerun with --num-steps {measured.num_spec_tokens}",
        )
    if "serving" not in paths:
        raise BadInput("no serving-path prediction to compare with the server", "fix the slot count first (see notes)")
    pred = {name: bootstrap_prediction(p.accepted_lengths, K) for name, p in paths.items()}
    ps = pred["serving"]
    rel = _relation(
        measured.mean_acceptance_length,
        measured.mean_acceptance_length_ci,
        ps["mean_acceptance_length"],
        ps["mean_acceptance_length_ci"],
    )
    notes = [
        "the verdict assumes the server ran the same prompts with the same settings (K, top-k, draft tokens, "
        "temperature) as this prediction; counters cannot show it"
    ]
    if settings.topk > 1 or settings.temperature > 0:
        notes.append("the prediction is for the tree/temperature settings given; chain figures are compared")
    ev = _evidence(measured, ps, pred.get("training"))
    verdict, findings = _verdict(rel, measured, paths, ps, pred.get("training"), ev, capture_fix)
    return ServingComparison(
        verdict,
        measured,
        pred,
        rel,
        {k: getattr(settings, k) for k in ("num_steps", "topk", "num_draft_tokens", "temperature", "sequences", "engine")},
        notes,
    ), findings


def _fmt(x: float, ci: tuple[float, float] | None) -> str:
    return f"{x:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def _evidence(measured: Measured, ps: dict[str, Any], pt: dict[str, Any] | None) -> list[str]:
    """Measured against predicted, overall and per position."""
    m = _fmt(measured.mean_acceptance_length, measured.mean_acceptance_length_ci)
    ev = [
        f"server ({measured.engine}, {measured.source}): mean acceptance length {m} over {measured.passes:g} verify passes",
        f"predicted under the serving features: {_fmt(ps['mean_acceptance_length'], ps['mean_acceptance_length_ci'])} "
        f"over {ps['passes']} passes / {ps['requests']} prompts",
    ]
    if pt is not None:
        ev.append(f"predicted under the training features: {_fmt(pt['mean_acceptance_length'], pt['mean_acceptance_length_ci'])}")
    if measured.per_position_rate is not None:
        for k, (r, ci) in enumerate(zip(measured.per_position_rate, measured.per_position_ci or [])):
            pr, pci = ps["per_position_rate"][k], ps["per_position_ci"][k]
            flag = "   <-- below" if ci[1] < pci[0] else ""
            ev.append(f"position {k + 1}: server {_fmt(r, ci)}, predicted {_fmt(pr, pci)}{flag}")
    return ev


def _verdict(
    rel: str,
    measured: Measured,
    paths: dict[str, PathResult],
    ps: dict[str, Any],
    pt: dict[str, Any] | None,
    ev: list[str],
    capture_fix: str | None,
) -> tuple[str | None, list[Any]]:
    """engine (SRV001), wiring (SRV002), draft (SRV003), undetermined (SRV004), or None: healthy."""
    t = paths.get("training")
    ref_step1 = t.step1 if t is not None and t.acc_k else paths["serving"].step1
    wiring_gap = (
        pt is not None
        and pt["mean_acceptance_length_ci"][0] > ps["mean_acceptance_length_ci"][1]
        and pt["mean_acceptance_length"] - ps["mean_acceptance_length"] >= MIN_GAP
    )
    if rel == "below":
        return "engine", [_engine_finding(measured, ps, ev)]
    if rel == "agree" and wiring_gap and _below(measured, pt):
        return "wiring", [_wiring_finding(measured, paths, ps, pt, ev, capture_fix)]  # type: ignore[arg-type]
    if rel == "agree" and ref_step1 < 0.3:
        return "draft", [_draft_finding(measured, ref_step1, ev)]
    if rel in ("unclear", "above") or (rel == "agree" and wiring_gap):
        return "undetermined", [_undetermined_finding(rel, ev)]
    return None, []


def _engine_finding(measured: Measured, ps: dict[str, Any], ev: list[str]) -> Finding:
    """SRV001: below the prediction for the very capture points the server uses: the runtime."""
    m = measured.mean_acceptance_length
    reports = RUNTIME_REPORTS.get(measured.engine, [])
    return Finding(
        "SRV001",
        f"the server accepts less than the doctor predicts for these very capture points: "
        f"{m:.2f} measured vs {ps['mean_acceptance_length']:.2f} predicted mean acceptance length",
        ev + [f"known runtime reports for {measured.engine}: " + "; ".join(reports)] if reports else ev,
        f"suspect the {measured.engine} runtime, not the wiring or the draft: rerun the same prompts eagerly "
        "(vLLM --enforce-eager; SGLang --disable-cuda-graph) and with one request at a time; if acceptance "
        "recovers, report it to the engine with these figures",
        data={"measured": m, "predicted": ps["mean_acceptance_length"], "predicted_ci": ps["mean_acceptance_length_ci"]},
    )


def _wiring_finding(
    measured: Measured,
    paths: dict[str, PathResult],
    ps: dict[str, Any],
    pt: dict[str, Any],
    ev: list[str],
    capture_fix: str | None,
) -> Finding:
    """SRV002: the server agrees with the serving-feature prediction, and the training features would do better."""
    m = measured.mean_acceptance_length
    from .results import spec_label

    trained = spec_label(paths["training"].spec)
    return Finding(
        "SRV002",
        f"the server's {m:.2f} matches the prediction under the serving features; the training "
        f"features would give {pt['mean_acceptance_length']:.2f}: the capture mismatch explains the gap",
        ev + [f"serving feeds {spec_label(paths['serving'].spec)}; trained on {trained}"],
        capture_fix or "run eagle3-doctor compare-hidden for the exact layer ids to write",
        data={
            "measured": m,
            "predicted_serving": ps["mean_acceptance_length"],
            "predicted_training": pt["mean_acceptance_length"],
        },
    )


def _draft_finding(measured: Measured, ref_step1: float, ev: list[str]) -> Finding:
    """SRV003: the server agrees with the prediction and the draft is weak on its own features."""
    return Finding(
        "SRV003",
        f"the server's {measured.mean_acceptance_length:.2f} matches the prediction, and the draft is weak even on its "
        f"training features (step-1 accuracy {ref_step1:.3f})",
        ev,
        "the draft itself needs work: check lm_head, d2t/t2d, embeddings, chat template, then retrain on data like this workload",
    )


def _undetermined_finding(rel: str, ev: list[str]) -> Finding:
    """SRV004: the figures cannot say which of engine, wiring or draft is at fault."""
    why = (
        "the server measured MORE than predicted: the workload or settings probably differ from this prediction"
        if rel == "above"
        else "the measured and predicted intervals neither separate nor agree"
        if rel == "unclear"
        else "the server agrees with the serving-feature prediction but cannot rule out the training-feature one: "
        "measure more verify passes"
    )
    return Finding(
        "SRV004",
        f"server vs prediction undetermined: {why}",
        ev,
        "replay the server's own prompts (--prompts) with its settings (--num-steps, --topk, --num-draft-tokens, "
        "--temperature), and scrape before and after exactly that workload",
    )


# --------------------------------------------------------------------------- rendering


def render_measured(console: Any, m: Measured) -> None:
    from rich.table import Table

    t = Table(title=f"measured by the server ({m.engine})")
    t.add_column("metric")
    t.add_column("value", justify="right")

    def ci(c: tuple[float, float] | None) -> str:
        return f"  [{c[0]:.3f}, {c[1]:.3f}]" if c else ""

    t.add_row("verify passes (vLLM drafts, SGLang verify calls)", f"{m.passes:g}")
    t.add_row("mean acceptance length (bonus in)", f"{m.mean_acceptance_length:.3f}{ci(m.mean_acceptance_length_ci)}")
    if m.draft_acceptance_rate is not None:
        t.add_row("draft acceptance rate", f"{m.draft_acceptance_rate:.3f}")
    if m.draft_tokens is not None:
        t.add_row("draft tokens / accepted tokens", f"{m.draft_tokens:g} / {m.accepted_tokens:g}")
    if m.requests is not None:
        t.add_row("requests", f"{m.requests:g}")
    for k, r in enumerate(m.per_position_rate or []):
        t.add_row(f"position {k + 1} rate (unconditional)", f"{r:.3f}{ci((m.per_position_ci or [None] * (k + 1))[k])}")
    console.print(t)
    console.print(f"source: {m.source}", markup=False)
    for n in m.notes:
        console.print(f"note: {n}", markup=False, soft_wrap=True)


def render_comparison(console: Any, c: ServingComparison) -> None:
    from rich.table import Table

    t = Table(title="server vs prediction (95% intervals: server from its counters, prediction by bootstrap over prompts)")
    t.add_column("figure")
    t.add_column("server", justify="right")
    for name in c.predicted:
        t.add_column(f"predicted, {name} features", justify="right")

    def f(x: float, ci: Any) -> str:
        return f"{x:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")

    m = c.measured
    t.add_row(
        "mean acceptance length",
        f(m.mean_acceptance_length, m.mean_acceptance_length_ci),
        *[f(p["mean_acceptance_length"], p["mean_acceptance_length_ci"]) for p in c.predicted.values()],
    )
    K = len(next(iter(c.predicted.values()))["per_position_rate"])
    for k in range(K):
        srv = "-" if m.per_position_rate is None else f(m.per_position_rate[k], (m.per_position_ci or [None] * K)[k])
        t.add_row(
            f"position {k + 1} rate", srv, *[f(p["per_position_rate"][k], p["per_position_ci"][k]) for p in c.predicted.values()]
        )
    console.print(t)
    console.print(
        f"verdict: {c.verdict or 'none (the server measured what the doctor predicts)'}  "
        f"(server vs serving-feature prediction: {c.relation})",
        markup=False,
    )
    for n in c.notes:
        console.print(f"note: {n}", markup=False, soft_wrap=True)
