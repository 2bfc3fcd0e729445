"""The method a vLLM release runs a launch's draft under (engines/vllm_method.py, data/vllm_method_detect.json,
conformance/method_exec.py), and CMD008, the launch's algorithm against the draft's kind for every kind
(engines/drafter_algorithms.py), through the CLI as a user runs it."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import DRAFTS, FIX, TARGET, invoke

from eagle3_doctor.engines.vllm_method import _row, served_method, table

ROOT = Path(__file__).resolve().parents[2]
TESTDATA = ROOT / "conformance" / "testdata" / "vllm"


@pytest.mark.parametrize("release", ["0.9.0", "0.11.0", "0.18.0", "0.33.0"])
def test_each_release_s_own_chain_executed_now_agrees_with_the_table_and_the_resolver(release: str) -> None:
    """The release's SpeculativeConfig statements as released (testdata/), executed over the harness's grid: the
    resolver on the branches read gives the release's method (or its raise) in every case, and the committed row for
    the release holds those branches."""
    sys.path.insert(0, str(ROOT / "conformance"))
    import method_exec

    ex = method_exec.executed(TESTDATA / release)
    assert ex is not None and len(ex["cases"]) == 2520
    assert method_exec.check(ex) == []
    row = _row(release)
    assert row is not None
    assert row["rule"] == {"rewrites": ex["rewrites"], "branches": [{k: b[k] for k in b if k != "line"} for b in ex["branches"]]}


def test_the_chain_s_turns_that_decide_a_user_s_launch() -> None:
    # read in the releases' files: "eagle-" is tested before "eagle3" from 0.10.2 to 0.33.0 (config/speculative.py:1445
    # in 0.33.0); 0.8.5-0.10.1.1 tested `"eagle-" in path or "eagle3-" in path` -> eagle
    assert served_method("0.33.0", None, "/models/llama-eagle-3b", "llama", []).method == "eagle"
    assert served_method("0.33.0", None, "/models/EAGLE3-llama", "llama", []).method == "eagle3"
    assert served_method("0.9.0", None, "/models/EAGLE3-llama", "llama", []).method == "eagle"
    # unset, nothing detected: draft_model from 0.17.0 (the rewrite at the top of __post_init__), a raise before
    m = served_method("0.33.0", None, "/models/draft", "llama", [])
    assert (m.method, m.raises, m.why) == ("draft_model", None, "no method typed: draft_model, the release's default")
    m = served_method("0.15.1", None, "/models/draft", "llama", [])
    assert m.method is None and "Unsupported speculative method" in (m.raises or "")
    assert "vllm/config/speculative.py" in m.source
    # a typed name the first test keeps stands; typed "mtp" is not kept there, so the path overrides it
    assert served_method("0.33.0", "eagle3", "/models/llama-eagle-3b", "llama", []).method == "eagle3"
    assert served_method("0.33.0", "mtp", "/models/x-eagle-y", "deepseek_mtp", []).method == "eagle"
    assert served_method("0.33.0", "deepseek_mtp", "/models/head", "deepseek_mtp", []).method == "mtp"
    assert served_method("0.10.2", None, "/models/x-dflash", "llama", []).raises  # no dflash detection before 0.20.0
    assert served_method("0.20.0", None, "/models/x-dflash", "llama", []).method == "dflash"
    assert served_method("0.7.0", None, "/m", "llama", []) is None  # no row: nothing claimed
    assert len(table()["rows"]) >= 20 and not table()["not_read"]


def _json(tmp_path: Path, *args: object) -> tuple[int, dict]:
    out = tmp_path / "o.json"
    r = invoke("inspect", *args, "--json", out)
    return r.exit_code, json.loads(out.read_text())


def _cmd008(doc: dict) -> dict | None:
    return next((f for f in doc["findings"] if f["code"] == "CMD008"), None)


def _vllm(draft: Path, method: str | None = None) -> str:
    spec = {**({"method": method} if method else {}), "model": str(draft), "num_speculative_tokens": 3}
    return f"vllm serve {TARGET} --speculative-config '{json.dumps(spec)}'"


def test_a_draft_launched_on_vllm_without_a_method_is_served_as_the_release_settles_it(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Saved under a path with none of the words vLLM looks for, 0.33.0 runs the draft as draft_model and 0.15.1 refuses
    to start; under a path with 'eagle-' in it, vLLM runs EAGLE-1's classes on it; a typed "eagle3" is served as
    trained. The copies sit under pytest's temporary root: the checkout's own path may hold any word."""
    plain = tmp_path_factory.mktemp("m") / "draft"
    shutil.copytree(DRAFTS["sglang"], plain)
    code, doc = _json(tmp_path, "-d", plain, "--serve-cmd", _vllm(plain))
    f = _cmd008(doc)
    assert code == 1 and f is not None and f["data"]["algorithm"] == "draft_model", doc["findings"]
    assert (f["edit"]["key"], f["edit"]["value"]) == ("--speculative-config.method", "eagle3")
    assert any("pass_hidden_states_to_model=False" in e for e in f["evidence"])
    code, doc = _json(tmp_path, "-d", plain, "--serve-cmd", _vllm(plain), "--engine-version", "0.15.1")
    f = _cmd008(doc)
    assert f is not None and f["data"]["algorithm"] is None and "refuses to start" in f["title"]
    named = tmp_path_factory.mktemp("m") / "llama-eagle-3b"  # a parent free of the words vLLM looks for
    shutil.copytree(DRAFTS["sglang"], named)
    code, doc = _json(tmp_path, "-d", named, "--serve-cmd", _vllm(named))
    f = _cmd008(doc)
    assert f is not None and f["data"]["algorithm"] == "eagle" and f["data"]["settled_by"] == "'eagle-' in the draft path"
    assert any("EagleLlamaForCausalLMEagle3" in e for e in f["evidence"])
    assert doc["serve"]["algorithm"] == "eagle", doc["serve"]
    code, doc = _json(tmp_path, "-d", named, "--serve-cmd", _vllm(named, "eagle3"))
    assert _cmd008(doc) is None and doc["serve"]["algorithm"] == "eagle3"


def test_every_kind_under_another_kind_s_algorithm_is_cmd008_with_the_kind_s_algorithm_as_the_fix(tmp_path: Path) -> None:
    sg = "python -m sglang.launch_server --model-path {t} --speculative-algorithm {a} --speculative-draft-model-path {d}"
    cases = [  # (draft, launch, the algorithm the fix sets)
        (DRAFTS["sglang"], sg.format(t=TARGET, a="EAGLE", d=DRAFTS["sglang"]), "EAGLE3"),
        (DRAFTS["sglang"], sg.format(t=TARGET, a="NEXTN", d=DRAFTS["sglang"]), "EAGLE3"),
        (FIX / "mtp-speculators", sg.format(t=TARGET, a="EAGLE3", d=FIX / "mtp-speculators"), "NEXTN"),
        (FIX / "dflash-draft", sg.format(t=TARGET, a="STANDALONE", d=FIX / "dflash-draft"), "DFLASH"),
        (FIX / "peagle-draft", _vllm(FIX / "peagle-draft", "eagle"), "eagle3"),
        (DRAFTS["sglang"], _vllm(DRAFTS["sglang"], "dflash"), "eagle3"),
    ]
    for draft, launch, fix in cases:
        code, doc = _json(tmp_path, "-d", draft, "--serve-cmd", launch)
        f = _cmd008(doc)
        assert code == 1 and f is not None and f["edit"]["value"] == fix, (launch, doc["findings"])
    # each kind under its own algorithm: no CMD008
    for draft, launch in [(DRAFTS["sglang"], sg.format(t=TARGET, a="EAGLE3", d=DRAFTS["sglang"])),
                          (FIX / "mtp-speculators", sg.format(t=TARGET, a="NEXTN", d=FIX / "mtp-speculators")),
                          (FIX / "dflash-draft", _vllm(FIX / "dflash-draft", "dflash"))]:  # fmt: skip
        _code, doc = _json(tmp_path, "-d", draft, "--serve-cmd", launch)
        assert _cmd008(doc) is None, (launch, doc["findings"])


def test_a_method_the_release_refuses_or_ignores_stands_alone(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """CMD006 and CMD007 name the fix CMD008 would; CMD007 says what the release detects for this launch instead."""
    plain = tmp_path_factory.mktemp("m") / "draft"  # a path free of the words vLLM looks for
    shutil.copytree(DRAFTS["sglang"], plain)
    _code, doc = _json(tmp_path, "-d", plain, "--serve-cmd", _vllm(plain, "EAGLE3"))
    codes = [f["code"] for f in doc["findings"]]
    assert "CMD006" in codes and "CMD008" not in codes
    _code, doc = _json(tmp_path, "-d", plain, "--serve-cmd", _vllm(plain, "EAGLE3"), "--engine-version", "0.9.0")
    cmd007 = next(f for f in doc["findings"] if f["code"] == "CMD007")
    assert "CMD008" not in [f["code"] for f in doc["findings"]]
    assert any("for this launch it runs this draft under draft_model" in e for e in cmd007["evidence"]), cmd007["evidence"]


def test_tensorrt_llm_decoding_types_against_the_kind(tmp_path: Path) -> None:
    """TensorRT-LLM's speculative_config.decoding_type: MTP runs the target's own layers whatever speculative_model
    says, Eagle/Eagle3 run an EAGLE-3 draft; each kind under the other's is CMD008 with the YAML key as the fix."""

    def launch(decoding: str, draft: Path) -> str:
        yaml = tmp_path / f"{decoding}-{draft.name}.yaml"
        yaml.write_text(f"speculative_config:\n  decoding_type: {decoding}\n  max_draft_len: 3\n  speculative_model: {draft}\n")
        return f"trtllm-serve {TARGET} --extra_llm_api_options {yaml}"

    mtp = FIX / "mtp-speculators"
    for draft, decoding, fix in ((DRAFTS["sglang"], "MTP", "Eagle3"), (mtp, "Eagle3", "MTP"), (mtp, "Eagle", "MTP")):
        code, doc = _json(tmp_path, "-d", draft, "--serve-cmd", launch(decoding, draft))
        f = _cmd008(doc)
        assert f is not None and (f["edit"]["key"], f["edit"]["value"]) == ("speculative_config.decoding_type", fix), doc
        assert str(draft) in f["evidence"][0]  # the draft measured, not the target MTP would run
    for draft, decoding in ((DRAFTS["sglang"], "Eagle3"), (DRAFTS["sglang"], "Eagle")):
        _code, doc = _json(tmp_path, "-d", draft, "--serve-cmd", launch(decoding, draft))
        assert _cmd008(doc) is None, doc["findings"]


def test_the_target_s_own_mtp_layers_are_left_to_the_family_override(tmp_path: Path) -> None:
    """vLLM drafts "method": "mtp" without a model with the target's own layers, its config rewritten by
    hf_config_override into the family's MTP model_type: config.json's model_type (deepseek_v3) is not what the
    chain reads, so the method stays as typed and no CMD008 claims a refusal (MTP003 judges the family)."""
    from eagle3_doctor.engines.drafter_algorithms import mismatch
    from eagle3_doctor.engines.launch import load

    target = tmp_path / "dsv3"
    target.mkdir()
    (target / "config.json").write_text(json.dumps({"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"]}))
    sc = load(f"vllm serve {target} --speculative-config '{json.dumps({'method': 'mtp', 'num_speculative_tokens': 1})}'", None)
    assert sc is not None and sc.draft == str(target) and sc.algorithm == "mtp" and sc.method_settled is None
    assert mismatch(sc, "mtp") is None
    # a head of its own beside the target: its config.json is the draft's, and the chain reads it
    head = tmp_path / "head"
    head.mkdir()
    (head / "config.json").write_text(json.dumps({"model_type": "deepseek_mtp"}))
    spec = {"method": "mtp", "model": str(head), "num_speculative_tokens": 1}
    sc = load(f"vllm serve {target} --speculative-config '{json.dumps(spec)}'", None)
    assert sc is not None and sc.method_settled is not None and sc.algorithm == "mtp"
    assert sc.method_settled.why == "the draft config's model_type deepseek_mtp"
