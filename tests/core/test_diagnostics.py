"""Findings as located diagnostics, so CI and editors point at what to change: a structured Fix beside the text, a ` --> file: key`
location, and the edit applied by its key (never by parsing the sentence) removes the finding."""

from __future__ import annotations

import copy
import itertools
import json
import os
import pickle

import pytest
from conftest import DRAFTS, ROOT, TARGET, invoke
from rich.console import Console

from eagle3_doctor.analyses.compare.symbolic import diagnose_specs
from eagle3_doctor.analyses.inspect.inspection import inspect
from eagle3_doctor.core.findings import DRAFT_CONFIG, Finding, Fix, Location, config_fix
from eagle3_doctor.core.taps import embed, final_norm, layer_out
from eagle3_doctor.engines.releases import ENGINE_VERSIONS
from eagle3_doctor.engines.serving import resolve_serving
from eagle3_doctor.report.render import findings_markdown, render_findings

L = 8


def _render(findings) -> str:
    con = Console(record=True, width=200, color_system=None)
    render_findings(con, findings, "ok")
    return con.export_text()


def test_plain_text_fix_still_constructs_and_serialises():
    f = Finding("CAP006", "t", ["e"], "do this")
    assert f.fix == "do this" and f.edit is None and f.location is None and f.help is None
    d = f.to_dict()
    assert d["fix"] == "do this" and d["edit"] is None and d["location"] is None and d["help"] is None


def test_fix_is_its_text_and_carries_the_edit():
    fx = config_fix('set "rope_theta": 10000.0 in the draft config', "rope_theta", 10000.0)
    assert isinstance(fx, str) and fx.startswith("set") and json.dumps(fx) == json.dumps(str(fx))
    assert (fx.file, fx.key, fx.op, fx.value, fx.snippet) == (DRAFT_CONFIG, "rope_theta", "set", 10000.0, '"rope_theta": 10000.0')
    for other in (copy.deepcopy(fx), pickle.loads(pickle.dumps(fx))):
        assert isinstance(other, Fix) and other == fx and other.to_dict() == fx.to_dict()
    f = Finding("CFG003", "t", [], fx)
    assert f.location == Location(DRAFT_CONFIG, "rope_theta") and f.edit is fx
    assert f.to_dict()["edit"] == {
        "file": DRAFT_CONFIG,
        "key": "rope_theta",
        "op": "set",
        "value": 10000.0,
        "snippet": '"rope_theta": 10000.0',
        "path": None,
    }
    assert config_fix("nested", "eagle_config.norm_before_fc", True).snippet == '"eagle_config": {"norm_before_fc": true}'
    with pytest.raises(ValueError):
        Fix("x", file=DRAFT_CONFIG, op="move")


def test_location_is_rendered_rustc_style_between_title_and_evidence():
    f = diagnose_specs(
        (layer_out(1), layer_out(3), layer_out(4)), "trained", resolve_serving("sglang", None, "llama", L, {}, [-1, 1, 3])
    )[0]
    assert f.code == "CAP002"
    lines = _render([f]).splitlines()
    assert lines[0].startswith("error[CAP002]: ")
    assert lines[1] == " --> draft/config.json: eagle_config.eagle_aux_hidden_state_layer_ids"
    assert lines[2].startswith("   | ")
    md = findings_markdown([f])
    assert "`draft/config.json: eagle_config.eagle_aux_hidden_state_layer_ids`" in md
    assert '"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}' in md
    # help is its own line, after the fix
    h = Finding("CAP006", "t", ["e"], "the fix", help="why it helps")
    assert _render([h]).splitlines()[-3:-1] == ["   = fix: the fix", "   = help: why it helps"]


POINTS = [embed(), *(layer_out(i) for i in range(L)), final_norm()]


@pytest.mark.parametrize("engine", ["sglang", "vllm", "modelopt", "trtllm"])
def test_the_edit_applied_by_key_serves_what_was_trained(engine):
    """Write Fix.value under Fix.key -- all a tool applying it reads -- and the engine serves the trained spec.

    Every 3-point training spec (and its reverse) against a served [0, 1, 2]; the count of edits
    checked is asserted, so an empty fix finder fails."""
    checked = 0
    for version in ENGINE_VERSIONS[engine]:
        s = resolve_serving(engine, version, "llama", L, {}, [0, 1, 2])
        if s.failure is not None:
            continue
        for combo in itertools.combinations(POINTS, 3):
            for trained in (combo, combo[::-1]):
                if s.spec == trained:
                    continue
                for f in diagnose_specs(trained, "trained", s):
                    if not (f.code.startswith("CAP") and f.data.get("fix_ids")):
                        continue
                    e = f.edit
                    assert e is not None and f.location == e.location and e.op == "set" and e.value == f.data["fix_ids"]
                    if engine == "trtllm":  # the LLM API options file: the engine takes the list as given
                        assert (e.file, e.key) == ("extra_llm_api_options.yaml", "speculative_config.eagle3_layers_to_capture")
                        fixed = resolve_serving(engine, version, "llama", L, {}, e.value)
                    else:
                        assert e.file == DRAFT_CONFIG
                        fixed = resolve_serving(engine, version, "llama", L, {e.key: e.value})
                    assert fixed.spec == trained, (engine, version, e.to_dict())
                    checked += 1
    assert checked >= 40, (engine, checked)


def _apply(d, fix: Fix) -> None:
    """Apply a structured config edit to draft/config.json by its key (nested dicts for dots)."""
    assert fix.file == DRAFT_CONFIG
    c = json.loads((d / "config.json").read_text())
    *parents, last = fix.key.split(".")
    node = c
    for p in parents:
        node = node.setdefault(p, {})
    if fix.op == "delete":
        node.pop(last)
    else:
        node[last] = fix.value
    (d / "config.json").write_text(json.dumps(c))


def _edit_config(d, fn) -> None:
    c = json.loads((d / "config.json").read_text())
    fn(c)
    (d / "config.json").write_text(json.dumps(c))


def _nothing(c) -> None:
    pass


BREAKAGES = {  # draft format, engine, version, breakage, the code it raises
    "rope_theta": ("sglang", "sglang", None, lambda c: c.update(rope_theta=500000.0), "CFG003"),
    "architecture": ("sglang", "sglang", None, lambda c: c.update(architectures=["LlamaForCausalLM"]), "CFG007"),
    "unsorted ids": ("sglang", "vllm", None, lambda c: c.update(eagle_aux_hidden_state_layer_ids=[5, 2, 4]), "CFG002"),
    # vLLM's V1 runner reads the nested SGLang ids as vLLM ids: one layer early
    "ids read in another numbering": ("sglang", "vllm", "0.33.0-v1", _nothing, "CAP001"),
    "tied head": ("sglang", "sglang", None, lambda c: c.update(tie_word_embeddings=True), "FWD004"),
    "max positions": ("sglang", "sglang", None, lambda c: c.update(max_position_embeddings=64), "CFG004"),
}


@pytest.mark.parametrize("case", list(BREAKAGES))
def test_inspect_findings_carry_edits_that_remove_them(case, tmp_copy):
    fmt, engine, version, breakage, code = BREAKAGES[case]
    d = tmp_copy(DRAFTS[fmt])
    _edit_config(d, breakage)
    before = inspect(str(TARGET), str(d), engine=engine, engine_version=version)
    hit = [f for f in before.findings if f.code == code]
    assert hit, [f.code for f in before.findings]
    f = hit[0]
    assert f.edit is not None and f.location is not None and f.location.file == DRAFT_CONFIG, f.to_dict()
    _apply(d, f.edit)
    after = inspect(str(TARGET), str(d), engine=engine, engine_version=version)
    assert code not in [x.code for x in after.findings], [x.to_dict() for x in after.findings]


# --------------------------------------------------------------------------- the real files behind the roles


def test_locations_name_the_files_this_run_used(tmp_copy, tmp_path):
    """` --> ` names the --draft directory's own config.json; JSON keeps the role in `file`, the file in `path`."""
    d = tmp_copy(DRAFTS["sglang"])
    _edit_config(d, BREAKAGES["rope_theta"][3])
    out = tmp_path / "inspect.json"
    r = invoke("inspect", "-t", TARGET, "-d", d, "--json", out)
    assert r.exit_code == 1, r.output
    cfg = os.path.abspath(d / "config.json")
    assert f" --> {cfg}: rope_theta\n" in r.output, r.output
    f = next(x for x in json.loads(out.read_text())["findings"] if x["code"] == "CFG003")
    assert f["location"] == {"file": DRAFT_CONFIG, "key": "rope_theta", "path": cfg}
    assert (f["edit"]["file"], f["edit"]["path"]) == (DRAFT_CONFIG, cfg)


def test_role_paths_local_hub_shards_and_roles_without_a_file(tmp_path, monkeypatch):
    from eagle3_doctor.core.findings import DRAFT_WEIGHTS, REQUEST, SERVER_COMMAND, locate
    from eagle3_doctor.io.hub import role_paths

    serve = tmp_path / "serve.sh"
    serve.write_text("python -m sglang.launch_server --model-path org/target\n")
    draft = DRAFTS["sglang"]
    p = role_paths("org/target", str(draft), serve_config=str(serve))
    assert p == {
        "target/config.json": "org/target:config.json",
        DRAFT_CONFIG: os.path.abspath(draft / "config.json"),
        DRAFT_WEIGHTS: os.path.abspath(draft / "model.safetensors"),
        SERVER_COMMAND: os.path.abspath(serve),
    }
    # a hub draft, downloaded to a snapshot: the repository's files, not the cache's copies
    assert role_paths(draft="org/draft", draft_dir=str(draft)) == {
        DRAFT_CONFIG: "org/draft:config.json",
        DRAFT_WEIGHTS: "org/draft:model.safetensors",
    }
    shards = tmp_path / "sharded"
    shards.mkdir()
    for name in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        (shards / name).write_bytes(b"")
    assert role_paths(draft=str(shards))[DRAFT_WEIGHTS] == os.path.join(os.path.abspath(shards), "*.safetensors")

    fs = [
        Finding("CFG003", "t", [], config_fix("x", "rope_theta", 1.0)),
        Finding("TPL003", "t", [], Fix("x", file=REQUEST, key="messages[0]")),
        Finding("CAP006", "t", [], "text"),
    ]
    locate(fs, role_paths(draft=str(draft)))  # no --serve-config: no file for the launch command or a request
    assert str(fs[0].location) == f"{os.path.abspath(draft / 'config.json')}: rope_theta"
    assert fs[0].edit.path == fs[0].location.path and fs[0].location.file == DRAFT_CONFIG
    assert fs[1].location.path is None and str(fs[1].location) == "each chat request: messages[0]"
    assert fs[2].location is None
    # the terminal shows it as rustc and ruff do: relative to the working directory when below it
    monkeypatch.chdir(draft.parent.parent)
    assert _render(fs[:1]).splitlines()[1] == f" --> {draft.parent.name}/{draft.name}/config.json: rope_theta"
    monkeypatch.chdir(tmp_path)
    assert _render(fs[:1]).splitlines()[1] == f" --> {os.path.abspath(draft / 'config.json')}: rope_theta"
    assert f"`{os.path.abspath(draft / 'config.json')}: rope_theta`" in findings_markdown(fs[:1])


# --------------------------------------------------------------------------- explain CODE


def test_every_code_has_an_explanation_and_no_explanation_lacks_a_code():
    from eagle3_doctor.core.findings import CODES
    from eagle3_doctor.core.findings.registry import REGISTRY

    assert set(REGISTRY) == set(CODES), sorted(set(REGISTRY) ^ set(CODES))
    for code, r in REGISTRY.items():
        assert all(len(x) > 20 for x in (r.meaning, r.why, r.confirm)), code


def test_explain_prints_the_long_form():
    from eagle3_doctor.core.findings.registry import REGISTRY

    r = invoke("explain", "cap002")
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    assert out.startswith("CAP002 (error): the embeddings are fed")
    for part in ("What it means", "Why acceptance drops", "How to confirm"):
        assert part in out
    assert " ".join(REGISTRY["CAP002"].why.split()) in out


@pytest.mark.parametrize("typo,first", [("CAP02", "CAP002"), ("cap2", "CAP002"), ("TPL", "TPL001"), ("DRF01", "DRF001")])
def test_explain_unknown_code_is_one_line_naming_the_closest(typo, first):
    import subprocess
    import sys

    from conftest import ROOT

    r = subprocess.run(
        [sys.executable, "-m", "eagle3_doctor.cli.app", "explain", typo],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"eagle3-doctor: error: unknown finding code '{typo}'"), r.stderr
    assert f"did you mean {first}" in lines[0]


# --------------------------------------------------------------------------- one exit policy, severity order


def test_exit_code_is_the_one_policy():
    from eagle3_doctor.core.findings import exit_code

    info, warn, err = Finding("CAP010", "i"), Finding("CAP007", "w"), Finding("CAP001", "e")
    assert exit_code([]) == 0 and exit_code([info]) == 0
    assert exit_code([warn]) == 1 and exit_code([warn], "error") == 0 and exit_code([info], "info") == 1
    assert exit_code([err], "error") == 1
    # a threshold the user set fails at any fail_on, whatever its severity
    assert Finding("ACC003", "below").severity == "warning" and exit_code([Finding("ACC003", "below")], "error") == 1
    assert exit_code([info], "error", passed=False) == 1
    with pytest.raises(ValueError):
        exit_code([], "fatal")
    cli_src = (ROOT / "eagle3_doctor" / "cli" / "app.py").read_text()
    assert "EXIT_FINDINGS" not in cli_src  # no command keeps a policy of its own


def test_findings_are_rendered_errors_first():
    fs = [
        Finding("CAP010", "info one"),
        Finding("CAP001", "error one"),
        Finding("CAP007", "warning one"),
        Finding("CAP006", "error two"),
    ]
    text = _render(fs)
    heads = [ln.split(":")[0] for ln in text.splitlines() if ln[:1] in "eiw" and "[" in ln]
    assert heads == ["error[CAP001]", "error[CAP006]", "warning[CAP007]", "info[CAP010]"]
    md = findings_markdown(fs)
    assert md.index("CAP001") < md.index("CAP006") < md.index("CAP007") < md.index("CAP010")
    assert [f.code for f in fs] == ["CAP010", "CAP001", "CAP007", "CAP006"]  # the caller's list is not reordered


def test_gate_table_is_rendered_by_report():
    from eagle3_doctor.cli.gate import Check, GateResult
    from eagle3_doctor.cli.gate_policy import Policy
    from eagle3_doctor.report.render import render_gate

    res = GateResult(
        Policy(),
        [Check("no findings at or above error", 1.0, 0.0, False, "CAP001"), Check("min slot cosine", 0.99, 0.98, True)],
        [Finding("CAP001", "shifted", ["e"], "set ids")],
        {},
    )
    con = Console(record=True, width=200, color_system=None)
    render_gate(con, res)
    text = con.export_text()
    assert "gate: FAIL" in text and "FAIL CAP001" in text and "0.9900" in text and "pass" in text
    assert text.index("gate: FAIL") < text.index("error[CAP001]: shifted")
