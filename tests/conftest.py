"""Shared test fixtures: the committed tiny target and draft under fixtures/, loaded once."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
TARGET = FIX / "target"
DRAFTS = {fmt: FIX / f"draft-{fmt}" for fmt in ("eagle", "sglang", "speculators")}
DUMP = FIX / "specforge-dump"
PROMPTS = FIX / "prompts.jsonl"
SERVING = FIX / "serving"  # server scrapes, logs and engine dumps: the serving side's own evidence

torch.set_num_threads(min(2, os.cpu_count() or 1))


def dotted(f: Path, root: Path) -> str:
    """The module name of file ``f`` under ``root`` (a package by its folder's name, not its ``__init__``)."""
    parts = f.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Every module of the package imported once before any test runs. A module that binds another's function by
    name at its first import (``from ..run import load_models``) bound whatever a monkeypatch had put there when
    that first import happened inside the patching test: run on their own, tests/hostile failed 13 tests after
    test_absurd_sizes.py patched ``load_models`` (the full suite's order had imported the module earlier)."""
    import importlib

    # every file, namespace packages (drafters/) included, which pkgutil's walk does not enter
    for f in sorted((ROOT / "eagle3_doctor").rglob("*.py")):
        if f.stem != "__main__":  # running the CLI is not importing it
            importlib.import_module(dotted(f, ROOT))


def invoke(*args, **kwargs):
    """The CLI in-process (typer's CliRunner) as a user types it: every argument str()-ed, the real program name."""
    from typer.testing import CliRunner

    from eagle3_doctor.cli.app import app

    return CliRunner().invoke(app, [str(a) for a in args], prog_name="eagle3-doctor", **kwargs)


@pytest.fixture(scope="session")
def target():
    from eagle3_doctor.model.target import load_target

    return load_target(str(TARGET), dtype="float32", device="cpu")


@pytest.fixture(scope="session")
def hf_target():
    """The fixture target on transformers' own model (the ``target`` fixture runs the native decoder)."""
    from eagle3_doctor.model.target import load_target

    return load_target(str(TARGET), dtype="float32", device="cpu", forward="transformers")


@pytest.fixture(scope="session")
def setup_sglang():
    from eagle3_doctor.doctor import load_setup

    return load_setup(target=str(TARGET), draft=str(DRAFTS["sglang"]), engine="sglang", dtype="float32", device="cpu")


@pytest.fixture()
def tmp_copy(tmp_path):
    """Copy a fixture directory into tmp_path so a test can break it."""

    def copy(src: Path, name: str | None = None) -> Path:
        dst = tmp_path / (name or src.name)
        shutil.copytree(src, dst)
        return dst

    return copy


def assert_hooks_match_hidden_states(model, ids):
    """hs[0]==embed, hs[i]==layer_out[i-1], hs[L]==final_norm, bit for bit; returns (captures, hs)."""
    from eagle3_doctor.core.taps import TapRecorder, all_points, embed, final_norm, layer_out

    L = model.config.num_hidden_layers
    with torch.no_grad():
        hs = model(input_ids=ids, output_hidden_states=True).hidden_states
        with TapRecorder(model, all_points(L)) as rec:
            model(input_ids=ids)
            got = rec.take()
    assert len(hs) == L + 1
    torch.testing.assert_close(got[embed()], hs[0], rtol=0, atol=0)
    for i in range(1, L):
        torch.testing.assert_close(got[layer_out(i - 1)], hs[i], rtol=0, atol=0)
    torch.testing.assert_close(got[final_norm()], hs[L], rtol=0, atol=0)
    return got, hs


def path_result(chain, *, name="serving", acc_k=(0.4, 0.2), tau=1.4, triage=(), buckets=()):
    """A PathResult built by hand (renderers and triage tested without a replay); ``chain``: ChainMetrics."""
    from eagle3_doctor.analyses.results import PathResult, PositionBucket

    return PathResult(
        name=name,
        acc_k=list(acc_k),
        acc_k_positions=[],
        tau=tau,
        chain=chain,
        step1_by_position=[PositionBucket(*b) for b in buckets],
        per_request_mean_acceptance_length=float("nan"),
        accepted_lengths=[],
        acc_k_by_request=[],
        step1_counts=[],
        triage=list(triage),
    )


def two_layer_draft(dst: Path, fmt: str = "speculators") -> Path:
    """A two-decoder-layer copy of a fixture draft: layer 1 takes the first layer's structure (the
    hidden half of q/k/v, its MLP and norms, each perturbed so no tensor is a copy), written under
    layers.1.* as speculators and vLLM name later layers."""
    from safetensors.torch import load_file, save_file

    src = DRAFTS[fmt]
    shutil.copytree(src, dst)
    sd = load_file(src / "model.safetensors")
    pre = "layers.0." if fmt == "speculators" else "midlayer."
    H = sd[pre + "hidden_norm.weight"].shape[0]
    new = {
        "input_layernorm.weight": sd[pre + "hidden_norm.weight"],
        "post_attention_layernorm.weight": sd[pre + "post_attention_layernorm.weight"],
        "self_attn.o_proj.weight": 0.5 * sd[pre + "self_attn.o_proj.weight"],
        "mlp.gate_proj.weight": sd[pre + "mlp.gate_proj.weight"],
        "mlp.up_proj.weight": sd[pre + "mlp.up_proj.weight"],
        "mlp.down_proj.weight": 0.5 * sd[pre + "mlp.down_proj.weight"],
    }
    for n in ("q_proj", "k_proj", "v_proj"):
        new[f"self_attn.{n}.weight"] = sd[pre + f"self_attn.{n}.weight"][:, H:]
    g = torch.Generator().manual_seed(1)
    for k, v in new.items():
        sd["layers.1." + k] = (v * (1 + 0.05 * torch.randn(v.shape, generator=g))).contiguous()
    save_file(sd, dst / "model.safetensors")
    cfg = json.loads((dst / "config.json").read_text())
    layer_cfg = cfg.get("transformer_layer_config")
    (layer_cfg if isinstance(layer_cfg, dict) else cfg)["num_hidden_layers"] = 2
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    return dst


def random_draft(seed: int = 0, hidden: int = 64, heads: int = 4, kv_heads: int = 2, **cfg):
    """A small EAGLE-3 draft of random weights (normal, std 0.3: outputs far from uniform) with its own embeddings of
    100 tokens, its draft vocabulary the first 50: for the tests of the draft's arithmetic itself."""
    from eagle3_doctor.draft.config import DraftConfig
    from eagle3_doctor.draft.model import Eagle3Draft

    c = DraftConfig(hidden_size=hidden, intermediate_size=3 * hidden // 2, num_attention_heads=heads,
                    num_key_value_heads=kv_heads, vocab_size=100, draft_vocab_size=50, **cfg)  # fmt: skip
    torch.manual_seed(seed)
    d = Eagle3Draft(c).eval()
    for p in d.parameters():
        torch.nn.init.normal_(p, 0, 0.3)
    d.set_embeddings(torch.randn(100, hidden), own=True)
    return d


def paste_printed_fix(c: dict, fix: str) -> bool:
    """Apply a printed config fix to config dict ``c`` exactly as a user would paste it: 'set "k": {...}
    in the draft's config.json' (nested objects merged) or 'delete "k" from ...'; False when ``fix`` is not
    such a sentence."""
    import re

    m = re.match(r'set (".+) in the draft\'s config\.json', fix)
    if m:

        def merge(dst, src):
            for k, v in src.items():
                if isinstance(v, dict) and isinstance(dst.get(k), dict):
                    merge(dst[k], v)
                else:
                    dst[k] = v

        merge(c, json.loads("{" + m.group(1) + "}"))
        return True
    m = re.match(r'delete "([^"]+)" from', fix)
    if m:
        c.pop(m.group(1))
        return True
    return False


def engine_capture(setup, opts, prompts: Path = PROMPTS):
    """What an engine serving the fixture target captures along its own greedy continuation, as acceptance runs it:
    (prompt ids, prompt + continuation per prompt, the serving path's aux rows [T, n*H] per sequence)."""
    import torch

    from eagle3_doctor.analyses.acceptance.run import acceptance_sequences
    from eagle3_doctor.model.replay import iter_captures, load_sources

    src = load_sources(setup.target, str(prompts), None, opts.max_tokens, opts.limit, None)
    rep = acceptance_sequences(setup, src, opts, lambda *_: None)
    spec, aux = setup.serving.spec, []
    for s in rep.seqs:
        (rb,) = list(iter_captures(setup.target, [s], spec, batch_size=1))
        aux.append(torch.cat([rb.captured[p][0] for p in spec], dim=-1))
    return [p.ids for p in src.prompts], rep.seqs, aux


def draft_with_embeddings(src: Path, dst: Path) -> Path:
    """A copy of draft ``src`` that ships the fixture target's embed_tokens, so nothing of the target is read."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dst)
    state = load_file(str(dst / "model.safetensors"))
    state["embed_tokens.weight"] = load_file(str(TARGET / "model.safetensors"))["model.embed_tokens.weight"]
    save_file(state, str(dst / "model.safetensors"))
    return dst


def interpret_triton_or_skip(gpu_check: str) -> None:
    """At a kernel test module's top: skip it where CUDA is available (``gpu_check`` runs the compiled kernels
    there) or Triton is not installed, else set ``TRITON_INTERPRET=1``. Triton reads it once, when it is imported:
    its own jit'd helpers (tl.max, tl.sum) are interpreted only if it is set then."""
    import sys

    if torch.cuda.is_available():
        pytest.skip(f"the kernels run interpreted on a CPU-only machine ({gpu_check} checks them on a GPU)",
                    allow_module_level=True)  # fmt: skip
    assert "triton" not in sys.modules or os.environ.get("TRITON_INTERPRET") == "1", "triton imported before"
    os.environ["TRITON_INTERPRET"] = "1"
    pytest.importorskip("triton", reason="the test extra installs Triton (x86-64 Linux)")


@pytest.fixture
def triton_interpreter(monkeypatch):
    """Triton's interpreter, patched where it trips on NumPy 2.4 (the module called :func:`interpret_triton_or_skip`)."""
    from triton.runtime import interpreter as mod

    real = mod._patch_lang_tensor

    def patched(tensor, scope):
        real(tensor, scope)
        # NumPy 2.4 refuses int() of a one-element array, which Triton 3.6's interpreter takes of a loop bound
        # read from memory (the attention kernel's per-row range)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    monkeypatch.setattr(mod, "_patch_lang_tensor", patched)

    def dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        # numpy's matmul hands the product to BLAS, whose kernel, and so its order of summation, depends on the
        # shape and the CPU (OpenBLAS on an AMD EPYC host): a row's bits then depended on how many rows shared the
        # product, which no GPU program does. einsum's own loop sums each output element in one order.
        if a.dtype.primitive_bitwidth == 8 or b.dtype.primitive_bitwidth == 8:
            return real_dot(self, a, b, d, input_precision, max_num_imprecise_acc)
        out = np.einsum("...ik,...kj->...ij", a.data, b.data, dtype=d.data.dtype)
        return mod.TensorHandle(out + d.data, d.dtype.scalar)

    real_dot = mod.InterpreterBuilder.create_dot
    monkeypatch.setattr(mod.InterpreterBuilder, "create_dot", dot)
    return mod
