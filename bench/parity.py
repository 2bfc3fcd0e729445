"""bf16-on-GPU vs float32-on-CPU parity on the trained fixtures.

    PYTHONPATH=. python bench/parity.py --device cuda --dtype bfloat16 > parity-gpu.json
    PYTHONPATH=. python bench/parity.py --device cpu --dtype float32 > parity-cpu.json

Runs the demo's scenarios (correct wiring, the seed-style slot shift, the training dump) and
prints findings, step-1 accuracy and mean acceptance length per scenario as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from eagle3_doctor.doctor import acceptance, compare_hidden, load_setup  # noqa: E402

F = ROOT / "fixtures"


def disagreement(acc) -> dict:
    """How often the reference loop and the estimator disagree, split by cause.

    A prompt whose loop tokens differ from the continuation's (generated with a KV cache) was
    decoded along other text: its passes cannot be compared one to one (target-side cause:
    full-prefix vs KV-cached forwards rounding near-tied logits apart). On prompts with the same
    tokens, a pass whose accepted length differs is a draft-side disagreement (the parallel unroll
    vs the loop's KV-cached draft steps).
    """
    ref, est = acc.reference.accepted_lengths, acc.paths["serving"].accepted_lengths
    same = acc.reference.same_tokens_per_prompt
    compared = disagreeing = 0
    for r, e, s in zip(ref, est, same):
        if not s:
            continue
        for a, b in zip(r, e):  # passes stay aligned only up to the first disagreement
            compared += 1
            if a != b:
                disagreeing += 1
                break
    return {
        "prompts": len(ref),
        "prompts_other_tokens": sum(1 for s in same if not s),
        "prompts_same_tokens_disagreeing": sum(1 for r, e, s in zip(ref, est, same) if s and r != e),
        "passes_compared_up_to_first_disagreement": compared,
        "passes_disagreeing": disagreeing,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--limit", type=int, default=16)
    ap.add_argument("--new", type=int, default=96)
    args = ap.parse_args()
    out = {"device": args.device, "dtype": args.dtype, "scenarios": {}}
    t0 = time.time()
    for name, ids in (("correct", None), ("seed shift [-1,1,3]", [-1, 1, 3]), ("one layer later [2,4,5]", [2, 4, 5])):
        setup = load_setup(
            target=str(F / "target"),
            draft=str(F / "draft-sglang"),
            engine="sglang",
            layer_ids=ids,
            dtype=args.dtype,
            device=args.device,
        )
        cmp = compare_hidden(setup, prompts_path=str(F / "prompts.jsonl"), limit=args.limit)
        acc = acceptance(
            setup, prompts_path=str(F / "prompts.jsonl"), limit=args.limit, num_steps=7, max_new_tokens=args.new, reference=True
        )
        s = acc.paths["serving"]
        out["scenarios"][name] = {
            "compare_findings": sorted(f"{f.code}:{f.severity}" for f in cmp.findings),
            "acceptance_findings": sorted(f"{f.code}:{f.severity}" for f in acc.findings),
            "step1_accuracy": s.acc_k[0],
            "mean_acceptance_length": s.chain.mean_acceptance_length,
            "per_position_rate": [round(r, 4) for r in s.chain.per_position_rate],
            "reference_agrees": acc.reference.agrees_with_estimator,
            "reference_same_tokens": acc.reference.same_tokens,
            **disagreement(acc),
        }
    setup = load_setup(target=str(F / "target"), draft=str(F / "draft-sglang"), dtype=args.dtype, device=args.device)
    # the same tokens on every device (the dump's text): differences are numerics alone, no
    # divergence of greedy continuations
    text = acceptance(setup, train_dump=str(F / "specforge-dump"), num_steps=7, continuation="text")
    s = text.paths["serving"]
    out["scenarios"]["text mode on the dump's tokens"] = {
        "acceptance_findings": sorted(f.code for f in text.findings),
        "step1_accuracy": s.acc_k[0],
        "acc_k": [round(a, 4) for a in s.acc_k],
        "mean_acceptance_length": s.chain.mean_acceptance_length,
    }
    d = compare_hidden(setup, train_dump=str(F / "specforge-dump"))
    out["scenarios"]["training dump"] = {
        "compare_findings": sorted(f"{f.code}:{f.severity}" for f in d.findings),
        "inferred_spec": [str(p) for p in d.train_spec],
        "slot_rel_l2": [round(s.rel_mean, 5) for s in d.slots],
    }
    out["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
