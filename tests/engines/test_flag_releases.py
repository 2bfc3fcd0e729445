"""Which flags each release's parser accepts (data/serve_flag_releases.json, conformance/flags_exec.py), and the
CMD003 finding a launch gets for a flag the release it names lacks, through the CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import DRAFTS, TARGET, invoke

from eagle3_doctor.engines.flag_releases import _table, absent_flags, listed_release
from eagle3_doctor.engines.launch_args import flag_table
from eagle3_doctor.engines.releases import release_key

ROOT = Path(__file__).resolve().parents[2]
SG = (
    "python3 -m sglang.launch_server --model-path fixtures/target --speculative-algorithm EAGLE3 "
    "--speculative-draft-model-path fixtures/draft-sglang --speculative-num-steps 3 --speculative-eagle-topk 2 "
    "--speculative-num-draft-tokens 6 "
)


def _release_set(engine: str, release: str) -> set[str]:
    """The flag names of one release, rebuilt from the committed ranges."""
    data = _table()[engine]
    names = data["releases"]
    at = names.index(release)
    out = set()
    for flag, ranges in data["flags"].items():
        for r in ranges:
            a, _, b = r.partition("..")
            if names.index(a) <= at <= names.index(b or a):
                out.add(flag)
    return out


# Each row read in the releases' own files (the wheel members conformance/flags_exec.py keeps), around the edges:
# - sglang --speculative-draft-kv-cache-dtype: no such flag or field in 0.5.17's server_args.py; the ServerArgs
#   field `speculative_draft_kv_cache_dtype: A[...]` at server_args.py:2187 of 0.5.18, arg_groups/fields/ from 0.5.20
# - sglang --speculative-draft-model-revision: absent from 0.5.1.post3's server_args.py, add_argument in 0.5.2's
# - sglang --model (alias of --model-path): first in 0.4.8.post1's add_argument("--model-path", "--model", ...)
# - sglang --speculative-ngram-branch-length: in 0.5.3's to 0.5.9's server_args.py, in none before or after
# - vllm --headless: first in 0.9.0's entrypoints/cli/serve.py; -asc: first in 0.9.1's serve.py (--api-server-count)
# - vllm --disable-log-requests: arg_utils.py up to 0.16.0 (line 2088 there), gone from 0.17.0
# - vllm --guided-decoding-backend: literal to 0.10.2, then the deprecated-flag loop of 0.11.x, gone from 0.12.0
# - vllm --no-enforce-eager: 0.8.5 registers --enforce-eager with action='store_true' (arg_utils.py:639: no
#   negation), 0.9.0 through get_kwargs' BooleanOptionalAction for the bool field (arg_utils.py:477)
PINNED = [
    ("sglang", "--speculative-draft-kv-cache-dtype", ["0.5.18..0.5.23"]),
    ("sglang", "--speculative-draft-model-revision", ["0.5.2..0.5.23"]),
    ("sglang", "--model", ["0.4.8.post1..0.5.23"]),
    ("sglang", "--speculative-ngram-branch-length", ["0.5.3..0.5.9"]),
    ("vllm", "--headless", ["0.9.0..0.33.0"]),
    ("vllm", "-asc", ["0.9.1..0.33.0"]),
    ("vllm", "--disable-log-requests", ["0.8.4..0.16.0"]),
    ("vllm", "--guided-decoding-backend", ["0.8.4..0.11.2"]),
    ("vllm", "--no-enforce-eager", ["0.9.0..0.33.0"]),
]


@pytest.mark.parametrize(("engine", "flag", "ranges"), PINNED)
def test_rows_pinned_against_the_wheels(engine, flag, ranges):
    assert _table()[engine]["flags"][flag] == ranges


def test_store_true_flags_have_no_negation():
    """vllm 0.33.0 registers --disable-log-stats with action="store_true" (arg_utils.py:1920): argparse refuses
    --no-disable-log-stats, so neither the argument table nor any release's names hold it."""
    assert "--disable-log-stats" in flag_table()["vllm"]["flags"]
    assert "--no-disable-log-stats" not in flag_table()["vllm"]["flags"]
    assert "--no-disable-log-stats" not in _table()["vllm"]["flags"]


def test_every_tracked_release_extracted_and_no_call_left_unread():
    sys.path.insert(0, str(ROOT / "conformance"))
    from releases import RELEASES

    for engine in ("sglang", "vllm"):
        data = _table()[engine]
        assert data["releases"] == RELEASES[engine]
        assert set(data["wheels"]) == set(RELEASES[engine]) and data["not_extracted"] == {}
        assert data["unresolved"] == {}


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_the_newest_release_has_every_flag_of_the_argument_table(engine):
    """The table the command is read with is that release's: checked against itself, no flag is absent."""
    table = flag_table()[engine]
    assert _release_set(engine, table["version"]) == set(table["flags"])
    assert absent_flags(engine, table["version"], sorted(table["flags"])) == []


def test_extraction_reexecuted_on_a_release_as_shipped():
    """conformance/flags_exec.py run now on vllm 0.11.0's flag files as released (testdata/): the openai frontend's
    FrontendArgs fields, serve.py's own flags and the loop over deprecated flag names give the committed row."""
    sys.path.insert(0, str(ROOT / "conformance"))
    import flags_exec

    names, unresolved = flags_exec.release_flags("vllm", ROOT / "conformance" / "testdata" / "vllm" / "0.11.0")
    assert unresolved == []
    assert {"--guided-decoding-backend", "--headless", "-asc", "--speculative-config", "--host"} <= names
    assert names == _release_set("vllm", "0.11.0")


def test_absent_flags_names_the_first_release_and_removals():
    (a,) = absent_flags("sglang", "0.5.9", ["--model-path", "--speculative-draft-kv-cache-dtype"])
    assert (a.flag, a.release, a.first_after, a.last_before) == ("--speculative-draft-kv-cache-dtype", "0.5.9", "0.5.18", None)
    (gone,) = absent_flags("sglang", "0.5.10", ["--speculative-ngram-branch-length"])
    assert (gone.first_after, gone.last_before) == (None, "0.5.9")
    assert absent_flags("vllm", "0.33", ["--speculative-config"]) == []  # 0.33 names 0.33.0
    assert listed_release("sglang", "0.5.24") is None and absent_flags("sglang", "0.5.24", ["--model"]) is None


def test_cli_names_the_absent_flag_and_its_first_release(tmp_path):
    out = tmp_path / "i.json"
    cmd = SG + "--speculative-draft-kv-cache-dtype bfloat16"
    r = invoke("inspect", "--serve-cmd", cmd, "--engine-version", "0.5.9", "--json", out)
    assert r.exit_code == 1, r.output
    (f,) = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "CMD003"]
    assert f["severity"] == "error"
    assert f["title"].startswith("--speculative-draft-kv-cache-dtype is not a flag of sglang 0.5.9")
    assert "upgrade to sglang >= 0.5.18" in f["fix"] and "drop --speculative-draft-kv-cache-dtype" in f["fix"]
    assert f["data"]["first_release_with_it"] == "0.5.18"
    assert "sglang 0.5.9 (its flags read by 0.5.23's argument table, checked against 0.5.9's own flag names)" in r.output


def test_cli_vllm_flag_of_a_later_release(tmp_path):
    out = tmp_path / "i.json"
    cmd = (
        "vllm serve fixtures/target --headless --speculative-config "
        '\'{"method": "eagle3", "model": "fixtures/draft-speculators", "num_speculative_tokens": 3}\''
    )
    r = invoke("inspect", "--serve-cmd", cmd, "--engine-version", "0.8.5", "--json", out)
    assert r.exit_code == 1, r.output
    (f,) = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "CMD003"]
    assert f["data"]["flag"] == "--headless" and f["data"]["first_release_with_it"] == "0.9.0"


def test_cli_newest_release_no_finding_and_untracked_release_said(tmp_path):
    out = tmp_path / "i.json"
    cmd = SG + "--speculative-draft-kv-cache-dtype bfloat16"
    for version in (None, "0.5.23", "0.5.18"):
        extra = ["--engine-version", version] if version else []
        r = invoke("inspect", "--serve-cmd", cmd, *extra, "--json", out)
        assert r.exit_code in (0, 1), r.output
        assert "CMD003" not in [f["code"] for f in json.loads(out.read_text())["findings"]]
    r = invoke("inspect", "--serve-cmd", cmd, "--engine-version", "0.5.24", "--json", out)
    assert "note: flags of sglang 0.5.24 not extracted" in r.output
    assert "CMD003" not in [f["code"] for f in json.loads(out.read_text())["findings"]]


def test_cli_release_from_the_image_tag(tmp_path):
    """No --engine-version: the release the image tag names is checked, as the run measures it, and the summary
    says so as it does for a release named with --engine-version."""
    out = tmp_path / "i.json"
    cmd = "docker run --gpus all lmsysorg/sglang:v0.5.4-cu126 " + SG + "--speculative-draft-kv-cache-dtype bfloat16"
    r = invoke("inspect", "--serve-cmd", cmd, "--json", out)
    assert r.exit_code == 1, r.output
    (f,) = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "CMD003"]
    assert f["data"]["release"] == "0.5.4" and f["data"]["first_release_with_it"] == "0.5.18"
    assert "sglang 0.5.4 (its flags read by 0.5.23's argument table, checked against 0.5.4's own flag names)" in r.output


def _lines(output: str) -> list[str]:
    return [x.strip() for x in output.splitlines() if x.startswith(("serving config:", "  note:", "eagle3-doctor: error"))]


def test_cli_one_release_for_the_launch(tmp_path):
    """An image of one release and --engine-version naming another: the run's release is the one every line names,
    the summary, the image's note, CMD003 and the run's document alike (the image's own is not checked)."""
    out = tmp_path / "i.json"
    cmd = "docker run lmsysorg/sglang:v0.5.4-cu126 " + SG + "--speculative-draft-kv-cache-dtype bfloat16"
    r = invoke("inspect", "--serve-cmd", cmd, "--engine-version", "0.5.9", "--json", out)
    assert r.exit_code == 1, r.output
    head, note = _lines(r.output)
    assert head.startswith("serving config: sglang 0.5.9 (its flags read by 0.5.23's argument table, checked against 0.5.9's")
    assert note == "note: image lmsysorg/sglang:v0.5.4-cu126: the sglang 0.5.9 rules apply, as --engine-version names"
    doc = json.loads(out.read_text())
    (f,) = [f for f in doc["findings"] if f["code"] == "CMD003"]
    assert f["data"]["release"] == doc["engine_release"] == "0.5.9"
    # --engine naming another engine: the launch runs its own release (the image's), checked as such
    r = invoke("inspect", "--serve-cmd", cmd, "--engine", "vllm", "--json", out)
    assert r.exit_code == 1, r.output
    assert _lines(r.output)[0].startswith("serving config: sglang 0.5.4 (its flags read by 0.5.23's argument table, checked")
    (f,) = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "CMD003"]
    assert f["data"]["release"] == "0.5.4"


def test_cli_refusal_names_the_release_the_run_names():
    """A measured setting's flag that no release registers is refused naming the release the launch runs, where that
    release's flag names were extracted; else the argument table's, the newest whose names are known to lack it."""
    cmd = SG + "--speculative-eagle-top-k 4"
    for pin, named in ((["--engine-version", "0.5.9"], "0.5.9"), ([], "0.5.23"), (["--engine-version", "0.5.24"], "0.5.23")):
        r = invoke("inspect", "--serve-cmd", cmd, *pin)
        assert r.exit_code == 2, r.output
        assert f"--speculative-eagle-top-k is not a sglang {named} flag: the server refuses to start on it" in r.output
    r = invoke("inspect", "--serve-cmd", "vllm serve fixtures/target --speculative-model d", "--engine-version", "0.8.5")
    assert r.exit_code == 2 and "--speculative-model is not a vllm 0.8.5 flag" in r.output, r.output


# a launch with three findings besides the flag 0.5.17 lacks (--speculative-draft-kv-cache-dtype, from 0.5.18): CMD001
# (the token map), CMD002 (spec v2 with a tree) and FWD015 (an fp8 target KV cache the draft takes)
BESIDE = (
    "SGLANG_ENABLE_SPEC_V2=1 " + SG + "--kv-cache-dtype fp8_e4m3 --speculative-token-map hot.pt "
    "--speculative-draft-kv-cache-dtype auto"
)


def _by_code(out: Path) -> dict[str, dict]:
    return {f["code"]: f for f in json.loads(out.read_text())["findings"]}


def test_cli_launch_findings_on_other_flags_fire_beside_cmd003(tmp_path):
    """CMD003 withholds only what reads the flag the release lacks: FWD015 reads --kv-cache-dtype alone on 0.5.17
    (that release's draft runner has no draft-only setting), so it stands beside CMD003 with CMD001 and CMD002."""
    out = tmp_path / "i.json"
    r = invoke("inspect", "--serve-cmd", BESIDE, "--engine-version", "0.5.17", "--json", out)
    assert r.exit_code == 1, r.output
    found = _by_code(out)
    assert {"CMD001", "CMD002", "CMD003", "FWD015"} <= set(found)
    assert found["CMD003"]["data"]["flag"] == "--speculative-draft-kv-cache-dtype"
    assert found["FWD015"]["data"]["launch_flags"] == ["--kv-cache-dtype"]
    assert not any("withheld" in e for e in found["CMD003"]["evidence"])


def test_cli_finding_that_reads_a_flag_the_release_lacks_is_withheld(tmp_path, monkeypatch):
    """No tracked release lacks a flag a launch finding reads (test_served_kv_dtype pins FWD015's); the rule is the
    general one, so it is shown on a release table where --speculative-token-map first comes in 0.5.18: under
    0.5.17 CMD003 names it, CMD001 (which reads it) is withheld and said so, the findings on other flags stand."""
    from eagle3_doctor.engines import flag_releases

    table = json.loads(json.dumps(_table()))
    table["sglang"]["flags"]["--speculative-token-map"] = ["0.5.18..0.5.23"]
    monkeypatch.setattr(flag_releases, "_table", lambda: table)
    out = tmp_path / "i.json"
    r = invoke("inspect", "--serve-cmd", BESIDE, "--engine-version", "0.5.17", "--json", out)
    assert r.exit_code == 1, r.output
    found = _by_code(out)
    assert "CMD001" not in found and {"CMD002", "FWD015"} <= set(found)
    (cmd,) = [f for f in json.loads(out.read_text())["findings"] if f["data"].get("flag") == "--speculative-token-map"]
    assert "CMD001 withheld: it reads --speculative-token-map as a server started with it would" in cmd["evidence"]
    assert "warning[CMD001]" not in r.output and "error[CMD003]: --speculative-token-map" in r.output


def test_cli_flag_an_older_release_had(tmp_path):
    """A flag the newest table lacks but older releases register is not refused as a misspelling: the release the
    run names decides (0.5.3..0.5.9 register --speculative-ngram-branch-length, verified in the wheels above)."""
    cmd = SG + "--speculative-ngram-branch-length 12"
    found = {}
    for version in ("0.5.9", None, "0.5.2"):
        out = tmp_path / f"i-{version}.json"
        r = invoke("inspect", "--serve-cmd", cmd, *(["--engine-version", version] if version else []), "--json", out)
        assert r.exit_code in (0, 1), r.output
        found[version] = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "CMD003"]
    assert found["0.5.9"] == []
    (now,) = found[None]
    assert now["data"]["last_release_before_with_it"] == "0.5.9" and "no later sglang release has it" in now["fix"]
    (early,) = found["0.5.2"]
    assert "run a sglang release from 0.5.3 to 0.5.9" in early["fix"]


# Values read in the releases' own files: sglang 0.5.3's server_args.py:1624 lists --kv-cache-dtype
# ["auto", "fp8_e5m2", "fp8_e4m3"]; 0.5.4's adds "bf16" and "bfloat16" (server_args.py:1983); 0.5.23's
# arg_groups/fields/model.py:197 has no plain "fp8"; --dtype's list is the same literal in every release.
def test_choices_rows_pinned_against_the_wheels():
    rows = {tuple(e["releases"]): e for e in _table()["sglang"]["choices"]["--kv-cache-dtype"]}
    assert rows[("0.4.3.post4..0.5.3.post3",)]["choices"] == ["auto", "fp8_e5m2", "fp8_e4m3"]
    assert rows[("0.4.3.post4..0.5.3.post3",)]["source"] == "sglang/srt/server_args.py:1624"
    assert rows[("0.5.4..0.5.4.post2",)]["choices"] == ["auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16"]
    assert "fp8" not in next(e for e in rows.values() if "0.5.23" in e["releases"][-1])["choices"]
    (dtype,) = _table()["sglang"]["choices"]["--dtype"]
    assert dtype["releases"] == ["0.4.3.post4..0.5.23"] and "bfloat16" in dtype["choices"]
    vllm = _table()["vllm"]["choices"]
    assert {"--speculative-config.method", "--dtype", "--kv-cache-dtype"} <= set(vllm)


# Read in vLLM's own files: 0.10.0's config/cache.py:52 CacheDType has no "bfloat16", 0.11.0's (cache.py:53) adds it;
# 0.33.0 annotates cache_dtype `CacheDType | str` (cache.py:235), so get_kwargs gives a metavar, not choices, and a
# validator of its own checks the value; --dtype is config/model.py's ModelDType `| torch.dtype` (choices) throughout.
def test_vllm_choices_rows_pinned_against_the_wheels():
    rows = {tuple(e["releases"]): e for e in _table()["vllm"]["choices"]["--kv-cache-dtype"]}
    assert "bfloat16" not in rows[("0.10.0..0.10.2",)]["choices"] and "bfloat16" in rows[("0.11.0",)]["choices"]
    assert rows[("0.11.0",)]["source"] == "vllm/config/cache.py:53"
    assert not any("0.33.0" in r[-1] for r in rows)  # a metavar there: not checked
    (dtype,) = _table()["vllm"]["choices"]["--dtype"]
    assert dtype["releases"] == ["0.8.4..0.33.0"] and "bfloat16" in dtype["choices"]


def test_vllm_choices_extraction_reexecuted_on_a_release_as_shipped():
    """conformance/flags_exec.py's vLLM choices run now on 0.11.0's arg_utils.py and config/cache.py as released
    (testdata/): the committed row, at 0.11.0, of every flag it reads there (the config classes not kept are skipped)."""
    sys.path.insert(0, str(ROOT / "conformance"))
    import flags_exec

    got = flags_exec.vllm_literal_choices(ROOT / "conformance" / "testdata" / "vllm" / "0.11.0")
    data = _table()["vllm"]
    at = data["releases"].index("0.11.0")
    for flag, (names, _) in got.items():
        (row,) = [e for e in data["choices"][flag] if any(
            data["releases"].index(r.partition("..")[0]) <= at <= data["releases"].index(r.partition("..")[2] or r)
            for r in e["releases"])]  # fmt: skip
        assert names == row["choices"], flag
    assert "--kv-cache-dtype" in got


# Read in the releases' own files: vLLM 0.9.0's SpeculativeConfig is a stdlib dataclass (config.py) whose method Literal
# lacks eagle3 while its code compares `self.method in ('eagle', 'eagle3')`; 0.9.1 imports pydantic's dataclass
# (vllm/config/__init__.py); 0.20.0 adds DFlashModelTypes = Literal["dflash"]; 0.33.0's Literal has no "peagle".
def test_vllm_method_rows_pinned_against_the_wheels():
    rows = {tuple(e["releases"]): e for e in _table()["vllm"]["choices"]["--speculative-config.method"]}
    old = rows[("0.9.0..0.9.0.1",)]
    assert old["validated"] is False and "eagle3" in old["choices"] and old["source"].startswith("vllm/config.py:")
    assert rows[("0.8.4",)]["validated"] is False and "eagle3" not in rows[("0.8.4",)]["choices"]
    first = next(e for e in rows.values() if e["releases"][0].startswith("0.9.1"))
    assert first["validated"] is True and "eagle3" in first["choices"]
    dflash = [e["releases"] for e in rows.values() if "dflash" in e["choices"]]
    assert dflash and all(release_key(r[0].split("..")[0]) >= release_key("0.20.0") for r in dflash)
    newest = next(e for e in rows.values() if e["releases"][-1].endswith("0.33.0"))
    assert {"eagle3", "mtp", "dflash"} <= set(newest["choices"]) and "peagle" not in newest["choices"]


@pytest.mark.parametrize("version", ["0.9.0", "0.18.0"])
def test_vllm_method_extraction_reexecuted_on_a_release_as_shipped(version):
    """conformance/flags_exec.py's reading of SpeculativeConfig.method run now on the files as released (testdata/):
    the committed row of that release, its validation included."""
    sys.path.insert(0, str(ROOT / "conformance"))
    import flags_exec

    ((names, source, validated),) = flags_exec.vllm_method_choices(ROOT / "conformance" / "testdata" / "vllm" / version).values()
    data = _table()["vllm"]
    at = data["releases"].index(version)
    (row,) = [e for e in data["choices"]["--speculative-config.method"]
              if any(data["releases"].index(r.partition("..")[0]) <= at <= data["releases"].index(r.partition("..")[2] or r)
                     for r in e["releases"])]  # fmt: skip
    assert (names, validated) == (row["choices"], row["validated"]) and validated == (version == "0.18.0")


def test_refused_values_of_the_vllm_method():
    from eagle3_doctor.engines.flag_releases import refused_values

    m = "--speculative-config.method"
    (r,) = refused_values("vllm", "0.33.0", {m: "EAGLE3"})
    assert (r.refused, r.spelled, r.takes_it) == (True, "eagle3", [])
    (r,) = refused_values("vllm", "0.9.0", {m: "EAGLE3"})
    assert (r.refused, r.spelled) == (False, "eagle3")  # compared exactly, not validated: the server starts
    assert refused_values("vllm", "0.9.0", {m: "eagle3"}) == []
    (r,) = refused_values("vllm", "0.19.1", {m: "dflash"})
    assert r.refused and r.takes_it[0].startswith("0.20.0")
    (r,) = refused_values("vllm", "0.8.4", {m: "eagle3"})
    assert not r.refused  # 0.8.4 handles no eagle3: it detects a method from the draft


def test_cli_a_vllm_value_the_release_refuses(tmp_path):
    """The user's path on vLLM: --dtype BFloat16 is refused by every tracked release (fix: bfloat16); --kv-cache-dtype
    bf16 (SGLang's spelling) by 0.11.0, whose choices are CacheDType's; 0.33.0 takes any string there (a metavar)."""
    spec = json.dumps({"method": "eagle3", "model": str(DRAFTS["speculators"]), "num_speculative_tokens": 3})
    cmd = f"vllm serve {TARGET} --speculative-config '{spec}' "
    out = tmp_path / "i.json"
    r = invoke("inspect", "--serve-cmd", cmd + "--dtype BFloat16", "--json", out)
    (f,) = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "CMD006"]
    assert r.exit_code == 1 and (f["edit"]["key"], f["edit"]["value"]) == ("--dtype", "bfloat16"), r.output
    invoke("inspect", "--serve-cmd", cmd + "--kv-cache-dtype bf16", "--engine-version", "0.11.0", "--json", out)
    (f,) = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "CMD006"]
    assert "fp8_e4m3" in f["fix"] and f["data"]["source"] == "vllm/config/cache.py:53"
    invoke("inspect", "--serve-cmd", cmd + "--kv-cache-dtype bf16", "--json", out)
    assert "CMD006" not in [f["code"] for f in json.loads(out.read_text())["findings"]]


def test_cli_a_vllm_method_in_the_wrong_case(tmp_path):
    """The user's path: "method": "EAGLE3" in --speculative-config. vLLM 0.9.1 on validate the field against its
    Literal (refused at start-up, CMD006); 0.9.0 compares it exactly and detects a method from the draft (CMD007);
    both fixes set "eagle3" by the key the edit names."""
    spec = json.dumps({"method": "EAGLE3", "model": str(DRAFTS["speculators"]), "num_speculative_tokens": 3})
    cmd = f"vllm serve {TARGET} --speculative-config '{spec}'"
    out = tmp_path / "i.json"
    for version, code in ((None, "CMD006"), ("0.9.0", "CMD007")):
        r = invoke("inspect", "--serve-cmd", cmd, *(["--engine-version", version] if version else []), "--json", out)
        (f,) = [f for f in json.loads(out.read_text())["findings"] if f["code"] in ("CMD006", "CMD007")]
        assert r.exit_code == 1 and f["code"] == code and f["severity"] == "error", r.output
        assert (f["edit"]["key"], f["edit"]["value"]) == ("--speculative-config.method", "eagle3")
    r = invoke("inspect", "--serve-cmd", cmd.replace("EAGLE3", "eagle3"), "--json", out)
    assert not [f for f in json.loads(out.read_text())["findings"] if f["code"] in ("CMD006", "CMD007")], r.output


def test_choices_extraction_reexecuted_on_a_release_as_shipped():
    """conformance/flags_exec.py's choices run now on sglang 0.4.5's server_args.py as released (testdata/): the
    committed row of every flag at 0.4.5, and nothing the table does not hold."""
    sys.path.insert(0, str(ROOT / "conformance"))
    import flags_exec

    got = flags_exec.release_choices(ROOT / "conformance" / "testdata" / "sglang" / "0.4.5")
    at = _table()["sglang"]["releases"].index("0.4.5")
    want = {}
    for flag, entries in _table()["sglang"]["choices"].items():
        for e in entries:
            for r in e["releases"]:
                a, _, b = r.partition("..")
                if _table()["sglang"]["releases"].index(a) <= at <= _table()["sglang"]["releases"].index(b or a):
                    want[flag] = e["choices"]
    assert {f: c for f, (c, _) in got.items()} == want and "--kv-cache-dtype" in want


def test_refused_values_name_the_choice_and_the_releases_that_take_it():
    from eagle3_doctor.engines.flag_releases import refused_values

    (r,) = refused_values("sglang", "0.5.3", {"--kv-cache-dtype": "bf16", "--dtype": "float32", "--host": "0.0.0.0"})
    assert (r.flag, r.value, r.takes_it, r.spelled) == ("--kv-cache-dtype", "bf16", ["0.5.4..0.5.23"], None)
    assert refused_values("sglang", "0.5.4", {"--kv-cache-dtype": "bf16"}) == []
    (case,) = refused_values("sglang", "0.5.23", {"--dtype": "BFloat16"})
    assert case.spelled == "bfloat16" and case.takes_it == []
    assert refused_values("sglang", "0.5.24", {"--dtype": "bf16"}) is None  # not extracted: nothing said


def test_cli_a_value_the_release_refuses(tmp_path):
    """The user's path: --kv-cache-dtype fp8 (vLLM's spelling) on SGLang is refused by every tracked release's parser;
    bf16 only before 0.5.4; a name in the wrong case gets the exact name as its fix."""
    out = tmp_path / "i.json"
    r = invoke("inspect", "--serve-cmd", SG + "--kv-cache-dtype fp8", "--json", out)
    assert r.exit_code == 1, r.output
    (f,) = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "CMD006"]
    assert f["severity"] == "error" and f["title"].startswith("--kv-cache-dtype fp8 is not a value sglang 0.5.23 takes")
    assert "fp8_e4m3" in f["fix"] and "no tracked sglang release takes 'fp8'" in f["evidence"]
    r = invoke("inspect", "--serve-cmd", SG + "--kv-cache-dtype bf16", "--engine-version", "0.5.3", "--json", out)
    (f,) = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "CMD006"]
    assert "0.5.4..0.5.23" in f["fix"]
    r = invoke("inspect", "--serve-cmd", SG + "--kv-cache-dtype bf16", "--engine-version", "0.5.4", "--json", out)
    assert "CMD006" not in [f["code"] for f in json.loads(out.read_text())["findings"]]
    r = invoke("inspect", "--serve-cmd", SG + "--dtype Float32", "--json", out)
    (f,) = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "CMD006"]
    assert (f["edit"]["key"], f["edit"]["value"]) == ("--dtype", "float32") and "error[CMD006]" in r.output


def test_a_refused_value_withholds_what_reads_that_flag():
    """A finding that reads a flag (its launch_flags) describes a server started with that flag's value; where CMD006 says
    the release refuses the value, that server never runs: the finding is withheld and CMD006 says so, as for CMD003."""
    from eagle3_doctor.core.findings import LAUNCH_FLAGS, Finding
    from eagle3_doctor.engines.launch import launch_findings, parse_serve_cmd, without_refused_flags

    sc = parse_serve_cmd(SG + "--kv-cache-dtype fp8", named=("sglang", "0.5.17"))
    (cmd,) = [f for f in launch_findings(sc, "0.5.17") if f.code == "CMD006"]
    reads = Finding("FWD015", "reads the KV dtype", [], "x", data={LAUNCH_FLAGS: ["--kv-cache-dtype"]})
    other = Finding("FWD015", "reads another flag", [], "x", data={LAUNCH_FLAGS: ["--dtype"]})
    assert without_refused_flags([cmd, reads, other], "sglang") == [cmd, other]
    assert "FWD015 withheld: it reads --kv-cache-dtype as a server started with it would" in cmd.evidence


def test_a_fix_that_sets_a_flag_the_release_lacks_says_so():
    """The general guard behind QNT001's release-aware fix: a fix written with the newest release's flags, followed under
    an older one, would stop that server; every fix that sets a launch flag the run's release lacks names the upgrade
    in its text and evidence; one under a release that has the flag, a deletion, or a config key are left as they are."""
    from eagle3_doctor.core.findings import DRAFT_CONFIG, SERVER_COMMAND, Finding, Fix
    from eagle3_doctor.engines.launch import fixes_within_release

    def finding(key: str, op: str = "set", file: str = SERVER_COMMAND) -> Finding:
        return Finding("FWD015", "t", [], Fix(f"add {key} bfloat16", file=file, key=key, value="bfloat16", op=op))

    new, gone, kept, deleted, config = (finding("--speculative-draft-kv-cache-dtype"), finding("--speculative-ngram-branch-length"),
                                        finding("--kv-cache-dtype"), finding("--speculative-draft-kv-cache-dtype", "delete"),
                                        finding("--speculative-draft-kv-cache-dtype", file=DRAFT_CONFIG))  # fmt: skip
    fixes_within_release([new, gone, kept, deleted, config], "sglang", "0.5.9")
    assert new.fix.endswith("(upgrade to sglang >= 0.5.18: sglang 0.5.9 has no --speculative-draft-kv-cache-dtype)")
    assert new.fix.key == "--speculative-draft-kv-cache-dtype" and new.fix.value == "bfloat16"  # the edit is kept
    assert any("not a flag of sglang 0.5.9" in e for e in new.evidence)
    assert gone.fix == "add --speculative-ngram-branch-length bfloat16" and not gone.evidence  # 0.5.9 has it
    assert [f.fix for f in (kept, deleted, config)] == ["add --kv-cache-dtype bfloat16"] + [
        "add --speculative-draft-kv-cache-dtype bfloat16"
    ] * 2
    fixes_within_release([gone], "sglang", "0.5.23")
    assert "no later sglang release has it" in gone.fix


def test_a_fix_that_sets_a_value_the_release_refuses_says_so():
    """The same guard over values, through CMD006's lists: a fix setting a value the run's release does not take (bf16
    before SGLang 0.5.4; eagle3 as vLLM 0.8.4's method, which that release does not act on) names the releases that
    take it; the same fix under a release that takes the value is left as it is."""
    from eagle3_doctor.core.findings import SERVER_COMMAND, Finding, Fix
    from eagle3_doctor.engines.launch import fixes_within_release

    def finding(key: str, value: str) -> Finding:
        return Finding("FWD015", "t", [], Fix(f"set {key} {value}", file=SERVER_COMMAND, key=key, value=value))

    old, new = finding("--kv-cache-dtype", "bf16"), finding("--kv-cache-dtype", "bf16")
    fixes_within_release([old], "sglang", "0.5.3")
    fixes_within_release([new], "sglang", "0.5.4")
    assert old.fix.endswith("(run sglang 0.5.4..0.5.23: sglang 0.5.3 does not take 'bf16' there)") and old.fix.value == "bf16"
    assert any("is not a value sglang 0.5.3 takes" in e for e in old.evidence)
    assert new.fix == "set --kv-cache-dtype bf16" and not new.evidence
    method = finding("--speculative-config.method", "eagle3")
    fixes_within_release([method], "vllm", "0.8.4")
    assert "vllm 0.8.4 does not take 'eagle3' there" in method.fix


def test_no_healthy_verdict_beside_a_launch_that_never_starts(tmp_path):
    """The launch's own findings join a command's list after the kind's judgment; one that stops the server (a value
    its parser refuses) withdraws the healthy verdict there, as a failed gate does, with or without a gate."""
    spec = json.dumps({"method": "eagle3", "model": str(DRAFTS["speculators"]), "num_speculative_tokens": 3})
    cmd = f"vllm serve {TARGET} --speculative-config '{spec}' "
    args = ["--prompts", ROOT / "fixtures" / "prompts.jsonl", "--limit", "6", "--max-new-tokens", "24"]
    r = invoke("acceptance", "--serve-cmd", cmd + "--scheduling-policy FCFS", *args, "--json", tmp_path / "a.json")
    assert [f["code"] for f in json.loads((tmp_path / "a.json").read_text())["findings"]] == ["CMD006"], r.output
    r = invoke("acceptance", "--serve-cmd", cmd + "--scheduling-policy fcfs", *args, "--json", tmp_path / "b.json")
    assert [f["code"] for f in json.loads((tmp_path / "b.json").read_text())["findings"]] == ["HLT002"], r.output


@pytest.mark.parametrize("draft", ["speculators", "dflash"])
def test_no_diagnose_says_healthy_offline_beside_a_launch_that_never_starts(tmp_path, draft):
    """The launch's error is the verdict where the measurements found the draft healthy (Run.amend_verdict, called by
    every kind's diagnose): the branch, the verdict line and the findings say the same thing, EAGLE-3 or DFlash."""
    path = DRAFTS["speculators"] if draft == "speculators" else ROOT / "fixtures" / "dflash-draft"
    spec = json.dumps(
        {"method": "eagle3" if draft == "speculators" else "dflash", "model": str(path), "num_speculative_tokens": 3}
    )
    cmd = f"vllm serve {TARGET} --speculative-config '{spec}' --scheduling-policy FCFS"
    args = ["--prompts", ROOT / "fixtures" / "prompts.jsonl", "--limit", "6", "--max-new-tokens", "24"]
    r = invoke("diagnose", "--serve-cmd", cmd, *args, "--json", tmp_path / "d.json")
    doc = json.loads((tmp_path / "d.json").read_text())
    assert doc["verdict"].startswith("the gap lives in the pipeline") and "(CMD006: " in doc["verdict"], r.output
    assert [f["code"] for f in doc["findings"]] == ["CMD006"] and r.exit_code == 1, r.output
