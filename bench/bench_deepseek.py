"""The seed case on a DeepSeek-V3-shaped target on one GPU: compare-hidden and acceptance timed
against a bare forward, findings checked.

    PYTHONPATH=. python bench/bench_deepseek.py [--experts 16 --seqs 8 --len 1024 --batch 2] [--out bench/RESULTS.md]
    PYTHONPATH=. python bench/bench_deepseek.py --small          # CPU smoke run, tiny widths

transformers' DeepseekV3ForCausalLM with random bf16 weights drawn on the GPU: the real 61 layers
(3 dense, 58 MoE), MLA attention (128 heads, q_lora_rank 1536, kv_lora_rank 512, qk 128+64, v 128),
hidden 7168, dense intermediate 18432, expert intermediate 2048, 1 shared expert, 8 routed experts
per token with group-limited routing (8 groups, 4 chosen), vocabulary 129280. Only the routed
expert count is scaled (256 -> --experts) so the weights fit one H200. Draft: an EAGLE-3 layer of
hidden 7168 (56 heads x 128, 8 KV heads), draft vocabulary 32000.

The seed case (as tests/model/test_architectures.py names it): a 61-layer DeepSeek target trained on
output_hidden_states 3, 31, 59 (= layer_out[2, 30, 58]), served by SGLang with the attempted fix
[-1, 2, 30]. The executed engine table (conformance/) says SGLang 0.5.2 has no EAGLE-3 for DeepSeek
(ENG001) and stock 0.5.10 crashes on -1, so the seed runs on 0.5.10 patched to map -1 to the
embeddings: slot 0 is fed the embeddings (CAP002, fix ids [2, 30, 58]); the correct ids on 0.5.10
leave no warning or error.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eagle3_doctor.doctor import Setup, acceptance, compare_hidden  # noqa: E402
from eagle3_doctor.draft.config import DraftConfig  # noqa: E402
from eagle3_doctor.draft.model import Eagle3Draft  # noqa: E402
from eagle3_doctor.engines.recipes import training_spec  # noqa: E402

CUDA = torch.cuda.is_available()


def sync() -> None:
    if CUDA:
        torch.cuda.synchronize()


def measure(fn, reps: int):
    fn()
    sync()
    if CUDA:
        torch.cuda.reset_peak_memory_stats()
    times, out = [], None
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        out = fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, (torch.cuda.max_memory_allocated() if CUDA else 0), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--experts", type=int, default=16, help="routed experts (DeepSeek-V3 has 256)")
    ap.add_argument("--seqs", type=int, default=8)
    ap.add_argument("--len", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None)
    ap.add_argument("--small", action="store_true")
    args = ap.parse_args()
    assert CUDA or args.small, "needs a GPU (or --small)"
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    if args.small:
        shape = dict(
            vocab_size=1024,
            hidden_size=64,
            intermediate_size=128,
            moe_intermediate_size=32,
            num_attention_heads=4,
            num_key_value_heads=4,
            kv_lora_rank=16,
            q_lora_rank=32,
            qk_rope_head_dim=8,
            v_head_dim=16,
            qk_nope_head_dim=8,
        )
        dshape = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, draft_vocab_size=256)
    else:
        shape = dict(
            vocab_size=129280,
            hidden_size=7168,
            intermediate_size=18432,
            moe_intermediate_size=2048,
            num_attention_heads=128,
            num_key_value_heads=128,
            kv_lora_rank=512,
            q_lora_rank=1536,
            qk_rope_head_dim=64,
            v_head_dim=128,
            qk_nope_head_dim=128,
        )
        dshape = dict(
            hidden_size=7168, intermediate_size=18432, num_attention_heads=56, num_key_value_heads=8, draft_vocab_size=32000
        )
    L = 61
    cfg = DeepseekV3Config(
        **shape,
        num_hidden_layers=L,
        n_shared_experts=1,
        n_routed_experts=args.experts,
        routed_scaling_factor=2.5,
        n_group=8,
        topk_group=4,
        num_experts_per_tok=8,
        first_k_dense_replace=3,
        norm_topk_prob=True,
        max_position_embeddings=max(4096, args.len),
        tie_word_embeddings=False,
        rms_norm_eps=1e-6,
    )
    cfg._attn_implementation = "sdpa"
    dev = torch.device("cuda:0" if CUDA else "cpu")
    torch.manual_seed(0)
    t0 = time.perf_counter()
    torch.set_default_dtype(torch.bfloat16)  # drawn in bf16 on the GPU: no float32 or CPU copy of the weights
    try:
        with dev:
            model = DeepseekV3ForCausalLM(cfg).eval()
            dcfg = DraftConfig(vocab_size=shape["vocab_size"], max_position_embeddings=cfg.max_position_embeddings, **dshape)
            draft = Eagle3Draft(dcfg).eval()
    finally:
        torch.set_default_dtype(torch.float32)
    sync()
    t_build = time.perf_counter() - t0
    DV, V = dshape["draft_vocab_size"], shape["vocab_size"]
    ar = torch.arange(DV, device=dev)
    draft.d2t.copy_(ar * 4 - ar)  # draft id i is target id 4i
    draft.t2d.zero_()
    draft.t2d[ar * 4] = True
    draft.set_embeddings(model.get_input_embeddings().weight, own=False)
    n_params = sum(p.numel() for p in model.parameters())
    recipe = "hf-hidden-states:3,31,59"
    trained, _ = training_spec(recipe, L)

    def setup_for(ids: list[int], version: str) -> Setup:
        return Setup.from_model(
            model,
            draft,
            engine="sglang",
            engine_version=version,
            layer_ids=ids,
            train_spec=trained,
            train_source=recipe,
            name="synthetic DeepSeek-V3 shape",
            device=dev,
        )

    # as tests/model/test_architectures.py: 0.5.2 refuses DeepSeek; stock 0.5.10 crashes on -1
    seed, good = setup_for([-1, 2, 30], "0.5.10+minus-one-embed"), setup_for([2, 30, 58], "0.5.10")
    refused = setup_for([2, 30, 58], "0.5.2")
    g = torch.Generator(device=dev).manual_seed(1)
    T = args.len if not args.small else 64
    ids = torch.randint(10, V - 10, (args.seqs, T), generator=g, device=dev)
    seqs = ids.tolist()

    @torch.inference_mode()
    def bare():
        for i in range(0, args.seqs, args.batch):
            model(input_ids=ids[i : i + args.batch], attention_mask=torch.ones_like(ids[i : i + args.batch]))

    rows = {}
    rows["bare target forward (logits)"] = measure(bare, args.repeats)
    rows["compare-hidden, seed ids [-1,2,30]"] = measure(
        lambda: compare_hidden(seed, prompt_ids=seqs, max_tokens=None, batch_size=args.batch), args.repeats
    )
    # the seed's serving path feeds the embeddings into slot 0; acceptance measures both paths
    # (serving and training) in one run, as the CLI does
    rows["acceptance K=7, seed ids (serving + training paths)"] = measure(
        lambda: acceptance(seed, prompt_ids=seqs, max_tokens=None, batch_size=args.batch, num_steps=7, continuation="text"),
        args.repeats,
    )
    ok = compare_hidden(good, prompt_ids=seqs, max_tokens=None, batch_size=args.batch)
    none = compare_hidden(refused, prompt_ids=seqs[:1], max_tokens=None, batch_size=1)
    bad = rows["compare-hidden, seed ids [-1,2,30]"][3]
    acc = rows["acceptance K=7, seed ids (serving + training paths)"][3]
    errs = [f for f in bad.findings if f.severity == "error"]
    cap = next((f for f in errs if f.code == "CAP002"), None)
    checks = {
        "seed ids: first error is CAP002, slot 0 fed the embeddings, fix ids [2, 30, 58]": bool(errs)
        and errs[0].code == "CAP002"
        and cap is not None
        and "slot 0 is fed the embeddings" in cap.title
        and cap.data.get("fix_ids") == [2, 30, 58],
        "seed ids: slot 0 numerically apart (rel-L2 > 0.2)": bad.slots[0].rel_mean > 0.2,
        "correct ids [2,30,58] on 0.5.10: no warning or error, slot rel-L2 0": [
            f.code for f in ok.findings if f.severity in ("error", "warning")
        ]
        == []
        and max(s.rel_mean for s in ok.slots) == 0,
        "SGLang 0.5.2 refuses a DeepSeek target (ENG001)": [f.code for f in none.findings if f.severity == "error"] == ["ENG001"],
        "acceptance ran both paths": set(acc.paths) == {"serving", "training"},
    }
    tb = rows["bare target forward (logits)"][0]
    import transformers

    gpu = torch.cuda.get_device_name(0) if CUDA else "CPU (smoke run, not a result)"
    cmd = ("PYTHONPATH=. python bench/bench_deepseek.py " + " ".join(sys.argv[1:])).strip()
    lines = [
        f"## {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}: DeepSeek-V3 shape, seed case, {gpu}, "
        f"torch {torch.__version__}, transformers {transformers.__version__}",
        "",
        f"Command: `{cmd}`",
        "",
        f"DeepseekV3ForCausalLM, {L} layers, hidden {shape['hidden_size']}, MLA ({shape['num_attention_heads']} heads, "
        f"q_lora {shape['q_lora_rank']}, kv_lora {shape['kv_lora_rank']}), {args.experts} routed experts (of 256: the only "
        f"scaled dimension) + 1 shared, top-8 in 8 groups / 4 chosen, vocabulary {V}: {n_params / 1e9:.1f}B parameters, "
        f"random bf16 drawn on the GPU in {t_build:.0f} s. Workload {args.seqs} x {T} tokens, batch {args.batch}; "
        f"median of {args.repeats} runs after one warm-up.",
        "",
        "| measurement | median (s) | ratio to bare forward | runs (s) | peak GPU memory (GiB) |",
        "|---|---|---|---|---|",
    ]
    for name, (t, runs, peak, _) in rows.items():
        lines.append(f"| {name} | {t:.3f} | {t / tb:.3f} | {', '.join(f'{x:.3f}' for x in runs)} | {peak / 2**30:.2f} |")
    lines += [
        "",
        "Findings (seed ids): " + ", ".join(f"{f.code}:{f.severity}" for f in bad.findings),
        "; correct ids: " + ", ".join(f"{f.code}:{f.severity}" for f in ok.findings) + ".",
        f"Slot rel-L2, seed ids: {[round(s.rel_mean, 4) for s in bad.slots]}; acceptance findings: "
        + ", ".join(f"{f.code}:{f.severity}" for f in acc.findings)
        + ".",
        "",
        "| check | met |",
        "|---|---|",
    ]
    lines += [f"| {k} | {'yes' if v else 'NO'} |" for k, v in checks.items()]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")
    sys.exit(0 if all(checks.values()) else 1)


if __name__ == "__main__":
    main()
