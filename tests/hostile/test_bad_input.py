"""Bad input, hostile files and determinism: one clear error (exit 2), nothing executed, stable output."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import DRAFTS, DUMP, PROMPTS, TARGET
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.doctor import compare_hidden, load_setup
from eagle3_doctor.draft.formats import config_to_canonical, detect_format, read_draft
from eagle3_doctor.io.conversations import TokenizedSample
from eagle3_doctor.io.prompts import read_prompt_file
from eagle3_doctor.io.train_dumps import load_dump_file


def setup(**kw):
    args = dict(target=str(TARGET), draft=str(DRAFTS["sglang"]), dtype="float32", device="cpu")
    args.update(kw)
    return load_setup(**args)


def test_config_missing_required_fields(tmp_copy):
    d = tmp_copy(DRAFTS["sglang"])
    c = json.loads((d / "config.json").read_text())
    del c["hidden_size"], c["num_attention_heads"]
    (d / "config.json").write_text(json.dumps(c))
    with pytest.raises(BadInput, match="lacks hidden_size, num_attention_heads"):
        setup(draft=str(d))


def test_target_config_missing(tmp_copy):
    t = tmp_copy(TARGET)
    (t / "config.json").unlink()
    with pytest.raises(BadInput, match="config.json not found"):
        setup(target=str(t))


def test_tensor_of_the_wrong_shape(tmp_copy):
    d = tmp_copy(DRAFTS["sglang"])
    sd = load_file(d / "model.safetensors")
    sd["midlayer.self_attn.o_proj.weight"] = sd["midlayer.self_attn.o_proj.weight"][:, :64].contiguous()
    save_file(sd, d / "model.safetensors")
    with pytest.raises(BadInput, match="o_proj.weight has shape"):
        setup(draft=str(d))


def test_fc_width_that_does_not_fit_the_target(tmp_copy):
    d = tmp_copy(DRAFTS["sglang"])
    sd = load_file(d / "model.safetensors")
    sd["fc.weight"] = torch.zeros(128, 300)
    save_file(sd, d / "model.safetensors")
    # config and weights agree with each other (3 x 100 = 300), so only the draft-vs-target check can
    # catch it: the target's hidden size is 128
    cfg = json.loads((d / "config.json").read_text())
    cfg["target_hidden_size"] = 100
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(BadInput, match="not a multiple of the target hidden size 128"):
        setup(draft=str(d))


def test_nan_in_draft_weights(tmp_copy):
    d = tmp_copy(DRAFTS["sglang"])
    sd = load_file(d / "model.safetensors")
    sd["fc.weight"][0, 0] = float("nan")
    save_file(sd, d / "model.safetensors")
    with pytest.raises(BadInput, match="NaN or Inf"):
        setup(draft=str(d))


def test_inf_in_target_weights(tmp_copy):
    t = tmp_copy(TARGET)
    sd = load_file(t / "model.safetensors")
    k = next(k for k in sd if "mlp.up_proj" in k)
    sd[k][0, 0] = float("inf")
    save_file(sd, t / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(BadInput, match="holds NaN or Inf"):
        setup(target=str(t))


def test_prompt_longer_than_the_target_positions(tmp_path):
    p = tmp_path / "long.txt"
    p.write_text("x = 1\n" * 0 + "a" * 5000 + "\n")
    s = setup()
    with pytest.raises(BadInput, match="positions"):
        compare_hidden(s, prompts_path=str(p), max_tokens=None)


def test_json_report_is_deterministic(tmp_path):
    from eagle3_doctor.io.outputs import write_json

    outs = []
    for i in range(2):
        res = compare_hidden(setup(layer_ids=[-1, 1, 3]), prompts_path=str(PROMPTS), limit=4, matrix=True)
        write_json(tmp_path / f"r{i}.json", res.to_dict())
        outs.append((tmp_path / f"r{i}.json").read_bytes())
    assert outs[0] == outs[1]


def test_inputs_are_not_modified(tmp_copy):
    import hashlib

    d = tmp_copy(DRAFTS["sglang"])
    before = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in d.iterdir()}
    compare_hidden(setup(draft=str(d)), prompts_path=str(PROMPTS), limit=2)
    assert before == {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in d.iterdir()}


# ----------------------------------------------------------------------------- fuzzing

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
config_keys = st.sampled_from(
    [
        "architectures",
        "hidden_size",
        "eagle_config",
        "speculators_model_type",
        "transformer_layer_config",
        "draft_vocab_size",
        "target_hidden_size",
        "rope_theta",
        "rope_scaling",
        "vocab_size",
        "norm_before_fc",
        "eagle_aux_hidden_state_layer_ids",
        "rope_parameters",
        "torch_dtype",
    ]
)


@settings(max_examples=200, deadline=None)
@given(
    cfg=st.dictionaries(config_keys, json_values, max_size=8),
    keys=st.lists(st.sampled_from(["fc.weight", "midlayer.x", "layers.0.x", "model.layers.0.y", "lm_head.weight"]), max_size=4),
)
def test_format_detection_and_config_normalisation_never_crash(cfg, keys):
    try:
        fmt, _ = detect_format(cfg, keys)
    except BadInput:
        return
    try:
        config_to_canonical(fmt, cfg)
    except BadInput:
        pass


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=400))
def test_random_draft_files_end_in_a_clean_error(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("fuzzdraft")
    (d / "config.json").write_bytes((DRAFTS["sglang"] / "config.json").read_bytes())
    (d / "model.safetensors").write_bytes(data)
    with pytest.raises(BadInput):
        read_draft(d)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, 2000), flip=st.integers(0, 255))
def test_mutated_dump_files_end_in_a_result_or_a_clean_error(tmp_path_factory, cut, flip):
    src = sorted(DUMP.rglob("*.ckpt"))[0].read_bytes()
    data = bytearray(src[: max(1, len(src) - cut)])
    data[len(data) // 2] ^= flip
    f = tmp_path_factory.mktemp("fuzzdump") / "data_0.ckpt"
    f.write_bytes(bytes(data))
    try:
        load_dump_file(f, vocab_size=320, hidden_size=128)
    except BadInput:
        pass


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.one_of(json_values.map(json.dumps), st.text(max_size=30)), min_size=0, max_size=5))
def test_prompt_parser_never_crashes(tmp_path_factory, lines):
    f = tmp_path_factory.mktemp("fuzzprompts") / "p.jsonl"
    f.write_text("\n".join(ln.replace("\n", " ") for ln in lines))
    try:
        items = read_prompt_file(f)
    except BadInput:
        return
    assert items and all(isinstance(i, (str, list, TokenizedSample)) for i in items)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    edits=st.dictionaries(
        config_keys | st.sampled_from(["num_key_value_heads", "intermediate_size", "head_dim"]),
        json_values,
        min_size=1,
        max_size=3,
    )
)
def test_mutated_draft_configs_load_or_fail_cleanly(tmp_path_factory, edits):
    d = tmp_path_factory.mktemp("fuzzcfg")
    c = json.loads((DRAFTS["sglang"] / "config.json").read_text())
    c.update(edits)
    (d / "config.json").write_text(json.dumps(c))
    (d / "model.safetensors").write_bytes((DRAFTS["sglang"] / "model.safetensors").read_bytes())
    try:
        read_draft(d)
    except BadInput:
        pass


def test_cuda_out_of_memory_names_the_batch_size_to_try(monkeypatch):
    from eagle3_doctor.core.errors import ResourceError

    s = setup()

    def oom(*a, **k):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(s.target.parts.base, "forward", oom)
    with pytest.raises(ResourceError, match="--batch-size 4"):
        compare_hidden(s, prompts_path=str(PROMPTS), limit=8, batch_size=8)


@pytest.mark.parametrize(
    "second",
    [TypeError("__init__() got an unexpected keyword argument 'rope_foo'"), OSError("model.safetensors: unexpected end of file")],
)
def test_a_failing_torch_dtype_retry_is_one_error_line(monkeypatch, second):
    """transformers < 4.56 refuses dtype= (TypeError); what the torch_dtype= retry raises is still mapped."""
    import transformers

    from eagle3_doctor.model.target import load_target

    calls = []

    def from_pretrained(name, **kw):
        calls.append(sorted(k for k in kw if "dtype" in k))
        if "dtype" in kw:
            raise TypeError("from_pretrained() got an unexpected keyword argument 'dtype'")
        raise second

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", from_pretrained)
    import re

    with pytest.raises(BadInput, match=f"cannot load the target .*{re.escape(str(second)[:20])}"):
        load_target(str(TARGET), dtype="float32", device="cpu", forward="transformers")
    assert calls == [["dtype"], ["torch_dtype"]]
