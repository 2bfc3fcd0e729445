"""Prompt format: every input layout loads, malformed files fail in one line, and the template
diff names the first differing tokens with a fix that works."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import FIX, ROOT, TARGET

from eagle3_doctor.analyses.templates.chat_template import load_template
from eagle3_doctor.analyses.templates.diff import diff_conversation
from eagle3_doctor.analyses.templates.template_diff import template_diff
from eagle3_doctor.analyses.templates.tokenizers import load_tokenizer
from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.io.conversations import Conversation, load_dataset, load_requests

CONV = FIX / "conversations"
TPL = FIX / "templates"
TRAIN_TPL = str(TARGET / "chat_template.jinja")


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(str(TARGET))


# --------------------------------------------------------------------------- loading


def test_every_training_layout_loads_to_the_same_conversations():
    sets = {name: load_dataset(CONV / f"{name}.jsonl") for name in ("openai", "sharegpt", "specforge")}
    assert sets["openai"].layouts == ["openai"]
    assert sets["sharegpt"].layouts == ["sharegpt"]
    assert sets["specforge"].layouts == ["specforge"]
    msgs = {n: [c.messages for c in d.conversations] for n, d in sets.items()}
    assert msgs["openai"] == msgs["sharegpt"] == msgs["specforge"]
    assert len(msgs["openai"]) == 7 and {m["role"] for c in msgs["openai"] for m in c} == {"user", "assistant"}
    assert max(len(c) for c in msgs["openai"]) == 4  # the two-turn conversation


def test_tokenized_layout_and_its_loss_mask_load(tok):
    ds = load_dataset(CONV / "tokenized.jsonl")
    assert ds.layouts == ["tokenized"] and len(ds.tokenized) == 7 and not ds.conversations
    s = ds.tokenized[0]
    assert len(s.input_ids) == len(s.loss_mask) and 0 < sum(s.loss_mask) < len(s.loss_mask)
    # the committed ids are the training template's rendering of the same conversation
    conv = load_dataset(CONV / "openai.jsonl").conversations[0]
    assert s.input_ids == tok(tok.apply_chat_template(conv.messages, tokenize=False), add_special_tokens=False)["input_ids"]


def test_requests_load_as_chat_completions(tmp_path):
    reqs = load_requests(CONV / "requests.jsonl")
    assert len(reqs) == 16 and all(r.messages[-1]["role"] == "user" for r in reqs)
    one = tmp_path / "one.json"
    one.write_text(
        json.dumps(
            {
                "model": "m",
                "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                "chat_template_kwargs": {"enable_thinking": False},
                "tools": [],
            }
        )
    )
    (r,) = load_requests(one)
    assert r.messages == [{"role": "user", "content": "hi"}] and r.template_kwargs == {"enable_thinking": False}
    arr = tmp_path / "arr.json"
    arr.write_text(
        json.dumps([{"messages": [{"role": "user", "content": "a"}]}, {"messages": [{"role": "user", "content": "b"}]}])
    )
    assert [c.messages[0]["content"] for c in load_requests(arr)] == ["a", "b"]


MALFORMED = {
    "missing role": ('{"messages": [{"content": "hi"}]}', "has no 'role'"),
    "missing speaker": ('{"conversations": [{"from": "human", "value": "a"}, {"value": "b"}]}', "no 'from' speaker"),
    "unknown speaker": ('{"conversations": [{"from": "robot", "value": "a"}]}', "unknown speaker 'robot'"),
    "content wrong type": ('{"messages": [{"role": "user", "content": 5}]}', "content is int"),
    "messages not a list": ('{"messages": "hi"}', "must be a non-empty list"),
    "message not an object": ('{"messages": ["hi"]}', "message 0 is a str"),
    "no known key": ('{"text_only": "x"}', "no 'messages', 'conversations' or 'input_ids'"),
    "not an object": ("[1, 2]", "expected a JSON object"),
    "bad JSON line": ('{"messages": []}\n{oops', "line 2 is not valid JSON"),
    "input_ids wrong type": ('{"input_ids": [1, "a"]}', "'input_ids' must be a non-empty list of integers"),
    "loss_mask length": ('{"input_ids": [1, 2, 3], "loss_mask": [0, 1]}', "loss_mask must be 0/1 and as long"),
    "loss_mask values": ('{"input_ids": [1, 2], "loss_mask": [0, 2]}', "loss_mask must be 0/1"),
    "kwargs wrong type": (
        '{"messages": [{"role": "user", "content": "a"}], "chat_template_kwargs": [1]}',
        "chat_template_kwargs must be an object",
    ),
    "tools wrong type": ('{"messages": [{"role": "user", "content": "a"}], "tools": "x"}', "tools must be a list"),
    "empty": ("  \n", "is empty"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_data_is_one_clear_error(tmp_path, case):
    text, needle = MALFORMED[case]
    f = tmp_path / "data.jsonl"
    f.write_text(text)
    with pytest.raises(BadInput) as e:
        load_dataset(f)
    assert needle in str(e.value) and "fix:" in str(e.value)


def test_non_utf8_files_are_refused(tmp_path, tok):
    f = tmp_path / "latin1.jsonl"
    f.write_bytes('{"messages": [{"role": "user", "content": "caf\u00e9"}]}'.encode("latin-1"))
    with pytest.raises(BadInput, match="not UTF-8"):
        load_dataset(f)
    with pytest.raises(BadInput, match="not UTF-8"):
        load_requests(f)
    t = tmp_path / "t.jinja"
    t.write_bytes(b"\xff\xfe{{ messages }}")
    with pytest.raises(BadInput, match="not UTF-8"):
        load_template(str(t), str(TARGET), tok, side="serve")


def test_requests_refuse_tokenized_rows(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text('{"input_ids": [1, 2]}')
    with pytest.raises(BadInput, match="not input_ids"):
        load_requests(f)


def test_template_sources(tmp_path, tok):
    assert load_template(None, str(TARGET), tok, side="train").path == TRAIN_TPL
    assert load_template(str(TARGET), str(TARGET), tok, side="train").text == tok.chat_template
    cfg = tmp_path / "tokenizer_config.json"
    cfg.write_text(json.dumps({"chat_template": [{"name": "default", "template": "{{ messages }}"}]}))
    assert load_template(str(cfg), None, tok, side="train").text == "{{ messages }}"
    cfg.write_text(json.dumps({"bos_token": "x"}))
    with pytest.raises(BadInput, match="no chat_template"):
        load_template(str(cfg), None, tok, side="train")
    with pytest.raises(BadInput, match="is not a file or directory"):
        load_template("llama-9", None, tok, side="serve")
    (tmp_path / "empty.jinja").write_text("")
    with pytest.raises(BadInput, match="is empty"):
        load_template(str(tmp_path / "empty.jinja"), None, tok, side="serve")


def test_broken_template_fails_cleanly_on_render(tmp_path, tok):
    bad = tmp_path / "bad.jinja"
    bad.write_text("{% for m in messages %}{{ m['content'] }")
    serve = load_template(str(bad), None, tok, side="serve")
    train = load_template(None, str(TARGET), tok, side="train")
    with pytest.raises(BadInput, match="bad.jinja fails on"):
        diff_conversation(tok, train, serve, Conversation([{"role": "user", "content": "hi"}], "x"))


# --------------------------------------------------------------------------- the diff


def codes(res):
    return [f.code for f in res.findings]


def test_same_template_produces_no_finding():
    res = template_diff(str(TARGET), serve_template=TRAIN_TPL, requests=str(CONV / "requests.jsonl"))
    assert res.findings == [] and res.identical == res.conversations == 16


def test_foreign_template_names_the_first_differing_tokens_and_the_fix_works():
    res = template_diff(str(TARGET), serve_template=str(TPL / "chatml.jinja"), requests=str(CONV / "requests.jsonl"))
    assert "TPL001" in codes(res) and res.identical == 0
    f = next(f for f in res.findings if f.code == "TPL001")
    assert "16 of 16" in f.title
    assert "training token 0 ['<|user|>']" in f.evidence[1] and "serving token 0 ['<', '|', 'i', 'm'" in f.evidence[1]
    assert f.fix.startswith(f"launch the server with --chat-template {TRAIN_TPL}")
    fixed_tpl = f.fix.split("--chat-template ")[1].split(" ")[0]
    assert template_diff(str(TARGET), serve_template=fixed_tpl, requests=str(CONV / "requests.jsonl")).findings == []


def test_default_system_prompt_in_the_serving_template():
    res = template_diff(str(TARGET), serve_template=str(TPL / "default-system.jinja"), train_data=str(CONV / "sharegpt.jsonl"))
    assert codes(res) == ["TPL003"]
    assert "'<|system|>'" in res.findings[0].evidence[1]


def test_recipe_system_prompt_fix_is_the_request_message(tmp_path):
    res = template_diff(str(TARGET), train_system_prompt="You are a helpful assistant.", requests=str(CONV / "requests.jsonl"))
    assert codes(res) == ["TPL003"]
    assert '{"role": "system", "content": "You are a helpful assistant."}' in res.findings[0].fix
    # following the fix: the requests carry that system prompt
    reqs = [json.loads(ln) for ln in (CONV / "requests.jsonl").read_text().splitlines()]
    fixed = tmp_path / "fixed-requests.jsonl"
    fixed.write_text(
        "".join(
            json.dumps({**r, "messages": [{"role": "system", "content": "You are a helpful assistant."}] + r["messages"]}) + "\n"
            for r in reqs
        )
    )
    assert template_diff(str(TARGET), train_system_prompt="You are a helpful assistant.", requests=str(fixed)).findings == []


def test_bos_whitespace_and_thinking_differences(tmp_path, tok):
    base = tok.chat_template
    cases = {
        "bos": ("{{ bos_token }}" + base, "TPL002"),
        "ws": (base.replace("<|assistant|>\n{% endif %}", "<|assistant|>\n\n{% endif %}"), "TPL005"),
        "think": (
            base.replace("<|assistant|>\n{% endif %}", "<|assistant|>\n{% if enable_thinking %}<think>\n{% endif %}{% endif %}"),
            "TPL006",
        ),
    }
    for name, (text, code) in cases.items():
        f = tmp_path / f"{name}.jinja"
        f.write_text(text)
        res = template_diff(
            str(TARGET),
            serve_template=str(f),
            serve_kwargs={"enable_thinking": True},
            requests=str(CONV / "requests.jsonl"),
            limit=3,
        )
        assert codes(res) == [code], (name, [x.title for x in res.findings])


def test_training_conversations_are_cut_before_the_last_assistant_turn(tok):
    ds = load_dataset(CONV / "openai.jsonl")
    train = load_template(None, str(TARGET), tok, side="train")
    d = diff_conversation(tok, train, train, ds.conversations[-1])
    full = tok(
        tok.apply_chat_template(ds.conversations[-1].messages[:3], tokenize=False, add_generation_prompt=True),
        add_special_tokens=False,
    )["input_ids"]
    assert d.identical and d.train_len == len(full)


def test_cli_template_diff(tmp_path):
    import os
    import subprocess
    import sys

    env = dict(os.environ, COLUMNS="200", PYTHONPATH=str(ROOT))
    out = tmp_path / "r.json"
    wt = tmp_path / "train.jinja"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "eagle3_doctor.cli.app",
            "template-diff",
            "-t",
            str(TARGET),
            "--serve-template",
            str(TPL / "chatml.jinja"),
            "--requests",
            str(CONV / "requests.jsonl"),
            "--json",
            str(out),
            "--write-template",
            str(wt),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 1, r.stderr
    assert "error[TPL001]" in r.stdout and "--chat-template" in r.stdout
    assert wt.read_text() == (TARGET / "chat_template.jinja").read_text()
    data = json.loads(out.read_text())
    assert data["schema"] == "eagle3-doctor/template-diff/1" and data["findings"][0]["code"] == "TPL001"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": [{"content": "x"}]}')
    r = subprocess.run(
        [sys.executable, "-m", "eagle3_doctor.cli.app", "template-diff", "-t", str(TARGET), "--requests", str(bad)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("eagle3-doctor: error: ") and "has no 'role'" in lines[0]


def test_data_only_fixture_step_reproduces_the_committed_files(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "fx"
    (out / "target").mkdir(parents=True)
    for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(TARGET / f, out / "target" / f)
    shutil.copy(FIX / "prompts.jsonl", out / "prompts.jsonl")
    r = subprocess.run(
        [sys.executable, str(FIX / "build.py"), "--prompt-format-data", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    for sub in ("templates", "conversations"):
        for f in sorted((FIX / sub).iterdir()):
            assert (out / sub / f.name).read_bytes() == f.read_bytes(), f


# --------------------------------------------------------------------------- acceptance under both formats


def test_paired_bootstrap_is_seeded_and_brackets_the_difference():
    from eagle3_doctor.analyses.templates.by_format import paired_bootstrap

    acc_a, n_a = [10, 12, 9, 11, 10, 13], [8, 8, 8, 8, 8, 8]
    acc_b = [6, 7, 5, 6, 8, 6]
    one = paired_bootstrap(acc_a, n_a, acc_b, n_a, seed=3)
    assert one == paired_bootstrap(acc_a, n_a, acc_b, n_a, seed=3)
    assert one["lo"] <= one["diff"] <= one["hi"] < 0
    same = paired_bootstrap(acc_a, n_a, acc_a, n_a)
    assert same["diff"] == same["lo"] == same["hi"] == 0.0
    noisy = paired_bootstrap([10, 0, 10, 0], [8] * 4, [0, 10, 0, 10], [8] * 4)
    assert noisy["lo"] < 0 < noisy["hi"]


def _format_run(setup, serve_path, n):
    from eagle3_doctor.analyses.templates.by_format import acceptance_by_format

    tok = setup.target.tokenizer
    convs = load_requests(CONV / "requests.jsonl")[:n]
    train = load_template(None, str(TARGET), tok, side="train")
    serve = load_template(serve_path, str(TARGET), tok, side="serve")
    from eagle3_doctor.analyses.acceptance.options import AcceptanceOptions

    return acceptance_by_format(setup, convs, train, serve, AcceptanceOptions(num_steps=3, max_new_tokens=24, batch_size=8))


def test_acceptance_in_the_training_format_twice_differs_by_nothing(setup_sglang):
    cmp = _format_run(setup_sglang, TRAIN_TPL, 4)
    d = cmp.table["mean_acceptance_length_diff"]
    assert d["diff"] == d["lo"] == d["hi"] == 0.0 and cmp.table["identical_prompts"] == 4
    assert cmp.findings == []
    assert len(cmp.train.paths["serving"].step1_counts) == 4


def test_acceptance_in_a_foreign_format_is_lower_and_named(setup_sglang):
    cmp = _format_run(setup_sglang, str(TPL / "chatml.jinja"), 8)
    t = cmp.table
    assert t["serving_format"]["mean_acceptance_length"] < t["training_format"]["mean_acceptance_length"]
    assert {"TPL001", "TPL004"} <= {f.code for f in cmp.findings}
    d = t["mean_acceptance_length_diff"]
    assert d["lo"] <= d["diff"] <= d["hi"]
    if d["hi"] < 0:
        f = next(f for f in cmp.findings if f.code == "TPL008")
        assert "paired bootstrap over 8 prompts" in f.evidence[0] and "--chat-template" in f.fix


# --------------------------------------------------------------------------- tokenizer and data checks


def test_loss_mask_roles_and_data_report():
    res = template_diff(str(TARGET), train_data=str(CONV / "tokenized.jsonl"), train_tokenizer=str(TARGET))
    assert res.findings == []
    lm = res.data_report["loss_mask"]
    assert lm["trained_tokens_by_role"]["assistant"] > 0 and lm["trained_tokens_by_role"].get("user", 0) == 0
    rep = template_diff(str(TARGET), train_data=str(CONV / "openai.jsonl")).data_report
    assert rep["conversations"] == 7 and rep["with_system_prompt"] == 0 and abs(rep["average_user_turns"] - 8 / 7) < 1e-9


def test_a_loss_mask_on_user_tokens_and_a_double_bos_are_found(tmp_path, tok):
    rows = [json.loads(ln) for ln in (CONV / "tokenized.jsonl").read_text().splitlines()]
    bos = tok.bos_token_id
    bad = [{"input_ids": [bos] + r["input_ids"], "loss_mask": [1] * (len(r["input_ids"]) + 1)} for r in rows[:2]]
    bad[0]["input_ids"] = [bos] + bad[0]["input_ids"]
    bad[0]["loss_mask"] = [1] + bad[0]["loss_mask"]
    f = tmp_path / "tok.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in bad))
    res = template_diff(str(TARGET), train_data=str(f))
    by = {x.code: x for x in res.findings}
    assert "user" in by["TPL011"].title and by["TPL011"].severity == "warning"
    assert "1 of 2 tokenized" in by["TPL002"].title


def test_another_training_tokenizer_is_found(tmp_path):
    other = tmp_path / "tok"
    other.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TARGET / name, other / name)
    data = json.loads((other / "tokenizer.json").read_text())
    vocab = data["model"]["vocab"]
    a, b = sorted(vocab, key=vocab.get)[100:102]
    vocab[a], vocab[b] = vocab[b], vocab[a]  # two ids swapped: same size, other meaning
    (other / "tokenizer.json").write_text(json.dumps(data))
    cfg = json.loads((other / "tokenizer_config.json").read_text())
    cfg["eos_token"] = "<|endoftext|>"
    (other / "tokenizer_config.json").write_text(json.dumps(cfg))
    res = template_diff(str(TARGET), train_tokenizer=str(other), requests=str(CONV / "requests.jsonl"), limit=2)
    codes_ = [f.code for f in res.findings]
    assert "TPL009" in codes_ and "TPL010" in codes_
    assert "2 with another id" in next(f for f in res.findings if f.code == "TPL009").evidence[1]
