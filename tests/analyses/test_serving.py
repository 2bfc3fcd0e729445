"""Serving evidence: server counters in (vLLM, SGLang), measured vs predicted acceptance, verdicts.

The .prom fixtures were written by vLLM 0.33.0's own metrics code (fixtures/serving/make_server_files.py)
fed with the fixture pair's decode; the verdict tests replay the same prompts and settings.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
from conftest import DRAFTS, ROOT, SERVING, TARGET

from eagle3_doctor.analyses.server_metrics.counters import load_counters
from eagle3_doctor.analyses.server_metrics.measured import load_measured, measure, measure_sglang_log, wilson
from eagle3_doctor.analyses.server_metrics.prediction import compare_to_prediction
from eagle3_doctor.core.errors import BadInput

SRV = SERVING
SETTINGS = json.loads((SRV / "settings.json").read_text())["workload"]
WIRING_IDS = json.loads((SRV / "settings.json").read_text())["wiring_layer_ids"]


def prom(name: str) -> str:
    return str(SRV / name)


# --------------------------------------------------------------------------- reading counters


def test_vllm_scrape_difference_gives_the_workload():
    before, after = load_counters(prom("vllm-before.prom")), load_counters(prom("vllm-after-healthy.prom"))
    assert before.engine == after.engine == "vllm"
    m = measure(after, before)
    # vllm/v1/spec_decode/metrics.py:113-118: 1 + accepted/drafts; per position = per_pos/drafts
    assert m.passes == after.values["vllm:spec_decode_num_drafts_total"] - before.values["vllm:spec_decode_num_drafts_total"]
    assert m.mean_acceptance_length == pytest.approx(1 + m.accepted_tokens / m.passes)
    assert m.num_spec_tokens == SETTINGS["num_steps"]
    assert sum(r * m.passes for r in m.per_position_rate) == pytest.approx(m.accepted_tokens)
    assert all(a >= b for a, b in zip(m.per_position_rate, m.per_position_rate[1:]))  # unconditional rates fall
    for r, (lo, hi) in zip(m.per_position_rate, m.per_position_ci):
        assert lo < r < hi
    lo, hi = m.mean_acceptance_length_ci  # from the accepted-length histogram the counters imply
    assert lo < m.mean_acceptance_length < hi and hi - lo < 1.5
    one = measure(after)  # one scrape: since server start, warm-up included
    assert one.passes > m.passes


def test_sglang_scrape_matches_the_same_decode_in_vllm():
    m = load_measured(prom("sglang-after-healthy.prom"), prom("sglang-before.prom"))
    v = load_measured(prom("vllm-after-healthy.prom"), prom("vllm-before.prom"))
    assert m.engine == "sglang" and m.requests == SETTINGS["limit"]
    # both fixtures count the same passes: tokens per verify pass agree once the prefill token is out
    assert m.passes == v.passes
    assert m.mean_acceptance_length == pytest.approx(v.mean_acceptance_length)
    assert any("own accept_length" in n for n in m.notes)


SGL_LOG = """\
[2026-01-01 10:00:00] Decode batch, #running-req: 4, #token: 900, token usage: 0.01, accept len: 3.10, accept rate: 0.53, cuda graph: True, gen throughput (token/s): 410.22, #queue-req: 0,
[2026-01-01 10:00:01] Prefill batch, #new-seq: 1, #new-token: 32, #cached-token: 0, token usage: 0.01,
[2026-01-01 10:00:02] Decode batch, #running-req: 2, #token: 950, token usage: 0.01, accept len: 2.50, accept rate: 0.38, cuda graph: True, gen throughput (token/s): 300.00, #queue-req: 0,
"""


def test_sglang_log_lines_are_pooled(tmp_path):
    f = tmp_path / "server.log"
    f.write_text(SGL_LOG)
    m = measure_sglang_log(SGL_LOG, str(f))
    assert m.passes == 2  # log lines
    assert m.mean_acceptance_length == pytest.approx((4 * 3.10 + 2 * 2.50) / 6)
    assert m.draft_acceptance_rate == pytest.approx((4 * 0.53 + 2 * 0.38) / 6)
    assert load_measured(None, log=str(f)).mean_acceptance_length == pytest.approx(m.mean_acceptance_length)


@pytest.mark.parametrize(
    "text, match",
    [
        ("this is not prometheus {{{\n", "not Prometheus"),
        ("# HELP x y\n# TYPE x counter\nx_total 3\n", "no vLLM, SGLang or llama.cpp"),
        (
            "# HELP llamacpp:n_decode_total x\n# TYPE llamacpp:n_decode_total counter\nllamacpp:n_decode_total 7\n",
            "no llamacpp:spec_decode_",
        ),
        ('vllm:num_requests_running{model_name="m"} 1\n', "no vllm:spec_decode"),
        ('vllm:spec_decode_num_drafts_total{model_name="m",engine="0"} 5\n', "lacks vllm:spec_decode_num_draft_tokens_total"),
        ('sglang:spec_accept_length{model_name="m"} 2.0\n', "lacks sglang:spec_verify_calls_total"),
    ],
)
def test_malformed_scrapes_are_one_line_errors(tmp_path, text, match):
    f = tmp_path / "m.prom"
    f.write_text(text)
    with pytest.raises(BadInput, match=match):
        load_measured(str(f))


def test_mismatched_scrapes_are_refused(tmp_path):
    with pytest.raises(BadInput, match="went down"):
        load_measured(prom("vllm-before.prom"), prom("vllm-after-healthy.prom"))
    with pytest.raises(BadInput, match="holds sglang metrics, not vllm"):
        load_measured(prom("vllm-after-healthy.prom"), prom("sglang-before.prom"))
    with pytest.raises(BadInput, match="holds vllm metrics, not sglang"):
        load_measured(prom("vllm-after-healthy.prom"), engine="sglang")
    # a scrape with other positions (another K): the before/after pair cannot be one server's
    text = (SRV / "vllm-before.prom").read_text()
    cut = "\n".join(ln for ln in text.splitlines() if 'position="4"' not in ln) + "\n"
    f = tmp_path / "k4.prom"
    f.write_text(cut)
    with pytest.raises(BadInput, match="number of draft positions"):
        load_measured(prom("vllm-after-healthy.prom"), str(f))
    with pytest.raises(BadInput, match="does not exist"):
        load_measured(str(tmp_path / "nope.prom"))
    with pytest.raises(BadInput, match="no metrics labelled model_name"):
        load_measured(prom("vllm-after-healthy.prom"), model="other")


def test_wilson_interval():
    lo, hi = wilson(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-3) and hi == pytest.approx(0.5962, abs=1e-3)
    assert wilson(0, 10)[0] == 0.0


def test_cli_server_metrics(tmp_path):
    out = tmp_path / "m.json"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "eagle3_doctor.cli.app",
            "server-metrics",
            "--metrics",
            prom("vllm-after-healthy.prom"),
            "--before",
            prom("vllm-before.prom"),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    assert "position 5 rate" in r.stdout
    assert json.loads(out.read_text())["schema"] == "eagle3-doctor/server-metrics/1"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "eagle3_doctor.cli.app",
            "server-metrics",
            "--metrics",
            prom("vllm-before.prom"),
            "--before",
            prom("vllm-after-healthy.prom"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith("eagle3-doctor: error:") and r.stderr.count("\n") == 1


# --------------------------------------------------------------------------- measured vs predicted


@pytest.fixture(scope="module")
def predictions():
    """The doctor's prediction for the fixtures' workload: correct wiring and a wiring fault (vLLM)."""
    from eagle3_doctor.cli.validate import parse_layer_ids
    from eagle3_doctor.doctor import acc_fix, acceptance, load_setup

    out = {}
    for name, ids in (("correct", None), ("fault", WIRING_IDS)):
        setup = load_setup(
            target=str(TARGET),
            draft=str(DRAFTS["speculators"]),
            engine="vllm",
            layer_ids=parse_layer_ids(ids),
            dtype="float32",
            device="cpu",
        )
        run = acceptance(
            setup,
            prompts_path=str(ROOT / SETTINGS["prompts"]),
            num_steps=SETTINGS["num_steps"],
            max_new_tokens=SETTINGS["max_new_tokens"],
            limit=SETTINGS["limit"],
        )
        out[name] = (run, acc_fix(setup))
    return out


def _verdict(predictions, which: str, after: str):
    run, fix = predictions[which]
    m = load_measured(prom(after), prom("vllm-before.prom"))
    return compare_to_prediction(m, run.paths, run.settings, fix if "training" in run.paths else None)


def test_matching_server_yields_no_finding(predictions):
    comp, findings = _verdict(predictions, "correct", "vllm-after-healthy.prom")
    assert comp.verdict is None and comp.relation == "agree" and findings == []
    ps = comp.predicted["serving"]
    assert ps["mean_acceptance_length"] == pytest.approx(comp.measured.mean_acceptance_length)
    lo, hi = ps["mean_acceptance_length_ci"]
    assert lo < ps["mean_acceptance_length"] < hi


def test_server_far_below_prediction_for_correct_wiring_is_the_engine(predictions):
    comp, findings = _verdict(predictions, "correct", "vllm-after-engine-bug.prom")
    assert comp.verdict == "engine"
    assert [f.code for f in findings] == ["SRV001"]
    ev = "\n".join(findings[0].evidence)
    assert "<-- below" in ev and "position 1:" in ev and "vllm PR #20190" in ev
    assert "--enforce-eager" in findings[0].fix


def test_wiring_fault_is_the_wiring(predictions):
    comp, findings = _verdict(predictions, "fault", "vllm-after-wiring.prom")
    assert comp.verdict == "wiring"
    assert [f.code for f in findings] == ["SRV002"]
    # the fix is the capture fix: the ids the draft was trained on, in vLLM's numbering
    assert '"eagle_aux_hidden_state_layer_ids": [2, 4, 5]' in findings[0].fix
    lo, hi = comp.measured.mean_acceptance_length_ci
    assert hi < comp.predicted["training"]["mean_acceptance_length_ci"][0]
    assert comp.predicted["training"]["mean_acceptance_length"] > comp.predicted["serving"]["mean_acceptance_length"]


def test_other_num_steps_is_refused(predictions):
    run, _ = predictions["correct"]
    m = load_measured(prom("vllm-after-healthy.prom"), prom("vllm-before.prom"))
    with pytest.raises(BadInput, match="--num-steps 5"):
        compare_to_prediction(m, run.paths, dataclasses.replace(run.settings, num_steps=3))


def _fake_path(lengths: list[list[int]], step1: float, spec: str):
    from conftest import path_result

    from eagle3_doctor.analyses.results import ChainMetrics
    from eagle3_doctor.core.taps import parse_spec

    p = path_result(ChainMetrics(), acc_k=[step1])
    p.accepted_lengths, p.spec = lengths, parse_spec(spec)
    return p


def _settings(num_steps: int):
    """The run settings compare_to_prediction reads (K, tree, temperature), for hand-made paths."""
    from types import SimpleNamespace

    return SimpleNamespace(num_steps=num_steps, topk=1, temperature=0.0, num_draft_tokens=None, sequences=12, engine="sglang")


def test_weak_draft_and_undetermined():
    from eagle3_doctor.analyses.server_metrics.measured import Measured

    weak = [[0, 0, 1, 0, 0, 0, 1, 0] for _ in range(12)]
    paths = {"serving": _fake_path(weak, 0.2, "layer_out[1]")}
    m = Measured("sglang", "x", 96.0, 1.25)
    comp, f = compare_to_prediction(m, paths, _settings(3))
    assert comp.verdict == "draft" and [x.code for x in f] == ["SRV003"]
    # a server far ABOVE the prediction: other prompts or settings, not a verdict
    comp, f = compare_to_prediction(Measured("sglang", "x", 96.0, 3.5), paths, _settings(3))
    assert comp.verdict == "undetermined" and [x.code for x in f] == ["SRV004"]
    # agreeing with the serving prediction but unable to rule out the training one: no wiring verdict
    good = [[3, 2, 3, 1, 3, 2, 3, 3] for _ in range(12)]
    paths = {"serving": _fake_path(weak, 0.5, "embed"), "training": _fake_path(good, 0.8, "layer_out[1]")}
    comp, f = compare_to_prediction(Measured("sglang", "x", 96.0, 1.25, (1.0, 3.7)), paths, _settings(3))
    assert comp.verdict == "undetermined" and "cannot rule out" in f[0].title
    comp, f = compare_to_prediction(Measured("sglang", "x", 96.0, 1.25, (1.1, 1.4)), paths, _settings(3))
    assert comp.verdict == "wiring"


def test_server_metrics_json_to_stdout_is_the_json_alone():
    """`--json -` makes stdout a JSON document a pipe can parse; the human report goes to stderr."""
    r = subprocess.run(
        [sys.executable, "-m", "eagle3_doctor.cli.app", "server-metrics", "--metrics", prom("vllm-after-healthy.prom"),
         "--before", prom("vllm-before.prom"), "--json", "-"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["schema"] == "eagle3-doctor/server-metrics/1"
    assert "position 5 rate" in r.stderr
