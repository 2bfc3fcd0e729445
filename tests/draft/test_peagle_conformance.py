"""The P-EAGLE serving rules (draft/peagle/served.py peagle_serving) against vLLM's own reading of a P-EAGLE
config, executed release by release: eagle3_doctor/draft/peagle/serving.json (written by `make conformance`,
conformance/peagle_exec.py) and a re-execution, here, of the release files kept in conformance/testdata/."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "conformance"))
import peagle_exec  # noqa: E402
from releases import RELEASES  # noqa: E402

from eagle3_doctor.draft.peagle.served import peagle_serving  # noqa: E402
from eagle3_doctor.draft.peagle.table import case_info  # noqa: E402

TABLE = json.loads((ROOT / peagle_exec.PACKAGE_TABLE).read_text())
TESTDATA = ROOT / "conformance" / "testdata"


def _row(version: str) -> dict:
    return next(r for r in TABLE["rows"] if version in r["releases"])


def test_every_listed_release_has_a_row_and_the_cases_are_the_harness_own():
    assert TABLE["releases"] == RELEASES["vllm"], "releases.py changed: run `make conformance`"
    assert sum(len(r["releases"]) for r in TABLE["rows"]) == len(RELEASES["vllm"])
    assert TABLE["cases"] == peagle_exec.cases(), "the cases changed: run `make conformance`"


@pytest.mark.parametrize("version", RELEASES["vllm"])
def test_peagle_serving_is_what_each_release_executes(version):
    outcome = _row(version)["outcome"]
    for name, cfg in TABLE["cases"].items():
        got, ran = peagle_serving("vllm", version, case_info(cfg)), outcome[name]
        if ran["mode"] == "absent":  # the reader before 0.16.0 has another shape: not executed, the rule refuses the type
            continue
        assert got.mode == ran["mode"], (version, name, got, ran)
        if ran["mode"] == "refused":
            assert ran["error"].split(":")[0] in ("ValueError", "KeyError") and ran["error"].split(": ", 1)[1][:12] in got.why
        else:
            assert got.k == ran["k"]
            if ran["token"] is not None:
                assert got.mask_token_id == ran["token"], (version, name)


def test_the_release_boundaries_the_rules_name_are_the_executed_ones():
    first = {n: next(r["executed_from"] for r in TABLE["rows"] if r["outcome"][n]["mode"] == "parallel")
             for n in ("peagle", "mask_token_id in transformer_layer_config")}  # fmt: skip
    assert first == {"peagle": "0.22.0", "mask_token_id in transformer_layer_config": "0.22.0"}
    tokens = {r["executed_from"]: r["outcome"]["mask_token_id in transformer_layer_config"].get("token") for r in TABLE["rows"]}
    assert tokens["0.22.0"] == 1 and tokens["0.28.0"] == 7  # from 0.28.0 the proposer reads mask_token_id first


@pytest.mark.parametrize("version", ["0.21.0", "0.27.1", "0.33.0"])
def test_the_kept_release_files_execute_to_the_committed_rows(version):
    r = peagle_exec.reader(TESTDATA / "vllm" / version)
    got = {n: peagle_exec._short(peagle_exec.read_config(r, c)) for n, c in peagle_exec.cases().items()}
    assert got == _row(version)["outcome"]


def test_a_reader_of_another_shape_is_said_to_have_moved(tmp_path: Path):
    src = TESTDATA / "vllm" / "0.33.0"
    moved = tmp_path / "vllm" / "transformers_utils" / "configs" / "speculators"
    moved.mkdir(parents=True)
    (moved / "algos.py").write_text((src / peagle_exec.ALGOS).read_text())
    (moved / "base.py").write_text("class SpeculatorsConfig:\n    pass\n")
    with pytest.raises(peagle_exec.PeagleCodeMoved, match="not found"):
        peagle_exec.reader(tmp_path)
