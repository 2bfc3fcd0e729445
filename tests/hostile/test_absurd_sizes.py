"""Sizes no machine holds are one line with the estimate and exit 2, never the allocator's exit 3: speedup's KV
cache at --batch-sizes 99999 --context 2^24 is refused from config.json before torch is imported (it was refused
only after the models had loaded, half a minute in), and torch's CPU allocator refusing a size mid-run is the
machine's limit, said as such, not "a bug in eagle3-doctor"."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import DRAFTS, PROMPTS, ROOT, TARGET, invoke


@pytest.mark.parametrize("device", ["cpu", "auto"])
def test_a_kv_cache_no_device_holds_is_refused_before_torch(device):
    argv = ["speedup", "-t", str(TARGET), "-d", str(DRAFTS["sglang"]), "--engine", "sglang", "--batch-sizes", "99999",
            "--context", str(2**24), "--device", device, "-q"]  # fmt: skip
    code = f"import sys; sys.argv = ['eagle3-doctor', *{argv!r}]\n"
    code += "from eagle3_doctor.cli.app import run\ntry:\n    run()\nexcept SystemExit as e:\n"
    code += "    print(e.code, 'torch' in sys.modules)\n"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert r.stdout.split() == ["2", "False"], (r.stdout, r.stderr[-2000:])
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "a KV cache of 99999 sequences x 16777216 positions needs at least 3,199,968 GiB" in lines[0]


def test_a_cache_that_fits_is_not_refused_by_the_estimate():
    from eagle3_doctor.cli.validate_files import check_cache_estimate

    check_cache_estimate({"target": str(TARGET), "batch_sizes": "1,8", "context": 2048, "device": "cpu"})


def test_the_cpu_allocator_refusing_a_size_is_exit_2_with_the_size(monkeypatch):
    import torch

    import eagle3_doctor.drafters.run as run

    def absurd(_run):
        return torch.empty((1 << 50,), dtype=torch.uint8)  # the allocator's own refusal, as a huge cache meets it

    monkeypatch.setattr(run, "load_models", absurd)
    r = invoke("speedup", "-t", TARGET, "-d", DRAFTS["sglang"], "--engine", "sglang", "--prompts", PROMPTS, "-q")
    assert r.exit_code == 2, r.output  # was exit 3, "a bug in eagle3-doctor"
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "out of host memory: the run asked for 1,048,576 GiB at once" in lines[0], r.stderr
