"""Targets larger than one GPU: eagle3-doctor on a target sharded by accelerate over every GPU.

    PYTHONPATH=. python bench/bench_multigpu.py [--out bench/RESULTS.md]         # 2+ GPUs
    PYTHONPATH=. python bench/bench_multigpu.py --small                          # CPU smoke run

Two checks in one run:
1. Equality: an 8B-shaped random target that fits on one GPU is run once on GPU 0 and once
   sharded over all GPUs (device_map "balanced"); findings, slot metrics and accepted lengths
   must be identical (the sharded run only moves activations between devices).
2. Cost: a target about twice one GPU's memory (Llama-70B shape, bf16, random weights created
   directly on the GPUs, no download) sharded over all GPUs; compare-hidden and acceptance are
   timed against a bare sharded forward over the same tokens.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eagle3_doctor.core.taps import DecoderParts, embed, layer_out  # noqa: E402
from eagle3_doctor.doctor import Setup, acceptance, compare_hidden  # noqa: E402
from eagle3_doctor.draft.config import DraftConfig  # noqa: E402
from eagle3_doctor.draft.model import Eagle3Draft  # noqa: E402
from eagle3_doctor.model.target import Target  # noqa: E402


def build_sharded(shape: dict, devices: list[str], seed: int = 0):
    """A random Llama of `shape`, materialised layer by layer on the devices of a balanced map."""
    from accelerate import dispatch_model, infer_auto_device_map
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(**shape, tie_word_embeddings=False, rms_norm_eps=1e-5, rope_theta=500000.0)
    with torch.device("meta"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    if len(devices) == 1:
        dmap = {"": devices[0]}
    else:
        dmap = infer_auto_device_map(model, max_memory=_balanced(model, devices), no_split_module_classes=["LlamaDecoderLayer"])
    # drawn on the device each tensor lives on (one generator per device): drawing 70B values on
    # the CPU alone took longer than a 10-minute device call
    gens: dict[str, torch.Generator] = {}
    for name, mod in model.named_modules():
        target = _device_for(name, dmap)
        if target is None:
            continue
        g = gens.setdefault(target, torch.Generator(device=target).manual_seed(seed))
        for pname, p in list(mod.named_parameters(recurse=False)):
            t = torch.empty(p.shape, dtype=torch.bfloat16, device=target)
            t.normal_(0, 0.02, generator=g) if p.dim() > 1 else t.fill_(1.0)
            mod._parameters[pname] = torch.nn.Parameter(t, requires_grad=False)
    # the rotary embedding's buffers are computed, not loaded: rebuild it on its device
    rot = model.model.rotary_emb
    with torch.device(_device_for("model.rotary_emb", dmap) or devices[0]):
        model.model.rotary_emb = type(rot)(config=cfg)
    model = dispatch_model(model, device_map=dmap) if len(devices) > 1 else model
    return model.eval(), cfg, dmap


def _balanced(model, devices: list[str]) -> dict:
    total = sum(p.numel() * 2 for p in model.parameters())
    each = int(total / len(devices) * 1.15)
    return {(int(d.split(":")[1]) if d.startswith("cuda") else d): each for d in devices}


def _device_for(module_name: str, dmap: dict):
    best, best_len = None, -1
    for k, v in dmap.items():
        if (k == "" or module_name == k or module_name.startswith(k + ".")) and len(k) > best_len:
            best, best_len = v, len(k)
    if best is None:
        return None
    return f"cuda:{best}" if isinstance(best, int) else best


def make_setup(model, cfg, device: str, target: Target | None = None) -> Setup:
    L = cfg.num_hidden_layers
    parts = DecoderParts(model)
    home = target.capture_device if target is not None else next(parts.norm.parameters()).device
    dcfg = DraftConfig(
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_key_value_heads,
        vocab_size=cfg.vocab_size,
        draft_vocab_size=min(32000, cfg.vocab_size),
        rope_theta=500000.0,
    )
    torch.manual_seed(1)  # drawn on its GPU in bf16: the same seed and device give the same draft in every run
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(home):
            draft = Eagle3Draft(dcfg).eval()
    finally:
        torch.set_default_dtype(torch.float32)
    draft.set_embeddings(model.get_input_embeddings().weight.to(home), own=False)
    trained = (layer_out(1), layer_out(L // 2 - 1), layer_out(L - 4))
    # serve the seed-style mistake so there is a finding to compare
    setup = Setup.from_model(
        model,
        draft,
        target.tokenizer if target is not None else None,
        layer_ids=[-1, 1, L // 2 - 1],
        train_spec=trained,
        train_source="eagle-default",
        name=target.name if target is not None else "synthetic",
        device=target.device if target is not None else home,
        capture_device=home,
    )
    assert setup.serving.spec[0] == embed()
    return setup


def timed(fn):
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--seqs", type=int, default=16)
    ap.add_argument("--len", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--devices", default=None, help="comma-separated devices to shard over for the equality check, e.g. cuda:0,cpu on one GPU"
    )
    ap.add_argument("--fits-shape", default="8b", choices=["8b", "1b"], help="shape of the model that fits on one device")
    args = ap.parse_args()
    n = torch.cuda.device_count()
    if args.devices:
        devices = args.devices.split(",")
        fits = (
            dict(
                vocab_size=32000,
                hidden_size=2048,
                intermediate_size=5632,
                num_hidden_layers=16,
                num_attention_heads=16,
                num_key_value_heads=4,
            )
            if args.fits_shape == "1b"
            else dict(
                vocab_size=128256,
                hidden_size=4096,
                intermediate_size=14336,
                num_hidden_layers=32,
                num_attention_heads=32,
                num_key_value_heads=8,
            )
        )
        big = None
    elif args.small:
        devices, fits, big = (
            ["cpu"],
            dict(
                vocab_size=512,
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=8,
                num_attention_heads=4,
                num_key_value_heads=2,
            ),
            None,
        )
    else:
        assert n >= 2, "needs 2+ GPUs (or --small)"
        devices = [f"cuda:{i}" for i in range(n)]
        fits = dict(
            vocab_size=128256,
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=8,
        )
        big = dict(
            vocab_size=128256,
            hidden_size=8192,
            intermediate_size=28672,
            num_hidden_layers=80,
            num_attention_heads=64,
            num_key_value_heads=8,
        )
    g = torch.Generator().manual_seed(2)
    seqs = torch.randint(10, fits["vocab_size"] - 10, (args.seqs, args.len if not args.small else 64), generator=g).tolist()
    import transformers

    t_start = time.perf_counter()
    cmd = "PYTHONPATH=. python bench/bench_multigpu.py " + " ".join(sys.argv[1:])
    lines = [
        f"## {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}: sharded target, "
        f"{n} x {torch.cuda.get_device_name(0) if n else 'CPU'}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}",
        "",
        f"Command: `{cmd}`",
        "",
    ]

    # 1. equality: one device vs sharded, same weights (same seed)
    single, cfg, _ = build_sharded(fits, devices[:1])
    s1 = make_setup(single, cfg, devices[0])
    c1 = compare_hidden(s1, prompt_ids=seqs, max_tokens=None, batch_size=args.batch)
    a1 = acceptance(s1, prompt_ids=seqs, max_tokens=None, batch_size=args.batch, num_steps=7, continuation="text")
    # the sharded run goes through the tool's own loader: save the same weights, load them back with
    # --device-map semantics (transformers + accelerate place and move each layer)
    import shutil
    import tempfile

    from eagle3_doctor.model.target import load_target

    tmp = Path(tempfile.mkdtemp(prefix="e3d-shard-"))
    single.save_pretrained(tmp)
    for f in (Path(__file__).resolve().parent.parent / "fixtures" / "target").iterdir():
        if f.name.startswith(("tokenizer", "chat_template")):
            shutil.copy(f, tmp / f.name)
    del single, s1
    # per-layer placement that alternates devices: every layer boundary crosses devices somewhere
    L = fits["num_hidden_layers"]
    dmap = {
        "model.embed_tokens": devices[0],
        "model.rotary_emb": devices[0],
        "model.norm": devices[-1],
        "lm_head": devices[-1],
        **{f"model.layers.{i}": devices[(i * len(devices)) // L] for i in range(L)},
    }
    tgt = load_target(str(tmp), dtype="bfloat16", device=devices[0] if devices[0] != "cpu" else "cpu", device_map=dmap)
    sharded, cfg = tgt.model, tgt.model.config
    s2 = make_setup(sharded, cfg, devices[0], tgt)
    c2 = compare_hidden(s2, prompt_ids=seqs, max_tokens=None, batch_size=args.batch)
    a2 = acceptance(s2, prompt_ids=seqs, max_tokens=None, batch_size=args.batch, num_steps=7, continuation="text")
    same_findings = [f.code for f in c1.findings] == [f.code for f in c2.findings]
    same_len = a1.paths["serving"].accepted_lengths == a2.paths["serving"].accepted_lengths
    max_rel = max(abs(x.rel_mean - y.rel_mean) for x, y in zip(c1.slots, c2.slots))
    where = sorted({str(v) for v in dmap.values()})
    lines += [
        f"{fits['num_hidden_layers']}-layer, hidden {fits['hidden_size']} target on {devices[0]} vs sharded over {where}: "
        f"findings identical "
        f"{same_findings} ({[f.code for f in c2.findings]}), accepted lengths identical {same_len}, "
        f"largest slot rel-L2 difference {max_rel:.2e}",
        "",
    ]
    del sharded, s2
    shutil.rmtree(tmp, ignore_errors=True)

    # 2. cost on a target larger than one GPU
    if big is not None:
        model, cfg, dmap = build_sharded(big, devices)
        s = make_setup(model, cfg, devices[0])
        ids = torch.tensor(seqs, device=devices[0])

        @torch.inference_mode()
        def bare():
            for i in range(0, len(seqs), args.batch):
                model(input_ids=ids[i : i + args.batch])

        tb, _ = timed(bare)
        tc, _ = timed(lambda: compare_hidden(s, prompt_ids=seqs, max_tokens=None, batch_size=args.batch))
        ta, _ = timed(
            lambda: acceptance(s, prompt_ids=seqs, max_tokens=None, batch_size=args.batch, num_steps=7, continuation="text")
        )
        params = sum(p.numel() for p in model.parameters()) / 1e9
        lines += [
            f"Llama-70B shape ({params:.1f}B parameters, bf16) over {n} GPUs, {len(seqs)} x {args.len} tokens, batch {args.batch}:",
            "",
            "| measurement | time (s) | ratio to bare sharded forward |",
            "|---|---|---|",
            f"| bare sharded forward | {tb:.3f} | 1.000 |",
            f"| compare-hidden | {tc:.3f} | {tc / tb:.3f} |",
            f"| acceptance K=7 | {ta:.3f} | {ta / tb:.3f} |",
            "",
        ]
    lines += [f"Whole script: {time.perf_counter() - t_start:.0f} s.", ""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")
    sys.exit(0 if same_findings and same_len else 1)


if __name__ == "__main__":
    main()
