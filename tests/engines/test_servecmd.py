"""Serving config in: real-shaped SGLang and vLLM launch commands -> every derived setting."""

from __future__ import annotations

import json

import pytest
from conftest import invoke

from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.engines.launch import parse_serve_cmd, parse_serve_config
from eagle3_doctor.engines.launch_args import flag_table
from eagle3_doctor.engines.launch_config import parse_token_tree

# The seed case: a DeepSeek-V3 target with an EAGLE-3 draft on 8 GPUs, as the SGLang docs launch it.
SEED = r"""
SGLANG_ENABLE_SPEC_V2=1 CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 python3 -m sglang.launch_server \
    --model-path deepseek-ai/DeepSeek-V3-0324 --trust-remote-code --tp 8 \
    --speculative-algorithm EAGLE3 \
    --speculative-draft-model-path /models/deepseek-v3-eagle3 \
    --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 \
    --mem-fraction-static 0.8 --cuda-graph-max-bs 64 --host 0.0.0.0 --port 30000
"""


def test_seed_deepseek_launch():
    sc = parse_serve_cmd(SEED)
    assert (sc.engine, sc.engine_version) == ("sglang", "0.5.23")
    assert sc.target == "deepseek-ai/DeepSeek-V3-0324"
    assert sc.draft == "/models/deepseek-v3-eagle3"
    assert sc.algorithm == "EAGLE3"
    assert (sc.num_steps, sc.topk, sc.num_draft_tokens) == (3, 1, 4)
    assert sc.tp_size == 8 and sc.pp_size == 1
    assert sc.dtype == "auto" and sc.chat_template is None
    assert sc.trust_remote_code is True
    # --tp is argparse's unique-prefix abbreviation of --tp-size; --cuda-graph-max-bs is ambiguous in 0.5.23
    assert any("--tp -> --tp-size" in n for n in sc.notes)
    assert sc.unknown_flags == ["--cuda-graph-max-bs (ambiguous: --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill)"]
    assert {"host", "port", "mem_fraction_static"} <= set(sc.ignored_flags)


def test_sglang_tree_launch_with_every_setting():
    sc = parse_serve_cmd(
        "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --revision main "
        "--speculative-algorithm EAGLE3 --speculative-draft-model-path jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B "
        "--speculative-draft-model-revision abc123 --speculative-num-steps 5 --speculative-eagle-topk 4 "
        "--speculative-num-draft-tokens 8 --dtype bfloat16 --chat-template llama-3 --tp-size 2 --pp-size 2 "
        "--enable-torch-compile --frobnicate 3 --no-such-switch"
    )
    assert (sc.target, sc.target_revision) == ("meta-llama/Llama-3.1-8B-Instruct", "main")
    assert (sc.draft, sc.draft_revision) == ("jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B", "abc123")
    assert (sc.num_steps, sc.topk, sc.num_draft_tokens) == (5, 4, 8)
    assert (sc.dtype, sc.chat_template, sc.tp_size, sc.pp_size) == ("bfloat16", "llama-3", 2, 2)
    assert sc.unknown_flags == ["--frobnicate 3", "--no-such-switch"]
    assert "enable_torch_compile" in sc.ignored_flags


def test_sglang_defaults_follow_the_engine(tmp_path):
    # speculative_hook.py:1430-1461: (5, 4, 8) for LlamaForCausalLM, (3, 1, 4) for DeepSeek-V3
    for arch, want in (("LlamaForCausalLM", (5, 4, 8)), ("DeepseekV3ForCausalLM", (3, 1, 4)), ("Qwen3ForCausalLM", (3, 1, 4))):
        d = tmp_path / arch
        d.mkdir()
        (d / "config.json").write_text(json.dumps({"architectures": [arch]}))
        sc = parse_serve_cmd(
            f"python -m sglang.launch_server --model-path {d} --speculative-algorithm EAGLE3 --speculative-draft-model-path /d"
        )
        assert (sc.num_steps, sc.topk, sc.num_draft_tokens) == want, arch
        assert "1430" in sc.sources["num_steps"]
    # a hub id with no local config: undetermined, said so
    sc = parse_serve_cmd(
        "python -m sglang.launch_server --model-path org/model --speculative-algorithm EAGLE3 --speculative-draft-model-path /d"
    )
    assert sc.num_steps is None and any("architecture" in n for n in sc.notes)


def test_sglang_topk1_forces_budget():
    sc = parse_serve_cmd(
        "python -m sglang.launch_server --model-path m --speculative-algorithm EAGLE3 "
        "--speculative-draft-model-path d --speculative-num-steps 4 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 16"
    )
    assert (sc.num_steps, sc.topk, sc.num_draft_tokens) == (4, 1, 5)
    assert any("steps + 1" in n for n in sc.notes)


VLLM = """vllm serve meta-llama/Llama-3.1-8B-Instruct -tp 4 --pipeline_parallel_size 2 --dtype bfloat16 \\
  --chat-template ./tmpl.jinja --trust-remote-code --max-model-len 8192 --enable-prefix-caching \\
  --speculative-config '{"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 5, "revision": "r1"}' \\
  --frobnicate 3"""


def test_vllm_serve_with_json_speculative_config():
    sc = parse_serve_cmd(VLLM)
    assert (sc.engine, sc.engine_version) == ("vllm", "0.33.0")
    assert sc.target == "meta-llama/Llama-3.1-8B-Instruct"
    assert (sc.draft, sc.draft_revision, sc.algorithm) == ("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "r1", "eagle3")
    assert (sc.num_steps, sc.topk, sc.num_draft_tokens) == (5, 1, 6)
    assert (sc.dtype, sc.chat_template, sc.tp_size, sc.pp_size) == ("bfloat16", "./tmpl.jinja", 4, 2)
    assert sc.trust_remote_code is True
    # a flag of no release the table holds: listed, not silently dropped
    assert sc.unknown_flags == ["--frobnicate 3"]
    assert {"max_model_len", "enable_prefix_caching"} <= set(sc.ignored_flags)


def test_vllm_dotted_form_and_method_detection():
    from eagle3_doctor.engines.launch import load

    cmd = (
        "python -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-8B "
        "--speculative-config.model AngelSlim/Qwen3-8B_eagle3 --speculative-config.num_speculative_tokens 3"
    )
    assert parse_serve_cmd(cmd).algorithm is None  # as typed: the release settles it (engines/vllm_method.py)
    sc = load(cmd, None)
    assert sc is not None and sc.target == "Qwen/Qwen3-8B" and sc.draft == "AngelSlim/Qwen3-8B_eagle3"
    assert sc.algorithm == "eagle3" and sc.sources["algorithm"].endswith("speculative.py:1433: 'eagle3' in the draft path")
    assert (sc.num_steps, sc.topk, sc.num_draft_tokens) == (3, 1, 4)


def test_vllm_token_tree():
    tree = "[(0,), (1,), (0, 0), (0, 1), (1, 0), (0, 0, 0)]"
    sc = parse_serve_cmd(
        "vllm serve m --speculative-config '"
        + json.dumps({"method": "eagle3", "model": "d", "num_speculative_tokens": 3, "speculative_token_tree": tree})
        + "'"
    )
    assert sc.token_tree == [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]
    assert (sc.num_steps, sc.topk, sc.num_draft_tokens) == (3, 2, 7)
    with pytest.raises(BadInput):
        parse_token_tree("[(0, 1)]")  # no parent (0,)


def test_serve_config_files(tmp_path):
    f = tmp_path / "spec.json"
    f.write_text(json.dumps({"method": "eagle3", "model": "/d", "num_speculative_tokens": 4}))
    sc = parse_serve_config(str(f))
    assert (sc.engine, sc.draft, sc.num_steps, sc.target) == ("vllm", "/d", 4, None)
    f = tmp_path / "engine.yaml"
    f.write_text(
        "model: org/t\ntensor-parallel-size: 2\nspeculative_config:\n  method: eagle3\n  model: /d\n"
        "  num_speculative_tokens: 2\nbogus_key: 1\n"
    )
    sc = parse_serve_config(str(f))
    assert (sc.engine, sc.target, sc.tp_size, sc.num_steps, sc.num_draft_tokens) == ("vllm", "org/t", 2, 2, 3)
    assert sc.unknown_flags == ["bogus_key (not a vLLM 0.33.0 engine arg)"]
    f = tmp_path / "sglang.json"
    f.write_text(
        json.dumps(
            {
                "model_path": "m",
                "speculative_algorithm": "EAGLE3",
                "speculative_draft_model_path": "/d",
                "speculative_num_steps": 2,
                "speculative_eagle_topk": 2,
                "speculative_num_draft_tokens": 5,
            }
        )
    )
    sc = parse_serve_config(str(f))
    assert (sc.engine, sc.num_steps, sc.topk, sc.num_draft_tokens) == ("sglang", 2, 2, 5)
    f = tmp_path / "launch.sh"
    f.write_text("#!/bin/sh\n" + SEED)
    assert parse_serve_config(str(f)).num_steps == 3


@pytest.mark.parametrize(
    "cmd",
    [
        "python serve.py --model x",
        "vllm serve m --speculative-config '{bad json'",
        "python -m sglang.launch_server --model-path 'unbalanced",
    ],
)
def test_bad_commands_are_bad_input(cmd):
    with pytest.raises(BadInput):
        parse_serve_cmd(cmd)


def test_flag_table_cites_the_engine_files():
    t = flag_table()
    for engine, want in (("sglang", "--speculative-eagle-topk"), ("vllm", "--speculative-config")):
        flags = t[engine]["flags"]
        assert want in flags and len(flags) > 300
        for name, spec in flags.items():
            path, _, line = spec["source"].rpartition(":")
            assert path in t[engine]["files"] and int(line) > 0, name
            assert spec["value"] in ("none", "one", "many")


def test_cli_serve_cmd_drives_acceptance(tmp_path):
    out = tmp_path / "a.json"
    cmd = (
        "python -m sglang.launch_server --model-path fixtures/target --speculative-algorithm EAGLE3 "
        "--speculative-draft-model-path fixtures/draft-sglang --speculative-num-steps 3 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 4 --dtype float32 --weird-flag"
    )
    r = invoke("acceptance", "--serve-cmd", cmd, "--limit", "1", "--max-new-tokens", "8", "-q", "--json", out)
    assert r.exit_code in (0, 1), r.output
    s = json.loads(out.read_text())["settings"]
    assert (s["num_steps"], s["topk"], s["num_draft_tokens"], s["dtype"]) == (3, 1, 4, "float32")
    assert s["serve"]["unknown_flags"] == ["--weird-flag"]
    assert s["engine"].startswith("sglang")
    # explicit options win over the command
    r = invoke(
        "acceptance",
        "--serve-cmd",
        cmd,
        "-k",
        "2",
        "--engine",
        "VLLM",
        "--limit",
        "1",
        "--max-new-tokens",
        "8",
        "-q",
        "--json",
        out,
    )
    assert r.exit_code in (0, 1), r.output
    s = json.loads(out.read_text())["settings"]
    assert s["num_steps"] == 2 and s["engine"].startswith("vllm")


def test_the_summary_line_names_the_release_measured():
    """--engine-version names the release the run measures; the launch line is still read by the newest argument
    table, and the summary says both rather than the table's release alone."""
    cmd = f"{SG}--speculative-draft-model-path fixtures/draft-sglang"
    r = invoke("inspect", "--serve-cmd", cmd, "--engine-version", "0.5.17")
    assert r.exit_code in (0, 1), r.output
    (line,) = [x for x in r.output.splitlines() if x.startswith("serving config:")]
    assert line.startswith(
        "serving config: sglang 0.5.17 (its flags read by 0.5.23's argument table, checked against 0.5.17's own flag names): "
    ), line
    r = invoke("inspect", "--serve-cmd", cmd)
    (line,) = [x for x in r.output.splitlines() if x.startswith("serving config:")]
    assert line.startswith("serving config: sglang 0.5.23: "), line


def test_cli_serve_cmd_needs_a_model():
    r = invoke("inspect", "--serve-cmd", 'vllm serve --speculative-config \'{"model": "d"}\'')
    assert r.exit_code == 2


# --------------------------------------------------------------------------- launch forms as published

SG = "python3 -m sglang.launch_server --model-path fixtures/target --speculative-algorithm EAGLE3 "


def test_sglang_refuses_underscored_flags_as_the_engine_does():
    # SGLang's plain argparse registers --speculative-num-steps only; vLLM's parser rewrites _ to -
    with pytest.raises(BadInput, match=r"refuses --speculative_num_steps.*write --speculative-num-steps"):
        parse_serve_cmd(SG + "--speculative-draft-model-path d --speculative_num_steps 3")
    sc = parse_serve_cmd(
        'vllm serve m --tensor_parallel_size 2 --speculative_config \'{"model": "d", "num_speculative_tokens": 2}\''
    )
    assert (sc.tp_size, sc.draft, sc.num_steps) == (2, "d", 2)


def test_unknown_flag_naming_a_measured_setting_is_refused():
    with pytest.raises(BadInput, match="--speculative-model is not a vllm 0.33.0 flag"):
        parse_serve_cmd("vllm serve m --speculative-model d --num-speculative-tokens 3")
    with pytest.raises(BadInput, match="--speculative-eagle-top-k is not a sglang"):
        parse_serve_cmd(SG + "--speculative-eagle-top-k 4")
    # one of another release (or a typo in an unrelated flag) is listed and the run goes on
    assert parse_serve_cmd(SG + "--speculative-draft-model-path d --frobnicate 1").unknown_flags == ["--frobnicate 1"]


def test_config_yaml_inside_the_command(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "sg.yaml").write_text(
        "model-path: /t\nspeculative-algorithm: EAGLE3\nspeculative-draft-model-path: /d\n"
        "speculative-num-steps: 4\nspeculative-eagle-topk: 2\nspeculative-num-draft-tokens: 6\ntrust-remote-code: true\n"
    )
    sc = parse_serve_cmd("python -m sglang.launch_server --config conf/sg.yaml --speculative-num-steps 5")
    assert (sc.target, sc.draft, sc.num_steps, sc.topk, sc.num_draft_tokens) == ("/t", "/d", 5, 2, 6)  # the command wins
    assert sc.trust_remote_code and not sc.unknown_flags
    (tmp_path / "conf" / "v.yaml").write_text(
        "tensor-parallel-size: 2\nspeculative-config:\n  model: /d\n  method: eagle3\n  num_speculative_tokens: 3\n"
    )
    sc = parse_serve_cmd("vllm serve org/t --config conf/v.yaml")
    assert (sc.target, sc.tp_size, sc.draft, sc.num_steps) == ("org/t", 2, "/d", 3)
    # the path is read where the server is launched: from elsewhere it does not exist
    monkeypatch.chdir(tmp_path / "conf")
    with pytest.raises(BadInput, match="conf/v.yaml"):
        parse_serve_cmd("vllm serve org/t --config conf/v.yaml")
    (tmp_path / "conf" / "u.yaml").write_text("speculative_num_steps: 3\n")
    with pytest.raises(BadInput, match="refuses --speculative_num_steps"):  # SGLang writes YAML keys as flags verbatim
        parse_serve_cmd("python -m sglang.launch_server --model-path m --config u.yaml")
    (tmp_path / "conf" / "x.json").write_text("{}")
    with pytest.raises(BadInput, match="not a .yaml file"):
        parse_serve_cmd("vllm serve m --config x.json")


def test_docker_run_forms():
    sc = parse_serve_cmd(
        "docker run --runtime nvidia --gpus all -v ~/.cache/huggingface:/root/.cache/huggingface "
        '--env "HF_TOKEN=abc" -p 8000:8000 --ipc=host vllm/vllm-openai:v0.10.2 --model org/t '
        '--speculative-config \'{"method": "eagle3", "model": "org/d", "num_speculative_tokens": 4}\''
    )
    assert (sc.engine, sc.engine_version, sc.target, sc.draft, sc.num_steps) == ("vllm", "0.10.2", "org/t", "org/d", 4)
    assert sc.env == {"HF_TOKEN": "abc"} and sc.image == "vllm/vllm-openai:v0.10.2"
    sc = parse_serve_cmd("docker run --gpus all vllm/vllm-openai:latest org/t")
    assert (sc.engine_version, sc.target) == ("0.33.0", "org/t") and any("names no release" in n for n in sc.notes)
    sc = parse_serve_cmd(
        "docker run --gpus all --shm-size 32g -e SGLANG_ENABLE_SPEC_V2=1 lmsysorg/sglang:v0.5.4-cu126 "
        "python3 -m sglang.launch_server --model-path org/t --speculative-algorithm EAGLE3 "
        "--speculative-draft-model-path org/d --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
    )
    assert (sc.engine, sc.engine_version, sc.draft, sc.num_steps) == ("sglang", "0.5.4", "org/d", 3)
    assert sc.env == {"SGLANG_ENABLE_SPEC_V2": "1"}


def test_vllm_serve_a_speculators_checkpoint():
    sc = parse_serve_cmd("vllm serve fixtures/draft-speculators --max-model-len 2048")
    assert (sc.target, sc.draft, sc.algorithm) == ("fixtures/target", "fixtures/draft-speculators", "eagle3")
    assert (sc.num_steps, sc.topk, sc.num_draft_tokens) == (3, 1, 4)
    assert not any("without speculative decoding" in n for n in sc.notes)


def _codes(sc):
    from eagle3_doctor.engines.launch import launch_findings

    return {f.code: f for f in launch_findings(sc)}


def test_token_map_finding():
    f = _codes(parse_serve_cmd(SG + "--speculative-draft-model-path d --speculative-token-map hot.pt"))["CMD001"]
    assert f.severity == "warning" and "ignored" in f.title and f.edit.key == "--speculative-token-map"
    f = _codes(
        parse_serve_cmd(
            "python -m sglang.launch_server --model-path m --speculative-algorithm EAGLE "
            "--speculative-draft-model-path d --speculative-token-map hot.pt"
        )
    )["CMD001"]
    assert f.severity == "error" and "replaces the draft's vocabulary" in f.title and f.edit.op == "delete"
    assert "CMD001" not in _codes(parse_serve_cmd(SG + "--speculative-draft-model-path d"))


def test_spec_v2_with_a_tree_finding():
    tree = (
        "--speculative-draft-model-path d --speculative-num-steps 5 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8"
    )
    f = _codes(parse_serve_cmd("SGLANG_ENABLE_SPEC_V2=True " + SG + tree))["CMD002"]
    assert f.severity == "warning" and f.edit.value == 1 and "--speculative-num-draft-tokens 6" in f.fix
    assert "CMD002" not in _codes(parse_serve_cmd(SG + tree))  # no variable
    assert "CMD002" not in _codes(parse_serve_cmd("SGLANG_ENABLE_SPEC_V2=0 " + SG + tree))
    chain = "--speculative-draft-model-path d --speculative-num-steps 3 --speculative-eagle-topk 1"
    assert "CMD002" not in _codes(parse_serve_cmd("SGLANG_ENABLE_SPEC_V2=1 " + SG + chain))


def test_cli_launch_findings_and_speculators_checkpoint(tmp_path):
    out = tmp_path / "i.json"
    r = invoke("inspect", "--serve-cmd", "vllm serve fixtures/draft-speculators", "--json", out)
    assert r.exit_code in (0, 1), r.output
    doc = json.loads(out.read_text())
    assert doc["draft"]["format"] == "speculators" and doc["target"]["path"].endswith("fixtures/target")
    cmd = (
        "SGLANG_ENABLE_SPEC_V2=1 " + SG + "--speculative-draft-model-path fixtures/draft-sglang --speculative-num-steps 3 "
        "--speculative-eagle-topk 2 --speculative-num-draft-tokens 6 --speculative-token-map hot.pt"
    )
    r = invoke("inspect", "--serve-cmd", cmd, "--json", out)
    assert r.exit_code == 1, r.output
    codes = [f["code"] for f in json.loads(out.read_text())["findings"]]
    assert codes[:2] == ["CMD001", "CMD002"]


@pytest.mark.parametrize(
    ("cmd", "note"),
    [
        (SG + "--speculative-draft-model-path d", None),
        ("python -m sglang.launch_server --model-path m --speculative-algorithm NEXTN", None),
        (SG.replace("EAGLE3", "DFLASH") + "--speculative-draft-model-path d", None),
        ('vllm serve m --speculative-config \'{"method": "dflash", "model": "d", "num_speculative_tokens": 4}\'', None),
        ('vllm serve m --speculative-config \'{"method": "mtp", "num_speculative_tokens": 1}\'', None),
        ('vllm serve m --speculative-config \'{"method": "qwen3_next_mtp", "num_speculative_tokens": 2}\'', None),
        ("python -m sglang.launch_server --model-path m --speculative-algorithm NGRAM", "NGRAM drafts with n-gram lookup"),
        ('vllm serve m --speculative-config \'{"method": "medusa", "model": "d"}\'', "medusa drafts with Medusa heads"),
        ('vllm serve m --speculative-config \'{"method": "ngram", "num_speculative_tokens": 3}\'', "ngram drafts with n-gram"),
    ],
)
def test_algorithm_note_only_where_the_doctor_does_not_measure(cmd, note):
    sc = parse_serve_cmd(cmd)
    said = [n for n in sc.notes if "eagle3-doctor" in n]
    if note is None:
        assert said == [], said
    else:
        assert len(said) == 1 and note in said[0] and "does not measure that drafter" in said[0], said
    if "mtp" in cmd and "vllm" in cmd:  # vLLM drafts every *_mtp method with the target's own MTP layer
        assert sc.draft == "m"


@pytest.mark.parametrize(
    ("cmd", "flags"),
    [
        ("python -m sglang.launch_server --model-path m --speculative-draft-model-path d", ["--speculative-draft-model-path"]),
        (
            "python -m sglang.launch_server --model-path m --speculative-num-steps 3 --speculative-eagle-topk 1",
            ["--speculative-num-steps", "--speculative-eagle-topk"],
        ),
        ("python -m sglang.launch_server --model-path m", None),
        (SG + "--speculative-draft-model-path d", None),
        ("python -m sglang.launch_server --model-path m --speculative-algorithm NEXTN", None),
    ],
)
def test_a_draft_configured_without_an_algorithm_is_served_without_speculation(cmd, flags):
    found = _codes(parse_serve_cmd(cmd)).get("CMD005")
    if flags is None:
        assert found is None
        return
    assert found is not None and found.severity == "error" and found.data["flags"] == flags
    assert (found.edit.key, found.edit.op, found.edit.value) == ("--speculative-algorithm", "set", "EAGLE3")


def test_server_args_file_without_an_algorithm(tmp_path):
    from eagle3_doctor.engines.launch import parse_serve_config

    f = tmp_path / "args.json"
    f.write_text(json.dumps({"model_path": "m", "speculative_draft_model_path": "d", "speculative_num_steps": 3}))
    assert _codes(parse_serve_config(str(f)))["CMD005"].data["flags"] == [
        "--speculative-draft-model-path",
        "--speculative-num-steps",
    ]


def test_cli_inspect_of_a_launch_without_an_algorithm_is_not_ok(tmp_path):
    """The user's path: inspect on the launch that names the draft and forgets the algorithm says error[CMD005] and the
    flag to add, exit 1, where it said OK."""
    out = tmp_path / "i.json"
    cmd = "python -m sglang.launch_server --model-path fixtures/target --speculative-draft-model-path fixtures/draft-sglang"
    r = invoke("inspect", "--serve-cmd", cmd, "--json", out)
    assert r.exit_code == 1, r.output
    assert "error[CMD005]" in r.output and "--speculative-algorithm EAGLE3" in r.output
    assert [f["code"] for f in json.loads(out.read_text())["findings"]][:1] == ["CMD005"]
