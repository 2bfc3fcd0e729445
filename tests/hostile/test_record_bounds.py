"""Training data, prompts and requests of any size are read in bounded memory and time: one record longer than
any served context (a 200 MB JSONL line) is refused before it is parsed or tokenized, naming its line. It used
to be parsed, tokenized and held until the machine killed the run (20 GB after two minutes)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

import pytest
from conftest import DRAFTS, PROMPTS, ROOT, TARGET

from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.io.conversations import MAX_RECORD_CHARS, load_dataset

LONG = "a" * (MAX_RECORD_CHARS + 1)
SHORT = {"conversations": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}


def _long(layout: str) -> dict:
    return {
        "sharegpt": {"conversations": [{"from": "human", "value": LONG}]},
        "openai": {"messages": [{"role": "user", "content": LONG}]},
        "tokenized": {"input_ids": [1] * (MAX_RECORD_CHARS // 2 + 1), "loss_mask": [1] * (MAX_RECORD_CHARS // 2 + 1)},
    }[layout]


@pytest.mark.parametrize("layout", ["sharegpt", "openai"])
@pytest.mark.parametrize("shape", ["jsonl-line-2", "array-item-1", "one-object"])
def test_a_record_longer_than_any_context_is_refused_naming_it(shape, layout, tmp_path):
    p = tmp_path / "train.jsonl"
    rec = _long(layout)
    if shape == "jsonl-line-2":
        p.write_text(json.dumps(SHORT) + "\n" + json.dumps(rec) + "\n")
        where = f"{p} line 2"
    elif shape == "array-item-1":
        p.write_text(json.dumps([SHORT, rec]))
        where = f"{p} item 1"
    else:
        p.write_text(json.dumps(rec))
        where = f"{p} line 1"
    with pytest.raises(BadInput) as e:
        load_dataset(p)
    assert str(e.value).startswith(f"{where} is ") and "one record may hold" in str(e.value), str(e.value)


def test_records_within_the_bound_are_read(tmp_path):
    p = tmp_path / "train.jsonl"
    ok = {"conversations": [{"role": "user", "content": "b" * (1 << 20)}, {"role": "assistant", "content": "c"}]}
    p.write_text(json.dumps([SHORT] * 3 + [ok]))  # a minified array: one line, many records
    assert len(load_dataset(p).conversations) == 4


def _limit_memory() -> None:  # the run as it was could take the whole machine: cap it so a failure is quick
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))


def test_a_200_mb_training_line_is_refused_in_bounded_memory_and_time(tmp_path):
    p = tmp_path / "train.jsonl"
    with open(p, "w") as f:
        f.write('{"conversations": [{"role": "user", "content": "' + "a" * 200_000_000 + '"}]}\n')
    argv = ["diagnose", "-t", TARGET, "-d", DRAFTS["sglang"], "--engine", "sglang", "--prompts", PROMPTS, "--limit", "2",
            "--train-data", p, "-q"]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "eagle3_doctor", *map(str, argv)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, preexec_fn=_limit_memory)  # fmt: skip
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak memory
    took = time.monotonic() - t0
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert os.waitstatus_to_exitcode(status) == 2 and len(lines) == 1, err[-2000:]
    assert f"{p} line 1 is 200,000,052 characters" in lines[0], lines[0]
    assert took < 30, took
    assert usage.ru_maxrss < 1_500_000, f"{usage.ru_maxrss} KiB"  # the file is 200 MB; it used to take 20 GB
