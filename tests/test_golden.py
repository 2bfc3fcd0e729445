"""Every command's JSON on the fixtures, compared with its committed golden file (tools/gen_golden.py).

A change meant to alter an output regenerates the files (`python tools/gen_golden.py`) and shows the
difference in review; any other change, a refactor above all, must leave every case byte-identical.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
from conftest import ROOT

_spec = importlib.util.spec_from_file_location("gen_golden", ROOT / "tools" / "gen_golden.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)


def test_every_command_that_writes_json_has_a_case():
    from eagle3_doctor.cli.app import app

    cmds = {c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands}
    # explain prints prose only; speedup's figures are timed on the machine that runs it
    without_json = {"explain", "speedup"}
    covered = {argv[0] for _, argv in gen.CASES}
    assert cmds - without_json - covered == set()


@pytest.mark.parametrize("name,argv", gen.CASES, ids=[n for n, _ in gen.CASES])
def test_output_matches_its_golden_file(name, argv):
    golden = (gen.GOLDEN / f"{name}.json").read_text()
    _, text = gen.run_case(argv)
    if text != golden:
        got, want = json.loads(text), json.loads(golden)
        pytest.fail(
            f"{name}: output differs from tests/golden/{name}.json; first differing top-level keys: "
            f"{[k for k in want['result'] if got['result'].get(k) != want['result'].get(k)][:5]}, "
            f"exit {got['exit_code']} (golden {want['exit_code']}); regenerate only if the change is meant"
        )
