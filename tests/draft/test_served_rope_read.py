"""FWD014: the RoPE each release's draft is built with from the draft config, through the transformers the release
admits, executed from the release's own llama.py and get_rope (conformance/rope_exec.py), against the config as the
trainer reads it."""

from __future__ import annotations

import json

import pytest
from conftest import DRAFTS, TARGET, invoke

from eagle3_doctor.analyses.inspect.inspection import inspect
from eagle3_doctor.engines.draft_rope import admitted_majors, rope_rule

LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}


def _rope(tmp_copy, name: str, layout: str, theta: float, scaling: dict | None = None):
    """The SGLang fixture draft with its RoPE stated in the transformers 5 layout (rope_parameters alone) or the 4 one."""
    d = tmp_copy(DRAFTS["sglang"], name)
    c = json.loads((d / "config.json").read_text())
    for k in ("rope_theta", "rope_scaling", "rope_parameters"):
        c.pop(k, None)
    if layout == "5":
        c["rope_parameters"] = {"rope_type": "default", **(scaling or {}), "rope_theta": theta}
    else:
        c["rope_theta"], c["rope_scaling"] = theta, scaling
    (d / "config.json").write_text(json.dumps(c))
    return d


def fwd014(d, engine, version):
    return [f for f in inspect(str(TARGET), str(d), engine=engine, engine_version=version).findings if f.code == "FWD014"]


def test_a_transformers5_config_under_a_release_on_transformers4_runs_at_theta_10000_through_the_cli(tmp_copy, tmp_path):
    """SGLang 0.5.7 pins transformers 4.57.1, which leaves rope_parameters unread: the draft runs at theta 10000; the fix
    is the 4.x layout, which that release reads (executed), as an exact edit."""
    d = _rope(tmp_copy, "rope5", "5", 500000.0)
    out = tmp_path / "r.json"
    r = invoke("inspect", "-t", TARGET, "-d", d, "-e", "sglang", "--engine-version", "0.5.7", "--json", out)
    assert "error[FWD014]" in r.output and "theta 10000 and no scaling under transformers 4.x" in r.output, r.output
    (f,) = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "FWD014"]
    assert f["data"]["served"] == {"4": {"rope_type": "default", "rope_theta": 10000.0}}
    assert '"rope_theta": 500000.0, "rope_scaling": null and delete rope_parameters' in f["fix"]
    assert "quarter turn apart by position" in " ".join(f["evidence"])
    # the edit it names, made: that release is quiet
    c = json.loads((d / "config.json").read_text())
    c.pop("rope_parameters")
    c["rope_theta"], c["rope_scaling"] = 500000.0, None
    (d / "config.json").write_text(json.dumps(c))
    r = invoke("inspect", "-t", TARGET, "-d", d, "-e", "sglang", "--engine-version", "0.5.7")
    assert "FWD014" not in r.output


def test_a_release_that_reads_rope_parameters_is_quiet_through_the_cli(tmp_copy):
    d = _rope(tmp_copy, "rope5q", "5", 500000.0)
    r = invoke("inspect", "-t", TARGET, "-d", d, "-e", "sglang", "--engine-version", "0.5.10")
    assert "FWD014" not in r.output, r.output


def test_sglang_0_5_6_post1_drops_theta_under_its_own_transformers_5_pin(tmp_copy):
    """Its llama.py reads config.rope_theta, which transformers 5 no longer sets: theta 10000 for any layout; the next
    release (pinned back to 4.57.1) reads the 4.x layout."""
    d = _rope(tmp_copy, "rope4", "4", 500000.0)
    (f,) = fwd014(d, "sglang", "0.5.6.post1")
    assert f.severity == "error" and f.data["misread_under"] == [5]
    assert f.fix == "upgrade to SGLang >= 0.5.6.post2, whose draft is built with the RoPE the config states"
    assert fwd014(d, "sglang", "0.5.6.post2") == []


def test_a_release_admitting_both_majors_warns_for_the_one_that_misreads(tmp_copy):
    """vLLM 0.23.0 admits transformers 4 and 5; under 4 its RoPE patch keeps a rope_parameters config's llama3 scaling
    and overwrites its theta with transformers' default 10000; under 5 it reads the config as written."""
    d = _rope(tmp_copy, "rope5l3", "5", 500000.0, {**LLAMA3, "original_max_position_embeddings": 256})
    (f,) = fwd014(d, "vllm", "0.23.0")
    assert f.severity == "warning" and f.data["misread_under"] == [4]
    assert f.data["served"]["4"]["rope_type"] == "llama3" and f.data["served"]["4"]["rope_theta"] == 10000.0
    assert f.fix.startswith('write in the draft\'s config.json "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3"')
    assert fwd014(d, "vllm", "0.24.0") == []


@pytest.mark.parametrize(("fmt", "engine", "version"), [("sglang", "sglang", "0.5.6.post1"), ("eagle", "vllm", "0.8.5")])
def test_the_shipped_drafts_at_theta_10000_are_quiet_everywhere(fmt, engine, version):
    """10000 is every release's fallback: a release that drops the config's theta still runs these drafts as trained."""
    assert fwd014(DRAFTS[fmt], engine, version) == []


def test_the_admitted_majors_come_from_each_release_requirement():
    assert rope_rule("sglang", "0.5.6.post1").majors == (5,)
    assert rope_rule("vllm", "0.18.0").majors == (4,)
    assert rope_rule("vllm", "0.33.0").majors == (5,)
    assert admitted_majors(">=4.51.1") == (4, 5)
    assert admitted_majors("!=5.0.*,!=5.1.*,!=5.2.*,!=5.3.*,!=5.4.*,!=5.5.0,>=4.56.0") == (4, 5)


def test_a_speculators_checkpoint_is_not_judged(tmp_copy):
    """vLLM builds a speculators draft's config through its own SpeculatorsConfig (keys set as written), a path the
    probe did not execute: no FWD014 either way, even for a RoPE every release would misread as a LlamaConfig."""
    d = tmp_copy(DRAFTS["speculators"], "spec-rope5")
    c = json.loads((d / "config.json").read_text())
    tl = c["transformer_layer_config"]
    tl.pop("rope_theta"), tl.pop("rope_scaling")
    tl["rope_parameters"] = {"rope_type": "default", "rope_theta": 500000.0}
    (d / "config.json").write_text(json.dumps(c))
    assert fwd014(d, "vllm", "0.11.0") == []
