"""The target's greedy continuation reports its progress per token, in order."""

from __future__ import annotations


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
