"""The static-cache decode path (CUDA-graphed on a GPU) gives transformers' own tokens and features:
greedy continuations equal ``generate``'s token for token in float32, the cached target's features equal
the dynamic cache's, and a model the path cannot hold (sliding-window layers) keeps ``generate``."""

from __future__ import annotations

import pytest
import torch

from eagle3_doctor.core.taps import final_norm, layer_out
from eagle3_doctor.model.continuation import _generate, greedy_continue
from eagle3_doctor.model.decode import CachedTarget
from eagle3_doctor.model.static import greedy_static, static_cache
from eagle3_doctor.model.target import Target


def _prompts(target, n: int) -> list[list[int]]:
    words = "def calendar module fractions import return self year width other op class".split()
    tok = target.tokenizer
    return [tok(" ".join(words[i % 5 : i % 5 + 2 + i % 7]))["input_ids"] for i in range(n)]


@pytest.mark.parametrize("forward", ["native", "transformers"])
@pytest.mark.parametrize("batch", [1, 3, 10])
def test_static_greedy_continuation_is_generates_token_for_token(target, hf_target, batch, forward):
    tgt = target if forward == "native" else hf_target
    assert tgt.forward == forward
    prompts = _prompts(target, 10)
    assert len({len(p) for p in prompts}) > 2  # ragged: rows of one batch carry different padding
    got = greedy_continue(tgt, prompts, 40, batch)
    want = [s for i in range(0, 10, batch) for s in _generate(hf_target, prompts[i : i + batch], 40, lambda k: None)]
    assert got == want
    assert greedy_static(tgt, prompts[:batch], 40) == want[:batch]  # the static path ran, not the fallback


def _model_target(target, family: str) -> Target:
    from transformers import AutoModelForCausalLM, GptOssConfig, Qwen3Config

    common = dict(vocab_size=320, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=256)
    cfg = {
        "qwen3": lambda: Qwen3Config(intermediate_size=128, num_key_value_heads=2, head_dim=16, **common),
        "gpt_oss": lambda: GptOssConfig(
            intermediate_size=64, num_key_value_heads=2, head_dim=16, num_local_experts=4, num_experts_per_tok=2,
            sliding_window=8, **common,
        ),
    }[family]()  # fmt: skip
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg).eval()
    return Target(model, target.tokenizer, cfg.to_dict(), family, torch.device("cpu"), torch.float32)


def test_another_family_decodes_the_same_over_the_static_cache(target):
    tgt = _model_target(target, "qwen3")
    prompts = _prompts(target, 4)
    assert static_cache(tgt, 4, 64) is not None
    assert greedy_static(tgt, prompts, 24) == _generate(tgt, prompts, 24, lambda k: None)


def test_sliding_window_layers_keep_transformers_generate(target):
    tgt = _model_target(target, "gpt_oss")
    prompts = _prompts(target, 3)
    assert static_cache(tgt, 3, 64) is None and greedy_static(tgt, prompts, 16) is None
    assert greedy_continue(tgt, prompts, 16, 3) == _generate(tgt, prompts, 16, lambda k: None)


@pytest.mark.parametrize("forward", ["native", "transformers"])
def test_the_cached_target_gives_the_dynamic_caches_features_and_tokens_over_the_static_cache(target, hf_target, forward):
    target = target if forward == "native" else hf_target
    spec = [layer_out(1), layer_out(4), final_norm()]
    dyn, st = CachedTarget(target, spec), CachedTarget(target, spec, max_len=64)
    assert (dyn.mode, st.mode) == ("eager", "static cache")
    prompt = torch.tensor([_prompts(target, 1)[0]])
    steps = [(prompt, True), (torch.tensor([[5, 9, 11]]), False), (torch.tensor([[7, 8]]), False)]
    for i, (ids, last) in enumerate(steps):
        if i == 2:  # the verified prefix only: the rejected tail of the last pass is dropped
            dyn.crop(dyn.length - 2), st.crop(st.length - 2)
        a, b = dyn.forward(ids, last_only=last), st.forward(ids, last_only=last)
        assert torch.allclose(a[0], b[0], atol=1e-5) and torch.equal(a[1], b[1])
        assert dyn.length == st.length
    st.reset()  # a new prompt over the same cache: nothing of the last one is seen
    assert st.length == 0
    again = st.forward(prompt, last_only=True)
    first = CachedTarget(target, spec).forward(prompt, last_only=True)
    assert torch.allclose(again[0], first[0], atol=1e-5) and torch.equal(again[1], first[1])


def test_a_continuation_batch_is_sized_by_its_kv_cache_not_a_forward(monkeypatch):
    """On a GPU the greedy continuation takes as many sequences as a static cache of their length fits beside
    one prefill: an 8B shape with 100 GB free runs 512 prompts x 512 tokens as one batch, where the forward's
    rule (capped at 64) ran eight; a longer context or less memory takes fewer; the CPU keeps 8."""
    from types import SimpleNamespace

    from eagle3_doctor.model.static import decode_batch_size, kv_bytes_per_token

    cfg = {"hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
           "num_hidden_layers": 32, "vocab_size": 128256}  # fmt: skip
    gpu = SimpleNamespace(config=cfg, device=torch.device("cuda"), dtype=torch.bfloat16, capture_device=None)
    assert kv_bytes_per_token(gpu) == 2 * 32 * 8 * 128 * 2
    free = [100 * 2**30]
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free[0], 141 * 2**30))
    n = decode_batch_size(gpu, 128, 640)
    assert n >= 512
    assert decode_batch_size(gpu, 8192, 8192 + 512) < n  # a long context: each sequence's cache is larger
    free[0] = 20 * 2**30
    assert 1 <= decode_batch_size(gpu, 128, 640) < n
    # the native decoder's prefill runs a capped group a forward: at 8k-token prompts a batch is sized by the
    # sequences' caches (about 1.1 GB each) beside one group's activations, not by every row's activations at once
    free[0] = 100 * 2**30
    native = SimpleNamespace(**vars(gpu), model=SimpleNamespace(native=True))
    long_hf, long_native = decode_batch_size(gpu, 8192, 8192 + 512), decode_batch_size(native, 8192, 8192 + 512)
    assert long_native > 2 * long_hf
    assert long_native * 8192 * kv_bytes_per_token(gpu) < 0.75 * free[0]
    assert decode_batch_size(SimpleNamespace(config=cfg, device=torch.device("cpu"), dtype=torch.float32), 128, 640) == 8


def test_attention_reads_the_written_slots_only_and_the_tokens_stay_generates(target, hf_target, monkeypatch):
    """Over the native cache a step attends the first W slots, W the written length rounded up to 256 slots
    (an eighth of it past 2,048): a continuation that crosses a window's end gives ``generate``'s tokens, and the
    windows it used are the rule's, growing with the length and never past the cache."""
    from eagle3_doctor.model.native.cache import StaticKV
    from eagle3_doctor.model.static import StaticDecoder

    seen: list[int] = []
    real = StaticKV.set_window
    monkeypatch.setattr(StaticKV, "set_window", lambda self, w: (seen.append(w), real(self, w))[1])
    prompts = _prompts(target, 3)
    got = greedy_static(target, prompts, 300)
    assert got == _generate(hf_target, prompts, 300, lambda k: None)
    assert seen[0] == 256 and 256 in seen and max(seen) == max(seen[-1], 256) > 256
    assert seen == sorted(seen)
    dec = StaticDecoder.__new__(StaticDecoder)
    dec.cache, dec.max_len = StaticKV(1, 1, 1, 40_000, 8, torch.float32, torch.device("meta")), 40_000
    assert [dec._window(e) for e in (1, 256, 257, 2048, 2049, 4097, 33_000, 39_999)] == [
        256, 256, 512, 2048, 2304, 4608, 36_864, 40_000
    ]  # fmt: skip


def test_prefill_groups_cover_every_row_once_within_the_slack():
    from eagle3_doctor.model.static import GROUP_SLACK, GROUP_TOKENS, prefill_groups

    lengths = [(i * 7919) % 3000 + 16 for i in range(400)]  # 16..3015 tokens: a ragged batch as users send it
    groups = prefill_groups(lengths)
    assert sorted(i for g in groups for i in g) == list(range(400))
    for g in groups:
        width = max(lengths[i] for i in g)
        padded, real = width * len(g), sum(lengths[i] for i in g)
        assert padded <= (1 + GROUP_SLACK) * real or width * (len(g) - 1) < GROUP_TOKENS
    total = sum(max(lengths[i] for i in g) * len(g) for g in groups)
    assert total <= 1.3 * sum(lengths) < max(lengths) * len(lengths) / 1.5  # one forward at the widest: 1.97x
    assert prefill_groups([60] * 512) == [list(range(512))]  # alike lengths: one forward, as before
    assert len(prefill_groups([5, 50, 500])) == 1  # fewer than GROUP_TOKENS padded tokens: one forward


def test_no_prefill_group_passes_its_token_cap():
    """Long prompts go a few rows a forward (a forward's activations grow with its tokens); a row past the cap is a
    group of its own; short ones still share one forward."""
    from eagle3_doctor.model.static import GROUP_MAX_TOKENS, prefill_groups

    assert prefill_groups([8192] * 16) == [list(range(i, i + 4)) for i in range(0, 16, 4)]
    assert prefill_groups([32768] * 4) == [[0], [1], [2], [3]]
    assert prefill_groups([40000, 100, 120]) == [[0], [2, 1]]
    lengths = [(i * 7919) % 9000 + 16 for i in range(300)]
    groups = prefill_groups(lengths)
    assert sorted(i for g in groups for i in g) == list(range(300))
    assert all(max(lengths[i] for i in g) * len(g) <= GROUP_MAX_TOKENS for g in groups)


def test_a_prefill_in_groups_gives_the_whole_batchs_features_cache_and_tokens(target, hf_target, monkeypatch):
    """Forced into groups of one or two rows, the native prefill writes every real slot of the cache, and returns
    the taps and the first tokens, that one forward over the whole left-padded batch does; the continuation stays
    generate's token for token."""
    from eagle3_doctor.model import static
    from eagle3_doctor.model.static import StaticDecoder, eos_and_pad, left_padded

    prompts = _prompts(target, 10)
    ids, pads = left_padded(prompts, eos_and_pad(target.tokenizer)[1])
    B, T = ids.shape
    real = torch.arange(T)[None, :] >= pads[:, None]

    def prefill(group_tokens: int):
        monkeypatch.setattr(static, "GROUP_TOKENS", group_tokens)
        monkeypatch.setattr(static, "GROUP_SLACK", 0.0)
        cache = static_cache(target, B, 64)
        dec = StaticDecoder(target, cache, B, 64, (layer_out(0), final_norm()))
        for last_only in (True, False):
            amax, taps = dec.prefill(ids, pads, last_only=last_only)
            yield amax, taps, [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]

    assert len(static.prefill_groups((T - pads).tolist())) == 1
    whole = list(prefill(1 << 30))
    monkeypatch.setattr(static, "GROUP_TOKENS", 1)
    monkeypatch.setattr(static, "GROUP_SLACK", 0.0)
    assert len(static.prefill_groups((T - pads).tolist())) > 3
    grouped = list(prefill(1))
    for (a0, t0, kv0), (a1, t1, kv1) in zip(whole, grouped):
        m = real if a0.shape[1] == T else torch.ones_like(a0, dtype=torch.bool)
        assert torch.equal(a0[m], a1[m])
        for p in t0:
            torch.testing.assert_close(t0[p][real], t1[p][real], rtol=1e-5, atol=1e-5)
        for (k0, v0), (k1, v1) in zip(kv0, kv1):
            slots = real[:, None, :, None].expand_as(k0[:, :, :T])
            torch.testing.assert_close(k0[:, :, :T][slots], k1[:, :, :T][slots], rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(v0[:, :, :T][slots], v1[:, :, :T][slots], rtol=1e-5, atol=1e-5)
    want = _generate(hf_target, prompts, 40, lambda k: None)
    assert greedy_static(target, prompts, 40) == want
