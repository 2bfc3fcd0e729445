"""The target's tokenizer read ahead by a helper process: the same ids, facts and refusals as the load in this
process, on the user's own path (the CLI in a process of its own) and function by function."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DRAFTS, PROMPTS, TARGET

from eagle3_doctor.core.errors import BadInput
from eagle3_doctor.io.prompts import load_prompts, tokenized
from eagle3_doctor.model import tokenizer as tk


def helper_for(monkeypatch, name: str, prompts: str | None, limit: int | None):
    """``tk.start`` as the CLI meets it, where transformers is not imported yet; the helper's answer taken."""
    with monkeypatch.context() as m:
        m.delitem(sys.modules, "transformers", raising=False)
        tk.start(name, prompts, limit)
    assert tk.started(name)
    return tk.taken(name)


def test_the_helpers_tokenizer_gives_what_the_load_here_gives(monkeypatch):
    real = tk.load_tokenizer(str(TARGET), False, by_class=True)
    ahead = helper_for(monkeypatch, str(TARGET), str(PROMPTS), 5)
    assert isinstance(ahead, tk.AheadTokenizer) and not tk.started(str(TARGET))
    assert ahead.tokenized_ahead(PROMPTS, 5) == tokenized(real, PROMPTS, 5)
    assert load_prompts(ahead, PROMPTS, max_tokens=7, limit=5) == load_prompts(real, PROMPTS, max_tokens=7, limit=5)
    for fact in tk.FACTS:
        assert getattr(ahead, fact) == getattr(real, fact), fact
    assert len(ahead) == len(real)
    # another file or limit than the helper read: tokenized here, by the tokenizer loaded here on first use
    assert ahead.tokenized_ahead(PROMPTS, 4) is None and ahead._real is None
    assert load_prompts(ahead, PROMPTS, max_tokens=None, limit=4) == load_prompts(real, PROMPTS, max_tokens=None, limit=4)
    assert ahead._real is not None and ahead.decode([5, 6]) == real.decode([5, 6])


def test_what_the_helper_cannot_read_is_refused_by_the_load_here(monkeypatch, tmp_path):
    """Broken tokenizer files or a prompts file with a bad record: the helper gives no answer (it runs without
    torch, so a failure there may be its own) and the command's own load and prompts refuse, with the line the
    command gives without a helper, where it gives it."""
    from eagle3_doctor.model.target import load_target

    broken = tmp_path / "target"
    shutil.copytree(TARGET, broken)
    (broken / "tokenizer.json").write_text("{not json")
    with pytest.raises(BadInput) as here:
        load_target(str(broken), dtype="float32", device="cpu")
    assert helper_for(monkeypatch, str(broken), None, None) is None
    with monkeypatch.context() as m:
        m.delitem(sys.modules, "transformers", raising=False)
        tk.start(str(broken), None, None)
    with pytest.raises(BadInput) as ahead:
        load_target(str(broken), dtype="float32", device="cpu")
    assert str(ahead.value) == str(here.value) and "cannot load the target tokenizer" in str(here.value)
    assert not tk.started(str(broken))

    bad = tmp_path / "prompts.jsonl"
    bad.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n{"neither": 1}\n')
    real = tk.load_tokenizer(str(TARGET), False, by_class=True)
    with pytest.raises(BadInput) as here:
        load_prompts(real, bad, max_tokens=None)
    assert helper_for(monkeypatch, str(TARGET), str(bad), None) is None
    with monkeypatch.context() as m:
        m.delitem(sys.modules, "transformers", raising=False)
        tk.start(str(TARGET), str(bad), None)
    tgt = load_target(str(TARGET), dtype="float32", device="cpu")
    with pytest.raises(BadInput) as ahead:
        load_prompts(tgt.tokenizer, bad, max_tokens=None)
    assert str(ahead.value) == str(here.value)


def test_a_helper_that_fails_leaves_the_load_here(monkeypatch):
    monkeypatch.setattr(sys, "executable", shutil.which("false") or "/bin/false")
    assert helper_for(monkeypatch, str(TARGET), None, None) is None


def test_a_helper_nobody_took_is_stopped_at_the_end(monkeypatch):
    with monkeypatch.context() as m:
        m.delitem(sys.modules, "transformers", raising=False)
        tk.start(str(TARGET), None, None)
    proc = tk._HELPERS[-1].proc
    tk._stop_all()
    assert proc.wait(timeout=30) != 0 and not tk.started(str(TARGET))


def _cli(tmp_path: Path, ahead: str) -> tuple[dict, str]:
    out = tmp_path / f"ahead{ahead}.json"
    args = ["acceptance", "--target", str(TARGET), "--draft", str(DRAFTS["sglang"]), "--engine", "sglang"]
    args += ["--prompts", str(PROMPTS), "--limit", "4", "--max-new-tokens", "12", "--dtype", "float32", "--json", str(out)]
    env = {**os.environ, "EAGLE3_DOCTOR_TOKENIZE_AHEAD": ahead}
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "eagle3_doctor", *args], env=env, capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(out.read_text())
    doc.pop("command", None)
    doc.pop("tool", None)
    return doc, p.stderr


def test_the_cli_measures_the_same_with_the_tokenizer_read_ahead(tmp_path):
    """The user's path: acceptance as typed, with the helper and without it, writes the same document; with it
    this process never imports transformers (the helper did, on another core)."""
    with_helper, imports = _cli(tmp_path, "1")
    without, imports_here = _cli(tmp_path, "0")
    assert with_helper == without
    assert " transformers" in imports_here and " transformers" not in imports


def test_the_native_load_takes_the_helpers_tokenizer_and_compiles_the_kernels_beside_the_copy(monkeypatch):
    import threading

    from eagle3_doctor.draft.gpu import fused
    from eagle3_doctor.model.target import load_target

    where: dict[str, str] = {}
    real_prepare = fused.prepare
    monkeypatch.setattr(
        fused, "prepare", lambda d, t: where.setdefault("kernels", threading.current_thread().name) and real_prepare(d, t)
    )
    with monkeypatch.context() as m:
        m.delitem(sys.modules, "transformers", raising=False)
        tk.start(str(TARGET), None, None)
    before = sys.getswitchinterval()
    tgt = load_target(str(TARGET), dtype="float32", device="cpu")
    assert tgt.forward == "native" and isinstance(tgt.tokenizer, tk.AheadTokenizer) and not tk.started(str(TARGET))
    assert where["kernels"] != threading.main_thread().name and sys.getswitchinterval() == before
    assert load_prompts(tgt.tokenizer, None, max_tokens=None)[0].ids and tgt.tokenizer._real is None


def test_the_helper_is_found_however_the_target_directory_is_spelled(monkeypatch, tmp_path):
    link = tmp_path / "linked-target"
    link.symlink_to(TARGET)
    rel = os.path.relpath(TARGET)
    ahead = helper_for(monkeypatch, rel, None, None)
    assert isinstance(ahead, tk.AheadTokenizer)
    with monkeypatch.context() as m:
        m.delitem(sys.modules, "transformers", raising=False)
        tk.start(str(link), None, None)
    assert tk.started(str(TARGET)) and isinstance(tk.taken(rel), tk.AheadTokenizer)
