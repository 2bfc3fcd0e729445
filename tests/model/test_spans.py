"""The per-row attention kernel of the static decoders' GPU steps (model.native.spans), run through Triton's
interpreter on the CPU: it computes scaled-dot-product attention under the equivalent mask, a query gets the same
bits in a verify pass as in a decode step, and the decoders that take it on a GPU give the masked route's tokens,
the plain continuation and the speculative one alike."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import interpret_triton_or_skip

interpret_triton_or_skip("bench/bench_decode_attention.py")


@pytest.fixture
def spans(triton_interpreter):
    """The kernel module with its kernel defined under the interpreter (and defined afresh after the test)."""
    from eagle3_doctor.model.native import spans as mod

    mod._kernel.cache_clear()
    yield mod
    mod._kernel.cache_clear()


def _case(n: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    B, Hkv, G, L, D = 3, 2, 4, 200, 16
    k, v = torch.randn(B, Hkv, L, D, generator=g), torch.randn(B, Hkv, L, D, generator=g)
    q = torch.randn(B, Hkv * G, n, D, generator=g)
    return q, k, v, torch.tensor([0, 7, 70]), torch.tensor([100, 130, 190])


@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("n", [1, 5])
def test_the_kernel_is_attention_under_each_rows_span(spans, n, splits):
    """Rows of three padding depths, each at its own slot, a pass of one query and of five, in one program per
    row and head and split three ways along the slots: equal to SDPA under the boolean mask in float32."""
    q, k, v, start, first = _case(n)
    out = spans.attend(q, k, v, spans.Spans(start, first), q.shape[-1] ** -0.5, splits=splits)
    j = torch.arange(k.shape[2])
    seen = (j >= start[:, None, None]) & (j <= (first[:, None] + torch.arange(n))[:, :, None])
    g = q.shape[1] // k.shape[1]
    want = F.scaled_dot_product_attention(
        q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), attn_mask=seen[:, None], scale=q.shape[-1] ** -0.5
    )
    assert out.shape == want.shape
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    # a 0-d first: every row's queries at one slot, as the plain continuation's rows are
    shared = spans.attend(q, k, v, spans.Spans(start, torch.tensor(120)), q.shape[-1] ** -0.5, splits=splits)
    assert torch.equal(shared, spans.attend(q, k, v, spans.Spans(start, torch.full((3,), 120)), q.shape[-1] ** -0.5,
                                            splits=splits))  # fmt: skip


@pytest.mark.parametrize("splits", [1, 2])
def test_a_query_gets_the_same_bits_in_a_verify_pass_as_in_a_decode_step(spans, splits):
    q, k, v, start, first = _case(5, seed=1)
    scale = q.shape[-1] ** -0.5
    passed = spans.attend(q, k, v, spans.Spans(start, first), scale, splits=splits)
    for i in range(5):
        step = spans.attend(q[:, :, i : i + 1].contiguous(), k, v, spans.Spans(start, first + i), scale, splits=splits)
        assert torch.equal(passed[:, :, i : i + 1], step)


@pytest.fixture
def kernel_route(spans, monkeypatch):
    """The decoders take the kernel on the CPU (as they do on a GPU); the calls that reach it are counted."""
    from eagle3_doctor.model.native import decoder

    calls = []
    real = decoder.attend
    monkeypatch.setattr(spans, "usable", lambda device, dtype, head_dim, groups, n: groups * n <= spans.MAX_ROWS)
    monkeypatch.setattr(decoder, "attend", lambda *a, **kw: (calls.append(a[0].shape[2]), real(*a, **kw))[1])
    return calls


def _prompts(target, n: int) -> list[list[int]]:
    words = "def calendar module fractions import return self year width other op class".split()
    return [target.tokenizer(" ".join(words[i % 5 : i % 5 + 2 + i % 7]))["input_ids"] for i in range(n)]


def test_the_plain_continuation_over_the_kernel_is_the_masked_routes(target, spans, kernel_route, monkeypatch):
    from eagle3_doctor.model.static import greedy_static

    prompts = _prompts(target, 3)
    assert len({len(p) for p in prompts}) == 3
    got = greedy_static(target, prompts, 12)
    assert kernel_route and set(kernel_route) == {1}  # every step took the kernel, one query a row
    kernel_route.clear()
    monkeypatch.setattr(spans, "usable", lambda *a: False)  # the masked route
    assert greedy_static(target, prompts, 12) == got
    assert not kernel_route


def test_the_speculative_continuation_over_the_kernel_is_the_plain_one(setup_sglang, kernel_route):
    """Rows that advance apart (the ragged decoder's per-row slots), verify passes of 1 + K queries: the tokens
    are the plain continuation's, which takes the kernel one query at a time."""
    from eagle3_doctor.analyses.acceptance.options import AcceptanceOptions
    from eagle3_doctor.analyses.spec_continuation import speculative_continue
    from eagle3_doctor.model.continuation import greedy_continue

    prompts = _prompts(setup_sglang.target, 3)
    plain = greedy_continue(setup_sglang.target, prompts, 12, 3)
    opts = AcceptanceOptions(num_steps=3, max_new_tokens=12)
    seqs, _ = speculative_continue(setup_sglang.target, setup_sglang.draft, setup_sglang.serving.spec, prompts, opts, 3,
                                   lambda *_: None)  # fmt: skip
    assert seqs == plain
    assert 4 in kernel_route  # the verify passes took it too


def test_a_kernel_that_does_not_run_leaves_the_masked_route_with_one_warning(spans, monkeypatch):
    """The kernel is compiled and checked against SDPA once per shape, eagerly, before a graph capture could meet
    a compiler's failure; a failure means the masked route, said in one warning."""
    spans._runs.cache_clear()
    assert spans._runs(torch.device("cpu"), torch.float32, 32, 2, 4)
    spans._runs.cache_clear()
    monkeypatch.setattr(spans, "attend", lambda *a, **kw: (_ for _ in ()).throw(RuntimeError("no C compiler")))
    with pytest.warns(UserWarning, match="attention kernel did not run .no C compiler.; PyTorch's kernels run instead"):
        assert not spans._runs(torch.device("cpu"), torch.float32, 32, 2, 4)
    spans._runs.cache_clear()
