"""The DFlash rules (draft/dflash/taps.py served_taps) against the engines' own DFlash code, executed:
eagle3_doctor/draft/dflash/serving.json (written by `make conformance`, conformance/dflash_exec.py) and a
re-execution, here, of the release files kept in conformance/testdata/. No download."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "conformance"))
import dflash_exec  # noqa: E402
from releases import RELEASES  # noqa: E402

from eagle3_doctor.core.taps import format_spec  # noqa: E402
from eagle3_doctor.draft.dflash.taps import served_taps  # noqa: E402

TABLE = json.loads((ROOT / dflash_exec.PACKAGE_TABLE).read_text())
ROWS = {r["id"]: r for r in TABLE["rows"]}
TESTDATA = ROOT / "conformance" / "testdata"
# the releases served_taps models: the newest of each engine, and vLLM's V2 runner (eagle3_utils.py)
MODELLED = (("sglang", RELEASES["sglang"][-1], "default"), ("vllm", RELEASES["vllm"][-1], "v2"))


def outcome(engine: str, version: str, runner: str) -> dict[str, dict[str, str]]:
    return TABLE["outcomes"][ROWS[TABLE["release_rows"][engine][version][runner]]["outcome"]]


def test_every_listed_release_has_a_dflash_row():
    for engine in ("sglang", "vllm"):
        assert TABLE["releases"][engine] == RELEASES[engine], "releases.py changed: run `make conformance`"
        for v in RELEASES[engine]:
            for rid in TABLE["release_rows"][engine][v].values():
                assert v in ROWS[rid]["releases"]
    assert TABLE["grid"]["configs"] == list(dflash_exec.grid(8)), "the grid changed: run `make conformance`"


def test_dflash_support_starts_where_the_engines_added_it():
    first = {e: next(r["executed_from"] for r in TABLE["rows"] if r["engine"] == e and r["present"]) for e in ("sglang", "vllm")}
    assert first == {"sglang": "0.5.11", "vllm": "0.20.0"}
    assert outcome("sglang", "0.5.10.post1", "default")["32|dflash_config.target_layer_ids"]["taps"].startswith(
        "!start-up: no DFlash"
    )


@pytest.mark.parametrize(("engine", "version", "runner"), MODELLED)
def test_served_taps_is_what_the_newest_release_executes(engine, version, runner):
    table = outcome(engine, version, runner)
    for key, L, cfg in dflash_exec.cases():
        t = served_taps(engine, cfg, L)
        assert t is not None
        got = table[key]["taps"]
        if got.startswith("!"):
            assert t.spec is None, (key, got, t.source)
        else:
            assert t.spec is not None and format_spec(t.spec).replace(", ", ",") == got, (key, got, t.source)


def test_sglang_0_5_21_reexecuted_from_testdata_is_its_committed_row():
    # 0.5.21 is the row's executed_from: the outcomes carry its file:line
    rel = dflash_exec.SglangRelease(TESTDATA / "sglang" / "0.5.21", "0.5.21")
    row = ROWS[TABLE["release_rows"]["sglang"]["0.5.21"]["default"]]
    assert row["executed_from"] == "0.5.21" and row["id"] == f"sglang/default/{rel.key()}"
    assert dflash_exec.execute(rel, "default") == outcome("sglang", "0.5.21", "default")


def test_vllm_0_31_fc_reexecuted_from_testdata_is_its_committed_row():
    rel = dflash_exec.VllmRelease.fc_only(TESTDATA / "vllm" / "0.31.0", "0.31.0")
    assert ROWS[TABLE["release_rows"]["vllm"]["0.31.0"]["v2"]]["executed_from"] == "0.31.0"
    table = outcome("vllm", "0.31.0", "v2")
    assert {k: rel.fc_taps(cfg) for k, _, cfg in dflash_exec.cases()} == {k: v["fc"] for k, v in table.items()}


def test_the_executed_traps():
    # SGLang: a Qwen3 target has no capture after its last layer, so DFlash id L-1 is silently dropped
    assert outcome("sglang", "0.5.23", "default")["32|the deep end"] == {"taps": "layer_out[29],layer_out[30]", "fc": "3"}
    # SGLang 0.5.11-0.5.17: the draft's fc resolves the ids against num_target_layers or the draft's own depth
    assert (
        "out-of-range" in outcome("sglang", "0.5.11", "default")["32|dflash_config.target_layer_ids, no num_target_layers"]["fc"]
    )
    # vLLM 0.20-0.21 (V1): dflash_config.target_layer_ids read as EAGLE-3 ids, one layer early
    assert (
        outcome("vllm", "0.20.0", "v1")["32|dflash_config.target_layer_ids"]["taps"] == "layer_out[0],layer_out[14],layer_out[27]"
    )
    # vLLM V1 from 0.22: eagle_config's EAGLE-3 ids override the DFlash ids; V2 does not read them
    assert outcome("vllm", "0.33.0", "v1")["32|+ eagle_config ids copied"]["taps"] == "layer_out[0],layer_out[14],layer_out[27]"
    assert outcome("vllm", "0.33.0", "v2")["32|+ eagle_config ids copied"]["taps"] == "layer_out[1],layer_out[15],layer_out[28]"


def _release_string(engine: str, version: str, runner: str) -> str:
    """The --engine-version that launches ``runner``: vLLM's stock runner is V1 before 0.33.0, V2 from it."""
    if engine == "sglang":
        return version
    from eagle3_doctor.engines.table import vllm_runner

    return version if vllm_runner(version) == runner else f"{version}-{runner}"


def test_served_taps_is_what_every_release_executes():
    """Each release's reading, not only the newest: vLLM 0.20-0.21 read the DFlash ids one layer early, V1
    lets eagle_config override them from 0.22, V2 reads layer_ids from 0.27; a release without DFlash refuses."""
    from eagle3_doctor.core.errors import BadInput

    checked = 0
    for engine in ("sglang", "vllm"):
        for version in TABLE["releases"][engine]:
            for runner, rid in TABLE["release_rows"][engine][version].items():
                table = TABLE["outcomes"][ROWS[rid]["outcome"]]
                rel = _release_string(engine, version, runner)
                if not ROWS[rid]["present"]:
                    with pytest.raises(BadInput, match="does not serve DFlash drafts"):
                        served_taps(engine, {}, 8, rel)
                    continue
                for key, L, cfg in dflash_exec.cases():
                    t = served_taps(engine, cfg, L, rel)
                    assert t is not None and t.release == f"{engine} {rel}"
                    got = table[key]["taps"]
                    if got.startswith("!"):
                        assert t.spec is None, (rel, runner, key, got, t.source)
                    else:
                        assert t.spec is not None and format_spec(t.spec).replace(", ", ",") == got, (
                            rel,
                            runner,
                            key,
                            got,
                            t.source,
                        )
                    checked += 1
    assert checked > 1000
