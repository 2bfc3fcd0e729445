"""Training data and prompts read in every layout the recipes store, through one reader and one layout
detection: the prompts reader, the preflight and the data verdict read the same records."""

from __future__ import annotations

import json

import pytest
from conftest import FIX, TARGET

from eagle3_doctor.cli.validate_files import check_prompts
from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.io.conversations import TokenizedSample, load_dataset
from eagle3_doctor.io.prompts import load_prompts, read_prompt_file

CONV = FIX / "conversations"
LAYOUTS = ("openai", "sharegpt", "specforge", "tokenized")


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(TARGET)


def test_every_layout_gives_the_same_token_ids(tok):
    """fixtures/build.py writes one set of conversations four ways, the tokenized rows through the target's
    template: each layout must reach the measurement as the same sequences."""
    ids = {n: [p.ids for p in load_prompts(tok, CONV / f"{n}.jsonl", max_tokens=None)] for n in LAYOUTS}
    assert len(ids["openai"]) == 7
    assert all(ids[n] == ids["openai"] for n in LAYOUTS), {n: [len(s) for s in v] for n, v in ids.items()}


def test_the_preflight_accepts_every_layout_and_says_what_it_read():
    for n in LAYOUTS:
        check_prompts(str(CONV / f"{n}.jsonl"), "training data")
    assert isinstance(read_prompt_file(CONV / "tokenized.jsonl")[0], TokenizedSample)
    assert read_prompt_file(CONV / "sharegpt.jsonl")[0][0]["role"] == "user"  # type: ignore[index]


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\u0085"])
def test_a_unicode_line_boundary_inside_a_string_does_not_split_the_record(tmp_path, sep):
    """JSON allows these raw inside a string; str.splitlines() breaks at each of them."""
    rows = [
        {"messages": [{"role": "user", "content": f"one{sep}two"}, {"role": "assistant", "content": "ok"}]},
        {"conversations": [{"from": "human", "value": f"three{sep}"}]},
    ]
    f = tmp_path / "data.jsonl"
    f.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    assert sep in f.read_text(encoding="utf-8")  # written raw, not escaped
    items = read_prompt_file(f)
    assert [m["content"] for m in items[0]] == [f"one{sep}two", "ok"]  # type: ignore[index]
    assert items[1] == [{"role": "user", "content": f"three{sep}"}]
    ds = load_dataset(f)
    assert len(ds.conversations) == 2 and ds.conversations[0].messages[0]["content"] == f"one{sep}two"
    text = tmp_path / "prompts.txt"
    text.write_text(f"alpha{sep}beta\ngamma\n", encoding="utf-8")
    assert read_prompt_file(text) == [f"alpha{sep}beta", "gamma"]


def test_crlf_lines_still_read(tmp_path):
    f = tmp_path / "crlf.jsonl"
    f.write_bytes(b'{"input_ids": [1, 2, 3]}\r\n{"text": "hi"}\r\n')
    items = read_prompt_file(f)
    assert isinstance(items[0], TokenizedSample) and items[0].input_ids == [1, 2, 3] and items[1] == "hi"


def test_a_tokenized_row_outside_the_tokenizer_is_one_clear_error(tmp_path, tok):
    f = tmp_path / "t.jsonl"
    f.write_text(json.dumps({"input_ids": [1, len(tok) + 5]}) + "\n")
    with pytest.raises(BadInput, match=f"line 1: token id {len(tok) + 5} is outside"):
        load_prompts(tok, f, max_tokens=None)


def test_a_bare_message_list_is_one_conversation(tmp_path):
    """A prompts line may be the message list alone; a whole-file array of such messages is one too."""
    f = tmp_path / "bare.jsonl"
    f.write_text('[{"role": "user", "content": "hi"}]\n')
    assert read_prompt_file(f) == [[{"role": "user", "content": "hi"}]]
    assert len(load_dataset(f).conversations) == 1
