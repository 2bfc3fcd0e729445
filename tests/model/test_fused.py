"""The native decoder's fused kernels (draft.gpu.fused: RMSNorm with its residual add, RoPE, SiLU x up) run
through Triton's interpreter on the CPU: each computes what PyTorch's ops compute (the add and RoPE to the bit), the
decoder over them gives PyTorch's tokens and features, a verify pass still gives a token its decode step's bits,
and which kernels run is one environment variable's answer (draft.gpu.kernels)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import interpret_triton_or_skip, random_draft

interpret_triton_or_skip("bench/check_kernels_gpu.py")

from eagle3_doctor.draft.gpu import fused, kernels  # noqa: E402


@pytest.fixture
def kernels_defined(triton_interpreter):
    fused._kernels.cache_clear()
    fused._runs.cache_clear()
    yield fused
    fused._kernels.cache_clear()
    fused._runs.cache_clear()


def _norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    x32 = x.float()
    return w * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.bfloat16])
def test_each_kernel_computes_what_pytorchs_ops_compute(kernels_defined, dtype):
    """The add and RoPE to the bit, rounded where PyTorch rounds them. Not checkable in bfloat16 here: the
    interpreter casts to it by truncation where a GPU rounds to nearest (the GPU's probe checks those bits)."""
    exact = dtype != torch.bfloat16
    g = torch.Generator().manual_seed(0)
    x, r = (torch.randn(2, 5, 80, generator=g).to(dtype) for _ in range(2))
    w = (1 + torch.randn(80, generator=g) / 4).to(dtype)
    total, normed = fused.add_rms_norm(x, r, w, 1e-6)
    assert torch.equal(total, x + r) or not exact
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 2e-2}
    torch.testing.assert_close(total, x + r, **tol)
    torch.testing.assert_close(normed, _norm(x + r, w, 1e-6), **tol)
    torch.testing.assert_close(fused.rms_norm(x, w, 1e-6), _norm(x, w, 1e-6), **tol)
    torch.testing.assert_close(fused.silu_mul(x, r), F.silu(x) * r, **tol)
    from eagle3_doctor.draft.rope import rope_cos_sin, rotate

    q = torch.randn(2, 3, 6, 16, generator=g).to(dtype)  # [B, n, heads, D], the projection's layout
    pos = torch.tensor([[4, 5, 6], [0, 1, 2]])
    cos, sin = rope_cos_sin(pos, 1.0 / 10000 ** (torch.arange(0, 16, 2).float() / 16), 1.0, dtype)
    got, want = fused.rope(q, cos, sin).transpose(1, 2), rotate(q.transpose(1, 2), cos, sin)
    assert got.shape == want.shape and (torch.equal(got, want) or not exact)
    torch.testing.assert_close(got, want, **tol)


def test_a_row_normalises_alike_whatever_the_rows_beside_it(kernels_defined):
    """One program a row: a verify pass of several tokens and a step of one give a token the same bits."""
    g = torch.Generator().manual_seed(1)
    x, r = (torch.randn(4, 6, 64, generator=g).to(torch.float16) for _ in range(2))
    w = torch.randn(64, generator=g).to(torch.float16)
    _total, whole = fused.add_rms_norm(x, r, w, 1e-5)
    for i in range(6):
        assert torch.equal(fused.add_rms_norm(x[:, i : i + 1], r[:, i : i + 1], w, 1e-5)[1], whole[:, i : i + 1])


@pytest.fixture
def fused_route(kernels_defined, monkeypatch):
    """The native decoder takes the fused kernels on the CPU in float32 (as it does on a GPU in 16 bits); the calls
    that reach each kernel are counted."""
    calls: dict[str, int] = {}
    monkeypatch.setattr(kernels, "wanted", lambda family, device, dtype: family == "fused")
    for name in ("rms_norm", "add_rms_norm", "rope", "silu_mul"):
        real = getattr(fused, name)
        monkeypatch.setattr(fused, name, lambda *a, _n=name, _r=real, **kw: (calls.__setitem__(_n, calls.get(_n, 0) + 1), _r(*a, **kw))[1])  # fmt: skip
    return calls


def test_prepare_checks_every_kernel_once_where_the_forward_will_ask(kernels_defined, monkeypatch):
    """A load runs the kernels' compile-and-check beside the weights' copy (model.target): the forward's own
    checks then find the answers made, under the key its tensors give."""
    monkeypatch.setattr(kernels, "wanted", lambda family, device, dtype: family == "fused")
    fused.prepare(torch.device("cpu"), torch.float32)
    made = fused._runs.cache_info()
    assert made.currsize == 3 and made.misses == 3
    x, w = torch.randn(2, 3, 64), torch.ones(64)
    assert fused.on("norm", x, w) and fused.on("rope", x, x) and fused.on("gated", x, x)
    assert fused._runs.cache_info().misses == 3  # nothing compiled or checked twice
    monkeypatch.setattr(kernels, "wanted", lambda *a: False)
    fused._runs.cache_clear()
    fused.prepare(torch.device("cpu"), torch.float32)
    assert fused._runs.cache_info().currsize == 0  # a route that will not run its kernels prepares nothing


def test_the_decoder_over_the_fused_kernels_gives_pytorchs_tokens_and_features(target, fused_route, monkeypatch):
    from eagle3_doctor.model.static import greedy_static

    ids = target.tokenizer("def calendar module fractions import return")["input_ids"]
    batch = torch.tensor([ids, ids[::-1]])
    fused_out = target.model.model(input_ids=batch, output_hidden_states=True)
    prompts = [ids, ids[:3]]
    got = greedy_static(target, prompts, 6)
    assert set(fused_route) == {"rms_norm", "add_rms_norm", "rope", "silu_mul"}
    monkeypatch.setattr(kernels, "wanted", lambda *a: False)
    plain_out = target.model.model(input_ids=batch, output_hidden_states=True)
    for a, b in zip(fused_out.hidden_states, plain_out.hidden_states):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert greedy_static(target, prompts, 6) == got


@pytest.mark.parametrize("interleaved", [False, True])
def test_the_draft_over_the_fused_kernels_gives_pytorchs_steps(fused_route, monkeypatch, interleaved):
    """The draft's norms, RoPE (GPT-J's pairs too, permuted first) and gated product on the kernels: every step of a
    teacher-forced unroll, its later steps from a base on included, is what PyTorch's ops give."""
    d = random_draft(rope_interleaved=interleaved)
    g = torch.Generator().manual_seed(1)
    aux, ids = torch.randn(2, 9, 192, generator=g), torch.randint(0, 100, (2, 9), generator=g)
    with torch.no_grad():
        got = [d.logits(h) for h in d.unroll(aux, ids, 3, from_base=2)]
        assert {"rms_norm", "rope", "silu_mul"} <= set(fused_route)
        monkeypatch.setattr(kernels, "wanted", lambda *a: False)
        want = [d.logits(h) for h in d.unroll(aux, ids, 3, from_base=2)]
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_the_speculative_continuation_over_every_kernel_is_the_plain_one(setup_sglang, kernels_defined, monkeypatch):
    """Verify passes of 1 + K queries through the fused kernels and the attention kernel together: the tokens are
    the plain continuation's, which runs them one query at a time."""
    from eagle3_doctor.analyses.acceptance.options import AcceptanceOptions
    from eagle3_doctor.analyses.spec_continuation import speculative_continue
    from eagle3_doctor.model.continuation import greedy_continue
    from eagle3_doctor.model.native import spans

    spans._kernel.cache_clear()
    monkeypatch.setattr(kernels, "wanted", lambda family, device, dtype: True)
    monkeypatch.setattr(spans, "_runs", lambda *a: True)
    ids = setup_sglang.target.tokenizer
    prompts = [ids(t)["input_ids"] for t in ("def calendar module", "import return self year")]
    plain = greedy_continue(setup_sglang.target, prompts, 8, 2)
    opts = AcceptanceOptions(num_steps=3, max_new_tokens=8)
    seqs, _ = speculative_continue(setup_sglang.target, setup_sglang.draft, setup_sglang.serving.spec, prompts, opts, 2,
                                   lambda *_: None)  # fmt: skip
    assert seqs == plain
    spans._kernel.cache_clear()


def test_a_kernel_that_does_not_run_leaves_pytorchs_op_with_one_warning(kernels_defined, monkeypatch):
    """Each kernel is checked on its own: one that fails (a compiler's error, bits off PyTorch's) leaves PyTorch's
    op in its place, with one warning naming it, and the others run."""
    cpu = torch.device("cpu")
    assert all(fused._runs(cpu, torch.float32, k) for k in ("norm", "rope", "gated"))
    fused._runs.cache_clear()
    monkeypatch.setattr(fused, "silu_mul", lambda *a: (_ for _ in ()).throw(RuntimeError("no C compiler")))
    real_rope = fused.rope
    monkeypatch.setattr(fused, "rope", lambda *a: real_rope(*a) * (1 + 2**-10))
    with pytest.warns(UserWarning, match="fused gated kernel did not run .no C compiler.; PyTorch's kernels run instead"):
        assert not fused._runs(cpu, torch.float32, "gated")
    with pytest.warns(UserWarning, match="fused rope kernel did not run .its RoPE is off by .* from PyTorch's"):
        assert not fused._runs(cpu, torch.float32, "rope")
    assert fused._runs(cpu, torch.float32, "norm")
    fused._runs.cache_clear()


@pytest.mark.parametrize(
    ("value", "families"),
    [("", {"attention", "fused"}), ("all", {"attention", "fused"}), ("torch", set()), ("attention", {"attention"}),
     (" Fused ", {"fused"})],
)  # fmt: skip
def test_one_variable_chooses_the_kernels(monkeypatch, value, families):
    monkeypatch.setenv(kernels.ENV, value)
    assert kernels.chosen() == families
    monkeypatch.setattr(kernels, "_triton", lambda: True)
    cuda = torch.device("cuda", 0)
    assert kernels.wanted("fused", cuda, torch.bfloat16) == ("fused" in families)
    assert not kernels.wanted("fused", cuda, torch.float32)  # 16-bit only
    assert not kernels.wanted("fused", torch.device("cpu"), torch.bfloat16)


def test_a_variable_naming_no_kernel_keeps_pytorchs_with_a_warning(monkeypatch):
    monkeypatch.setenv(kernels.ENV, "sdpa")
    kernels._warn_once.cache_clear()
    with pytest.warns(UserWarning, match="names no kernel family"):
        assert kernels.chosen() == frozenset()


def test_shapes_the_kernels_are_not_written_for_keep_pytorchs_ops(monkeypatch):
    """A head of 80 dims or a partial rotation is not rotated by the kernel, nor a row wider than it normalises: the
    decoder takes PyTorch's op there rather than failing."""
    monkeypatch.setattr(kernels, "wanted", lambda *a: True)
    monkeypatch.setattr(fused, "_runs", lambda *a: True)
    q, cos = torch.zeros(1, 2, 4, 80), torch.zeros(1, 1, 2, 80)
    assert not fused.on("rope", q, q, cos, cos)
    assert not fused.on("rope", torch.zeros(1, 2, 4, 128), torch.zeros(1, 2, 4, 128), torch.zeros(1, 1, 2, 64))
    assert fused.on("rope", torch.zeros(1, 2, 4, 128), torch.zeros(1, 2, 4, 128), torch.zeros(1, 1, 2, 128))
    assert not fused.on("norm", torch.zeros(2, fused.MAX_WIDTH * 2), torch.zeros(fused.MAX_WIDTH * 2))
    assert fused.on("norm", torch.zeros(2, 4096), torch.zeros(4096))
