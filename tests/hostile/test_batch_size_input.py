"""diagnose's per-batch-size scrapes (--server-metrics FILE@N): every malformed one refused with one line and exit 2,
before a model is loaded; an '@' that is no batch size stays part of the file name."""

from __future__ import annotations

import shutil

import pytest
from conftest import DRAFTS, PROMPTS, SERVING, TARGET, invoke

from eagle3_doctor.cli.server_batches import split_batch
from eagle3_doctor.core.errors import BadInput

PROM, BEFORE, SGL = SERVING / "vllm-after-healthy.prom", SERVING / "vllm-before.prom", SERVING / "sglang-after-healthy.prom"


@pytest.mark.parametrize(
    "extra,says",
    [
        (["--server-metrics", f"{PROM}@0"], "batch size 0 is not a number of sequences"),
        (["--server-metrics", f"{PROM}@x"], "no such file, and '@x' is not a batch size"),
        (["--server-metrics", f"{SERVING}/missing.prom@8"], "missing.prom does not exist"),
        (["--server-metrics", f"{PROM}@1", "--server-metrics", str(PROM)], "some --server-metrics"),
        (["--server-metrics", f"{PROM}@1", "--server-metrics", f"{PROM}@1"], "names batch size 1 twice"),
        (["--server-metrics", str(PROM), "--server-metrics", str(PROM)], "given 2 times, none with a batch size"),
        (["--server-metrics", f"{PROM}@1", "--server-metrics-before", f"{BEFORE}@8"], "which no --server-metrics names"),
        (["--server-metrics", f"{PROM}@1", "--server-log", str(PROM)], "does not pair with FILE@N"),
        (["--server-metrics", f"{PROM}@1", "--server-metrics", f"{SGL}@8"], "from different engines"),
    ],
)
def test_a_malformed_batch_scrape_is_one_line(extra, says):
    r = invoke("diagnose", "-t", TARGET, "-d", DRAFTS["speculators"], "--engine", "vllm", "--prompts", PROMPTS, *extra)
    assert r.exit_code == 2, r.output
    assert r.output.startswith("eagle3-doctor: error:") and r.output.count("\n") == 1 and says in r.output, r.output


def test_the_json_written_over_a_batch_scrape_is_refused(tmp_path):
    scrape = tmp_path / "after.prom"
    shutil.copy(PROM, scrape)
    r = invoke("diagnose", "-t", TARGET, "-d", DRAFTS["speculators"], "--engine", "vllm", "--prompts", PROMPTS,
               "--server-metrics", f"{scrape}@8", "--json", scrape)  # fmt: skip
    assert r.exit_code == 2 and "is --server-metrics" in r.output, r.output
    assert scrape.read_text() == PROM.read_text()


def test_the_last_at_sign_followed_by_digits_is_the_batch_size():
    assert split_batch("runs/a@b/after.prom@16", "--server-metrics") == ("runs/a@b/after.prom", 16)
    assert split_batch("runs/a@b/after.prom", "--server-metrics") == ("runs/a@b/after.prom", None)
    assert split_batch("after@x", "--server-metrics") == ("after@x", None)
    with pytest.raises(BadInput, match="batch size 0"):
        split_batch("after.prom@0", "--server-metrics")
