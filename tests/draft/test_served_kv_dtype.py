"""FWD015: the KV cache dtype each release gives the draft's attention for a launch's --kv-cache-dtype and draft-only
setting (executed from the release's own code by conformance/kvdtype_exec.py), and the acceptance it costs, measured
on the pair with every key and value the draft reads rounded through that dtype."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from conftest import DRAFTS, PROMPTS, TARGET, invoke

from eagle3_doctor.analyses.faults.classes import fp8_round
from eagle3_doctor.engines.draft_kv_dtype import first_with_key, served_kv, table

RUN = ("--prompts", PROMPTS, "--limit", 8, "--max-new-tokens", 32)


def _vllm(draft: Path, spec: dict) -> str:
    spec = {"method": "eagle3", "model": str(draft), "num_speculative_tokens": 3, **spec}
    return f"vllm serve {TARGET} --kv-cache-dtype fp8 --speculative-config '{json.dumps(spec)}'"


def _sglang(draft: Path, extra: str = "") -> str:
    return (
        f"python -m sglang.launch_server --model-path {TARGET} --speculative-algorithm EAGLE3 --speculative-draft-model-path "
        f"{draft} --speculative-num-steps 3 --speculative-eagle-topk 1 --kv-cache-dtype fp8_e4m3 {extra}"
    )


def _fwd015(tmp_path: Path, draft: Path, cmd: str, version: str) -> list[dict]:
    out = tmp_path / f"a-{version}.json"
    r = invoke("acceptance", "-t", TARGET, "-d", draft, "--serve-cmd", cmd, "--engine-version", version, *RUN, "--json", out)
    assert r.exit_code in (0, 1), r.output
    return [f for f in json.loads(out.read_text())["findings"] if f["code"] == "FWD015"]


def test_vllm_serves_the_draft_an_fp8_cache_until_its_speculative_config_says_auto(tmp_path):
    """vLLM 0.33.0 hands the draft the target's fp8 cache config; the measured cost on the fixture pair is within
    noise (its keys and values stay under 8, e4m3 saturates at 448), so a warning that says so; the printed key
    applied, the draft keeps its own dtype."""
    (f,) = _fwd015(tmp_path, DRAFTS["speculators"], _vllm(DRAFTS["speculators"], {}), "0.33.0")
    assert f["severity"] == "warning" and f["data"]["served"] == "fp8_e4m3"
    ev = " ".join(f["evidence"])
    assert "_create_draft_vllm_config, executed" in ev and "load_eagle_model, executed" in ev
    assert "measured cost on this pair (8 prompts" in ev and "within noise on these prompts" in ev
    lo, hi = f["data"]["cost_interval"]
    assert lo <= 0 <= hi and 0 < f["data"]["peak"] < 448
    assert f["fix"].startswith('add "kv_cache_dtype": "auto" to --speculative-config')
    fixed = _vllm(DRAFTS["speculators"], {"kv_cache_dtype": "auto"})
    assert _fwd015(tmp_path, DRAFTS["speculators"], fixed, "0.33.0") == []
    # a release before the setting existed: the draft still takes the target's fp8, the fix is the release
    (g,) = _fwd015(tmp_path, DRAFTS["speculators"], fixed, "0.25.1")
    assert "has no --speculative-config kv_cache_dtype setting (first in 0.26.0)" in " ".join(g["evidence"])
    assert g["fix"].startswith("upgrade to vLLM >= 0.26.0")


def test_sglang_gives_the_draft_its_own_dtype_from_0_5_18_with_its_draft_flag(tmp_path):
    d = DRAFTS["sglang"]
    (f,) = _fwd015(tmp_path, d, _sglang(d), "0.5.23")
    assert f["fix"].startswith("launch with --speculative-draft-kv-cache-dtype auto")
    assert "kv_cache_dtype.py:34" in " ".join(f["evidence"])
    assert _fwd015(tmp_path, d, _sglang(d, "--speculative-draft-kv-cache-dtype auto"), "0.5.23") == []
    (g,) = _fwd015(tmp_path, d, _sglang(d, "--speculative-draft-kv-cache-dtype auto"), "0.5.17")
    assert g["fix"].startswith("upgrade to SGLang >= 0.5.18")


def test_keys_and_values_past_fp8s_range_cost_acceptance_and_make_it_an_error(tmp_copy, tmp_path):
    """v_proj scaled up 1000x and o_proj down 1000x: the same forward in full precision, values up to 6800 that e4m3
    clips at 448: the measured loss clears zero, and the finding is an error carrying it."""
    from safetensors.torch import load_file, save_file

    d = tmp_copy(DRAFTS["sglang"], "big-values")
    sd = load_file(d / "model.safetensors")
    sd["midlayer.self_attn.v_proj.weight"] = sd["midlayer.self_attn.v_proj.weight"] * 1000
    sd["midlayer.self_attn.o_proj.weight"] = sd["midlayer.self_attn.o_proj.weight"] / 1000
    save_file(sd, d / "model.safetensors")
    (f,) = _fwd015(tmp_path, d, _sglang(d), "0.5.23")
    assert f["severity"] == "error" and f["data"]["peak"] > 448
    assert f["data"]["cost_interval"][1] < 0 and "within noise" not in " ".join(f["evidence"])


def test_no_fp8_in_the_launch_is_quiet(tmp_path):
    d = DRAFTS["sglang"]
    assert _fwd015(tmp_path, d, _sglang(d).replace("--kv-cache-dtype fp8_e4m3", ""), "0.5.23") == []


def test_the_rule_per_release_as_executed():
    assert first_with_key("vllm") == "0.26.0" and first_with_key("sglang") == "0.5.18"
    assert served_kv("vllm", "0.33.0", "fp8", None).dtype == "fp8_e4m3"  # "fp8" = e4m3 (vllm config/cache.py)
    assert served_kv("vllm", "0.33.0", "fp8", "auto").dtype == "model"
    assert served_kv("vllm", "0.25.1", "fp8", "auto").dtype == "fp8_e4m3"  # no such field there: ignored
    assert served_kv("vllm", "0.33.0-v2", "fp8_e5m2", None).per_runner == {"V2": "fp8_e5m2"}
    assert served_kv("sglang", "0.5.23", "fp8_e4m3", "bf16").dtype == "bfloat16"
    assert served_kv("sglang", "0.5.6", "auto", None).dtype == "model"
    assert served_kv("sglang", "0.5.23", "nvfp4", None) is None  # not executed: no reading
    assert served_kv("sglang", "0.4.3.post4", "fp8_e4m3", None) is None  # no EAGLE-3 draft model


def test_fp8_rounding_keeps_each_formats_bits_and_range():
    x = torch.tensor([1.0625, 3.3, 1000.0, -70000.0])
    assert fp8_round(x).tolist() == [1.0, 3.25, 448.0, -448.0]
    assert fp8_round(x, torch.float8_e5m2).tolist() == [1.0, 3.5, 1024.0, -57344.0]


@pytest.mark.parametrize("version", ["0.27.1", "0.33.0"])
def test_the_table_holds_vllms_proposer_re_executed_from_testdata(version):
    """The V1 proposer kept in conformance/testdata, executed again: its draft gets what the committed table says."""
    here = Path(__file__).resolve().parents[2] / "conformance"
    sys.path.insert(0, str(here))
    import kvdtype_exec

    fn, where = kvdtype_exec._vllm_runner(here / "testdata" / "vllm" / version, kvdtype_exec.V1, "_create_draft_vllm_config")
    row = table()["rows"][table()["release_rows"]["vllm"][version]["row"]]["served"]["V1"]
    for case, want in row.items():
        t, d = case.split("|")
        spec = type("Spec", (), {"kv_cache_dtype": None if d == "-" else d, "moe_backend": None, "attention_backend": None})
        got = fn(spec, kvdtype_exec._Vllm(kvdtype_exec._Sub(cache_dtype=t), kvdtype_exec._Sub(), kvdtype_exec._Sub()))
        assert kvdtype_exec.VLLM_NAMES.get(got, got) == want, (case, where)


@pytest.mark.parametrize(
    ("cmd", "target", "draft"),
    [
        ("python -m sglang.launch_server --model-path t --kv-cache-dtype fp8_e4m3", "fp8_e4m3", None),
        ("python -m sglang.launch_server --model-path t --kv-cache-dtype fp8_e5m2 --speculative-draft-kv-cache-dtype auto",
         "fp8_e5m2", "auto"),
        ("vllm serve t --kv-cache-dtype fp8 --speculative-config '{\"model\": \"d\", \"kv_cache_dtype\": \"auto\"}'", "fp8", "auto"),
        ("vllm serve t --kv-cache-dtype fp8 --speculative-config.model d --speculative-config.kv_cache_dtype bfloat16",
         "fp8", "bfloat16"),
        ("vllm serve t --speculative-config '{\"model\": \"d\"}'", None, None),
    ],
)  # fmt: skip
def test_the_launch_line_gives_both_kv_dtypes(cmd, target, draft):
    from eagle3_doctor.engines.launch import parse_serve_cmd

    sc = parse_serve_cmd(cmd)
    assert (sc.kv_cache_dtype, sc.draft_kv_cache_dtype) == (target, draft)
    assert "kv_cache_dtype" not in sc.ignored_flags


def test_the_flags_fwd015_reads_are_flags_of_the_release():
    """FWD015 reads the draft-only setting only where the release's draft runner has it (the KV-dtype table, executed),
    and every SGLang and vLLM release in that table registers the flags FWD015 then reads (the flag table, extracted
    from each wheel): no CMD003 of a launch ever names a flag FWD015 read (were one to, the CLI withholds FWD015)."""
    from eagle3_doctor.engines.draft_kv_dtype import DRAFT_KEY
    from eagle3_doctor.engines.flag_releases import absent_flags

    for engine in ("sglang", "vllm"):
        for version, at in table()["release_rows"][engine].items():
            reads = ["--kv-cache-dtype"] + ([DRAFT_KEY[engine].split()[0]] if at["key"] else [])
            assert absent_flags(engine, version, reads) == [], (engine, version)
    # and the other way: an SGLang release without the draft-only setting is one whose parser lacks its flag
    no_key = [v for v, at in table()["release_rows"]["sglang"].items() if not at["key"]]
    assert all(absent_flags("sglang", v, ["--speculative-draft-kv-cache-dtype"]) for v in no_key)


def test_every_release_with_a_draft_model_has_a_kv_dtype_row():
    """The releases the draft table executes a draft model for are the ones the KV-dtype table covers: no release
    with a draft falls outside FWD015's rule."""
    from eagle3_doctor.engines.draft_table import table as draft_table

    d = draft_table()
    for engine in ("sglang", "vllm"):
        with_draft = {v for v, i in d["release_rows"][engine].items() if "absent" not in d["rows"][i]["behaviour"]}
        assert sorted(table()["release_rows"][engine]) == sorted(with_draft)


def test_inspect_names_the_rule_and_leaves_the_cost_to_acceptance(tmp_path):
    """inspect runs no forward: the same launch gives a warning whose cost is undetermined, and the same fix."""
    d = DRAFTS["sglang"]
    out = tmp_path / "i.json"
    r = invoke("inspect", "-t", TARGET, "-d", d, "--serve-cmd", _sglang(d), "--json", out)
    (f,) = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "FWD015"]
    assert f["severity"] == "warning" and "cost undetermined, not measured: inspect runs no forward" in r.output
    assert f["fix"].startswith("launch with --speculative-draft-kv-cache-dtype auto")
    r = invoke("inspect", "-t", TARGET, "-d", d, "--serve-cmd", _sglang(d, "--speculative-draft-kv-cache-dtype auto"))
    assert "FWD015" not in r.output


def test_diagnose_names_the_same_cost_as_acceptance(tmp_path):
    """The finding is the same whichever measuring command prints it: diagnose adds it after its verdict, measured on
    the same prompts through the draft as served."""
    cmd = _vllm(DRAFTS["speculators"], {})
    (want,) = _fwd015(tmp_path, DRAFTS["speculators"], cmd, "0.33.0")
    out = tmp_path / "d.json"
    r = invoke("diagnose", "-t", TARGET, "-d", DRAFTS["speculators"], "--serve-cmd", cmd, "--engine-version", "0.33.0",
               *RUN, "--json", out)  # fmt: skip
    assert r.exit_code in (0, 1), r.output
    (got,) = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "FWD015"]
    assert (got["title"], got["evidence"], got["fix"]) == (want["title"], want["evidence"], want["fix"])
    assert "FWD015" in r.output
