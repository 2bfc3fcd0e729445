"""Hostile inputs: every bad argument, path and file ends in ONE line, the right exit code, no traceback,
no hang, and the inputs untouched. 136 such inputs broke earlier versions; every class of them has cases here.

Cases run in-process (typer's CliRunner) with a SIGALRM watchdog. Cases marked ``pre`` must be refused
before any model is loaded: loading one fails the case. ``python tests/hostile/test_hostile.py --time`` runs the
pre-load cases as real processes and prints the rejection times that docs/reliability.md quotes.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import signal
import statistics
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: conftest, when run as a script
from conftest import DRAFTS, FIX, PROMPTS, ROOT, TARGET, invoke  # noqa: E402

D = DRAFTS["sglang"]
CH, ACC, INS, GATE = "compare-hidden", "acceptance", "inspect", "gate"


class _ModelLoaded(BaseException):
    """Raised if a pre-load case reaches the model loader (BaseException: the error boundary must not eat it)."""


class _Hang(BaseException):
    pass


# ----------------------------------------------------------------------------- hostile inputs, built once


def _safetensors(tensors: dict[str, tuple[str, list[int], bytes]]) -> bytes:
    header, blob, off = {}, b"", 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        blob += data
        off += len(data)
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + blob


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch /tmp/eagle3_doctor_hostile_pwned",))


class Hostile:
    """Named broken inputs under one directory. Checkpoint copies link their big weights (read-only use)."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def p(self, name: str) -> Path:
        return self.root / name

    def _copy(self, src: Path, name: str, link: tuple[str, ...] = ("model.safetensors",)) -> Path:
        d = self.p(name)
        d.mkdir()
        for f in src.iterdir():
            if f.name in link:
                os.symlink(f, d / f.name)
            else:
                shutil.copy(f, d / f.name)
        return d

    def target(
        self, name: str, edit: Callable[[dict], None] | None = None, link: tuple[str, ...] = ("model.safetensors",)
    ) -> Path:
        d = self._copy(TARGET, name, link)
        if edit:
            c = json.loads((d / "config.json").read_text())
            edit(c)
            (d / "config.json").write_text(json.dumps(c))
        return d

    def draft(
        self, name: str, edit: Callable[[dict], None] | None = None, link: tuple[str, ...] = ("model.safetensors",)
    ) -> Path:
        d = self._copy(D, name, link)
        if edit:
            c = json.loads((d / "config.json").read_text())
            edit(c)
            (d / "config.json").write_text(json.dumps(c))
        return d

    def file(self, name: str, data: bytes | str) -> Path:
        f = self.p(name)
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(data.encode() if isinstance(data, str) else data)
        return f

    def fifo(self, name: str) -> Path:
        f = self.p(name)
        f.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(f)
        return f


def _set(**kv):
    def edit(c: dict) -> None:
        c.update(kv)

    return edit


def _del(*keys):
    def edit(c: dict) -> None:
        for k in keys:
            c.pop(k, None)

    return edit


def build(root: Path) -> Hostile:
    h = Hostile(root)
    # targets
    h.target("t-layers-str", _set(num_hidden_layers="eight"))
    h.target("t-layers-1e9", _set(num_hidden_layers=10**9))
    h.target("t-layers-0", _set(num_hidden_layers=0))
    h.target("t-layers-neg", _set(num_hidden_layers=-1))
    h.target("t-layers-bool", _set(num_hidden_layers=True))
    h.target("t-layers-12", _set(num_hidden_layers=12))
    h.target("t-layers-missing", _del("num_hidden_layers"))
    h.target("t-hidden-0", _set(hidden_size=0))
    h.target("t-hidden-str", _set(hidden_size="big"))
    h.target("t-vocab-huge", _set(vocab_size=10**12))
    h.target("t-heads-float", _set(num_attention_heads=4.5))
    h.target("t-maxpos-neg", _set(max_position_embeddings=-4))
    t = h.target("t-no-config")
    (t / "config.json").unlink()
    t = h.target("t-config-dir")
    (t / "config.json").unlink()
    (t / "config.json").mkdir()
    t = h.target("t-config-fifo")
    (t / "config.json").unlink()
    os.mkfifo(t / "config.json")
    h.target("t-config-bad").joinpath("config.json").write_text("{not json")
    h.target("t-config-list").joinpath("config.json").write_text("[1, 2]")
    h.target("t-config-bin").joinpath("config.json").write_bytes(b"\xff\xfe\x00garbage")
    t = h.target("t-weights-dir")
    (t / "model.safetensors").unlink()
    (t / "model.safetensors").mkdir()
    t = h.target("t-weights-fifo")
    os.mkfifo(t / "extra.safetensors")
    t = h.target("t-trunc", link=())
    f = t / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-5000])
    t = h.target("t-header", link=())
    f = t / "model.safetensors"
    f.write_bytes((2**62).to_bytes(8, "little") + f.read_bytes()[8:])
    t = h.target("t-shard-missing")
    (t / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors"}})
    )
    t = h.target("t-index-bad")
    (t / "model.safetensors.index.json").write_text("{oops")
    t = h.target("t-index-list")
    (t / "model.safetensors.index.json").write_text(json.dumps({"weight_map": [1, 2]}))
    t = h.target("t-shard-escape")
    (t / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": "../../etc/passwd"}}))
    t = h.target("t-evil-bin")
    (t / "model.safetensors").unlink()
    with open(t / "pytorch_model.bin", "wb") as fh:
        pickle.dump({"model.embed_tokens.weight": _Evil()}, fh)
    # drafts
    d = h.draft("d-weights-dir")
    (d / "model.safetensors").unlink()
    (d / "model.safetensors").mkdir()
    d = h.draft("d-weights-fifo")
    (d / "model.safetensors").unlink()
    os.mkfifo(d / "model.safetensors")
    d = h.draft("d-no-weights")
    (d / "model.safetensors").unlink()
    d = h.draft("d-no-config")
    (d / "config.json").unlink()
    h.draft("d-config-bad").joinpath("config.json").write_text('{"architectures": ')
    h.draft("d-config-str").joinpath("config.json").write_text('"a string"')
    d = h.draft("d-trunc", link=())
    f = d / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-1000])
    d = h.draft("d-random", link=())
    (d / "model.safetensors").write_bytes(os.urandom(256))
    d = h.draft("d-int32", link=())
    (d / "model.safetensors").write_bytes(_safetensors({"fc.weight": ("I32", [128, 384], b"\0" * 4 * 128 * 384)}))
    h.draft("d-ids-str", lambda c: c["eagle_config"].update(eagle_aux_hidden_state_layer_ids=["1", "3", "4"]))
    h.draft("d-ids-nested", lambda c: c["eagle_config"].update(eagle_aux_hidden_state_layer_ids=[[1], [3], [4]]))
    h.draft("d-ids-scalar", lambda c: c["eagle_config"].update(eagle_aux_hidden_state_layer_ids=3))
    h.draft("d-ids-huge", lambda c: c["eagle_config"].update(eagle_aux_hidden_state_layer_ids=[1, 3, 10**9]))
    h.draft("d-ids-top-str", _set(eagle_aux_hidden_state_layer_ids="1,3,4"))
    h.draft("d-hidden-0", _set(hidden_size=0))
    h.draft("d-hidden-str", _set(hidden_size="wide"))
    h.draft("d-layers-1e9", _set(num_hidden_layers=10**9))
    h.draft("d-vocab-neg", _set(draft_vocab_size=-2))
    # prompts
    h.file("p-empty.jsonl", "\n\n")
    h.file("p-latin1.txt", "caf\xe9\n".encode("latin-1"))
    h.file("p-badjson.jsonl", '{"messages": [{"role": "user", "content": "hi"}]}\n{"messages": [\n')
    h.file("p-numbers.jsonl", "1\n2\n")
    h.file("p-shape.jsonl", '{"messages": [{"role": 3, "content": null}]}\n')
    h.file("p-noroles.jsonl", '{"foo": "bar"}\n')
    h.fifo("p-fifo.txt")
    (h.p("p-dir")).mkdir()
    # dumps
    (h.p("dump-empty")).mkdir()
    h.file("dump-zero/data_0.ckpt", b"")
    h.file("dump-gz/data_0.ckpt.gz", b"not gzip at all")
    h.file("dump-junk/data_0.ckpt", b"\x00junk" * 20)
    h.file("dump-st/data_0.safetensors", _safetensors({"input_ids": ("I64", [4], b"\0" * 32)})[:-8])
    h.fifo("dump-fifo/data_0.ckpt")
    with open(h.p("dump-evil.ckpt"), "wb") as fh:
        pickle.dump({"input_ids": _Evil()}, fh)
    import torch

    torch.save({"input_ids": torch.zeros(0, dtype=torch.long), "aux_hidden_state": torch.zeros(1, 0, 384)}, h.p("dump-len0.ckpt"))
    torch.save({"input_ids": torch.tensor([1, 2, 3]), "aux_hidden_state": torch.zeros(1, 3, 100)}, h.p("dump-width.ckpt"))
    # outputs
    (h.p("out-dir")).mkdir()
    h.file("out-file", "a file\n")
    # policies and baselines
    h.file("pol-bad.toml", "[gate\nmin_cosine = ")
    h.file("pol-str.toml", '[gate]\nmin_cosine = "high"\n')
    h.file("pol-unknown.toml", "[gate]\nmin_cosinus = 0.9\n")
    h.file("pol-steps0.toml", "[gate]\nnum_steps = 0\n")
    h.file("pol-limit-bool.toml", "[gate]\nlimit = true\n")
    h.file("pol-notable.toml", "gate = 5\n")
    h.file("pol-failon.toml", '[gate]\nfail_on = "fatal"\n')
    h.file("pol-engine.toml", '[gate]\nengine = "tgi"\n')
    h.file("pol-cos-range.toml", "[gate]\nmin_cosine = 3.0\n")
    h.file("pol-bin.toml", b"\xff\xfe\xfa")
    h.file("base-bad.json", "{nope")
    h.file("base-99.json", json.dumps({"schema": "eagle3-doctor/gate/99", "metrics": {"tau": 2.0}}))
    h.file("base-types.json", json.dumps({"schema": "eagle3-doctor/gate/1", "metrics": {"tau": "2.0", "step1_accuracy": [0.5]}}))
    h.file("base-nometrics.json", json.dumps({"schema": "eagle3-doctor/gate/1"}))
    h.file("base-list.json", "[1, 2, 3]")
    h.file("base-metrics-list.json", json.dumps({"schema": "eagle3-doctor/gate/1", "metrics": [1]}))
    h.fifo("base-fifo.json")
    build_round3(h)
    return h


# ----------------------------------------------------------------------------- the cases


@dataclass
class Case:
    id: str
    args: Callable[[Hostile], list]
    needle: str
    pre: bool = True  # refused before any model is loaded
    code: int = 2
    env: dict[str, Any] | None = None  # environment variables set for the run (e.g. $GITHUB_STEP_SUMMARY)


def ch(*extra):
    return lambda h: [CH, "--target", TARGET, "--draft", D, *[e(h) if callable(e) else e for e in extra]]


def acc(*extra):
    return lambda h: [ACC, "--target", TARGET, "--draft", D, *[e(h) if callable(e) else e for e in extra]]


def gate(*extra):
    return lambda h: [GATE, "--target", TARGET, "--draft", D, *[e(h) if callable(e) else e for e in extra]]


def with_target(name, cmd=CH):
    return lambda h: [cmd, "--target", h.p(name) if isinstance(name, str) else name, "--draft", D]


def with_draft(name, cmd=CH):
    return lambda h: [cmd, "--target", TARGET, "--draft", h.p(name) if isinstance(name, str) else name]


def P(name):
    return lambda h: str(h.p(name))


CASES = [
    # --- arguments: nonsense values (earlier versions accepted them silently, or crashed)
    Case("max-tokens-negative", ch("--max-tokens", "-5"), "--max-tokens -5 is out of range"),
    Case("max-tokens-zero", ch("--max-tokens", "0"), "--max-tokens 0"),
    Case("limit-negative", ch("--limit", "-1"), "--limit -1"),
    Case("limit-zero", ch("--limit", "0"), "--limit 0"),
    Case("topk-zero", acc("--topk", "0"), "--topk 0"),
    Case("topk-absurd", acc("--topk", "100000"), "--topk 100000"),
    Case("temperature-negative", acc("--temperature", "-1"), "--temperature -1"),
    Case("temperature-nan", acc("--temperature", "nan"), "--temperature nan"),
    Case("temperature-inf", acc("--temperature", "inf"), "--temperature inf"),
    Case("max-new-tokens-negative", acc("--max-new-tokens", "-3"), "--max-new-tokens -3"),
    Case("max-new-tokens-absurd", acc("--max-new-tokens", str(10**12)), "--max-new-tokens"),
    Case("num-steps-zero", acc("--num-steps", "0"), "--num-steps 0"),
    Case("num-steps-absurd", acc("-k", "100000"), "--num-steps 100000"),
    Case("num-draft-tokens-zero", acc("--num-draft-tokens", "0"), "--num-draft-tokens 0"),
    Case("min-accept-rate-above-1", acc("--min-accept-rate", "1.5"), "--min-accept-rate 1.5"),
    Case("min-tau-negative", acc("--min-tau", "-1"), "--min-tau -1"),
    Case("continuation-unknown", acc("--continuation", "sideways"), "--continuation"),
    Case("temperature-mode-unknown", acc("--temperature-mode", "magic"), "--temperature-mode"),
    Case("layer-ids-empty", ch("--layer-ids", ""), "--layer-ids ''"),
    Case("layer-ids-comma", ch("--layer-ids", ","), "--layer-ids"),
    Case("layer-ids-words", ch("--layer-ids", "a,b"), "--layer-ids"),
    Case("layer-ids-hole", ch("--layer-ids", "1,,3"), "--layer-ids"),
    Case("layer-ids-nested", ch("--layer-ids", "[[1],2]"), "--layer-ids"),
    Case("layer-ids-float", ch("--layer-ids", "1.5,2"), "--layer-ids"),
    Case("layer-ids-absurd", ch("--layer-ids", "1,3,99999999999"), "--layer-ids"),
    Case("batch-size-zero", ch("--batch-size", "0"), "--batch-size 0"),
    Case("batch-size-word", ch("--batch-size", "two"), "--batch-size 'two'"),
    Case("batch-size-negative", ch("--batch-size", "-4"), "--batch-size"),
    Case("batch-size-absurd", ch("--batch-size", "99999999"), "--batch-size 99999999"),
    Case("dtype-unknown", ch("--dtype", "float8"), "--dtype 'float8'"),
    Case("device-unknown", ch("--device", "gpu"), "--device 'gpu'"),
    Case("device-index-word", ch("--device", "cuda:x"), "--device"),
    Case("engine-unknown", ch("--engine", "tgi"), "--engine 'tgi'"),
    Case("engine-version-unknown", ch("--engine-version", "9.9"), "--engine-version 9.9"),
    Case("recipe-unknown", ch("--train-recipe", "bogus"), "--train-recipe 'bogus'"),
    Case("recipe-ids-words", ch("--train-recipe", "specforge:a,b"), "ids must be integers"),
    Case("recipe-empty", ch("--train-recipe", ""), "--train-recipe is empty"),
    Case("recipe-hf-no-ids", ch("--train-recipe", "hf-hidden-states"), "needs indices"),
    Case("draft-format-unknown", ch("--draft-format", "onnx"), "--draft-format 'onnx'"),
    Case("max-memory-lots", ch("--max-memory", "0=lots"), "'lots'"),
    Case("max-memory-no-equals", ch("--max-memory", "lots"), "not DEVICE=SIZE"),
    Case("max-memory-device-word", ch("--max-memory", "gpu=1GiB"), "device 'gpu'"),
    Case("device-map-bad-json", ch("--device-map", "{bad"), "not valid JSON"),
    Case("device-map-json-list", ch("--device-map", '{"a": [1]}'), "--device-map JSON"),
    Case("device-map-unknown", ch("--device-map", "everywhere"), "--device-map 'everywhere'"),
    Case("gate-min-cosine-range", gate("--min-cosine", "2"), "--min-cosine 2"),
    Case("gate-step1-negative", gate("--min-step1-accuracy", "-0.1"), "--min-step1-accuracy"),
    Case("gate-regression-negative", gate("--max-regression", "-1"), "--max-regression"),
    Case("gate-fail-on-unknown", gate("--fail-on", "fatal"), "--fail-on 'fatal'"),
    Case("gate-limit-zero", gate("--limit", "0"), "--limit 0"),
    # --- click usage errors, as one line
    Case("usage-missing-target", lambda h: [CH], "Missing option '--target'"),
    Case("usage-limit-word", ch("--limit", "two"), "--limit"),
    Case("usage-unknown-option", ch("--frobnicate"), "No such option: --frobnicate"),
    Case("usage-unknown-command", lambda h: ["diagnoze"], "No such command"),
    Case("usage-missing-draft", lambda h: [ACC, "--target", TARGET], "--draft"),
    Case("usage-int-as-float", ch("--max-tokens", "1e3"), "--max-tokens"),
    Case("usage-option-of-another-command", ch("--temperature", "0.5"), "No such option"),
    Case("usage-option-without-value", lambda h: [CH, "--target"], "--target"),
    Case("usage-float-word", acc("--temperature", "warm"), "--temperature"),
    # --- target paths
    Case("target-missing-dotslash", lambda h: [CH, "--target", "./no-such-model", "--draft", D], "does not exist"),
    Case("target-missing-under-existing-dir", lambda h: [CH, "--target", f"{FIX}/no-such-model", "--draft", D], "does not exist"),
    Case("target-missing-typo-of-local-dir", lambda h: [CH, "--target", "fixtures/targt", "--draft", D], "does not exist"),
    Case(
        "target-missing-absolute",
        lambda h: [CH, "--target", "/nonexistent/models/llama", "--draft", D],
        "/nonexistent/models/llama does not exist",
    ),
    Case("target-is-a-file", lambda h: [CH, "--target", PROMPTS, "--draft", D], "is a file, not a directory"),
    Case("target-newline-in-path", lambda h: [CH, "--target", "/nonexistent/a\nb", "--draft", D], "a\\nb"),
    Case("target-fifo", lambda h: [CH, "--target", h.p("p-fifo.txt"), "--draft", D], "named pipe"),
    Case("target-dev-null", lambda h: [CH, "--target", "/dev/null", "--draft", D], "is a device"),
    Case("target-empty-string", lambda h: [CH, "--target", "", "--draft", D], "--target is empty"),
    Case("target-under-a-file", lambda h: [CH, "--target", f"{PROMPTS}/model", "--draft", D], "is a file, not a directory"),
    Case("target-bad-hub-id", lambda h: [CH, "--target", "org/na me", "--draft", D], "does not exist"),
    Case("target-no-config", with_target("t-no-config"), "config.json does not exist"),
    Case("target-config-dir", with_target("t-config-dir"), "is a directory, not a file"),
    Case("target-config-fifo", with_target("t-config-fifo"), "named pipe"),
    Case("target-config-bad-json", with_target("t-config-bad"), "not valid JSON"),
    Case("target-config-list", with_target("t-config-list"), "not an object"),
    Case("target-config-binary", with_target("t-config-bin"), "not valid JSON"),
    Case("target-layers-string", with_target("t-layers-str"), 'num_hidden_layers is "eight"'),
    Case("target-layers-billion", with_target("t-layers-1e9"), "num_hidden_layers = 1000000000"),
    Case("target-layers-zero", with_target("t-layers-0"), "num_hidden_layers = 0"),
    Case("target-layers-negative", with_target("t-layers-neg"), "num_hidden_layers = -1"),
    Case("target-layers-bool", with_target("t-layers-bool"), "num_hidden_layers is true"),
    Case("target-layers-beyond-weights", with_target("t-layers-12"), "the weights hold 8 layers"),
    Case("target-layers-missing", with_target("t-layers-missing"), "lacks num_hidden_layers"),
    Case("target-hidden-zero", with_target("t-hidden-0"), "hidden_size = 0"),
    Case("target-hidden-string", with_target("t-hidden-str"), 'hidden_size is "big"'),
    Case("target-vocab-absurd", with_target("t-vocab-huge"), "vocab_size = 1000000000000"),
    Case("target-heads-float", with_target("t-heads-float"), "num_attention_heads is 4.5"),
    Case("target-max-positions-negative", with_target("t-maxpos-neg"), "max_position_embeddings = -4"),
    Case("target-weights-directory", with_target("t-weights-dir"), "is a directory, not a file"),
    Case("target-weights-fifo", with_target("t-weights-fifo"), "named pipe"),
    Case("target-weights-truncated", with_target("t-trunc"), "truncated"),
    Case("target-weights-absurd-header", with_target("t-header"), "corrupt safetensors header"),
    Case("target-shard-missing", with_target("t-shard-missing"), "model-00002-of-00002.safetensors"),
    Case("target-index-bad-json", with_target("t-index-bad"), "not valid JSON"),
    Case("target-index-not-a-map", with_target("t-index-list"), "no weight_map"),
    Case("target-index-shard-outside", with_target("t-shard-escape"), "outside the checkpoint directory"),
    Case("target-hostile-pickle", with_target("t-evil-bin"), "weights_only=True", pre=False),
    # --- inspect meets the same targets and drafts (earlier versions exited 1 with a traceback here)
    Case("inspect-layers-billion", with_target("t-layers-1e9", INS), "num_hidden_layers = 1000000000"),
    Case("inspect-layers-string", with_target("t-layers-str", INS), 'num_hidden_layers is "eight"'),
    Case("inspect-shard-missing", with_target("t-shard-missing", INS), "model-00002-of-00002.safetensors"),
    Case("inspect-index-bad-json", with_target("t-index-bad", INS), "not valid JSON"),
    Case("inspect-hidden-zero", with_target("t-hidden-0", INS), "hidden_size = 0"),
    Case("inspect-int32-draft", with_draft("d-int32", INS), "not a floating-point type"),
    Case("inspect-draft-weights-dir", with_draft("d-weights-dir", INS), "is a directory, not a file"),
    Case("inspect-draft-weights-fifo", with_draft("d-weights-fifo", INS), "named pipe"),
    Case("inspect-missing-target", lambda h: [INS, "--target", "./nope", "--draft", D], "does not exist"),
    # --- draft paths and configs
    Case("draft-missing", lambda h: [CH, "--target", TARGET, "--draft", h.p("no-such-draft")], "draft directory"),
    Case("draft-is-a-file", lambda h: [CH, "--target", TARGET, "--draft", D / "config.json"], "is a file, not a directory"),
    Case("draft-is-a-fifo", lambda h: [CH, "--target", TARGET, "--draft", h.p("p-fifo.txt")], "named pipe"),
    Case("draft-no-config", with_draft("d-no-config"), "config.json does not exist"),
    Case("draft-config-bad-json", with_draft("d-config-bad"), "not valid JSON"),
    Case("draft-config-string", with_draft("d-config-str"), "not an object"),
    Case("draft-weights-dir", with_draft("d-weights-dir"), "is a directory, not a file"),
    Case("draft-weights-fifo", with_draft("d-weights-fifo"), "named pipe"),
    Case("draft-no-weights", with_draft("d-no-weights"), "no *.safetensors"),
    Case("draft-weights-truncated", with_draft("d-trunc"), "truncated"),
    Case("draft-weights-random", with_draft("d-random"), "safetensors"),
    Case("draft-int32-weights", with_draft("d-int32"), "not a floating-point type"),
    Case("draft-ids-strings", with_draft("d-ids-str"), "expected a list of integers"),
    Case("draft-ids-nested", with_draft("d-ids-nested"), "expected a list of integers"),
    Case("draft-ids-scalar", with_draft("d-ids-scalar"), "expected a list of integers"),
    Case("draft-ids-absurd", with_draft("d-ids-huge"), "beyond any model's depth"),
    Case("draft-ids-top-level-string", with_draft("d-ids-top-str"), "expected a list of integers"),
    Case("draft-hidden-zero", with_draft("d-hidden-0"), "hidden_size = 0"),
    Case("draft-hidden-string", with_draft("d-hidden-str"), 'hidden_size is "wide"'),
    Case("draft-layers-billion", with_draft("d-layers-1e9"), "num_hidden_layers = 1000000000"),
    Case("draft-vocab-negative", with_draft("d-vocab-neg"), "draft_vocab_size = -2"),
    # --- prompt files
    Case("prompts-missing", ch("--prompts", P("nope.jsonl")), "does not exist"),
    Case("prompts-directory", ch("--prompts", P("p-dir")), "is a directory"),
    Case("prompts-fifo", ch("--prompts", P("p-fifo.txt")), "named pipe"),
    Case("prompts-dev-zero", ch("--prompts", "/dev/zero"), "is a device"),
    Case("prompts-empty", ch("--prompts", P("p-empty.jsonl")), "is empty"),
    Case("prompts-not-utf8", ch("--prompts", P("p-latin1.txt")), "not UTF-8"),
    Case("prompts-bad-json-line", ch("--prompts", P("p-badjson.jsonl")), "line 2"),
    Case("prompts-numbers", ch("--prompts", P("p-numbers.jsonl")), "expected a JSON object"),
    Case("prompts-bad-messages", ch("--prompts", P("p-shape.jsonl")), "message 0 has no 'role'"),
    Case("prompts-no-known-key", ch("--prompts", P("p-noroles.jsonl")), "'input_ids', 'text' or 'prompt'"),
    Case("prompts-under-a-file", ch("--prompts", lambda h: f"{PROMPTS}/x.jsonl"), "is a file, not a directory"),
    # --- training dumps
    Case("dump-missing", ch("--train-dump", P("no-dump")), "does not exist"),
    Case("dump-empty-dir", ch("--train-dump", P("dump-empty")), "no .ckpt"),
    Case("dump-zero-bytes", ch("--train-dump", P("dump-zero")), "is empty (0 bytes)"),
    Case("dump-gz-not-gzip", ch("--train-dump", P("dump-gz")), "not gzip"),
    Case("dump-junk", ch("--train-dump", P("dump-junk")), "neither a torch.save zip nor a pickle"),
    Case("dump-safetensors-truncated", ch("--train-dump", P("dump-st")), "safetensors"),
    Case("dump-fifo", ch("--train-dump", P("dump-fifo")), "named pipe"),
    Case("dump-hostile-pickle", ch("--train-dump", P("dump-evil.ckpt")), "weights_only=True", pre=False),
    Case("dump-zero-length-sequence", ch("--train-dump", P("dump-len0.ckpt")), "input_ids is empty", pre=False),
    Case("dump-wrong-width", ch("--train-dump", P("dump-width.ckpt")), "not a multiple of the target hidden size", pre=False),
    # --- output paths
    Case("json-is-directory", ch("--json", P("out-dir")), "--json"),
    Case("json-under-a-file", ch("--json", lambda h: f"{h.p('out-file')}/r.json"), "is a file, not a directory"),
    Case("json-in-proc", ch("--json", "/proc/eagle3-doctor.json"), "cannot write in /proc"),
    Case("json-empty", ch("--json", ""), "--json is empty"),
    Case("report-is-a-file", ch("--report", P("out-file")), "is a file, not a directory"),
    Case("report-under-a-file", ch("--report", lambda h: f"{h.p('out-file')}/rep"), "is a file, not a directory"),
    Case("report-in-proc", ch("--report", "/proc/eagle3-doctor-report"), "cannot write in /proc"),
    Case("plot-is-directory", ch("--plot", P("out-dir")), "is a directory"),
    Case("plot-no-writable-parent", ch("--plot", "/proc/none/x.png"), "cannot write in /proc"),
    Case("acceptance-plot-under-file", acc("--plot", lambda h: f"{h.p('out-file')}/a.png"), "is a file, not a directory"),
    Case("inspect-json-dir", lambda h: [INS, "--target", TARGET, "--draft", D, "--json", h.p("out-dir")], "--json"),
    Case("gate-summary-dir", gate("--summary", P("out-dir")), "--summary"),
    # --- gate policy and baseline
    Case("policy-missing", gate("--policy", P("nope.toml")), "does not exist"),
    Case("policy-directory", gate("--policy", P("out-dir")), "is a directory"),
    Case("policy-bad-toml", gate("--policy", P("pol-bad.toml")), "not valid TOML"),
    Case("policy-binary", gate("--policy", P("pol-bin.toml")), "not valid TOML"),
    Case("policy-min-cosine-string", gate("--policy", P("pol-str.toml")), 'min_cosine = "high" is not a number'),
    Case("policy-min-cosine-range", gate("--policy", P("pol-cos-range.toml")), "min_cosine 3.0"),
    Case("policy-unknown-key", gate("--policy", P("pol-unknown.toml")), "unknown key(s) min_cosinus"),
    Case("policy-num-steps-zero", gate("--policy", P("pol-steps0.toml")), "num_steps 0"),
    Case("policy-limit-bool", gate("--policy", P("pol-limit-bool.toml")), "limit = true is not an integer"),
    Case("policy-gate-not-a-table", gate("--policy", P("pol-notable.toml")), "gate is not a table"),
    Case("policy-fail-on-unknown", gate("--policy", P("pol-failon.toml")), "fail_on = 'fatal'"),
    Case("policy-engine-unknown", gate("--policy", P("pol-engine.toml")), "--engine 'tgi'"),
    Case("baseline-missing", gate("--baseline", P("nope.json")), "does not exist"),
    Case("baseline-bad-json", gate("--baseline", P("base-bad.json")), "not valid JSON"),
    Case("baseline-schema-99", gate("--baseline", P("base-99.json")), "schema 'eagle3-doctor/gate/99'"),
    Case("baseline-metric-types", gate("--baseline", P("base-types.json")), "not a number"),
    Case("baseline-no-metrics", gate("--baseline", P("base-nometrics.json")), "not a gate JSON"),
    Case("baseline-a-list", gate("--baseline", P("base-list.json")), "not a gate JSON"),
    Case("baseline-metrics-a-list", gate("--baseline", P("base-metrics-list.json")), "metrics is not an object"),
    Case("baseline-fifo", gate("--baseline", P("base-fifo.json")), "named pipe"),
    Case("baseline-is-the-draft-dir", gate("--baseline", lambda h: str(D)), "is a directory"),
]


# ----------------------------------------------------------------------------- outputs, code, files, writes, ranges
# Outputs aimed at inputs, custom code, FIFOs and oversized or self-multiplying files, writes the machine
# refuses, out-of-range numbers. In-process cases join CASES; the ones that need a real process (stdin,
# stdout on /dev/full, a file-size limit, a hang that must end within 10 s) join SUB_CASES. Each class
# adds its inputs to BUILDERS, which build() runs.

TD, SM, FP = "template-diff", "server-metrics", "fingerprint"


SERVING = FIX / "serving"


PROM = SERVING / "vllm-after-healthy.prom"


MARKER = Path("/tmp/eagle3_doctor_hostile_custom_code_ran")


SERVE_CMD = "python -m sglang.launch_server --model-path {t} --speculative-algorithm EAGLE3 --speculative-draft-model-path {d}"


def td(*extra):
    return lambda h: [TD, "--target", TARGET, *[e(h) if callable(e) else e for e in extra]]


def sm(*extra):
    return lambda h: [SM, "--metrics", PROM, *[e(h) if callable(e) else e for e in extra]]


def cmd(*parts):
    return lambda h: [e(h) if callable(e) else e for e in parts]


def sub(name, rel):
    return lambda h: str(h.p(name) / rel)


def _tokenizer_dir(h: Hostile, name: str, fifo: str | None = None) -> Path:
    d = h.p(name)
    d.mkdir()
    for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "config.json"):
        if f == fifo:
            os.mkfifo(d / f)
        else:
            shutil.copy(TARGET / f, d / f)
    return d


BUILDERS: list[Callable[[Hostile], None]] = []


def build_round3(h: Hostile) -> None:
    for b in BUILDERS:
        b(h)


@dataclass
class SubCase:
    id: str
    args: Callable[[Hostile], list]
    needle: str
    stdin_yes: bool = False  # `yes |`: a prompt on stdin would be answered "y"
    stdout_full: bool = False  # stdout is /dev/full
    timeout: int = 10  # the hang classes: an answer within 10 s, or the case fails
    code: int = 2
    report_first: bool = False  # the command's report goes to stderr first (--json -): the error is the last line


SUB_CASES: list[SubCase] = []


# --- outputs never land on inputs


def _build_overlap(h: Hostile) -> None:
    h.target("o-target")
    h.target("o-target-real", link=())  # its weights a real copy: --plot is aimed at them
    h.draft("o-draft")
    h.file("o-prompts.jsonl", PROMPTS.read_text())
    h.file("o-serve.txt", SERVE_CMD.format(t=TARGET, d=D))
    h.file("o-policy.toml", "[gate]\nmin_cosine = 0.9\n")
    h.file("o-base.json", json.dumps({"schema": "eagle3-doctor/gate/1", "metrics": {"tau": 2.0}}))
    h.file("o-metrics.prom", PROM.read_text())
    h.file("o-before.prom", (SERVING / "vllm-before.prom").read_text())
    h.file("o-server.log", "Decode batch. #running-req: 1, #token: 10, accept len: 2.50, gen throughput (token/s): 1\n")
    h.file("o-requests.json", json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    h.file("o-train.jsonl", json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}))
    h.file("o-train.jinja", (TARGET / "chat_template.jinja").read_text())
    h.file("o-serve.jinja", (TARGET / "chat_template.jinja").read_text())
    h.file("o-rep/acceptance.md", "a prompt that happens to be named like the report\n")
    h.file("o-dump/data_0.ckpt", b"\x80junk")
    h.file("o-edump/hidden.safetensors", b"junk")
    _tokenizer_dir(h, "o-tok")
    os.symlink(h.p("o-draft") / "config.json", h.p("o-link.json"))
    os.symlink(h.p("o-draft"), h.p("o-draft-link"))
    h.file("o-out/placeholder", "")


BUILDERS.append(_build_overlap)
OVERLAP = "writing it would overwrite an input"


SAME = "are the same file"


OVERLAP_CASES = [
    Case(
        "out-json-on-draft-config",
        cmd(CH, "--target", TARGET, "--draft", P("o-draft"), "--json", sub("o-draft", "config.json")),
        OVERLAP,
    ),
    Case(
        "out-json-on-target-config",
        cmd(CH, "--target", P("o-target"), "--draft", D, "--json", sub("o-target", "config.json")),
        OVERLAP,
    ),
    Case("out-json-on-prompts", ch("--prompts", P("o-prompts.jsonl"), "--json", P("o-prompts.jsonl")), "is --prompts"),
    Case(
        "out-json-on-serve-config", cmd(INS, "--serve-config", P("o-serve.txt"), "--json", P("o-serve.txt")), "is --serve-config"
    ),
    Case(
        "out-plot-on-target-weights",
        cmd(CH, "--target", P("o-target-real"), "--draft", D, "--plot", sub("o-target-real", "model.safetensors")),
        OVERLAP,
    ),
    Case(
        "out-json-through-symlink-to-draft-config",
        cmd(CH, "--target", TARGET, "--draft", P("o-draft"), "--json", P("o-link.json")),
        "resolves to",
    ),
    Case(
        "out-json-through-symlinked-dir",
        cmd(CH, "--target", TARGET, "--draft", P("o-draft"), "--json", sub("o-draft-link", "config.json")),
        OVERLAP,
    ),
    Case(
        "out-json-dotdot-into-draft",
        cmd(CH, "--target", TARGET, "--draft", P("o-draft"), "--json", sub("o-draft", "../o-draft/config.json")),
        OVERLAP,
    ),
    Case(
        "out-json-new-file-inside-draft",
        cmd(INS, "--target", TARGET, "--draft", P("o-draft"), "--json", sub("o-draft", "result.json")),
        "lies inside --draft",
    ),
    Case(
        "out-write-template-over-target-template",
        cmd(TD, "--target", P("o-target"), "--write-template", sub("o-target", "chat_template.jinja")),
        "lies inside --target",
    ),
    Case(
        "out-write-template-over-train-template",
        td("--train-template", P("o-train.jinja"), "--write-template", P("o-train.jinja")),
        "is --train-template",
    ),
    Case(
        "out-json-on-serve-template",
        td("--serve-template", P("o-serve.jinja"), "--json", P("o-serve.jinja")),
        "is --serve-template",
    ),
    Case("out-json-on-requests", td("--requests", P("o-requests.json"), "--json", P("o-requests.json")), "is --requests"),
    Case("out-json-on-train-data", td("--train-data", P("o-train.jsonl"), "--json", P("o-train.jsonl")), "is --train-data"),
    Case(
        "out-json-into-train-tokenizer",
        td("--train-tokenizer", P("o-tok"), "--json", sub("o-tok", "tokenizer.json")),
        "lies inside --train-tokenizer",
    ),
    Case(
        "out-template-diff-json-on-prompts", td("--prompts", P("o-prompts.jsonl"), "--json", P("o-prompts.jsonl")), "is --prompts"
    ),
    Case("out-summary-on-policy", gate("--policy", P("o-policy.toml"), "--summary", P("o-policy.toml")), "is --policy"),
    Case("out-json-on-baseline", gate("--baseline", P("o-base.json"), "--json", P("o-base.json")), "is --baseline"),
    Case(
        "out-step-summary-on-policy",
        gate("--policy", P("o-policy.toml")),
        "$GITHUB_STEP_SUMMARY",
        env={"GITHUB_STEP_SUMMARY": P("o-policy.toml")},
    ),
    Case("out-report-is-the-draft", cmd(INS, "--target", TARGET, "--draft", P("o-draft"), "--report", P("o-draft")), "--report"),
    Case(
        "out-report-inside-the-target",
        cmd(INS, "--target", P("o-target"), "--draft", D, "--report", sub("o-target", "rep")),
        "lies inside --target",
    ),
    Case("out-report-file-on-prompts", acc("--prompts", sub("o-rep", "acceptance.md"), "--report", P("o-rep")), "is --prompts"),
    Case(
        "out-json-into-train-dump", ch("--train-dump", P("o-dump"), "--json", sub("o-dump", "r.json")), "lies inside --train-dump"
    ),
    Case(
        "out-json-into-engine-dump",
        cmd(
            CH,
            "--engine-dump",
            P("o-edump"),
            "--train-dump",
            P("o-dump"),
            "--num-layers",
            "8",
            "--json",
            sub("o-edump", "r.json"),
        ),
        "lies inside --engine-dump",
    ),
    Case(
        "out-json-on-server-metrics",
        acc("--server-metrics", P("o-metrics.prom"), "--json", P("o-metrics.prom")),
        "is --server-metrics",
    ),
    Case("out-plot-on-server-log", acc("--server-log", P("o-server.log"), "--plot", P("o-server.log")), "is --server-log"),
    Case(
        "out-json-on-metrics-before",
        acc("--server-metrics", P("o-metrics.prom"), "--server-metrics-before", P("o-before.prom"), "--json", P("o-before.prom")),
        "is --server-metrics-before",
    ),
    Case(
        "out-server-metrics-json-on-scrape",
        cmd(SM, "--metrics", P("o-metrics.prom"), "--json", P("o-metrics.prom")),
        "is --metrics",
    ),
    Case(
        "out-server-metrics-json-on-before",
        cmd(SM, "--metrics", P("o-metrics.prom"), "--before", P("o-before.prom"), "--json", P("o-before.prom")),
        "is --before",
    ),
    Case(
        "out-server-metrics-json-on-log",
        cmd(SM, "--server-log", P("o-server.log"), "--json", P("o-server.log")),
        "is --server-log",
    ),
    Case(
        "out-json-into-draft-named-by-serve-cmd",
        cmd(INS, "--serve-cmd", lambda h: SERVE_CMD.format(t=TARGET, d=h.p("o-draft")), "--json", sub("o-draft", "config.json")),
        "lies inside --draft",
    ),
    Case("out-json-and-plot-collide", ch("--json", sub("o-out", "x.json"), "--plot", sub("o-out", "x.json")), SAME),
    Case("out-json-on-report-markdown", acc("--json", sub("o-out", "acc/acceptance.md"), "--report", sub("o-out", "acc")), SAME),
    Case("out-json-and-summary-collide", gate("--json", sub("o-out", "s.md"), "--summary", sub("o-out", "s.md")), SAME),
    Case(
        "out-summary-is-step-summary",
        gate("--summary", sub("o-out", "s.md")),
        SAME,
        env={"GITHUB_STEP_SUMMARY": sub("o-out", "s.md")},
    ),
    Case("out-write-template-and-json-collide", td("--write-template", sub("o-out", "t"), "--json", sub("o-out", "t")), SAME),
]
CASES += OVERLAP_CASES


# --- a checkpoint's own code never runs, whatever stdin says


def _custom_code(d: Path, config: dict) -> None:
    """A config naming its own Python (auto_map), whose import would leave MARKER behind."""
    body = f"open({str(MARKER)!r}, 'w').write('ran')\n"
    (d / "configuration_custom.py").write_text(
        body
        + "from transformers import PretrainedConfig\n\nclass CustomConfig(PretrainedConfig):\n    model_type = 'custom-xyz'\n"
    )
    (d / "tokenization_custom.py").write_text(
        body + "from transformers import PreTrainedTokenizerFast\n\nclass CustomTokenizer(PreTrainedTokenizerFast):\n    pass\n"
    )
    tok = [None, "tokenization_custom.CustomTokenizer"]
    auto = {"AutoConfig": "configuration_custom.CustomConfig", "AutoTokenizer": tok}
    (d / "config.json").write_text(json.dumps({**config, "model_type": "custom-xyz", "auto_map": auto}))
    (d / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "CustomTokenizer", "auto_map": {"AutoTokenizer": tok}})
    )


def _build_code(h: Hostile) -> None:
    d = h.p("c-tok")
    d.mkdir()
    shutil.copy(TARGET / "tokenizer.json", d / "tokenizer.json")
    _custom_code(d, {})
    t = h.target("c-target")
    _custom_code(t, json.loads((TARGET / "config.json").read_text()))


BUILDERS.append(_build_code)
SUB_CASES += [
    SubCase(
        "code-template-diff-target", cmd(TD, "--target", P("c-tok")), "needs its own Python code", stdin_yes=True, timeout=120
    ),
    SubCase(
        "code-template-diff-train-tokenizer",
        td("--train-tokenizer", P("c-tok"), "--prompts", PROMPTS),
        "needs its own Python code",
        stdin_yes=True,
        timeout=120,
    ),
    SubCase("code-compare-hidden-target", with_target("c-target"), "pass --trust-remote-code", stdin_yes=True, timeout=120),
    SubCase("code-acceptance-target", with_target("c-target", ACC), "pass --trust-remote-code", stdin_yes=True, timeout=120),
    SubCase("code-fingerprint-target", with_target("c-target", FP), "pass --trust-remote-code", stdin_yes=True, timeout=120),
]


# --- regular files only, bounded


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _laughs(levels: int = 9, fan: int = 9) -> str:
    """'Billion laughs' in YAML: each level an alias list of the one before, fan**levels strings in all."""
    lines = ["a0: &a0 [lol]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fan)}]")
    return "\n".join(lines) + "\n"


def _build_files(h: Hostile) -> None:
    for name in ("f-serve.txt", "f-metrics.prom", "f-before.prom", "f-log.txt", "f-policy.toml", "f-requests.json"):
        h.fifo(name)
    for name in ("f-train.jsonl", "f-train.jinja", "f-serve.jinja", "f-prompts.jsonl", "f-base.json"):
        h.fifo(name)
    _tokenizer_dir(h, "f-tok-config", fifo="tokenizer_config.json")
    _tokenizer_dir(h, "f-tok-json", fifo="tokenizer.json")
    _tokenizer_dir(h, "f-tok-template", fifo="chat_template.jinja")
    t = h.target("f-target-config")
    (t / "config.json").unlink()
    os.mkfifo(t / "config.json")
    h.file("b-laughs.yaml", _laughs())
    h.file("b-self.yaml", "a: &a [1, *a]\nspeculative_algorithm: EAGLE3\n")
    h.file("b-deep.yaml", "x: " + _nested(150) + "\n")
    h.file("b-deep.json", '{"method": "eagle3", "x": ' + _nested(150) + "}")
    h.file("b-deeper.json", '{"method": "eagle3", "x": ' + _nested(100_000) + "}")
    h.file("b-big.txt", "#" * (5 << 20))
    h.file("b-prompts-deep.jsonl", '{"messages": ' + _nested(100_000) + "}\n")
    h.file("b-requests-deep.json", '{"messages": ' + _nested(100_000) + "}")
    h.file("b-policy-deep.toml", "[gate]\nx = " + _nested(100_000) + "\n")
    h.file("b-base-deep.json", '{"metrics": ' + _nested(100_000) + "}")
    h.draft("b-draft-deep").joinpath("config.json").write_text('{"eagle_config": ' + "[" * 150 + "]" * 150 + "}")
    h.target("b-target-deep").joinpath("config.json").write_text('{"x": ' + _nested(100_000) + "}")


BUILDERS.append(_build_files)
FIFO = "named pipe (FIFO), not a regular file"


BOUNDED_CASES = [
    Case(
        "yaml-billion-laughs",
        cmd(INS, "--target", TARGET, "--draft", D, "--serve-config", P("b-laughs.yaml")),
        "more than 20 YAML aliases",
    ),
    Case(
        "yaml-alias-contains-itself",
        cmd(INS, "--target", TARGET, "--draft", D, "--serve-config", P("b-self.yaml")),
        "contains itself",
    ),
    Case(
        "yaml-too-deep", cmd(INS, "--target", TARGET, "--draft", D, "--serve-config", P("b-deep.yaml")), "nests deeper than 100"
    ),
    Case(
        "serve-config-json-too-deep",
        cmd(INS, "--target", TARGET, "--draft", D, "--serve-config", P("b-deep.json")),
        "nests deeper than 100",
    ),
    Case(
        "serve-config-json-recursion",
        cmd(INS, "--target", TARGET, "--draft", D, "--serve-config", P("b-deeper.json")),
        "nests deeper than 100",
    ),
    Case(
        "serve-config-oversized", cmd(INS, "--target", TARGET, "--draft", D, "--serve-config", P("b-big.txt")), "over the 4 MiB"
    ),
    Case("serve-config-dev-zero", cmd(INS, "--target", TARGET, "--draft", D, "--serve-config", "/dev/zero"), "is a device"),
    Case("server-metrics-dev-zero", cmd(SM, "--metrics", "/dev/zero"), "is a device"),
    Case("prompts-line-recursion", ch("--prompts", P("b-prompts-deep.jsonl")), "nests deeper than 100"),
    Case("requests-recursion", td("--requests", P("b-requests-deep.json")), "nests deeper than 100"),
    Case("policy-recursion", gate("--policy", P("b-policy-deep.toml")), "nests too deeply"),
    Case("baseline-recursion", gate("--baseline", P("b-base-deep.json")), "nests deeper than 100"),
    Case("draft-config-too-deep", with_draft("b-draft-deep"), "nests deeper than 100"),
    Case("target-config-recursion", with_target("b-target-deep"), "nests deeper than 100"),
    Case("serve-config-directory", cmd(INS, "--target", TARGET, "--draft", D, "--serve-config", P("p-dir")), "is a directory"),
    Case("server-log-directory", cmd(SM, "--server-log", P("p-dir")), "is a directory"),
]
CASES += BOUNDED_CASES
SUB_CASES += [
    SubCase("fifo-serve-config-inspect", cmd(INS, "--target", TARGET, "--draft", D, "--serve-config", P("f-serve.txt")), FIFO),
    SubCase("fifo-serve-config-acceptance", acc("--serve-config", P("f-serve.txt")), FIFO),
    SubCase("fifo-server-metrics", acc("--server-metrics", P("f-metrics.prom")), FIFO),
    SubCase("fifo-server-metrics-before", acc("--server-metrics", PROM, "--server-metrics-before", P("f-before.prom")), FIFO),
    SubCase("fifo-server-log", acc("--server-log", P("f-log.txt")), FIFO),
    SubCase("fifo-server-metrics-cmd-metrics", cmd(SM, "--metrics", P("f-metrics.prom")), FIFO),
    SubCase("fifo-server-metrics-cmd-before", sm("--before", P("f-before.prom")), FIFO),
    SubCase("fifo-server-metrics-cmd-log", cmd(SM, "--server-log", P("f-log.txt")), FIFO),
    SubCase("fifo-policy", gate("--policy", P("f-policy.toml")), FIFO),
    SubCase("fifo-baseline", gate("--baseline", P("f-base.json")), FIFO),
    SubCase("fifo-prompts", ch("--prompts", P("f-prompts.jsonl")), FIFO),
    SubCase(
        "fifo-engine-dump",
        cmd(CH, "--engine-dump", P("f-log.txt"), "--train-dump", FIX / "specforge-dump", "--num-layers", "8", "--draft", D),
        FIFO,
    ),
    SubCase("fifo-template-diff-prompts", td("--prompts", P("f-prompts.jsonl")), FIFO),
    SubCase("fifo-requests", td("--requests", P("f-requests.json")), FIFO),
    SubCase("fifo-train-data", td("--train-data", P("f-train.jsonl")), FIFO),
    SubCase("fifo-train-template", td("--train-template", P("f-train.jinja")), FIFO),
    SubCase("fifo-serve-template", td("--serve-template", P("f-serve.jinja")), FIFO),
    SubCase("fifo-tokenizer-config-in-target", cmd(TD, "--target", P("f-tok-config")), FIFO),
    SubCase("fifo-tokenizer-json-in-train-tokenizer", td("--train-tokenizer", P("f-tok-json")), FIFO),
    SubCase("fifo-template-in-train-template-dir", td("--train-template", P("f-tok-template")), FIFO),
    SubCase(
        "fifo-target-config-named-by-serve-cmd",
        cmd(INS, "--serve-cmd", lambda h: SERVE_CMD.format(t=h.p("f-target-config"), d=D)),
        FIFO,
    ),
]


# --- writes the machine refuses


def RO(name):
    """A path in a directory nobody may write: a 0555 directory, or /sys where root ignores the mode bits."""
    return lambda h: str(Path("/sys" if os.geteuid() == 0 else h.p("ro")) / name)


def _build_read_only(h: Hostile) -> None:
    ro = h.p("ro")
    ro.mkdir()
    os.chmod(ro, 0o555)


BUILDERS.append(_build_read_only)
WRITE_CASES = [
    Case("json-dev-full-server-metrics", sm("--json", "/dev/full"), "no space left on the device (ENOSPC)"),
    Case("json-dev-full-inspect", cmd(INS, "--target", TARGET, "--draft", D, "--json", "/dev/full"), "cannot write /dev/full"),
    Case("write-template-dev-full", td("--prompts", PROMPTS, "--write-template", "/dev/full"), "ENOSPC", pre=False),
    Case("json-read-only-dir", cmd(INS, "--target", TARGET, "--draft", D, "--json", RO("r.json")), "cannot write in"),
    Case("report-read-only-dir", cmd(INS, "--target", TARGET, "--draft", D, "--report", RO("rep")), "cannot write in"),
    Case("write-template-read-only-dir", td("--write-template", RO("t.jinja")), "cannot write in"),
    Case("server-metrics-json-read-only-dir", sm("--json", RO("m.json")), "cannot write in"),
    Case("summary-read-only-dir", gate("--summary", RO("s.md")), "cannot write in"),
    Case("step-summary-is-a-directory", gate(), "$GITHUB_STEP_SUMMARY", env={"GITHUB_STEP_SUMMARY": P("o-out")}),
    Case("step-summary-in-read-only-dir", gate(), "cannot write in", env={"GITHUB_STEP_SUMMARY": RO("s.md")}),
]
CASES += WRITE_CASES
SUB_CASES += [
    SubCase("stdout-full-server-metrics", sm(), "cannot write standard output: no space left", stdout_full=True, timeout=120),
    SubCase(
        "stdout-full-json-dash",
        sm("--json", "-"),
        "cannot write standard output",
        stdout_full=True,
        timeout=120,
        report_first=True,
    ),
    SubCase("stdout-full-inspect", cmd(INS, "--target", TARGET, "--draft", D), "ENOSPC", stdout_full=True, timeout=120),
    SubCase("stdout-full-explain", cmd("explain", "CAP001"), "ENOSPC", stdout_full=True, timeout=120),
    SubCase("stdout-full-help", cmd("--help"), "cannot write standard output", stdout_full=True, timeout=120),
    SubCase("stdout-full-command-help", cmd(INS, "--help"), "cannot write standard output", stdout_full=True, timeout=120),
    SubCase("stdout-full-version", cmd("--version"), "cannot write standard output", stdout_full=True, timeout=120),
    SubCase("stdout-full-bare", cmd(), "cannot write standard output", stdout_full=True, timeout=120),
]


# --- numbers out of range


def _build_ranges(h: Hostile) -> None:
    for tag, v in (("nan", "NaN"), ("inf", "Infinity"), ("neg", "-1e-06"), ("str", '"tiny"'), ("big", "2.0")):
        h.target(f"r-t-eps-{tag}").joinpath("config.json").write_text(
            (TARGET / "config.json").read_text().replace('"rms_norm_eps": 1e-06', f'"rms_norm_eps": {v}')
        )
    for tag, v in (("nan", "NaN"), ("inf", "Infinity"), ("minf", "-Infinity"), ("neg", "-1")):
        h.draft(f"r-d-eps-{tag}").joinpath("config.json").write_text(
            (D / "config.json").read_text().replace('"rms_norm_eps": 1e-06', f'"rms_norm_eps": {v}')
        )
    d = h._copy(DRAFTS["speculators"], "r-spec-eps-nan")
    c = json.loads((d / "config.json").read_text())
    c["transformer_layer_config"]["rms_norm_eps"] = float("nan")
    (d / "config.json").write_text(json.dumps(c))
    counter = "vllm:spec_decode_num_drafts_total"
    text = PROM.read_text()
    assert counter in text
    for tag, v in (("nan", "NaN"), ("neg", "-5"), ("inf", "+Inf")):
        lines = [ln if not ln.startswith(counter) else f"{ln.rsplit(' ', 1)[0]} {v}" for ln in text.splitlines()]
        h.file(f"r-prom-{tag}.prom", "\n".join(lines) + "\n")


BUILDERS.append(_build_ranges)
RANGE_CASES = [
    *[Case(f"target-eps-{t}", with_target(f"r-t-eps-{t}"), "rms_norm_eps") for t in ("nan", "inf", "neg", "str", "big")],
    *[Case(f"draft-eps-{t}", with_draft(f"r-d-eps-{t}"), "rms_norm_eps") for t in ("nan", "inf", "minf", "neg")],
    Case("draft-eps-nan-in-transformer-layer-config", with_draft("r-spec-eps-nan"), "rms_norm_eps = nan"),
    Case("inspect-target-eps-nan", with_target("r-t-eps-nan", INS), "rms_norm_eps = nan"),
    Case("acceptance-draft-eps-inf", with_draft("r-d-eps-inf", ACC), "rms_norm_eps = inf"),
    *[
        Case(f"server-metrics-counter-{t}", cmd(SM, "--metrics", P(f"r-prom-{t}.prom")), "counters are finite and never negative")
        for t in ("nan", "neg", "inf")
    ],
    Case("server-metrics-before-counter-negative", sm("--before", P("r-prom-neg.prom")), "is -5"),
    Case("acceptance-server-metrics-counter-nan", acc("--server-metrics", P("r-prom-nan.prom")), "is nan"),
    Case("template-diff-limit-zero", td("--limit", "0"), "--limit 0"),
    Case("template-diff-limit-negative", td("--limit", "-1"), "--limit -1"),
    Case("acceptance-max-new-tokens-zero", acc("--max-new-tokens", "0"), "--max-new-tokens 0 leaves no greedy continuation"),
    Case(
        "gate-policy-max-new-tokens-zero",
        gate("--policy", lambda h: str(h.file("r-pol-mnt0.toml", "[gate]\nmax_new_tokens = 0\nfingerprint = false\n"))),
        "max_new_tokens 0 is out of range: it must be at least 1",
    ),
    Case(
        "gate-policy-max-new-tokens-negative",
        gate("--policy", lambda h: str(h.file("r-pol-mnt.toml", "[gate]\nmax_new_tokens = -1\n"))),
        "max_new_tokens -1",
    ),
]
CASES += RANGE_CASES


# ----------------------------------------------------------------------------- running a case


def _snapshot(args: list) -> dict[str, str]:
    """sha256 of every regular file an argument names (directories walked; pipes and devices skipped)."""
    out = {}
    for a in args:
        p = Path(str(a))
        try:
            if not p.exists() or str(p).startswith(("/dev", "/proc")):
                continue
            files = [p] if p.is_file() else [f for f in p.rglob("*") if f.is_file()] if p.is_dir() else []
        except OSError:
            continue
        for f in files:
            out[str(f)] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="session")
def hostile(tmp_path_factory):
    return build(tmp_path_factory.mktemp("hostile"))


def run_case(args: list, *, pre: bool, timeout: int, monkeypatch=None):
    import eagle3_doctor.model.setup as loader
    import eagle3_doctor.model.target as target

    if pre and monkeypatch is not None:

        def refuse(*a, **k):
            raise _ModelLoaded("a model was loaded before the input was refused")

        monkeypatch.setattr(target, "load_target", refuse)
        monkeypatch.setattr(loader, "load_target", refuse)  # bound by name where Setup is loaded

    def hang(*_):
        raise _Hang(f"no answer within {timeout} s")

    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(timeout)
    t0 = time.perf_counter()
    try:
        r = invoke(*args, catch_exceptions=False)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return r, time.perf_counter() - t0


def assert_one_line(r, code: int, needle: str) -> str:
    assert "Traceback" not in r.output, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, f"exit {r.exit_code}, stderr:\n{r.stderr}\nstdout:\n{r.stdout[-2000:]}"
    line = lines[0]
    assert r.exit_code == code, (r.exit_code, line)
    assert line.startswith("eagle3-doctor: error: ") and " -- fix: " in line, line
    assert needle in line, (needle, line)
    return line


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input_is_refused_in_one_line(case: Case, hostile: Hostile, monkeypatch):
    args = case.args(hostile)
    for k, v in (case.env or {}).items():
        monkeypatch.setenv(k, v(hostile) if callable(v) else v)
    before = _snapshot(args)
    r, _ = run_case(args, pre=case.pre, timeout=30 if case.pre else 300, monkeypatch=monkeypatch)
    assert_one_line(r, case.code, case.needle)
    assert _snapshot(args) == before, "an input changed"
    assert not Path("/tmp/eagle3_doctor_hostile_pwned").exists(), "a pickle ran code"


def test_the_in_process_table_holds_at_least_120_cases_each_with_its_own_id():
    """The table above is the guard against regressions: it may grow, never quietly shrink or repeat an id."""
    assert len(CASES) >= 120
    assert len({c.id for c in CASES}) == len(CASES)


# ----------------------------------------------------------------------------- cases that need a real process


def run_sub(args: list, *, stdin_yes: bool = False, stdout_full: bool = False, timeout: int = 10, **kw):
    """The CLI as a real process (this checkout's copy), stdin and stdout as the case asks."""
    import subprocess

    root = ROOT
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")
    env.pop("GITHUB_STEP_SUMMARY", None)
    yes = subprocess.Popen(["yes"], stdout=subprocess.PIPE) if stdin_yes else None
    out = open("/dev/full", "w") if stdout_full else subprocess.PIPE
    try:
        return subprocess.run(
            [sys.executable, "-m", "eagle3_doctor", *map(str, args)],
            stdin=yes.stdout if yes else subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.PIPE,
            env=env,
            timeout=timeout,
            cwd=root,
            text=True,
            **kw,
        )
    finally:
        if yes is not None:
            yes.kill()
            yes.wait()
        if stdout_full:
            out.close()


def assert_one_stderr_line(r, code: int, needle: str) -> str:
    assert "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, f"exit {r.returncode}, stderr:\n{r.stderr}"
    assert r.returncode == code, (r.returncode, lines[0])
    assert lines[0].startswith("eagle3-doctor: error: ") and " -- fix: " in lines[0], lines[0]
    assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.mark.parametrize("case", SUB_CASES, ids=[c.id for c in SUB_CASES])
def test_hostile_input_in_a_real_process(case: SubCase, hostile: Hostile):
    MARKER.unlink(missing_ok=True)
    args = case.args(hostile)
    before = _snapshot(args)
    r = run_sub(args, stdin_yes=case.stdin_yes, stdout_full=case.stdout_full, timeout=case.timeout)
    if case.report_first:  # the report on stderr (stdout holds the JSON alone), then the one error line
        assert "Traceback" not in r.stderr, r.stderr
        r.stderr = r.stderr.rstrip().rsplit("\n", 1)[-1] + "\n"
    assert_one_stderr_line(r, case.code, case.needle)
    assert not MARKER.exists(), "a checkpoint's own Python code ran"
    assert _snapshot(args) == before, "an input changed"


def test_every_transformers_loader_is_told_about_remote_code():
    """Each from_pretrained in the package passes trust_remote_code explicitly: transformers' default asks on stdin."""
    import ast

    pkg = ROOT / "eagle3_doctor"
    calls = []
    for f in sorted(pkg.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "from_pretrained":
                calls.append((f"{f.name}:{node.lineno}", {k.arg for k in node.keywords}))
    assert len(calls) >= 4, calls
    missing = [where for where, kws in calls if "trust_remote_code" not in kws and None not in kws]
    assert not missing, f"from_pretrained without trust_remote_code: {missing}"


def _limit_file_size(limit: int) -> Callable[[], None]:
    def pre() -> None:
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write then fails with EFBIG instead of killing us
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return pre


def test_a_write_over_the_size_limit_keeps_the_old_file(tmp_path):
    """A real environment fault mid-write (ulimit -f): exit 2 with the path, the old result intact, no temp file."""
    old = tmp_path / "m.json"
    old.write_text("OLD\n")
    r = run_sub([SM, "--metrics", PROM, "--json", old], timeout=120, preexec_fn=_limit_file_size(256))
    assert_one_stderr_line(r, 2, f"cannot write {old}: the file is over the size limit")
    assert old.read_text() == "OLD\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


def test_a_fifo_whose_reader_leaves_mid_write_is_one_line(tmp_path):
    """--json into a FIFO whose reader goes away halfway (a real EPIPE): the path and the fix, exit 2."""
    import fcntl
    import select
    import subprocess

    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    rd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader exists, so the writer's open succeeds
    fcntl.fcntl(rd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 4096)  # the 6 KB JSON no longer fits in the pipe
    root = ROOT
    args = [CH, "--target", TARGET, "--draft", D, "--limit", "1", "--matrix", "-q", "--json", fifo]
    p = subprocess.Popen(
        [sys.executable, "-m", "eagle3_doctor", *map(str, args)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=root,
        env=dict(os.environ, PYTHONPATH=str(root)),
    )
    try:
        assert select.select([rd], [], [], 240)[0], "nothing was written into the FIFO"
        os.read(rd, 16)
    finally:
        os.close(rd)  # the reader leaves while the writer still has most of the JSON to write
    _, err = p.communicate(timeout=120)
    r = subprocess.CompletedProcess(p.args, p.returncode, "", err)
    assert_one_stderr_line(r, 2, f"cannot write {fifo}: the reader closed the pipe (EPIPE)")


WRITE_FAULTS = ["ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPIPE"]


@pytest.mark.parametrize("name", WRITE_FAULTS)
@pytest.mark.parametrize("out", ["--json", "--report"])
def test_a_refused_write_keeps_the_old_output(name, out, tmp_path, monkeypatch):
    """The disk refuses the result's bytes: one line naming the path, exit 2, the previous output as it was."""
    import errno

    import eagle3_doctor.io.outputs as outputs

    def refuse(f, data):
        f.write(data[: len(data) // 2])  # half of it reached the disk
        raise OSError(getattr(errno, name), os.strerror(getattr(errno, name)))

    monkeypatch.setattr(outputs, "_write_all", refuse)
    dest = tmp_path / ("r.json" if out == "--json" else "rep")
    if out == "--report":
        dest.mkdir()
        (dest / "inspect.md").write_text("OLD\n")
    else:
        dest.write_text("OLD\n")
    r = invoke(INS, "--target", TARGET, "--draft", D, out, dest, catch_exceptions=False)
    line = assert_one_line(r, 2, f"({name})")
    assert str(dest) in line
    assert (dest / "inspect.md" if out == "--report" else dest).read_text() == "OLD\n"
    leftovers = sorted(p.name for p in (dest.iterdir() if out == "--report" else tmp_path.iterdir()))
    assert leftovers == (["inspect.md"] if out == "--report" else ["r.json"])


def test_the_report_files_kept_apart_from_inputs_are_the_ones_written():
    """overlap.REPORT_FILES names what --report writes (report/render.py's OutputSet.add calls): a new file there is checked too."""
    import ast

    from eagle3_doctor.io.overlap import REPORT_FILES

    tree = ast.parse((ROOT / "eagle3_doctor" / "report" / "render.py").read_text(encoding="utf-8"))
    added = {
        n.args[0].value
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "add" and n.args and isinstance(n.args[0], ast.Constant)
    }
    assert added and added == set(REPORT_FILES), (sorted(added), REPORT_FILES)


def test_each_class_of_output_code_read_write_and_range_fault_has_at_least_five_cases():
    """Outputs landing on inputs, a checkpoint's own code, unbounded reads (FIFOs, devices), write faults of the
    environment and out-of-range values: each class keeps at least 5 cases, 60 in all, every id unique."""
    classes = {
        "outputs on inputs": len(OVERLAP_CASES),
        "custom code": sum(c.id.startswith("code-") for c in SUB_CASES),
        "regular files, bounded": len(BOUNDED_CASES) + sum(c.id.startswith("fifo-") for c in SUB_CASES),
        "environment write faults": len(WRITE_CASES) + sum(c.stdout_full for c in SUB_CASES) + 2 * len(WRITE_FAULTS) + 1,
        "ranges": len(RANGE_CASES),
    }
    assert sum(classes.values()) >= 60, classes
    assert min(classes.values()) >= 5, classes
    ids = [c.id for c in CASES] + [c.id for c in SUB_CASES]
    assert len(set(ids)) == len(ids)


def _timing_main() -> None:
    """Real processes, as a user meets them: wall and CPU time of every pre-load rejection.

    CPU time (user + sys of the child) is what a rejection costs; wall time also holds the wait for
    a core, so on a loaded machine it is the larger figure. Both are printed.
    """
    import resource
    import subprocess
    import tempfile

    root = ROOT
    with tempfile.TemporaryDirectory() as tmp:
        h = build(Path(tmp) / "hostile")
        walls, cpus, bad = [], [], []
        for c in CASES:
            if not c.pre:
                continue
            args = [str(a) for a in c.args(h)]
            extra = {k: str(v(h) if callable(v) else v) for k, v in (c.env or {}).items()}  # as the test sets them
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            r = subprocess.run(
                [sys.executable, "-m", "eagle3_doctor.cli.app", *args],
                capture_output=True,
                text=True,
                env=dict(os.environ, PYTHONPATH=str(root), **extra),
                timeout=120,
                cwd=root,
            )
            walls.append((time.perf_counter() - t0, c.id))
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append((r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, c.id))
            if r.returncode != c.code or len([x for x in r.stderr.splitlines() if x.strip()]) != 1:
                bad.append(c.id)

        def summary(xs):
            v = sorted(t for t, _ in xs)
            return (
                f"median {statistics.median(v):.3f} s, p90 {v[int(0.9 * (len(v) - 1))]:.3f} s, worst {v[-1]:.3f} s ({max(xs)[1]})"
            )

        print(
            f"{len(walls)} pre-load rejections as real processes (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
        )
        print(f"  wall: {summary(walls)}")
        print(f"  CPU:  {summary(cpus)}")
        print(f"  not one line / wrong code: {bad or 'none'}")


if __name__ == "__main__":
    if "--time" in sys.argv:
        _timing_main()


# --------------------------------------------------------------------------- signals from the first instruction


def _before_first_instruction(sig: str, returncode: int, err: str) -> bool:
    """Under load Python's own start-up (site, .pth files) can outlast the delay. No handler of ours
    exists then: SIGTERM kills silently, and SIGINT is Python's KeyboardInterrupt raised outside the
    console entry's ``run`` (once ``run`` has started, no handler of ours raises it, so a traceback
    through ``run`` is a real failure). test_signal_inside_import covers the handlers themselves."""
    if sig == "SIGTERM":
        return returncode == -signal.SIGTERM and not err.strip()
    entry = str(ROOT / "eagle3_doctor" / "cli" / "__init__.py")
    in_run = any(entry in ln and ln.rstrip().endswith(", in run") for ln in err.splitlines())
    return returncode == 1 and err.rstrip().endswith("KeyboardInterrupt") and not in_run


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("delay", [0.1, 0.3, 0.8, 2.0])
def test_a_signal_at_any_moment_of_start_up_is_one_line_and_the_shells_code(sig, delay, tmp_path):
    """The console entry takes SIGINT/SIGTERM before typer, rich or torch import; a command's own error
    boundary takes over once it runs: 130/143 and one line at every moment, never a traceback."""
    import subprocess

    code = {"SIGINT": 130, "SIGTERM": 143}[sig]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    args = ["compare-hidden", "--target", TARGET, "--draft", D, "--prompts", PROMPTS, "--json", tmp_path / "o.json", "-q"]
    p = subprocess.Popen(
        [sys.executable, "-m", "eagle3_doctor", *map(str, args)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    time.sleep(delay)
    p.send_signal(getattr(signal, sig))
    out, err = p.communicate(timeout=60)
    if p.returncode == 0:
        pytest.skip(f"the run finished within {delay} s on this machine: nothing left to interrupt")
    if _before_first_instruction(sig, p.returncode, err.decode()):
        pytest.skip(f"the signal came {delay} s in, while the interpreter was still starting: before any code of ours")
    # killed by the signal itself (-signum: Python re-raises an unhandled KeyboardInterrupt as SIGINT at exit)
    # is the same status to a shell, 128 + signum
    assert p.returncode in (code, -getattr(signal, sig)), (p.returncode, err.decode()[-2000:])
    lines = [ln for ln in err.decode().splitlines() if ln.strip()]
    assert "Traceback" not in err.decode() and len(lines) == 1 and lines[0].startswith("eagle3-doctor: "), lines
    assert not (tmp_path / "o.json").exists()


def test_importing_the_package_imports_nothing_before_the_entry_takes_signals():
    """``python -m eagle3_doctor`` imports the package before the console entry installs its SIGINT/SIGTERM
    handlers: whatever the package's ``__init__`` imports widens the window in which a signal is a traceback
    (a version lookup through importlib.metadata there did, and only a timing test caught it). It imports
    nothing, and the version is still there on first use."""
    import subprocess

    code = (
        "import sys; before = set(sys.modules); import eagle3_doctor; "
        "print(sorted(set(sys.modules) - before)); print(bool(eagle3_doctor.__version__))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.splitlines() == ["['eagle3_doctor']", "True"], out
