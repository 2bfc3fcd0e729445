"""What the server measured over a workload: its counters after minus before (or one SGLang log, or SGLang's
per-request accept histograms), as acceptance figures with their intervals."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

from ...core.errors import BadInput
from ...engines.launch_args import MAX_NUM_STEPS
from .counters import (
    PER_PASS,
    SGL_GEN,
    SGL_REQS,
    SGL_VERIFY,
    Counters,
    load_counters,
    read_source,
)

SCHEMA = "eagle3-doctor/server-metrics/1"


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
    # the sampling temperature the workload was served at (the counters do not record it: the user gives it)
    temperature: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["schema"] = SCHEMA
        return d


def measure(after: Counters, before: Counters | None = None) -> Measured:
    """The workload's own figures: counters of ``after`` minus ``before`` (when given)."""
    if before is not None and before.engine == "llamacpp" and before.per_pos is None and after.per_pos is not None:
        # llama.cpp writes the per-position series only once a speculative request has finished
        # (server-task.cpp:1606): a scrape before any has none, which is zeros
        before = replace(before, per_pos=[0.0] * len(after.per_pos))
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
    if after.engine in PER_PASS:
        return _per_pass_measured(after.engine, vals, per_pos, src, notes)
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


def _per_pass_measured(engine: str, vals: dict[str, float], per_pos: list[float] | None, src: str, notes: list[str]
                       ) -> Measured:  # fmt: skip
    """vLLM's or llama.cpp's four counters (counters.PER_PASS) as the workload's figures."""
    names = PER_PASS[engine]
    drafts, drafted, acc = vals[names[0]], vals[names[1]], vals[names[2]]
    if drafts <= 0:
        raise BadInput(
            f"no speculative drafts were counted in {src}", "run a workload between the scrapes (or check that speculation is on)"
        )
    # llama.cpp streams its totals at 6 significant digits while its per-position counts are exact, so past a
    # million passes the rounded count of drafts can fall below the passes accepting position 1
    slack = 1e-5 * drafts if engine == "llamacpp" else 0.0
    if acc > drafted + slack or (per_pos is not None and any(p > drafts + slack for p in per_pos)):
        raise BadInput(
            f"{src}: accepted tokens exceed drafted tokens (or drafts): not one server's counters",
            f"take the scrapes from one {engine} server, unedited",
        )
    if per_pos is not None:  # a rate above 1 within the slack is that rounding, not a count
        per_pos = [min(p, drafts) for p in per_pos]
    rates = [p / drafts for p in per_pos] if per_pos is not None else None
    cis = [wilson(p, drafts) for p in per_pos] if per_pos is not None else None
    if per_pos is not None and abs(sum(per_pos) - acc) > 0.5 + slack:
        notes.append(f"sum of per-position accepted ({sum(per_pos):g}) differs from accepted tokens ({acc:g})")
    if engine == "llamacpp" and per_pos and drafted < len(per_pos) * drafts * (1 - 1e-5):
        # its draft stops early where the draft's confidence falls below speculative.p_min, or at the context's end
        notes.append(f"llama.cpp drafted {drafted / drafts:.2f} tokens a pass on average, under its {len(per_pos)}: the "
                     "deeper positions' rates count passes that drafted no token there, which the simulation drafts")  # fmt: skip
    mal = 1.0 + acc / drafts
    ci = mean_interval(drafts, per_pos) if per_pos is not None else None
    return Measured(
        engine,
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


def mean_interval(passes: float, per_pos: list[float]) -> tuple[float, float] | None:
    """The mean acceptance length's 95% interval (normal, over passes) from passes reaching each position.

    per_pos[k] = passes with more than k accepted, so the counts hold the whole histogram of accepted
    lengths: #(A = j) = per_pos[j-1] - per_pos[j]; its spread gives the interval."""
    if passes <= 1:
        return None
    K = len(per_pos)
    ge = [passes, *per_pos, 0.0]
    hist = [ge[j] - ge[j + 1] for j in range(K + 1)]
    mean = sum(j * h for j, h in enumerate(hist)) / passes
    var = sum(h * (j - mean) ** 2 for j, h in enumerate(hist)) / (passes - 1)
    half = 1.96 * math.sqrt(var / passes)
    return (1.0 + mean - half, 1.0 + mean + half)


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


# Each pattern begins with a literal and its repeats end at a delimiter, and a line is searched from
# its "Decode batch" on, once: the scan is linear in the log. (One pattern "Decode batch.*?#running-req
# ...accept rate" restarted its lazy scan at every "Decode batch" of a line: quadratic in a long line.)
_SGL_MARK = "Decode batch"
_SGL_RUNNING = re.compile(r"#running-req:[ \t]*([^,\s]*)")
_SGL_ACCEPT = re.compile(r"accept len:[ \t]*([^,\s]*),[ \t]*accept rate:[ \t]*([^,\s]*)")
MAX_ACCEPT_LEN = 1 + MAX_NUM_STEPS  # the bonus token and at most one per draft step


def _sglang_rows(text: str, src: str) -> list[tuple[int, float, float]]:
    rows: list[tuple[int, float, float]] = []
    pos = 0
    while (i := text.find(_SGL_MARK, pos)) >= 0:
        end = text.find("\n", i)
        end = len(text) if end < 0 else end
        running = _SGL_RUNNING.search(text, i, end)
        accept = _SGL_ACCEPT.search(text, running.end(), end) if running else None
        if running is None or accept is None:
            pos = end + 1
            continue
        n, a, r = _number(running.group(1), int), _number(accept.group(1), float), _number(accept.group(2), float)
        bad = _bad_row(n, a, r, running.group(1), accept.group(1), accept.group(2))
        if bad is not None:  # the line number is counted only here: counting it per row would be quadratic
            line = text.count("\n", 0, i) + 1
            raise BadInput(
                f"{src}, line {line}: {bad}", "pass the SGLang server's log as it wrote it (or only its 'Decode batch' lines)"
            )
        rows.append((int(n or 0), float(a or 0), float(r or 0)))
        pos = accept.end()
    return rows


def _bad_row(n: float | None, a: float | None, r: float | None, running: str, length: str, rate: str) -> str | None:
    """What is wrong with one log line's numbers, if anything: SGLang prints an integer request count,
    an accept length of at least 1 (the bonus token is counted) and a rate in [0, 1]."""
    if n is None or n < 0:
        return f"#running-req {running[:40]!r} is not a request count"
    if a is None or not 1 <= a <= MAX_ACCEPT_LEN:
        return f"accept len {length[:40]!r} is not a number from 1 to {MAX_ACCEPT_LEN}"
    if r is None or not 0 <= r <= 1:
        return f"accept rate {rate[:40]!r} is not a rate from 0 to 1"
    return None


def _number(text: str, kind: type) -> float | None:
    if len(text) > 20:  # SGLang prints counts and two-decimal figures: longer is not its number
        return None
    try:
        v = kind(text)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def measure_sglang_log(text: str, src: str) -> Measured:
    """Pool SGLang's ``Decode batch ... accept len: X, accept rate: Y`` log lines.

    Each line covers ``decode_log_interval`` decode forwards (metrics_reporter.py:932) of the
    batch running then; its forward count (requests x forwards) is not printed, so lines are
    weighted by ``#running-req`` as the nearest printed proxy, and the interval is over lines.
    """
    rows = _sglang_rows(text, src)
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
    """Measured acceptance from a scrape (optionally minus an earlier one), SGLang's responses with their accept
    histograms, or an SGLang log."""
    if after is None:
        if log is None:
            raise BadInput(
                "no server evidence given", "pass --server-metrics FILE|URL (and --server-metrics-before) or --server-log FILE"
            )
        if before is not None:
            raise BadInput("--server-metrics-before needs --server-metrics", "pass the scrape taken after the workload too")
        return measure_sglang_log(read_source(log, "log"), log)
    from .counters import counters_from_text

    text = read_source(after)
    if looks_like_responses(text):
        from .vllm_responses import spec_metrics

        objs = _objects(text, after)
        if any(spec_metrics(o) is not None for o in objs):  # vLLM's per-request metrics, not SGLang's histograms
            if before is not None or engine not in (None, "auto", "vllm"):
                raise BadInput(f"{after} holds vLLM responses with their own per-request figures",
                               "drop --server-metrics-before and pass --engine vllm (or auto)")  # fmt: skip
            return measure_vllm_responses(objs, after)
        if before is not None:
            raise BadInput(
                f"{after} holds SGLang responses: their accept histograms are the workload's own, no earlier scrape applies",
                "drop --server-metrics-before (--before)",
            )
        if engine not in (None, "auto", "sglang"):
            raise BadInput(f"{after} holds SGLang responses, not {engine} metrics", "pass --engine sglang or the scrape")
        m = measure_sglang_histograms(text, after)
        if log is not None:
            m.notes.append(f"server log {log} not read: the accept histograms hold every verify step")
        return m
    a = counters_from_text(text, after, engine, model)
    b = load_counters(before, a.engine, model) if before else None
    m = measure(a, b)
    if log is not None:
        lm = measure_sglang_log(read_source(log, "log"), log)
        m.notes.append(f"server log {log}: accept len {lm.mean_acceptance_length:.3f} ({lm.notes[0]})")
    return m


# ----------------------------------------------------------------------------- SGLang's per-request accept histograms
# SGLang's per-request accept histogram, read from the server's responses: the whole per-position profile.
#
# SGLang keeps, per request, ``spec_acceptance_histogram`` (``managers/schedule_batch.py`` ``Req``: list index = draft
# tokens accepted in one verify step, value = steps that accepted that many; the scheduler adds each step's
# ``accept_length_per_req_cpu``, bonus excluded) and returns it in the response's ``meta_info`` as
# ``spec_accept_histogram`` (older releases: ``spec_correct_drafts_histogram``). Summed over the workload's requests it
# is the histogram of accepted lengths vLLM's per-position counters also hold, so it reads into the same figures:
# per-position rates with Wilson intervals and the mean with its interval over passes.
#
# Input: the /generate responses as JSON lines or one JSON array, each an object with ``meta_info`` (or a bare
# meta_info object).

KEYS = ("spec_accept_histogram", "spec_correct_drafts_histogram")


def looks_like_responses(text: str) -> bool:
    """JSON (an object or an array at the start), not a Prometheus text exposition."""
    head = text.lstrip()[:1]
    return head in ("{", "[")


def _objects(text: str, src: str) -> list[Any]:
    try:
        whole = json.loads(text)
        return whole if isinstance(whole, list) else [whole]
    except json.JSONDecodeError:
        pass
    out = []
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise BadInput(
                f"{src}: line {n} is not JSON ({e.msg})", "save SGLang's /generate responses one JSON object a line"
            ) from None
    return out


def _histogram(obj: Any) -> list[int] | None:
    if not isinstance(obj, dict):
        return None
    meta = obj.get("meta_info", obj)
    if not isinstance(meta, dict):
        return None
    for k in KEYS:
        h = meta.get(k)
        if h is not None:
            return h
    return None


def measure_sglang_histograms(text: str, src: str) -> Measured:
    """The workload's figures from every response's accept histogram, summed."""
    total: list[float] = []
    requests = 0
    for obj in _objects(text, src):
        h = _histogram(obj)
        if h is None:
            continue
        if not isinstance(h, list) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in h):
            raise BadInput(
                f"{src}: an accept histogram is not a list of counts ({str(h)[:60]})", "pass SGLang's responses unedited"
            )
        requests += 1
        total += [0.0] * (len(h) - len(total))
        for j, x in enumerate(h):
            total[j] += x
    passes = sum(total)
    if not requests or passes <= 0:
        raise BadInput(
            f"{src} holds no SGLang accept histogram with a verify step ({' or '.join(KEYS)} in meta_info)",
            "pass the /generate responses of an SGLang server with speculative decoding on",
        )
    K = len(total) - 1  # the deepest accepted length seen: positions past it were reached by no pass
    per_pos = [sum(total[j] for j in range(k + 1, K + 1)) for k in range(K)]
    accepted = sum(j * x for j, x in enumerate(total))
    notes = [
        f"{requests} responses' accept histograms summed; positions past {K} were reached by no verify step, and the "
        "histogram does not say how many tokens the server drafted"
    ]
    return Measured(
        "sglang",
        src,
        passes,
        1.0 + accepted / passes,
        mean_interval(passes, per_pos),
        None,
        accepted,
        None,
        [p / passes for p in per_pos],
        [wilson(p, passes) for p in per_pos],
        None,
        float(requests),
        {"verify_steps": passes, "accepted_tokens": accepted},
        notes,
    )


def measure_vllm_responses(objs: list[Any], src: str) -> Measured:
    """The workload's figures from vLLM's per-request responses (vllm_responses.py), their histograms summed."""
    from .vllm_responses import sum_histograms

    total, K, drafted, requests, detailed = sum_histograms(objs, src)
    passes = sum(total)
    per_pos = [sum(total[k + 1 :]) for k in range(K)]
    accepted = sum(j * x for j, x in enumerate(total))
    notes = [f"{requests} vLLM responses' acceptance histograms summed ({detailed} with per-step arrays, checked "
             f"against their histograms); the server drafted {K} tokens a step"]  # fmt: skip
    return Measured("vllm", src, passes, 1.0 + accepted / passes, mean_interval(passes, per_pos), drafted, accepted,
                    accepted / drafted if drafted else None, [p / passes for p in per_pos],
                    [wilson(p, passes) for p in per_pos], K, float(requests),
                    {"verify_steps": passes, "accepted_tokens": accepted, "draft_tokens": drafted}, notes)  # fmt: skip
