"""A decode step run in two staggered halves (model.native.halves) is the plain step: on the CPU, where the two
streams are one, the same tokens, taps and cache, on the continuation's own path."""

from __future__ import annotations

import pytest
import torch

from eagle3_doctor.core.taps import embed, final_norm, layer_out
from eagle3_doctor.model.continuation import _generate
from eagle3_doctor.model.native import halves
from eagle3_doctor.model.native.decoder import NativeModel
from eagle3_doctor.model.static import StaticDecoder, eos_and_pad, greedy_static, left_padded, static_cache


def _prompts(target, n: int) -> list[list[int]]:
    words = "def calendar module fractions import return self year width other op class".split()
    tok = target.tokenizer
    return [tok(" ".join(words[i % 5 : i % 5 + 2 + i % 7]))["input_ids"] for i in range(n)]


@pytest.fixture
def forced(monkeypatch):
    def force(on: bool) -> None:
        monkeypatch.setattr(NativeModel, "halves_forced", on)

    return force


def test_a_step_in_halves_gives_the_plain_steps_taps_tokens_and_cache(target, forced, monkeypatch):
    """Ragged rows, an odd batch (halves of 3 and 4): each step's argmax, every tap (the embedding layer 0's call
    sees, a middle layer's output, the final norm) and every key and value written equal the plain step's."""
    ran = []
    real_step = halves.step
    monkeypatch.setattr(halves, "step", lambda *a: ran.append(1) or real_step(*a))
    prompts = _prompts(target, 7)
    ids, pads = left_padded(prompts, eos_and_pad(target.tokenizer)[1])
    points = (embed(), layer_out(0), layer_out(1), final_norm())

    def run(on: bool):
        forced(on)
        cache = static_cache(target, len(prompts), 64)
        dec = StaticDecoder(target, cache, len(prompts), 64, points)
        cur, _ = dec.prefill(ids, pads)
        got = []
        for _ in range(6):
            amax, taps = dec.forward(cur)
            got.append((amax.clone(), {p: t.clone() for p, t in taps.items()}))
            cur = amax
        return got, [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]

    plain, kv0 = run(False)
    assert not ran
    split, kv1 = run(True)
    assert len(ran) == 6
    for (a0, t0), (a1, t1) in zip(plain, split):
        assert torch.equal(a0, a1)
        assert set(t0) == set(t1) == set(points)
        for p in points:
            torch.testing.assert_close(t0[p], t1[p], rtol=1e-5, atol=1e-5)
    for (k0, v0), (k1, v1) in zip(kv0, kv1):
        torch.testing.assert_close(k0, k1, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(v0, v1, rtol=1e-5, atol=1e-5)


def test_the_continuation_in_halves_stays_generates_token_for_token(target, hf_target, forced):
    prompts = _prompts(target, 10)
    forced(True)
    assert greedy_static(target, prompts, 40) == _generate(hf_target, prompts, 40, lambda k: None)


def test_halves_stay_off_where_they_cannot_apply(target, forced):
    """A prefill (several positions), one row, a speculative step's own write slots: the plain loop."""
    forced(True)
    cache = static_cache(target, 4, 64)
    h = torch.zeros(4, 1, 8)
    assert halves.applies(h, cache, None, force=True)
    assert not halves.applies(torch.zeros(4, 3, 8), cache, None, force=True)
    assert not halves.applies(torch.zeros(1, 1, 8), static_cache(target, 1, 64), None, force=True)
    cache.write_rows_at(torch.zeros(4, dtype=torch.long))
    assert not halves.applies(h, cache, None, force=True)
    forced(False)
    assert not halves.applies(torch.zeros(512, 1, 8), static_cache(target, 4, 64), None)  # the CPU: never by default
