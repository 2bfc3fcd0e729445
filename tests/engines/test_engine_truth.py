"""Engine truth through the CLI: release strings, and fixes on later releases.

What an engine really feeds for an id list (ENG002/ENG003: a state short, none, repeated, fc skipped) is
in rows of tests/test_finding_cases.py."""

from __future__ import annotations

import json

import pytest
from conftest import DRAFTS, TARGET, invoke


def _with_ids(tmp_copy, ids, fmt="sglang"):
    d = tmp_copy(DRAFTS[fmt])
    f = d / "config.json"
    c = json.loads(f.read_text())
    if fmt == "sglang":
        c["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = ids
    else:
        c["eagle_aux_hidden_state_layer_ids"] = ids
    f.write_text(json.dumps(c))
    return d


def _inspect(tmp_path, draft, *args):
    out = tmp_path / "inspect.json"
    r = invoke("inspect", "--target", TARGET, "--draft", draft, *args, "--json", out)
    assert r.exit_code in (0, 1), r.output
    return r.exit_code, json.loads(out.read_text())["findings"]


def _one(findings, code):
    hits = [f for f in findings if f["code"] == code]
    assert len(hits) == 1, [f["code"] for f in findings]
    return hits[0]


@pytest.mark.parametrize("fmt,engine", [("sglang", "sglang"), ("speculators", "vllm"), ("sglang", "modelopt")])
def test_clean_fixtures_stay_quiet(tmp_path, fmt, engine):
    rc, found = _inspect(tmp_path, DRAFTS[fmt], "--engine", engine)
    assert rc == 0 and not [f for f in found if f["severity"] in ("error", "warning")], found


def _inspect_doc(tmp_path, draft, *args):
    out = tmp_path / "inspect.json"
    r = invoke("inspect", "--target", TARGET, "--draft", draft, *args, "--json", out)
    assert r.exit_code in (0, 1), r.output
    return r.exit_code, json.loads(out.read_text())


@pytest.mark.parametrize(
    "engine,given,release,fmt",
    [
        ("sglang", "0.5.10rc0", "0.5.10", "sglang"),
        ("sglang", "0.5.10.dev3", "0.5.10", "sglang"),
        ("vllm", "0.11.0rc2.dev45+g1234abc", "0.11.0", "speculators"),
        ("sglang", "0.5.4.post2", "0.5.4.post2", "sglang"),
        ("trtllm", "1.2.1", "1.2", "sglang"),
        ("trtllm", "1.2.1-two-model", "1.2-two-model", "sglang"),
    ],
)
def test_pre_dev_post_and_point_releases_map_to_their_release(tmp_path, engine, given, release, fmt):
    rc, doc = _inspect_doc(tmp_path, DRAFTS[fmt], "--engine", engine, "--engine-version", given)
    facts = dict(doc["facts"])
    assert f"{engine} {release} feeds" in facts, facts
    assert rc == 0 and not [f for f in doc["findings"] if f["severity"] != "info"], doc["findings"]


@pytest.mark.parametrize(
    "engine,given,rules,fmt",
    [
        ("sglang", "0.6.0", "0.5.23", "sglang"),
        ("vllm", "0.34", "0.33.0", "speculators"),
        ("modelopt", "0.48.0rc1", "0.47.0", "sglang"),
    ],
)
def test_a_release_past_the_newest_takes_its_rules_with_a_warning(tmp_path, engine, given, rules, fmt):
    rc, doc = _inspect_doc(tmp_path, DRAFTS[fmt], "--engine", engine, "--engine-version", given)
    f = _one(doc["findings"], "ENG005")
    assert rc == 1 and f["severity"] == "warning" and f["data"]["rules_of"] == rules
    assert f"the rules of {engine} {rules} were applied" in f["title"]
    assert "conformance/releases.py" in f["fix"] and f"--engine-version {rules}" in f["fix"]
    # the newest rules really are applied: the clean fixture is served as trained, so ENG005 is the only finding
    assert [x["code"] for x in doc["findings"] if x["severity"] != "info"] == ["ENG005"]


@pytest.mark.parametrize("engine,given", [("sglang", "0.7.0"), ("vllm", "0.35"), ("modelopt", "0.49"), ("trtllm", "1.4")])
def test_far_out_releases_are_still_refused_before_any_load(engine, given):
    r = invoke("inspect", "--target", TARGET, "--draft", DRAFTS["sglang"], "--engine", engine, "--engine-version", given)
    assert r.exit_code == 2 and "newer than any" in r.output


def test_release_parsing_is_light():
    # the preflight parses --engine-version before torch is imported
    import os
    import subprocess
    import sys

    from conftest import ROOT

    code = (
        "import sys; from eagle3_doctor.engines.releases import check_engine; "
        "print(check_engine('vllm', '0.11.0rc2.dev45+g1234abc'), 'torch' in sys.modules)"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout.split()
    assert out == ["0.11.0", "False"]


def test_vllm_0_10_2_fix_names_the_first_release_that_reads_the_ids(tmp_copy, tmp_path):
    # vLLM 0.10.2 ignores the ids and feeds its default layer_out[1], layer_out[3], layer_out[4]; from 0.11.1 the V1
    # runner reads the top-level key, and [1, 3, 5] in vLLM numbering is the trained layer_out[0], layer_out[2], layer_out[4]
    d = _with_ids(tmp_copy, [1, 3, 5], "speculators")
    rc, found = _inspect(tmp_path, d, "--engine", "vllm", "--engine-version", "0.10.2")
    assert rc == 1
    for code in ("CAP006", "CAP009", "CAP007"):
        assert "upgrade to vLLM >= 0.11.1, which reads these ids" in _one(found, code)["fix"], code
    # on a release that reads them the same config is healthy, so the advice is right
    rc, found = _inspect(tmp_path, d, "--engine", "vllm", "--engine-version", "0.11.1")
    assert rc == 0, [f["code"] for f in found]


def test_a_later_release_that_stops_serving_the_config_bounds_the_upgrade():
    from eagle3_doctor.analyses.compare.symbolic import diagnose_specs
    from eagle3_doctor.core.taps import layer_out
    from eagle3_doctor.engines.keys import NESTED
    from eagle3_doctor.engines.serving import resolve_serving

    # nested-only ids: the V1 runner reads eagle_config from 0.22.0, the default Model Runner V2 (0.33.0) reads the top only
    s = resolve_serving("vllm", "0.18.0", "llama", 8, {NESTED: [1, 3, 5]})
    fix = next(f.fix for f in diagnose_specs((layer_out(0), layer_out(2), layer_out(4)), "given", s) if f.code == "CAP006")
    assert 'set "eagle_aux_hidden_state_layer_ids": [1, 3, 5]' in fix  # the id edit on the user's release ...
    assert "or upgrade to vLLM >= 0.22.0 and < 0.33.0" in fix  # ... and beside it the releases that read the nested key
