"""Every command's JSON on the fixtures, compared with its committed golden file (tools/gen_golden.py).

A change meant to alter an output regenerates the files (`python tools/gen_golden.py`) and shows the
difference in review; any other change, a refactor above all, must leave every case identical up to float round-off (figures under
gen_golden.ROUND_OFF are 0; a last digit may flip at a rounding boundary, gen_golden.close).
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
    got, want = json.loads(text), json.loads(golden)
    if text != golden and not gen.close(got, want):
        pytest.fail(
            f"{name}: output differs from tests/golden/{name}.json; first differing top-level keys: "
            f"{[k for k in want['result'] if got['result'].get(k) != want['result'].get(k)][:5]}, "
            f"exit {got['exit_code']} (golden {want['exit_code']}); regenerate only if the change is meant"
        )


def test_round_off_is_the_only_slack():
    """A last-digit flip and a round-off figure pass; a changed figure, key or code does not."""
    assert gen.close({"a": -0.0046344}, {"a": -0.0046345})
    assert not gen.close({"a": 0.25092}, {"a": 0.25192})
    assert not gen.close({"a": 1.0}, {"b": 1.0}) and not gen.close({"code": "ACC001"}, {"code": "ACC002"})
    assert not gen.close([1.0, 2.0], [1.0])
    row = gen._normalise({"rel_l2": 3.1e-07, "position": 72, "sequence": 2, "token": "e", "maxabs": 0.5}, "/t")
    assert row == {"rel_l2": 0.0, "position": None, "sequence": None, "token": None, "maxabs": 0.5}
    assert gen._normalise({"rel_l2": 0.25, "position": 72}, "/t") == {"rel_l2": 0.25, "position": 72}
