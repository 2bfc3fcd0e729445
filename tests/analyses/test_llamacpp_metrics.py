"""llama.cpp's /metrics (llama-server --metrics) read as a live profile: the same four figures as vLLM's, under its
own names. The fixture is written here in exactly the text ggml-org/llama.cpp 0c1e57098bba's
``server_task_result_metrics::to_metrics`` (tools/server/server-task.cpp:1523-1616) emits: every counter then every
gauge as HELP, TYPE and an unlabelled sample whose double goes through a C++ stream at its default 6 significant
digits (``%g``), then the per-position series of exact integers once a speculative request has finished."""

from __future__ import annotations

import pytest
from conftest import SERVING

from eagle3_doctor.analyses.server_metrics.counters import LLAMACPP_PER_POS, load_counters
from eagle3_doctor.analyses.server_metrics.measured import load_measured
from eagle3_doctor.core.errors import BadInput

LLAMA = SERVING / "llamacpp-after-kv-layout-shift.prom"
VLLM = SERVING / "vllm-after-kv-layout-shift.prom"  # the same planted passes as vLLM counts them


def llamacpp_scrape(drafts: float, draft_tokens: float, accepted: float, per_pos: list[int] | None) -> str:
    """to_metrics()'s text for these spec-decode totals; the counters and gauges it does not read are 0."""
    counters = [
        ("prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens", 0.0),
        ("prompt_tokens_cached_total", "Number of prompt tokens reused from the cache", 0.0),
        ("prompt_seconds_total", "Total time spent processing prompts", 0.0),
        ("tokens_predicted_total", "Number of generation tokens processed", 0.0),
        ("tokens_predicted_seconds_total", "Total time spent generating tokens", 0.0),
        ("n_decode_total", "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding",
         0.0),
        ("n_tokens_max", "Largest observed sequence length (prompt + generation)", 0.0),
        ("spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated", draft_tokens),
        ("spec_decode_num_accepted_tokens_total", "Speculative: Total draft tokens accepted by the target model", accepted),
        ("spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps", drafts),
    ]  # fmt: skip
    gauges = [
        ("prompt_tokens_seconds", "Average prompt throughput in tokens/s", 0.0),
        ("predicted_tokens_seconds", "Average generation throughput in tokens/s", 0.0),
        ("requests_processing", "Number of requests processing", 0.0),
        ("requests_deferred", "Number of requests deferred", 0.0),
        ("n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call", 0.0),
    ]
    out = []
    for kind, items in (("counter", counters), ("gauge", gauges)):
        for name, help_, value in items:
            out += [f"# HELP llamacpp:{name} {help_}", f"# TYPE llamacpp:{name} {kind}", f"llamacpp:{name} {value:g}"]
    if per_pos:
        out += [f"# HELP {LLAMACPP_PER_POS} Accepted tokens per draft position", f"# TYPE {LLAMACPP_PER_POS} counter"]
        out += [f'{LLAMACPP_PER_POS}{{position="{i}"}} {n}' for i, n in enumerate(per_pos)]
    return "\n".join(out) + "\n"


def _from_vllm() -> str:
    c = load_counters(str(VLLM))
    d, t, a = (c.values[f"vllm:spec_decode_num_{k}_total"] for k in ("drafts", "draft_tokens", "accepted_tokens"))
    assert c.per_pos is not None
    return llamacpp_scrape(d, t, a, [int(p) for p in c.per_pos])


def test_the_shipped_scrape_is_the_planted_passes_in_llamacpps_text():
    assert LLAMA.read_text() == _from_vllm()


def test_a_llamacpp_scrape_reads_as_the_same_profile():
    ll, vl = load_measured(str(LLAMA)), load_measured(str(VLLM))
    assert ll.engine == "llamacpp" and ll.num_spec_tokens == vl.num_spec_tokens == 5
    for key in ("passes", "mean_acceptance_length", "mean_acceptance_length_ci", "draft_acceptance_rate",
                "per_position_rate", "per_position_ci"):  # fmt: skip
        assert getattr(ll, key) == getattr(vl, key), key


def test_a_before_scrape_without_the_per_position_series_counts_as_zeros(tmp_path):
    """The series appears only once a speculative request has finished: a fresh server's scrape has none."""
    before = tmp_path / "before.prom"
    before.write_text(llamacpp_scrape(0, 0, 0, None))
    assert load_measured(str(LLAMA), str(before)).per_position_rate == load_measured(str(LLAMA)).per_position_rate


def test_six_significant_digits_do_not_make_one_servers_counts_inconsistent(tmp_path):
    # 1234564 passes print as 1.23456e+06, below the exact 1234564 that accepted position 1
    f = tmp_path / "big.prom"
    f.write_text(llamacpp_scrape(1234564, 5 * 1234564, 2469128, [1234564, 1234564]))
    assert "1.23456e+06" in f.read_text()
    m = load_measured(str(f))
    assert m.per_position_rate is not None and m.per_position_rate[0] == 1.0
    f.write_text(llamacpp_scrape(1000, 5000, 900, [1100, 0]))  # past the rounding: not one server's counts
    with pytest.raises(BadInput, match="exceed"):
        load_measured(str(f))


def test_a_short_average_draft_is_noted(tmp_path):
    f = tmp_path / "short.prom"
    f.write_text(llamacpp_scrape(100, 300, 120, [80, 30, 10, 0, 0]))
    assert any("drafted 3.00 tokens a pass on average, under its 5" in n for n in load_measured(str(f)).notes)
    assert not any("on average" in n for n in load_measured(str(LLAMA)).notes)


def test_the_table_names_the_engine_and_the_counter_its_passes_come_from():
    """The terminal table says which server and which counter the verify passes were read from: llama.cpp's own,
    not the vLLM and SGLang names a reader would look for in the scrape and not find."""
    from conftest import SERVING, invoke

    for scrape, engine, counter in (("llamacpp-after-kv-layout-shift", "llama.cpp", "llamacpp:spec_decode_num_drafts_total"),
                                    ("vllm-after-healthy", "vLLM", "vllm:spec_decode_num_drafts_total"),
                                    ("sglang-after-healthy", "SGLang", "sglang:spec_verify_calls_total")):  # fmt: skip
        r = invoke("server-metrics", "--metrics", SERVING / f"{scrape}.prom")
        assert r.exit_code == 0, r.output
        assert f"measured by the server ({engine})" in r.output and f"verify passes ({counter})" in r.output, r.output
