"""SGLang's tree shape for what a launch leaves unset, per release: the committed table (written by
conformance/spec_defaults_exec.py from each release's own code), the rules the doctor applies held to every executed
case, and the release the user names deciding the defaults a run prints and measures."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import DRAFTS, ROOT, TARGET, invoke

from eagle3_doctor.engines.sglang_tree import TreeRules, resolve_shape, table, tree_rules

sys.path.insert(0, str(ROOT / "conformance"))
import spec_defaults_exec as harness  # noqa: E402
from releases import SGLANG  # noqa: E402

TESTDATA = ROOT / "conformance" / "testdata" / "sglang"


def _given(key: str) -> tuple:
    return tuple(None if x == "-" else int(x) for x in key.split("|"))


def test_every_release_has_its_own_row():
    assert list(table()["release_rows"]) == SGLANG, "releases.py changed: run `make conformance`"
    assert table()["cases"] == [harness.case_key(g) for g in harness.GIVEN]


def test_the_rules_reproduce_every_executed_case():
    """What the doctor applies for a release is what that release's code did, case by case and architecture by
    architecture (OTHER: a name no release lists)."""
    n = 0
    for v, at in table()["release_rows"].items():
        row = table()["rows"][at["row"]]
        rules = TreeRules.of(row, v, at["sources"])
        for key, per in row["cases"].items():
            for arch, want in per.items():
                got = resolve_shape(rules, _given(key), harness.OTHER if arch == "*" else arch)
                assert (got.error or ",".join("-" if x is None else str(x) for x in got.values)) == want, (v, key, arch)
                n += 1
        if row["auto"] is not None:  # the doctor's architectures, each as the unset launch ran for it
            unset = row["cases"]["-|-|-"]
            for arch in harness.ARCHS:
                assert row["auto"][arch] == unset.get(arch, unset.get("*", unset.get(harness.OTHER))), (v, arch)
    assert n > 72 * 12


# executed facts, spot-checked per release range: the architecture's pick when steps/topk/draft tokens are all unset
PICKS = [
    ("0.5.23", "LlamaForCausalLM", (5, 4, 8)),
    ("0.5.23", "Grok1ForCausalLM", (5, 4, 8)),
    ("0.5.23", "Qwen3ForCausalLM", (3, 1, 4)),
    ("0.5.23", "DeepseekV3ForCausalLM", (3, 1, 4)),
    ("0.5.8", "Qwen2ForCausalLM", (3, 1, 4)),  # from 0.5.8 an unlisted architecture gets (3, 1, 4)
    ("0.5.7", "Qwen2ForCausalLM", (5, 4, 8)),
    ("0.5.4", "Qwen3ForCausalLM", (5, 4, 8)),
    ("0.5.4", "GptOssForCausalLM", (3, 1, 4)),
    ("0.5.4", "DeepseekV3ForCausalLM", (3, 1, 4)),
    ("0.4.10", "GptOssForCausalLM", (5, 4, 8)),  # GPT-OSS joins the (3, 1, 4) list in 0.5.1
    ("0.4.7", "DeepseekV3ForCausalLM", (3, 1, 4)),
    ("0.4.6", "DeepseekV3ForCausalLM", (5, 4, 8)),  # every architecture (5, 4, 8) before 0.4.7
]


@pytest.mark.parametrize("release,arch,want", PICKS)
def test_picks_by_release(release, arch, want):
    rules = tree_rules(release)
    assert rules is not None
    got = resolve_shape(rules, (None, None, None), arch)
    assert got.values == want and set(got.how.values()) == {"auto"}, got


def test_older_releases_resolve_otherwise():
    # before the chooser (0.4.4.post3 and older) each field keeps its own ServerArgs default
    r = tree_rules("0.4.4.post3")
    assert r is not None and r.auto is None and r.defaults == (5, 4, 8)
    assert resolve_shape(r, (4, None, None), "LlamaForCausalLM").values == (4, 4, 8)
    # 0.4.4.post4-0.4.5.post3: the chooser reads ServerArgs.decrypted_config_file, which no release code defines
    r = tree_rules("0.4.5")
    assert r is not None
    got = resolve_shape(r, (None, None, None), "LlamaForCausalLM")
    assert got.error == "!AttributeError: 'ServerArgs' object has no attribute 'decrypted_config_file'"
    assert r.sources["raised"][got.error] == "sglang/srt/server_args.py:1319"
    # the topk-1 adjustment arrives in 0.4.5.post3
    assert resolve_shape(r, (4, 1, 16), None).values == (4, 1, 16)
    r = tree_rules("0.4.5.post3")
    assert r is not None and resolve_shape(r, (4, 1, 16), None).values == (4, 1, 5)
    assert tree_rules("0.5.24") is None and tree_rules("0.4.0") is None


@pytest.mark.parametrize("version", ["0.4.5", "0.5.23"])
def test_the_harness_reexecutes_the_kept_release_files(version):
    """conformance/spec_defaults_exec.py run now on the files kept in testdata/ (as released) gives the committed row
    and the release's own file:line."""
    rel = harness.Release(TESTDATA / version, version)
    cases = harness.outcomes(rel)
    at = table()["release_rows"][version]
    row = table()["rows"][at["row"]]
    assert cases == row["cases"]
    assert harness.rules(rel, cases) == {k: row[k] for k in harness.rules(rel, cases)}
    assert {**rel.sources, "raised": rel.raised} == at["sources"]


# --------------------------------------------------------------------------- through the CLI


@pytest.fixture(scope="module")
def qwen_target(tmp_path_factory) -> Path:
    """The fixture target declared a Qwen3 architecture: SGLang 0.5.23 and 0.5.4 pick different trees for it."""
    d = tmp_path_factory.mktemp("qwen") / "target"
    shutil.copytree(TARGET, d)
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "architectures": ["Qwen3ForCausalLM"]}))
    return d


def _cmd(target: Path) -> str:
    return (
        f"python -m sglang.launch_server --model-path {target} --speculative-algorithm EAGLE3 "
        f"--speculative-draft-model-path {DRAFTS['sglang']} --dtype float32"
    )


def _summary(output: str) -> list[str]:
    lines = output.splitlines()
    i = next(i for i, x in enumerate(lines) if x.startswith("serving config:"))
    return [lines[i]] + [x for x in lines[i + 1 :] if x.startswith("  note:")]


@pytest.mark.parametrize(
    "pin,shape,note",
    [
        ([], "steps 3, topk 1, draft tokens 4", None),
        (["--engine-version", "0.5.4"], "steps 5, topk 4, draft tokens 8", None),
        (["--engine-version", "0.5.24"], "steps None, topk None, draft tokens None", "defaults for SGLang 0.5.24 not extracted"),
        (["--engine-version", "0.4.5"], "steps None, topk None, draft tokens None", "SGLang 0.4.5 fails at start-up"),
    ],
)
def test_inspect_prints_the_named_releases_defaults(qwen_target, pin, shape, note):
    r = invoke("inspect", "--serve-cmd", _cmd(qwen_target), *pin)
    assert r.exit_code in (0, 1), r.output
    head, *notes = _summary(r.output)
    assert shape in head, head
    if note is None:
        assert not any("not extracted" in n or "fails at start-up" in n for n in notes), notes
    else:
        assert any(note in n for n in notes), notes


def test_acceptance_measures_the_named_releases_tree(qwen_target, tmp_path):
    """The tree the run measures is the one the named release serves: 0.5.4 gives a Qwen3 target (5, 4, 8), 0.5.23
    (3, 1, 4), each cited to that release's file."""
    out = tmp_path / "a.json"
    for version, want, where in (
        ("0.5.4", (5, 4, 8), "sglang/srt/server_args.py:3805-3833"),
        ("0.5.23", (3, 1, 4), "sglang/srt/arg_groups/speculative_hook.py:1430-1461"),
    ):
        r = invoke("acceptance", "--serve-cmd", _cmd(qwen_target), "--engine-version", version, "--limit", "1",
                   "--max-new-tokens", "8", "-q", "--json", out)  # fmt: skip
        assert r.exit_code in (0, 1), r.output
        s = json.loads(out.read_text())["settings"]
        assert (s["num_steps"], s["topk"], s["num_draft_tokens"]) == want, version
        assert f"SGLang {version} default for Qwen3ForCausalLM ({where}" in s["serve"]["sources"]["num_steps"]
