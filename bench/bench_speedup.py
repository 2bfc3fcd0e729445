"""Predicted vs measured speedup of speculative settings, at real model size on a GPU.

    PYTHONPATH=. python bench/bench_speedup.py                 # GPU: 8B-shaped Llama, bf16 (about 3-5 minutes)
    PYTHONPATH=. python bench/bench_speedup.py --quick         # CPU smoke run: tiny shapes, float32

The target is Llama-3.1-8B-shaped (32 layers, hidden 4096, 32/8 heads, vocabulary 128256) with random
weights drawn on the device. A random draft accepts almost nothing, so both are made predictable:
- the target: every layer's residual writes (o_proj, down_proj) are scaled by --residual-scale, so the
  next token depends mostly on the current one (a near-bigram model: f(x) = its greedy successor);
- the draft is derived from the target: fc and the MLP's down_proj are zero, queries and keys read the
  token alone with q_proj = k_proj times a large factor (each position attends to itself, or to the same
  token earlier), v_proj's hidden half cancels the residual (so a step's output carries its own token
  only, not every earlier step's), and lm_head row v is the sum of the draft's normed outputs for every
  token x it maps to v: f(x), except for a --draft-miss share of tokens mapped to a random one. Such a
  draft proposes its map of the token at every step, so per-step acceptance is about 1 - miss.
Then `speedup`'s prediction (exact acceptance per setting, costs probed eager) is printed beside the
timed real decode loop at the same chain settings, with both rankings.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eagle3_doctor.analyses.speedup import SpeedupOptions, predict_speedup  # noqa: E402
from eagle3_doctor.core.taps import DecoderParts  # noqa: E402
from eagle3_doctor.draft.config import DraftConfig  # noqa: E402
from eagle3_doctor.draft.model import Eagle3Draft  # noqa: E402
from eagle3_doctor.engines.spec_settings import chain, tree  # noqa: E402
from eagle3_doctor.model.setup import Setup  # noqa: E402


def build_target(args, dev: str, dtype: torch.dtype):
    from transformers import LlamaConfig, LlamaForCausalLM

    H, FF, NL, V, nh, nkv = (4096, 14336, 32, 128256, 32, 8) if not args.quick else (128, 384, 8, 2048, 4, 2)
    cfg = LlamaConfig(
        vocab_size=V, hidden_size=H, intermediate_size=FF, num_hidden_layers=NL, num_attention_heads=nh,
        num_key_value_heads=nkv, max_position_embeddings=4096, rope_theta=500000.0, rms_norm_eps=1e-5,
        tie_word_embeddings=False,
    )  # fmt: skip
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    torch.set_default_dtype(dtype)  # drawn in the final dtype: no float32 copy of 8B weights
    with torch.device(dev):
        model = LlamaForCausalLM(cfg).eval()
    torch.set_default_dtype(torch.float32)
    with torch.no_grad():
        for layer in DecoderParts(model).layers:
            layer.self_attn.o_proj.weight.mul_(args.residual_scale)
            layer.mlp.down_proj.weight.mul_(args.residual_scale)
        # the head is a permutation of the embeddings: logits(x)_v = e_perm(v) . norm(e_x) has one clear winner
        # (|e|^2 against sqrt(H)-sized cross terms), so bf16 rounding of the small residual writes cannot flip
        # the greedy token: a near-bigram target with a margin (random heads have near-ties every few tokens)
        emb = model.get_input_embeddings().weight
        perm = torch.randperm(V, generator=torch.Generator().manual_seed(3)).to(emb.device)
        model.lm_head.weight.copy_(emb[perm] * args.head_scale)
    return model


@torch.inference_mode()
def successor(model, chunk: int = 4096) -> torch.Tensor:
    """f(x): the target's greedy next token after the one-token input x, for every token."""
    V = model.config.vocab_size
    dev = next(model.parameters()).device
    out = torch.empty(V, dtype=torch.long, device=dev)
    for s in range(0, V, chunk):
        ids = torch.arange(s, min(s + chunk, V), device=dev)[:, None]
        out[s : s + chunk] = model(input_ids=ids).logits[:, -1].argmax(-1)
    return out


@torch.inference_mode()
def derived_draft(model, f: torch.Tensor, dev: str, dtype: torch.dtype, miss: float = 0.0) -> Eagle3Draft:
    """``miss``: the share of tokens whose successor the draft learns wrong (a random token), so that
    per-step acceptance is about 1 - miss and the settings' ranking is not decided by cost alone."""
    c = model.config
    dcfg = DraftConfig(
        hidden_size=c.hidden_size, intermediate_size=c.intermediate_size, num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads, vocab_size=c.vocab_size, draft_vocab_size=c.vocab_size,
        rope_theta=500000.0, max_position_embeddings=4096,
    )  # fmt: skip
    torch.manual_seed(1)
    with torch.device(dev):
        d = Eagle3Draft(dcfg).to(dtype).eval()
    d.t2d.fill_(True)  # the full target vocabulary, d2t = 0
    d.set_embeddings(model.get_input_embeddings().weight, own=False)
    attn, rep, H, V = d.midlayer.self_attn, dcfg.num_attention_heads // dcfg.num_key_value_heads, c.hidden_size, c.vocab_size
    d.fc.weight.zero_()
    d.midlayer.mlp.down_proj.weight.zero_()
    # queries and keys read the token alone (its half of [embed, hidden_norm(h)]): a position attends to
    # itself, or to the same token earlier
    attn.k_proj.weight[:, H:] = 0
    k = attn.k_proj.weight.view(dcfg.num_key_value_heads, attn.d, -1)
    attn.q_proj.weight.copy_(40.0 * k.repeat_interleave(rep, 0).reshape_as(attn.q_proj.weight))
    # A step's output is residual + attention = h_prev + o_proj(v): left alone, step k would carry every
    # earlier step's token and propose a blend. The hidden half of v_proj cancels the residual instead:
    # with M = o_proj summed over each kv head's query heads, v's hidden half -r pinv(M) hidden_norm(h)
    # gives o_proj(...) = -h for any h in M's range (where every step's output lies), r being the rms the
    # outputs have. Each step's output is then u(token) alone, up to the spread of that rms (a few %).
    M = attn.o_proj.weight.float().view(H, dcfg.num_key_value_heads, rep, attn.d).sum(2).reshape(H, -1)
    Wv_e = attn.v_proj.weight[:, :H].float()

    def u_of(ids: torch.Tensor) -> torch.Tensor:  # the output for token x, attending to itself with h = 0
        e = d.midlayer.input_layernorm(d.embed_tokens(ids).to(dtype)).float()
        return e @ Wv_e.T @ M.T

    r = u_of(torch.arange(0, min(V, 8192), device=dev)).pow(2).mean(-1).sqrt().mean()
    attn.v_proj.weight[:, H:] = (-r * torch.linalg.pinv(M)).to(dtype)
    g = torch.Generator().manual_seed(4)
    wrong = (torch.rand(V, generator=g) < miss).to(f.device)
    f = torch.where(wrong, torch.randint(0, V, (V,), generator=g).to(f.device), f)
    # lm_head row v: the sum of the normed outputs of every token x the draft maps to v
    lm = torch.zeros(V, H, dtype=torch.float32, device=dev)
    for s in range(0, V, 8192):
        uu = d.norm(u_of(torch.arange(s, min(s + 8192, V), device=dev)).to(dtype)).float()
        lm.index_add_(0, f[s : s + 8192], uu / uu.norm(dim=-1, keepdim=True))
    d.lm_head.weight.copy_(lm.to(dtype))
    return d


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="CPU smoke run: tiny shapes, float32, few prompts")
    ap.add_argument("--prompts", type=int, default=6)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--batch-sizes", default="1,8")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--residual-scale", type=float, default=0.01)
    ap.add_argument("--head-scale", type=float, default=1.0)
    ap.add_argument("--draft-miss", type=float, default=0.2, help="share of tokens the derived draft gets wrong")
    ap.add_argument("--max-k", type=int, default=8, help="chains K = 1..max-k, each predicted and timed in the loop")
    ap.add_argument("--fixtures", action="store_true", help="the committed trained fixture pair instead of the 8B shape")
    ap.add_argument("--fixtures-dtype", default="float32", choices=["float32", "bfloat16"])
    args = ap.parse_args()
    dev = "cpu" if args.quick else args.device
    dtype = torch.float32 if dev == "cpu" else torch.bfloat16
    if args.quick:
        args.prompts, args.new, args.repeats, args.batch_sizes = 3, 24, 3, "1,2"
    t0 = time.perf_counter()
    prompts_path, prompts = None, None
    if args.fixtures:
        # the committed trained pair (a real draft, mean acceptance length about 3): small, so every forward
        # is launch-bound, but the acceptance and the loop are real
        from eagle3_doctor.model.setup import load_setup

        root = Path(__file__).resolve().parent.parent / "fixtures"
        fdtype = "float32" if args.fixtures_dtype == "float32" else "bfloat16"
        setup = load_setup(
            target=str(root / "target"), draft=str(root / "draft-sglang"), engine="sglang", dtype=fdtype, device=dev
        )
        prompts_path = str(root / "prompts.jsonl")
        print(f"loaded the fixture pair ({fdtype}) in {time.perf_counter() - t0:.1f} s on {dev}", flush=True)
    else:
        model = build_target(args, dev, dtype)
        f = successor(model)
        draft = derived_draft(model, f, dev, dtype, args.draft_miss)
        setup = Setup.from_model(model, draft, name="8B-shaped Llama, random near-bigram weights", device=dev)
        print(f"built target + derived draft in {time.perf_counter() - t0:.1f} s on {dev}", flush=True)
        g = torch.Generator().manual_seed(2)
        prompts = torch.randint(10, model.config.vocab_size - 10, (args.prompts, args.prompt_len), generator=g).tolist()
    chains = [chain(k) for k in range(1, args.max_k + 1)]
    settings = chains + [tree(5, 4, 8), tree(3, 4, 16)]
    opts = SpeedupOptions(
        settings, [int(b) for b in args.batch_sizes.split(",")], max_new_tokens=args.new, max_tokens=None,
        batch_size=min(8, args.prompts), repeats=args.repeats, loop=chains,
    )  # fmt: skip
    t0 = time.perf_counter()
    res = predict_speedup(setup, opts, prompts_path=prompts_path, prompt_ids=prompts)
    print(f"speedup run (acceptance grid, cost probe, loop at {len(chains)} settings): {time.perf_counter() - t0:.1f} s")
    report(res)
    drift(setup, chains, res)


def drift(setup, chains, res) -> None:
    """The probe once more after the loop: if the machine's pace moved while the loop ran, the costs say so."""
    from eagle3_doctor.analyses.cost_probe import probe_costs

    again = probe_costs(setup, chains, [1], res.costs.context, res.costs.repeats)
    print("\nprobe before the loop -> after it (batch 1, ms):")
    for r in again.rows:
        print(f"  {r.part} {r.tokens}: {1000 * res.costs.seconds(1, r.part, r.tokens):.2f} -> {1000 * r.seconds:.2f}")


def report(res) -> None:
    from rich.console import Console

    from eagle3_doctor.report.speedup import render_speedup

    render_speedup(Console(width=80), res)
    loop = res.loop
    pr = {r.label: i + 1 for i, r in enumerate(sorted(loop, key=lambda r: -r.predicted_speedup))}
    ms = {r.label: i + 1 for i, r in enumerate(sorted(loop, key=lambda r: -r.measured_speedup))}
    print("\n| setting | tokens/pass (loop = predicted) | exact | predicted speedup | measured speedup | rank pred | rank meas |")
    print("|---|---|---|---|---|---|---|")
    for r in loop:
        exact = "yes" if r.same_as_greedy and r.same_passes_as_estimator else "NO"
        print(
            f"| {r.label} | {r.tokens_per_pass:.3f} = {r.predicted_tokens_per_pass:.3f} | {exact} | "
            f"{r.predicted_speedup:.2f}x | {r.measured_speedup:.2f}x | {pr[r.label]} | {ms[r.label]} |"
        )
    best_p = min(pr, key=pr.get)
    print(f"\npredicted best (batch 1, chains): {best_p}; measured best: {min(ms, key=ms.get)}; "
          f"measured speedup of the predicted best: {next(r.measured_speedup for r in loop if r.label == best_p):.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
