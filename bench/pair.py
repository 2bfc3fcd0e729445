"""The benchmarks' 8B-shaped pair, saved in its released formats, and the HBM bandwidth they measure floors with.

An 8B-shaped Llama target (32 layers, hidden 4096, 32/8 heads, vocabulary 128256; the tiny shape with
``quick``) and a matching EAGLE-3 draft, random weights drawn on the device in their final dtype: the target
as ``save_pretrained`` safetensors with the fixture tokenizer, the draft in the SGLang format.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

FIX = Path(__file__).resolve().parent.parent / "fixtures"


# room for the long-context runs (32k-token prompts and their continuation), as Llama-3.1's config allows
POSITIONS = 131072


def fresh_dir(path: str) -> Path:
    """``path`` emptied and made: each run builds its pair from nothing."""
    out = Path(path)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    return out


def build_pair(out: Path, quick: bool, dev: str) -> tuple[Path, Path, int]:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from eagle3_doctor.core.taps import layer_out
    from eagle3_doctor.draft.config import DraftConfig
    from eagle3_doctor.draft.model import Eagle3Draft
    from eagle3_doctor.draft.writing import write_draft

    H, FF, NL, V, nh, nkv = (4096, 14336, 32, 128256, 32, 8) if not quick else (128, 384, 8, 2048, 4, 2)
    dtype = torch.bfloat16 if dev != "cpu" else torch.float32
    cfg = LlamaConfig(
        vocab_size=V, hidden_size=H, intermediate_size=FF, num_hidden_layers=NL, num_attention_heads=nh,
        num_key_value_heads=nkv, max_position_embeddings=POSITIONS, rope_theta=500000.0, tie_word_embeddings=False,
    )  # fmt: skip
    torch.manual_seed(0)
    torch.set_default_dtype(dtype)
    with torch.device(dev):
        model = LlamaForCausalLM(cfg).eval()
        dcfg = DraftConfig(
            hidden_size=H, intermediate_size=FF, num_attention_heads=nh, num_key_value_heads=nkv, vocab_size=V,
            draft_vocab_size=32000 if not quick else 1024, rope_theta=500000.0, max_position_embeddings=POSITIONS,
        )  # fmt: skip
        draft = Eagle3Draft(dcfg).eval()
    torch.set_default_dtype(torch.float32)
    nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    tdir, ddir = out / "target", out / "draft"
    model.save_pretrained(tdir, safe_serialization=True)
    for f in (FIX / "target").iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "chat_template")):
            shutil.copy(f, tdir / f.name)
    write_draft(draft, ddir, "sglang", (layer_out(1), layer_out(NL // 2 - 1), layer_out(NL - 4)), NL)
    del model, draft
    if dev != "cpu":
        torch.cuda.empty_cache()
    return tdir, ddir, nbytes


def hbm_bandwidth(dev: str = "cuda") -> float:
    """Bytes per second of a device-to-device copy of 2 GiB (read + write counted), after a warm-up."""
    import torch

    x = torch.empty(1024**3 if dev != "cpu" else 64 << 20, dtype=torch.bfloat16, device=dev)
    y = torch.empty_like(x)
    y.copy_(x)
    sync = torch.cuda.synchronize if dev != "cpu" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for _ in range(10):
        y.copy_(x)
    sync()
    return 2 * x.numel() * x.element_size() * 10 / (time.perf_counter() - t0)


def flop_rate(dev: str = "cuda") -> float:
    """FLOP/s of a square matmul after a warm-up: bf16 8192^3 on a GPU, float32 1024^3 on the CPU."""
    import torch

    n, dt = (8192, torch.bfloat16) if dev != "cpu" else (1024, torch.float32)
    a = torch.randn(n, n, dtype=dt, device=dev)
    b = torch.randn(n, n, dtype=dt, device=dev)
    for _ in range(3):
        a @ b
    if dev != "cpu":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        a @ b
    if dev != "cpu":
        torch.cuda.synchronize()
    return 20 * 2 * n**3 / (time.perf_counter() - t0)
