"""The draft's own fingerprint: the trained capture points recovered from weights and target alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from conftest import DRAFTS, PROMPTS, ROOT, TARGET

from eagle3_doctor.analyses.fingerprint import UNDETERMINED, candidates, fingerprint, shifts
from eagle3_doctor.core.taps import embed, final_norm, layer_out

TRAINED = (layer_out(1), layer_out(3), layer_out(4))


def test_candidates_hold_every_one_layer_shift_and_the_seed_shift_both_ways():
    s = shifts(TRAINED, 8)
    assert (layer_out(0), layer_out(3), layer_out(4)) in s and (layer_out(2), layer_out(4), layer_out(5)) in s
    assert (layer_out(1), layer_out(4), layer_out(4)) not in s  # duplicates are no recipe
    assert shifts((embed(), layer_out(3), layer_out(7)), 8)[-1] == (layer_out(0), layer_out(4), final_norm())
    seed = (embed(), layer_out(1), layer_out(3))
    assert seed in candidates([TRAINED], 8)
    assert TRAINED in candidates([seed], 8)  # the incident's config leads back to what was trained


@pytest.fixture(scope="module")
def fp_fixture(setup_sglang):
    return fingerprint(setup_sglang, prompts_path=str(PROMPTS), limit=8, max_new_tokens=48)


def test_trained_spec_ranks_first_separated_from_every_one_layer_shift(fp_fixture):
    fp = fp_fixture
    top = fp.rows[0]
    assert top.spec == tuple(TRAINED) and top.trained and top.configured
    assert fp.verdict == ", ".join(str(p) for p in top.spec)
    for sh in shifts(TRAINED, 8):
        r = fp.row_for(sh)
        assert r is not None and r.diff_to_best.hi < 0, (sh, r)
    seed = fp.row_for((embed(), layer_out(1), layer_out(3)))
    narrowest = max(fp.row_for(sh).diff_to_best.lo for sh in shifts(TRAINED, 8))
    assert seed.diff_to_best.hi < -0.1 and seed.diff_to_best.hi < 10 * narrowest  # widely separated
    assert fp.settings["chance"]["above_chance"]
    # reproducible: the bootstrap is seeded
    assert fp.rows == fingerprint(fp_fixture_setup(), prompts_path=str(PROMPTS), limit=8, max_new_tokens=48).rows


def fp_fixture_setup():
    from eagle3_doctor.doctor import load_setup

    return load_setup(target=str(TARGET), draft=str(DRAFTS["sglang"]), engine="sglang", dtype="float32", device="cpu")


def test_random_weights_are_undetermined():
    s = fp_fixture_setup()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in s.draft.named_parameters():
            if p.dim() == 2 and "embed" not in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
    fp = fingerprint(s, prompts_path=str(PROMPTS), limit=8, max_new_tokens=48)
    assert fp.verdict == UNDETERMINED and not fp.determined
    assert not fp.settings["chance"]["above_chance"]


def test_cli_names_the_trained_spec_for_the_incident_config(tmp_path, tmp_copy):
    d = tmp_copy(DRAFTS["sglang"], "incident")
    cfg = json.loads((d / "config.json").read_text())
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [-1, 1, 3]
    (d / "config.json").write_text(json.dumps(cfg))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "eagle3_doctor.cli.app",
            "fingerprint",
            "--target",
            str(TARGET),
            "--draft",
            str(d),
            "--prompts",
            str(PROMPTS),
            "--limit",
            "8",
            "--max-new-tokens",
            "48",
            "-q",
            "--json",
            str(tmp_path / "f.json"),
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200"),
    )
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert "fingerprint: layer_out[1], layer_out[3], layer_out[4]" in r.stdout
    data = json.loads((tmp_path / "f.json").read_text())
    assert data["rows"][0]["spec"] == [str(p) for p in TRAINED]
    assert next(x for x in data["rows"] if x["configured"])["spec"] == ["embed", "layer_out[1]", "layer_out[3]"]


def test_the_tables_show_the_configured_row_wherever_it_ranks(fp_fixture):
    """A configured wiring ranked last (the seed incident's ranks 12th of 14): the summary's table still shows it,
    after a gap, beside the best rows."""
    import dataclasses
    import io

    from rich.console import Console

    from eagle3_doctor.analyses.fingerprint import fingerprint_markdown, render_fingerprint
    from eagle3_doctor.core.taps import format_spec

    n = len(fp_fixture.rows)
    assert n > 5
    rows = [dataclasses.replace(r, configured=i == n - 1) for i, r in enumerate(fp_fixture.rows)]
    fp = dataclasses.replace(fp_fixture, rows=rows)
    md = fingerprint_markdown(fp, top=3)
    ranks = [ln.split("|")[1].strip() for ln in md.splitlines() if ln.startswith("| ") and not ln.startswith("| rank")]
    assert ranks == ["1", "2", "3", "...", str(n)], ranks
    assert f"| {n} | {format_spec(rows[-1].spec)} |" in md and md.rstrip().endswith("configured |")
    buf = io.StringIO()
    render_fingerprint(Console(file=buf, width=200), fp, top=3)
    assert format_spec(rows[-1].spec) in buf.getvalue() and "..." in buf.getvalue()
