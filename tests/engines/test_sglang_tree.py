"""SGLang's tree shape for what a launch leaves unset, per release and per --speculative-algorithm: the committed table
(written by conformance/spec_defaults_exec.py from each release's own code), the rules the doctor applies held to every
executed case, and the release and algorithm the user names deciding the settings a run prints, measures and reports
(CMD004 where the release does not start)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import DRAFTS, ROOT, TARGET, invoke

from eagle3_doctor.engines.sglang_tree import (
    UNREADABLE,
    DflashRules,
    Refused,
    TreeRules,
    dflash_block,
    resolve_dflash,
    resolve_shape,
    table,
    tree_rules,
)

sys.path.insert(0, str(ROOT / "conformance"))
import spec_defaults_exec as harness  # noqa: E402
from releases import SGLANG  # noqa: E402

TESTDATA = ROOT / "conformance" / "testdata" / "sglang"


def _given(key: str) -> tuple:
    return tuple(None if x == "-" else int(x) for x in key.split("|"))


def _shape(got) -> str:
    return got.error or ",".join("-" if x is None else str(x) for x in got.values)


def test_every_release_has_its_own_entry():
    assert list(table()["release_rows"]) == SGLANG, "releases.py changed: run `make conformance`"
    assert table()["cases"] == [harness.case_key(g) for g in harness.GIVEN]
    assert table()["dflash_cases"] == [harness.dflash_key(g) for g in harness.DFLASH_GIVEN]
    for at in table()["release_rows"].values():
        assert set(at["algorithms"]) == {*harness.ALGORITHMS, harness.ALIAS}


def test_the_rules_reproduce_every_executed_case():
    """What the doctor applies for a release and algorithm is what that release's code did, case by case and
    architecture by architecture (OTHER: a name no release lists), and for DFLASH draft by draft."""
    n = 0
    for v, at in table()["release_rows"].items():
        for algo, a in at["algorithms"].items():
            if "row" not in a:
                continue
            row = table()["rows"][a["row"]]
            if row["handler"] == "dflash":
                rules = tree_rules(v, algo)
                assert isinstance(rules, DflashRules)
                for key, per in row["cases"].items():
                    head, draft = key.split("@")
                    s, t, k, b = _given(head)
                    got = resolve_dflash(rules, (s, t, k), b, dflash_block(harness.DFLASH_DRAFTS[draft]))
                    assert _shape(got) == per["*"], (v, key)
                    n += 1
                continue
            rules = TreeRules.of(row, v, at["sources"])
            for key, per in row["cases"].items():
                for arch, want in per.items():
                    got = resolve_shape(rules, _given(key), harness.OTHER if arch == "*" else arch)
                    assert _shape(got) == want, (v, algo, key, arch)
                    n += 1
            if row["auto"] is not None:  # the doctor's architectures, each as the unset launch ran for it
                unset = row["cases"]["-|-|-"]
                for arch in harness.ARCHS:
                    assert row["auto"][arch] == unset.get(arch, unset.get("*", unset.get(harness.OTHER))), (v, arch)
    assert n > 72 * 12 * 2 + 13 * 72


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
    assert isinstance(r, TreeRules) and r.auto is None and r.defaults == (5, 4, 8)
    assert resolve_shape(r, (4, None, None), "LlamaForCausalLM").values == (4, 4, 8)
    # 0.4.4.post4-0.4.5.post3: the chooser reads ServerArgs.decrypted_config_file, which no release code defines
    r = tree_rules("0.4.5")
    assert isinstance(r, TreeRules)
    got = resolve_shape(r, (None, None, None), "LlamaForCausalLM")
    assert got.error == "!AttributeError: 'ServerArgs' object has no attribute 'decrypted_config_file'"
    assert r.sources["raised"][got.error] == "sglang/srt/server_args.py:1319"
    # the topk-1 adjustment arrives in 0.4.5.post3
    assert resolve_shape(r, (4, 1, 16), None).values == (4, 1, 16)
    r = tree_rules("0.4.5.post3")
    assert isinstance(r, TreeRules) and resolve_shape(r, (4, 1, 16), None).values == (4, 1, 5)
    assert tree_rules("0.5.24") is None and tree_rules("0.4.0") is None


def test_steps_without_topk_crashes_from_0_5_2():
    """--speculative-num-steps without --speculative-eagle-topk leaves topk None; from 0.5.2 the page-size check after
    the topk-1 adjustment opens with ``speculative_eagle_topk > 1`` and raises (0.5.23: speculative_hook.py:1274, the
    line the real 0.5.23 server's traceback names); up to 0.5.1 the release's argument handling runs."""
    for v in ("0.5.2", "0.5.8", "0.5.23"):
        r = tree_rules(v)
        assert isinstance(r, TreeRules)
        got = resolve_shape(r, (4, None, None), "LlamaForCausalLM")
        assert got.error == "!TypeError: '>' not supported between instances of 'NoneType' and 'int'", v
        assert got.cause == "topk_unset"
        assert resolve_shape(r, (4, 1, None), "LlamaForCausalLM").values == (4, 1, 5)
    r = tree_rules("0.5.23")
    assert (
        isinstance(r, TreeRules) and r.sources["raised"][r.topk_unset_error] == "sglang/srt/arg_groups/speculative_hook.py:1274"
    )
    r = tree_rules("0.5.1")
    assert isinstance(r, TreeRules) and r.topk_unset_error is None
    assert resolve_shape(r, (4, None, None), "LlamaForCausalLM").values == (4, None, None)


# what each release does with DFLASH, executed: steps and topk forced to 1, the draft tokens from the block-size flag,
# the launch, the draft's config (dflash_config.block_size first) or 16
DFLASH_CASES = [
    ((None, None, None), None, 4, (1, 1, 4)),
    ((5, 4, None), None, 4, (1, 1, 4)),
    ((None, None, 16), None, 4, (1, 1, 16)),
    ((None, None, None), 8, 4, (1, 1, 8)),
    ((None, None, None), None, None, (1, 1, 16)),
]


@pytest.mark.parametrize("release", ["0.5.11", "0.5.13", "0.5.14", "0.5.23"])
def test_dflash_takes_its_own_defaults(release):
    r = tree_rules(release, "DFLASH")
    assert isinstance(r, DflashRules)
    for given, flag, block, want in DFLASH_CASES:
        assert resolve_dflash(r, given, flag, block).values == want, (given, flag, block)
    got = resolve_dflash(r, (None, None, 16), 8, 4)
    assert got.error is not None and got.error.startswith("!ValueError: Both --speculative-num-draft-tokens and")
    assert resolve_dflash(r, (None, None, None), None, UNREADABLE).needs_draft
    assert dflash_block({"block_size": 4, "dflash_config": {"block_size": 6}}) == 6
    assert dflash_block({"dflash_config": {}}) is None and dflash_block(None) == UNREADABLE


def test_which_names_each_release_takes():
    """The parser's own choices, executed: DFLASH from 0.5.11, STANDALONE from 0.5.2, EAGLE3 from 0.4.4.post2; NEXTN is
    the release's EAGLE; STANDALONE's chooser picks (3, 1, 4) whatever the target."""
    r = tree_rules("0.5.4", "DFLASH")
    assert isinstance(r, Refused) and r.error == (
        "!argparse: argument --speculative-algorithm: invalid choice: 'DFLASH' "
        "(choose from 'EAGLE', 'EAGLE3', 'NEXTN', 'STANDALONE', 'NGRAM')"
    )
    assert r.sources["parser"] == "sglang/srt/server_args.py:2412"
    assert isinstance(tree_rules("0.5.1.post3", "STANDALONE"), Refused)
    assert isinstance(tree_rules("0.4.4.post1", "EAGLE3"), Refused) and isinstance(tree_rules("0.4.4.post2", "EAGLE3"), TreeRules)
    for v in ("0.5.2", "0.5.23"):
        r = tree_rules(v, "STANDALONE")
        assert isinstance(r, TreeRules) and resolve_shape(r, (None, None, None), "LlamaForCausalLM").values == (3, 1, 4)
    for v, at in table()["release_rows"].items():
        assert at["algorithms"]["NEXTN"] == {"as": "EAGLE"}, v
        assert at["algorithms"]["EAGLE"] == at["algorithms"]["EAGLE3"] or "refused" in at["algorithms"]["EAGLE3"], v
    assert tree_rules("0.5.23", "NGRAM") is None  # not executed: the doctor fills nothing


@pytest.mark.parametrize("version", ["0.4.5", "0.5.23"])
def test_the_harness_reexecutes_the_kept_release_files(version):
    """conformance/spec_defaults_exec.py run now on the files kept in testdata/ (as released) gives the committed rows,
    every algorithm's, and the release's own file:line."""
    rel = harness.Release(TESTDATA / version, version)
    rows: list = []
    entry = harness.release_entry(rel, rows)
    at = table()["release_rows"][version]
    assert entry["sources"] == at["sources"]
    for algo, a in entry["algorithms"].items():
        if "row" not in a:
            assert a == at["algorithms"][algo], algo
            continue
        mine, committed = rows[a["row"]], table()["rows"][at["algorithms"][algo]["row"]]
        assert {k: v for k, v in mine.items() if k != "releases"} == {k: v for k, v in committed.items() if k != "releases"}


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


# --------------------------------------------------------------------------- DFLASH on the user's path


DFLASH_DRAFT = ROOT / "fixtures" / "dflash-draft"  # its config.json: block_size 4


def _dflash_cmd(*extra: str) -> str:
    return (
        f"python -m sglang.launch_server --model-path {TARGET} --speculative-algorithm DFLASH "
        f"--speculative-draft-model-path {DFLASH_DRAFT} --dtype float32 " + " ".join(extra)
    )


def test_inspect_prints_dflash_settings_not_the_eagle_tree(tmp_path):
    """A DFLASH launch runs with steps 1, topk 1 and the draft's block size as draft tokens (SGLang 0.5.23's
    _handle_dflash, executed), not the EAGLE tree (5, 4, 8) the Llama target's chooser would pick; a topk the launch
    sets is overridden, and spec v2's topk-1 warning (CMD002) has nothing to warn about."""
    out = tmp_path / "i.json"
    r = invoke("inspect", "--serve-cmd", "SGLANG_ENABLE_SPEC_V2=1 " + _dflash_cmd("--speculative-eagle-topk 4"), "--json", out)
    assert r.exit_code == 0, r.output
    head, *notes = _summary(r.output)
    assert "steps 1, topk 1, draft tokens 4," in head, head
    assert any("overrides --speculative-eagle-topk 4 to 1 for DFLASH (sglang/srt/arg_groups/speculative_hook.py:287-446" in n
               for n in notes), notes  # fmt: skip
    assert [f["code"] for f in json.loads(out.read_text())["findings"]] == []


def test_dflash_block_size_flag_and_the_release_before_dflash(tmp_path):
    r = invoke("inspect", "--serve-cmd", _dflash_cmd("--speculative-dflash-block-size 8"))
    assert "steps 1, topk 1, draft tokens 8," in _summary(r.output)[0]
    # 0.5.4's parser has no DFLASH: the summary says so (the DFlash kind then refuses the release in one line)
    r = invoke("inspect", "--serve-cmd", _dflash_cmd(), "--engine-version", "0.5.4")
    assert any(
        "SGLang 0.5.4 fails at start-up on this launch (argparse: argument --speculative-algorithm: invalid choice: 'DFLASH'" in n
        and "SGLang 0.5.11 and later" in n
        for n in _summary(r.output)[1:]
    ), r.output


def test_cmd004_when_the_release_does_not_start(tmp_path):
    """The server's own refusal as a finding: DFLASH's block size beside a different draft-token count, and EAGLE3's
    steps without topk (0.5.23: TypeError); none where the release starts (0.5.1 runs, the doctor assumes a chain)."""
    out = tmp_path / "i.json"
    r = invoke("inspect", "--serve-cmd", _dflash_cmd("--speculative-dflash-block-size 8 --speculative-num-draft-tokens 16"),
               "--json", out)  # fmt: skip
    assert r.exit_code == 1, r.output
    (f,) = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "CMD004"]
    assert f["severity"] == "error" and f["data"]["where"] == "sglang/srt/arg_groups/speculative_hook.py:377"
    assert f["title"] == (
        "sglang 0.5.23 refuses to start on this launch: ValueError: Both --speculative-num-draft-tokens and "
        "--speculative-dflash-block-size are set but they differ. For DFLASH they must match."
    )
    assert f["edit"]["key"] == "--speculative-num-draft-tokens" and f["edit"]["op"] == "delete"
    assert "--speculative-num-draft-tokens 16, --speculative-dflash-block-size 8" in f["evidence"][0]
    assert f["data"]["launch_flags"] == [  # what it reads: a CMD003 for one of them would withhold it
        "--speculative-algorithm", "--speculative-num-draft-tokens", "--speculative-dflash-block-size",
    ]  # fmt: skip

    eagle = _cmd(TARGET) + " --speculative-num-steps 4"
    r = invoke("inspect", "--serve-cmd", eagle, "--json", out)
    assert r.exit_code == 1, r.output
    (f,) = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "CMD004"]
    assert f["data"]["error"] == "TypeError: '>' not supported between instances of 'NoneType' and 'int'"
    assert f["data"]["where"] == "sglang/srt/arg_groups/speculative_hook.py:1274"
    assert (f["edit"]["key"], f["edit"]["value"]) == ("--speculative-eagle-topk", 1)
    r = invoke("inspect", "--serve-cmd", eagle, "--engine-version", "0.5.1", "--json", out)
    assert "CMD004" not in [f["code"] for f in json.loads(out.read_text())["findings"]]
    assert "steps 4, topk 1, draft tokens 5" in _summary(r.output)[0]


def test_a_name_in_lower_case_is_refused_where_the_parser_lists_its_names(tmp_path):
    """argparse matches its choices exactly: up to 0.5.11 (the table's parser a server_args.py line) `eagle3` stops the
    server; from 0.5.12 SGLang upper-cases the name, and the tree is EAGLE3's. On the user's path: inspect of that launch
    under 0.5.2 says CMD004 with the name to write, exit 1."""
    from eagle3_doctor.engines.launch import launch_findings, launch_release, parse_serve_cmd
    from eagle3_doctor.engines.sglang_tree import first_upper_casing

    assert first_upper_casing() == "0.5.12"
    cmd = _cmd(TARGET).replace("--speculative-algorithm EAGLE3", "--speculative-algorithm eagle3")
    assert "eagle3" in cmd
    for v in table()["release_rows"]:
        sc = parse_serve_cmd(cmd, named=("sglang", v))
        upper = parse_serve_cmd(cmd.replace("eagle3", "EAGLE3"), named=("sglang", v))
        codes = {f.code: f for f in launch_findings(sc, launch_release("sglang", "sglang", v))}
        if table()["release_rows"][v]["sources"]["parser"].startswith("sglang/srt/server_args.py:"):
            f = codes["CMD004"]
            assert f.data["error"] == "argparse: argument --speculative-algorithm: invalid choice: 'eagle3'", v
            assert (f.edit.key, f.edit.value) == ("--speculative-algorithm", "EAGLE3"), v
        else:
            assert "CMD004" not in codes, v
            assert (sc.num_steps, sc.topk, sc.num_draft_tokens) == (upper.num_steps, upper.topk, upper.num_draft_tokens), v
    out = tmp_path / "i.json"
    r = invoke("inspect", "--serve-cmd", cmd, "--engine-version", "0.5.2", "--json", out)
    assert r.exit_code == 1 and "error[CMD004]" in r.output and "--speculative-algorithm EAGLE3" in r.output, r.output
