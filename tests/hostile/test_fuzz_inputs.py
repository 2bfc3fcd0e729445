"""Fuzzing every option parser and every file loader of the preflight: each input is accepted or refused
with one BadInput, never another exception (the CLI would report that as a bug, exit 3)."""

from __future__ import annotations

import json
import os
import string

import pytest
from conftest import DRAFTS, ROOT, TARGET, invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eagle3_doctor.cli import validate as v
from eagle3_doctor.cli import validate_files as vf
from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.io import checks

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**12), 10**12) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
option_text = st.text(alphabet=string.printable, max_size=24) | st.sampled_from(
    ["", ",", "-1", "0", "1e3", "nan", "inf", "-inf", "auto", "[1,2]", "{}", "0=1GiB", "cuda:0", "1,3,4"]
)


def _accepts_or_refuses(fn, *a, **k):
    try:
        return fn(*a, **k)
    except BadInput as e:
        text = str(e)
        assert text and " -- fix: " in text
        return None


@FUZZ
@given(text=option_text)
def test_layer_ids_parser(text):
    ids = _accepts_or_refuses(v.parse_layer_ids, text)
    assert ids is None or (ids and all(isinstance(i, int) for i in ids))


@FUZZ
@given(text=option_text)
def test_max_memory_parser(text):
    out = _accepts_or_refuses(v.parse_max_memory, text)
    assert out is None or all(isinstance(k, (int, str)) for k in out)


@FUZZ
@given(text=option_text)
def test_trained_with_parser(text):
    from eagle3_doctor.engines.trainers import check_trained_with

    got = _accepts_or_refuses(check_trained_with, text)
    assert got is None or got[2]["trains"]


int_opts = ["max_tokens", "limit", "num_steps", "max_new_tokens", "topk", "num_draft_tokens"]
float_opts = ["temperature", "min_accept_rate", "min_tau", "min_cosine", "min_step1_accuracy", "max_regression"]
text_opts = [
    "batch_size",
    "dtype",
    "device",
    "draft_format",
    "layer_ids",
    "train_recipe",
    "max_memory",
    "device_map",
    "fail_on",
    "temperature_mode",
    "continuation",
    "engine_version",
]


@FUZZ
@given(
    ints=st.dictionaries(st.sampled_from(int_opts), st.integers(-(10**15), 10**15), max_size=3),
    floats=st.dictionaries(st.sampled_from(float_opts), st.floats(allow_nan=True, allow_infinity=True), max_size=3),
    texts=st.dictionaries(st.sampled_from(text_opts), option_text, max_size=3),
    engine=st.sampled_from(["sglang", "vllm", "trtllm", "modelopt", "eagle", "tgi", ""]),
)
def test_every_option_checker(ints, floats, texts, engine):
    _accepts_or_refuses(v.check_arguments, engine=engine, **ints, **floats, **texts)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    opts=st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "--max-tokens",
                    "--limit",
                    "--batch-size",
                    "--layer-ids",
                    "--dtype",
                    "--device",
                    "--engine",
                    "--engine-version",
                    "--train-recipe",
                    "--trained-with",
                    "--max-memory",
                    "--device-map",
                    "--draft-format",
                    "--bogus",
                ]
            ),
            option_text,
        ),
        min_size=1,
        max_size=4,
    )
)
def test_the_command_line_answers_bad_options_in_one_line(monkeypatch, opts):
    """Random option values through the real CLI: exit 2 with one line, or (all valid) on to the model loader."""
    import eagle3_doctor.model.setup as doctor  # where load_models finds load_setup

    class Loaded(BaseException):
        pass

    def loader(**kw):
        raise Loaded()

    monkeypatch.setattr(doctor, "load_setup", loader)
    args = ["compare-hidden", "--target", str(TARGET), "--draft", str(DRAFTS["sglang"])]
    for o, val in opts:
        args += [o, val]
    try:
        r = invoke(*args, catch_exceptions=False)
    except Loaded:
        return
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("eagle3-doctor: error: "), (args, r.exit_code, r.stderr)


@FUZZ
@given(
    cfg=st.dictionaries(
        st.sampled_from(
            [
                "num_hidden_layers",
                "n_layer",
                "hidden_size",
                "vocab_size",
                "intermediate_size",
                "num_attention_heads",
                "num_key_value_heads",
                "head_dim",
                "max_position_embeddings",
                "text_config",
                "architectures",
            ]
        ),
        json_values,
        max_size=6,
    ),
    names=st.lists(
        st.sampled_from(["model.layers.0.x", "model.layers.7.y", "model.layers.99.z", "lm_head.weight", "transformer.h.3.attn"]),
        max_size=4,
    ),
)
def test_target_config_checker(cfg, names):
    _accepts_or_refuses(checks.check_target_config, cfg, "config.json", names or None)


@FUZZ
@given(
    cfg=st.dictionaries(
        st.sampled_from(
            [
                "eagle_config",
                "eagle_aux_hidden_state_layer_ids",
                "aux_hidden_state_layer_ids",
                "eagle3_layers_to_capture",
                "num_hidden_layers",
                "hidden_size",
            ]
        ),
        json_values,
        max_size=4,
    )
)
def test_draft_layer_id_checker(cfg):
    _accepts_or_refuses(checks.check_draft_layer_ids, cfg, "config.json")


@FUZZ
@given(
    edits=st.dictionaries(
        st.sampled_from(
            [
                "hidden_size",
                "num_hidden_layers",
                "draft_vocab_size",
                "target_hidden_size",
                "eagle_config",
                "vocab_size",
                "transformer_layer_config",
                "architectures",
            ]
        ),
        json_values,
        min_size=1,
        max_size=3,
    )
)
def test_draft_directory_checker(tmp_path_factory, edits):
    d = tmp_path_factory.mktemp("fuzzdraft")
    c = json.loads((DRAFTS["sglang"] / "config.json").read_text())
    c.update(edits)
    (d / "config.json").write_text(json.dumps(c))
    os.symlink(DRAFTS["sglang"] / "model.safetensors", d / "model.safetensors")
    _accepts_or_refuses(vf.check_draft, str(d))


@FUZZ
@given(data=st.binary(max_size=300) | json_values.map(lambda x: json.dumps(x).encode()))
def test_json_reader(tmp_path_factory, data):
    f = tmp_path_factory.mktemp("fuzzjson") / "config.json"
    f.write_bytes(data)
    _accepts_or_refuses(checks.read_json, f, "config", "fix it")


@FUZZ
@given(data=st.binary(max_size=300) | json_values.map(lambda x: json.dumps(x).encode()))
def test_baseline_loader(tmp_path_factory, data):
    f = tmp_path_factory.mktemp("fuzzbase") / "base.json"
    f.write_bytes(data)
    _accepts_or_refuses(vf.check_baseline, str(f))


@FUZZ
@given(
    gate=st.dictionaries(
        st.sampled_from(
            [
                "engine",
                "engine_version",
                "fail_on",
                "min_cosine",
                "min_step1_accuracy",
                "min_tau",
                "max_regression",
                "num_steps",
                "max_new_tokens",
                "limit",
            ]
        ),
        st.booleans()
        | st.integers(-5, 10**7)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(alphabet=string.ascii_letters + ".", max_size=8),
        max_size=5,
    )
)
def test_policy_loader(tmp_path_factory, gate):
    tomllib = pytest.importorskip("tomllib")
    from eagle3_doctor.cli.gate_policy import Policy

    def toml_value(x):
        return ("true" if x else "false") if isinstance(x, bool) else json.dumps(x)

    f = tmp_path_factory.mktemp("fuzzpol") / "policy.toml"
    f.write_text("[gate]\n" + "".join(f"{k} = {toml_value(x)}\n" for k, x in gate.items()))
    assert isinstance(tomllib.loads(f.read_text()), dict)
    try:
        vf.check_policy_file(str(f))
        pol = Policy.load(str(f), {})
        v.check_policy_values(pol, "policy")
    except BadInput:
        pass


@FUZZ
@given(data=st.binary(max_size=400), name=st.sampled_from(["data_0.ckpt", "data_0.ckpt.gz", "data_0.safetensors"]))
def test_dump_file_checker(tmp_path_factory, data, name):
    d = tmp_path_factory.mktemp("fuzzdump")
    (d / name).write_bytes(data)
    _accepts_or_refuses(vf.check_dump, str(d))


@FUZZ
@given(path=st.text(alphabet=string.ascii_letters + "/._-~ \n[]", max_size=30))
def test_target_path_classifier(path):
    """Any string is a hub id or a local path; a local path that is missing is refused, never sent to the hub."""
    local = checks.looks_local(path)
    if not local:
        assert path.count("/") <= 1 and not path.startswith((".", "/", "~"))
    _accepts_or_refuses(checks.check_target, path) if local or os.path.exists(path) else None


@FUZZ
@given(path=st.text(alphabet=string.ascii_letters + "/._-", min_size=1, max_size=30))
def test_output_path_checkers(tmp_path_factory, path):
    base = tmp_path_factory.mktemp("fuzzout")
    (base / "afile").write_text("x")
    path = path.replace("..", "_").lstrip("/~") or "x"  # stay inside the temporary directory
    os.chdir(base)
    try:
        _accepts_or_refuses(vf.check_output_file, path, "--json")
        _accepts_or_refuses(vf.check_output_dir, path, "--report")
    finally:
        os.chdir(ROOT)


TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja"]


def _edit_json(raw: bytes, path: list[int], value) -> bytes:
    """``raw``'s JSON with the entry that ``path`` walks to (each int picks a key or an item, modulo) set to
    ``value``; a container met with no entries is where it stops."""
    obj = json.loads(raw)
    node, key = obj, None
    for i in path:
        if isinstance(node, dict) and node:
            key = sorted(node)[i % len(node)]
        elif isinstance(node, list) and node:
            key = i % len(node)
        else:
            break
        if not isinstance(node[key], (dict, list)):
            break
        node, key = node[key], None
    if key is not None:
        node[key] = value
    elif isinstance(node, dict):
        node["x"] = value
    return json.dumps(obj).encode()


tokenizer_edits = st.lists(
    st.tuples(
        st.sampled_from(TOKENIZER_FILES),
        st.sampled_from(["truncate", "value", "remove"]),
        st.integers(0, 10**6),
        st.lists(st.integers(0, 50), min_size=1, max_size=4),
        json_values,
    ),
    min_size=1,
    max_size=2,
)


def test_a_tokenizer_that_panics_the_tokenizers_library_is_refused_in_one_line(tmp_path):
    """A normalizer that replaces the empty string makes the tokenizers library panic at the first encode (pyo3's
    PanicException, a BaseException that `except Exception` lets through): the user's command answers in one line,
    exit 2, as for any other broken tokenizer file; the fuzz case above found it first."""
    import shutil

    target = tmp_path / "target"
    shutil.copytree(TARGET, target)
    tj = json.loads((target / "tokenizer.json").read_text())
    tj["normalizer"] = {"type": "Replace", "pattern": {"String": ""}, "content": "x"}
    (target / "tokenizer.json").write_text(json.dumps(tj))
    r = invoke("acceptance", "-t", target, "-d", DRAFTS["sglang"], "--engine", "sglang", "--prompts",
               ROOT / "fixtures" / "prompts.jsonl", "--limit", "1", "--max-new-tokens", "2")  # fmt: skip
    assert r.exit_code == 2 and "PanicException" in r.output and "Traceback" not in r.output, r.output
    assert len([ln for ln in r.output.splitlines() if ln.startswith("eagle3-doctor: error:")]) == 1, r.output


@FUZZ
@given(edits=tokenizer_edits, by_class=st.booleans())
def test_the_tokenizer_files_load_and_render_or_are_refused(tmp_path_factory, edits, by_class):
    """The target's tokenizer files truncated, removed or with any JSON value in any entry, on both routes a target's
    tokenizer loads by (the class its config names, AutoTokenizer): the tokenizer loads, renders a prompt through
    its chat template and encodes it, or one BadInput says what is wrong. The tokenizers library reports a
    tokenizer.json it cannot read as a bare Exception, Jinja a broken template as TemplateSyntaxError, a
    tokenizer_config.json value of the wrong type fails at the first encode: each was exit 3, "a bug"."""
    import shutil

    from eagle3_doctor.io.prompts import render
    from eagle3_doctor.model.tokenizer import load_tokenizer

    d = tmp_path_factory.mktemp("fuzztok")
    for f in (*TOKENIZER_FILES, "config.json"):
        shutil.copy(TARGET / f, d / f)
    for name, how, cut, path, value in edits:
        p = d / name
        if not p.exists():
            continue
        raw = p.read_bytes()
        if how == "truncate":
            p.write_bytes(raw[: cut % max(len(raw), 1)])
        elif how == "remove":
            p.unlink()
        elif name.endswith(".json"):
            try:
                p.write_bytes(_edit_json(raw, path, value))
            except ValueError:  # an earlier edit left it unparseable: edited as bytes instead
                p.write_bytes(raw[::-1])
        else:
            p.write_text(str(value))

    def use():
        tok = load_tokenizer(str(d), False, by_class=by_class)
        return tok(render(tok, [{"role": "user", "content": "hi"}], "prompt 1"), add_special_tokens=False)

    _accepts_or_refuses(use)
