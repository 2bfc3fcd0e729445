"""TensorRT-LLM launch lines: trtllm-serve MODEL ... --extra_llm_api_options FILE.yaml -> every derived setting."""

from __future__ import annotations

import json

import pytest
from conftest import invoke

from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.engines.launch import parse_serve_cmd, parse_serve_config
from eagle3_doctor.engines.releases import check_engine

EAGLE3 = """\
speculative_config:
  decoding_type: Eagle3
  max_draft_len: 3
  speculative_model_dir: /models/llama-eagle3
"""


def _yaml(tmp_path, text: str, name: str = "extra.yaml") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_eagle3_one_model_launch(tmp_path):
    y = _yaml(tmp_path, EAGLE3)
    sc = parse_serve_cmd(
        f"trtllm-serve meta-llama/Llama-3.1-8B-Instruct --backend pytorch --tp_size 2 --host 0.0.0.0 --port 8000 "
        f"--trust_remote_code --extra_llm_api_options {y}"
    )
    assert (sc.engine, sc.engine_version, sc.algorithm) == ("trtllm", "1.2", "Eagle3")
    assert (sc.target, sc.draft) == ("meta-llama/Llama-3.1-8B-Instruct", "/models/llama-eagle3")
    assert (sc.num_steps, sc.topk, sc.num_draft_tokens, sc.token_tree) == (3, 1, 4, None)
    assert (sc.tp_size, sc.trust_remote_code, sc.unknown_flags) == (2, True, [])
    assert sc.sources["draft"] == "speculative_config.speculative_model_dir"
    assert {"host", "port"} <= set(sc.ignored_flags) and not sc.notes


def test_two_model_captured_ids_and_yaml_over_the_command(tmp_path):
    y = _yaml(
        tmp_path,
        "tensor_parallel_size: 4\nspeculative_config:\n  decoding_type: Eagle\n  max_draft_len: 5\n"
        "  speculative_model: org/draft\n  eagle3_one_model: false\n  eagle3_layers_to_capture: [2, 16, 29]\n",
    )
    # --config is the same option as --extra_llm_api_options; `serve` may be written out
    sc = parse_serve_cmd(f"trtllm-serve serve org/target --tp_size 2 --config {y}")
    assert (sc.engine_version, sc.draft, sc.num_steps, sc.tp_size) == ("1.2-two-model", "org/draft", 5, 4)
    assert sc.layer_ids == [2, 16, 29]
    assert any("pass --layer-ids 2,16,29" in n for n in sc.notes)


def test_mtp_drafts_with_the_target(tmp_path):
    y = _yaml(tmp_path, "speculative_config:\n  decoding_type: MTP\n  num_nextn_predict_layers: 3\n")
    sc = parse_serve_cmd(f"python -m tensorrt_llm.commands.serve deepseek-ai/DeepSeek-V3 --extra_llm_api_options {y}")
    assert (sc.engine, sc.algorithm, sc.target, sc.draft) == (
        "trtllm",
        "MTP",
        "deepseek-ai/DeepSeek-V3",
        "deepseek-ai/DeepSeek-V3",
    )
    assert (sc.num_steps, sc.topk, sc.num_draft_tokens) == (3, 1, 4)
    assert not any("does not measure" in n for n in sc.notes)
    y = _yaml(tmp_path, "speculative_config:\n  decoding_type: MTP\n", "one.yaml")
    assert parse_serve_cmd(f"trtllm-serve m --extra_llm_api_options {y}").num_steps == 1  # the config's default


def test_static_tree_from_eagle_choices(tmp_path):
    y = _yaml(tmp_path, EAGLE3 + '  eagle_choices: "[[0], [1], [0, 0], [0, 1], [0, 0, 0]]"\n')
    sc = parse_serve_cmd(f"trtllm-serve m --extra_llm_api_options {y}")
    assert sc.token_tree == [[0], [1], [0, 0], [0, 1], [0, 0, 0]]
    assert (sc.num_steps, sc.topk, sc.num_draft_tokens) == (3, 2, 6)


def test_algorithms_the_doctor_does_not_measure_say_so(tmp_path):
    y = _yaml(tmp_path, "speculative_config:\n  decoding_type: NGram\n  max_draft_len: 4\n")
    sc = parse_serve_cmd(f"trtllm-serve m --extra_llm_api_options {y}")
    assert sc.draft is None and sc.num_steps is None
    assert any("NGram drafts with n-gram lookup" in n and "does not measure" in n for n in sc.notes)
    sc = parse_serve_cmd("trtllm-serve m")
    assert any("without speculative decoding" in n for n in sc.notes)


@pytest.mark.parametrize(
    ("yaml_text", "match"),
    [
        (None, "does not exist"),
        ("speculative_config: [1, 2\n", "not valid YAML"),
        ("- a\n- b\n", "no mapping"),
        ("speculative_config: 3\n", "not a mapping"),
        ("speculative_config:\n  decoding_type: Eagle4\n", "decoding_type 'Eagle4' is not one TensorRT-LLM reads"),
        ("speculative_config:\n  decoding_type: Eagle3\n  max_draft_len: 1000\n", "out of range"),
        ("speculative_config:\n  decoding_type: Eagle3\n  eagle3_layers_to_capture: two\n", "not a list of layer ids"),
    ],
)
def test_bad_options_file_is_one_line(tmp_path, yaml_text, match):
    path = tmp_path / "x.yaml"
    if yaml_text is not None:
        path.write_text(yaml_text)
    with pytest.raises(BadInput, match=match):
        parse_serve_cmd(f"trtllm-serve m --extra_llm_api_options {path}")


def test_click_options_as_trtllm_serve_parses_them(tmp_path):
    # click neither abbreviates nor accepts dashes for underscores: these are unknown, listed
    sc = parse_serve_cmd("trtllm-serve m --tp 2 --tp-size 2")
    assert sc.unknown_flags == ["--tp 2", "--tp-size 2"] and sc.tp_size == 1
    # one that names a measured setting would be defaulted silently: refused, as trtllm-serve refuses it
    with pytest.raises(BadInput, match="speculative_config"):
        parse_serve_cmd("trtllm-serve m --speculative_model_dir d")
    with pytest.raises(BadInput, match="trtllm-serve disaggregated is not the serve command"):
        parse_serve_cmd("trtllm-serve disaggregated -c disagg.yaml")


def test_docker_image_names_the_release(tmp_path):
    y = _yaml(tmp_path, EAGLE3 + "  eagle3_one_model: false\n")
    sc = parse_serve_cmd(
        f"docker run --gpus all nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6 trtllm-serve m --extra_llm_api_options {y}"
    )
    assert (sc.image, sc.engine_version) == ("nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6", "1.2.0rc6-two-model")
    # an older image is that release's rules, two-model path kept (it was refused before 1.2)
    sc = parse_serve_cmd(f"docker run nvcr.io/nvidia/tensorrt-llm/release:1.0.0 trtllm-serve m --extra_llm_api_options {y}")
    assert check_engine("trtllm", sc.engine_version) == "1.0-two-model"


def test_options_file_alone_as_serve_config(tmp_path):
    sc = parse_serve_config(_yaml(tmp_path, EAGLE3))
    assert (sc.engine, sc.target, sc.draft, sc.num_steps) == ("trtllm", None, "/models/llama-eagle3", 3)
    assert any("pass --target" in n for n in sc.notes) and not any("no MODEL" in n for n in sc.notes)


def test_cli_reads_trtllm_serve(tmp_path):
    y = _yaml(tmp_path, EAGLE3.replace("/models/llama-eagle3", "fixtures/draft-sglang"))
    out = tmp_path / "i.json"
    r = invoke("inspect", "--serve-cmd", f"trtllm-serve fixtures/target --extra_llm_api_options {y}", "--json", out)
    assert r.exit_code in (0, 1), r.output
    d = json.loads(out.read_text())
    assert d["engine"] == "trtllm" and d["serve"]["num_steps"] == 3
    r = invoke("inspect", "--serve-cmd", f"trtllm-serve fixtures/target --extra_llm_api_options {tmp_path / 'none.yaml'}")
    assert r.exit_code == 2 and "none.yaml does not exist" in r.output
    assert len(r.output.strip().splitlines()) == 1
