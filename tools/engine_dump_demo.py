"""Engine dumps of the fixture target, written by the engines' own writer code, for a dump-only acceptance run.

    python tools/engine_dump_demo.py OUT [--limit 8] [--max-new-tokens 64]

Writes, under OUT: ``prompts.jsonl`` (the prompts as input_ids records), ``sglang/`` (SGLang 0.5.23's dumper over two
tensor-parallel ranks, one extend over each prompt + greedy continuation), ``vllm/dp0`` and ``vllm/dp1`` (vLLM 0.33.0's
hidden-states connector on two data-parallel workers, ``include_output_tokens``) and ``draft-own-embed/`` (the fixture
draft with the target's embed_tokens, so a run reads nothing of the target). The writers run from the release source
(conformance/dump_writers.py); the features are the fixture target's own capture at the serving capture points along
its greedy continuation, as an engine serving it computes them. docs/serving-evidence.md shows a run on this output.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "conformance"), str(ROOT / "tests")]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--limit", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=64)
    a = p.parse_args(argv)

    from conftest import DRAFTS, TARGET, draft_with_embeddings, engine_capture
    from dump_writers import write_sglang_dump, write_vllm_dump

    from eagle3_doctor.analyses.acceptance.options import AcceptanceOptions
    from eagle3_doctor.doctor import load_setup

    setup = load_setup(target=str(TARGET), draft=str(DRAFTS["sglang"]), engine="sglang", dtype="float32", device="cpu")
    prompts, seqs, aux = engine_capture(setup, AcceptanceOptions(max_new_tokens=a.max_new_tokens, limit=a.limit))
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "prompts.jsonl").write_text("".join(json.dumps({"input_ids": ids}) + "\n" for ids in prompts))
    write_sglang_dump(a.out / "sglang", seqs, aux, ranks=2)
    half = len(seqs) // 2
    write_vllm_dump(a.out / "vllm" / "dp0", seqs[:half], aux[:half])
    write_vllm_dump(a.out / "vllm" / "dp1", seqs[half:], aux[half:], first_id=half)
    if not (a.out / "draft-own-embed").exists():
        draft_with_embeddings(DRAFTS["sglang"], a.out / "draft-own-embed")
    print(f"wrote {a.out}: {len(seqs)} sequences, {sum(map(len, seqs))} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
