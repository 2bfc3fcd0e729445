"""The drafter registry: each shipped checkpoint is recognised as its kind, once, in the order stated; and a fifth
kind appended to the registry runs every command through the CLI with no CLI file touched, its options honoured
or refused by what it declares."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import FIX, PROMPTS, TARGET, invoke

from eagle3_doctor.drafters import registry
from eagle3_doctor.drafters.kind import Command, Kind, Outcome

SHIPPED = {"draft-sglang": "eagle3", "draft-speculators": "eagle3", "draft-eagle": "eagle3", "mtp-speculators": "mtp",
           "dflash-draft": "dflash", "peagle-draft": "peagle"}  # fmt: skip


@pytest.mark.parametrize("folder", sorted(SHIPPED))
def test_every_shipped_draft_is_its_kind(folder):
    assert registry.kind_of(FIX / folder)[0].name == SHIPPED[folder]


def test_the_registry_holds_each_kind_once_and_eagle3_last():
    names = [k.name for k in registry.kinds()]
    assert sorted(names) == ["dflash", "eagle3", "mtp", "peagle"] and len(set(names)) == len(names)
    assert names[-1] == "eagle3"  # it answers for every checkpoint: anything after it would never be reached


def test_detection_reads_the_draft_once_per_command(monkeypatch, tmp_path):
    """kind_of is asked once per measuring command (it was asked three or four times per EAGLE-3 run)."""
    calls = []
    real = registry.kind_of
    monkeypatch.setattr(registry, "kind_of", lambda d: calls.append(d) or real(d))
    r = invoke("inspect", "-t", TARGET, "-d", FIX / "dflash-draft", "--engine", "vllm", "--json", tmp_path / "o.json")
    assert r.exit_code in (0, 1), r.output
    assert len(calls) == 1, calls


def _stub_kind(seen: list[str]) -> Kind:
    def impl(command: str):
        def run(r) -> Outcome:
            seen.append(command)
            found: list = []
            doc = lambda: {"stub": command, "num_steps": r.opt("num_steps"), "findings": [f.title for f in found]}  # noqa: E731
            return Outcome(found, doc, lambda con: con.print(f"stub {command}"), served=(1.5, 0.5))

        return run

    cmds = {c: Command(impl(c), frozenset({"num_steps", "min_tau"} if c == "acceptance" else set()))
            for c in ("inspect", "compare-hidden", "acceptance", "diagnose", "fix")}  # fmt: skip
    return Kind("stub", "stub drafts", "a stub draft", lambda cfg, _n: "a stub config" if cfg.get("stub_drafter") else None, cmds)


@pytest.fixture
def stub_draft(monkeypatch, tmp_path):
    seen: list[str] = []
    kinds = registry.kinds()
    monkeypatch.setattr(registry, "_KINDS", [_stub_kind(seen), *kinds])
    d = tmp_path / "stub"
    shutil.copytree(FIX / "dflash-draft", d)
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "stub_drafter": True}))
    return d, seen


@pytest.mark.parametrize("command", ["inspect", "compare-hidden", "acceptance", "diagnose", "fix"])
def test_a_fifth_kind_runs_every_command_with_no_cli_file_edited(stub_draft, tmp_path, command):
    d, seen = stub_draft
    args = [command, "-t", TARGET, "-d", d, "--engine", "vllm", "--json", tmp_path / "o.json"]
    args += [] if command == "inspect" else ["--prompts", PROMPTS]
    args += ["--out", tmp_path / "fixed"] if command == "fix" else []
    r = invoke(*args)
    assert r.exit_code == 0 and f"stub {command}" in r.stdout, r.output
    assert json.loads((tmp_path / "o.json").read_text())["stub"] == command and seen == [command]


def test_the_fifth_kinds_options_are_honoured_or_refused(stub_draft, tmp_path):
    d, seen = stub_draft
    base = ["-t", TARGET, "-d", d, "--prompts", PROMPTS, "--json", tmp_path / "o.json"]
    r = invoke("acceptance", *base, "--num-steps", "3", "--min-tau", "2")
    assert (tmp_path / "o.json").exists(), r.output
    doc = json.loads((tmp_path / "o.json").read_text())
    # honoured: the option reached the kind, and the shared gate read the kind's served figure (1.5 < 2)
    assert r.exit_code == 1 and doc["num_steps"] == 3 and doc["findings"] == ["tau 1.500 is below --min-tau 2.0"], r.output
    r = invoke("diagnose", *base, "--num-steps", "3")
    assert r.exit_code == 2 and "--num-steps is not supported for stub drafts" in r.output and seen == ["acceptance"], r.output
