"""The target: its greedy continuation reports progress per token; the native load reads the tokenizer beside the
weights' copy; a device map's offload folder is removed at the end."""

from __future__ import annotations

from pathlib import Path


def test_greedy_continuation_reports_per_token(target):
    from eagle3_doctor.model.continuation import greedy_continue

    seen = []
    greedy_continue(target, [[1, 2, 3], [4, 5]], 6, 1, progress=lambda d, n: seen.append((d, n)))
    assert seen[-1] == (12, 12) and len(seen) >= 10
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_a_target_on_a_cuda_device_turns_the_per_shape_attention_plans_off(monkeypatch):
    """cuDNN's attention re-plans at every new KV length (a decode loop meets one each pass); a target
    placed on CUDA switches that backend off, one on the CPU leaves the setting alone."""
    import torch

    from eagle3_doctor.model.target import Target

    calls: list[bool] = []
    monkeypatch.setattr(torch.backends.cuda, "enable_cudnn_sdp", calls.append)
    Target(None, None, {}, "cpu target", torch.device("cpu"), torch.float32)
    assert calls == []
    Target(None, None, {}, "gpu target", torch.device("cuda", 0), torch.bfloat16)
    assert calls == [False]


def test_the_tokenizer_is_made_beside_the_weights_copy_and_the_kernels_and_its_refusal_is_one_line(monkeypatch, tmp_path):
    """The native load reads the tokenizer on a second thread while this one copies the weights and then prepares the
    fused kernels (the tokenizer outlasts the threaded copy); the interpreter's switch interval comes back as it was;
    a tokenizer that cannot load is still one BadInput."""
    import shutil
    import sys
    import threading

    import pytest
    from conftest import TARGET

    from eagle3_doctor.core.errors import BadInput
    from eagle3_doctor.draft.gpu import fused
    from eagle3_doctor.model import tokenizer as plan
    from eagle3_doctor.model.target import load_target

    where: dict[str, str] = {}
    real_tok, real_prepare = plan.load_tokenizer_class, fused.prepare
    monkeypatch.setattr(
        plan, "load_tokenizer_class", lambda p: where.setdefault("tokenizer", threading.current_thread().name) and real_tok(p)
    )
    monkeypatch.setattr(
        fused, "prepare", lambda d, t: where.setdefault("kernels", threading.current_thread().name) and real_prepare(d, t)
    )
    before = sys.getswitchinterval()
    tgt = load_target(str(TARGET), dtype="float32", device="cpu")
    assert tgt.forward == "native" and tgt.tokenizer("def")["input_ids"]
    assert where["tokenizer"] != where["kernels"] == threading.main_thread().name
    assert sys.getswitchinterval() == before
    broken = tmp_path / "target"
    shutil.copytree(TARGET, broken)
    (broken / "tokenizer.json").write_text("{not json")
    with pytest.raises(BadInput, match="cannot load the target tokenizer"):  # was a JSONDecodeError: exit 3, "a bug"
        load_target(str(broken), dtype="float32", device="cpu")
    # a refusal made inside the loader keeps its own line and fix, not wrapped in a second one
    (broken / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(BadInput) as refused:
        load_target(str(broken), dtype="float32", device="cpu")
    assert "tokenizer_config.json is not valid JSON" in str(refused.value)
    assert str(refused.value).count(" -- fix: ") == 1 and "BadInput" not in str(refused.value)
    assert sys.getswitchinterval() == before


def test_a_device_maps_offload_folder_is_removed_at_the_end(tmp_path, monkeypatch):
    """Each --device-map load makes a folder for accelerate's disk offload; the end of the process removes it."""
    import atexit
    import os

    import pytest
    import torch

    from eagle3_doctor.model import target as mod

    pytest.importorskip("accelerate")
    registered: list[object] = []
    monkeypatch.setattr(atexit, "register", registered.append)
    monkeypatch.setattr(mod, "_OFFLOADS", [])
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR read afresh
    first = mod._load_kwargs(torch.device("cpu"), "auto", None, False)["offload_folder"]
    second = mod._load_kwargs(torch.device("cpu"), "auto", None, False)["offload_folder"]
    assert first != second and all(os.path.isdir(p) and p.startswith(str(tmp_path)) for p in (first, second))
    (Path(first) / "offloaded.dat").write_bytes(b"x" * 1024)
    assert registered == [mod.remove_offload_folders]  # one handler, however many loads
    mod.remove_offload_folders()
    assert list(tmp_path.iterdir()) == []
