"""A parallel drafter's mask token against the target's embedding, read from disk one row at a time: DRF014 where
the id has no row or its row is all zero (the fixture target's pad token), for DFlash and P-EAGLE alike."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from conftest import FIX, TARGET, invoke

from eagle3_doctor.analyses.mask_token import mask_token_findings
from eagle3_doctor.io.hub import embedding_row


def test_one_row_is_read_as_the_checkpoint_holds_it():
    from safetensors.numpy import load_file

    full = load_file(str(TARGET / "model.safetensors"))["model.embed_tokens.weight"]
    for t in (0, 1, 319):
        row, rows = embedding_row(TARGET, t)
        assert rows == full.shape[0] and np.array_equal(row, full[t].astype(np.float32))
    assert embedding_row(TARGET, 320) == (None, 320)


@pytest.mark.parametrize(("token", "severity"), [(1, None), (0, "warning"), (-1, "error"), (320, "error")])
def test_the_mask_token_needs_a_nonzero_row(token, severity):
    got = mask_token_findings(str(TARGET), token, "mask_token_id", "P-EAGLE draft")
    assert [f.severity for f in got] == ([severity] if severity else [])


def test_inspect_on_a_dflash_draft_whose_mask_token_is_the_pad_token(tmp_path):
    d = tmp_path / "dflash"
    shutil.copytree(FIX / "dflash-draft", d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["dflash_config"]["mask_token_id"] = 0
    (d / "config.json").write_text(json.dumps(cfg))
    r = invoke("inspect", "-t", TARGET, "-d", d, "--engine", "sglang")
    assert r.exit_code == 1 and "warning[DRF014]" in r.output and "dflash_config.mask_token_id = 0" in r.output, r.output
