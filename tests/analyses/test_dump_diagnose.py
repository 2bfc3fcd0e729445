"""diagnose on an engine's own capture with only the draft loaded reaches the loaded run's verdict: the same serving
figures, the same module-health verdicts, the same branch, for a healthy draft and for one broken in its checkpoint.
The dumps are written by SGLang 0.5.23's own dumper code (conformance/dump_writers.py), over two ranks."""

from __future__ import annotations

import sys

import pytest
from conftest import DRAFTS, PROMPTS, ROOT, TARGET, engine_capture

from eagle3_doctor.analyses.acceptance.options import AcceptanceOptions
from eagle3_doctor.analyses.attribution.from_dump import diagnose_from_dump
from eagle3_doctor.analyses.attribution.measure import diagnose_gap
from eagle3_doctor.doctor import load_setup

sys.path.insert(0, str(ROOT / "conformance"))
from dump_writers import write_sglang_dump  # noqa: E402

OPTS = AcceptanceOptions(num_steps=4, max_new_tokens=32, limit=6, batch_size=6)


def _broken(tmp_path):
    """The fixture draft with its lm_head rows permuted: a converter's head-layout slip, no skill left."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    d = tmp_path / "broken"
    shutil.copytree(DRAFTS["sglang"], d)
    state = load_file(str(d / "model.safetensors"))
    key = next(k for k in state if k.endswith("lm_head.weight"))
    state[key] = state[key][torch.randperm(state[key].shape[0], generator=torch.Generator().manual_seed(0))].contiguous()
    save_file(state, str(d / "model.safetensors"))
    return d


@pytest.mark.parametrize("case", ["healthy", "broken"])
def test_dump_only_diagnosis_reaches_the_loaded_verdict(tmp_path, case):
    draft = DRAFTS["sglang"] if case == "healthy" else _broken(tmp_path)
    setup = load_setup(target=str(TARGET), draft=str(draft), engine="sglang", dtype="float32", device="cpu")
    loaded = diagnose_gap(setup, OPTS, prompts_path=str(PROMPTS))
    prompts, seqs, aux = engine_capture(setup, OPTS)
    write_sglang_dump(tmp_path / "dump", seqs, aux, ranks=2)
    dump = diagnose_from_dump(str(draft), str(tmp_path / "dump"), OPTS, prompt_ids=prompts, target=str(TARGET))
    assert dump.branch == loaded.branch, (dump.verdict, loaded.verdict)
    assert dump.serving == loaded.serving  # the serving path's mean acceptance length and its interval
    assert [(m.module, m.verdict) for m in dump.modules] == [(m.module, m.verdict) for m in loaded.modules]
    # mean ablation averages a module's output over every row of the batch, padding included: the loaded replay's
    # padding rows are the target's states of pad tokens, the dump's zeros, so the ablated figures are close, not equal
    for a, b in zip(dump.modules, loaded.modules):
        assert b.step1.lo - 0.01 <= a.step1.point <= b.step1.hi + 0.01
    codes = [f.code for f in dump.findings]
    assert codes == [f.code for f in loaded.findings]
    assert dump.branch == ("runtime" if case == "healthy" else "checkpoint")
    if case == "healthy":
        hlt = next(f for f in dump.findings if f.code == "HLT002")
        assert any("the weights' own fit" in e and "not looked at" in e for e in hlt.evidence)
