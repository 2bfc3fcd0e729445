"""The drafters beside EAGLE-3 on a GPU: each fixture's planted mismatch through the CLI's acceptance (a whole
process each, as a user runs it), on CUDA in float32 (where the estimator must equal the sequential loop and
greedy decoding exactly, as on the CPU) and in bfloat16 (where it is reported as measured).

    PYTHONPATH=. python bench/check_drafters_gpu.py --out OUT_DIR

Writes OUT_DIR/drafters_gpu.json: per run, the command, its exit code, wall seconds, the figures and the
reference loop's agreement.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"


def planted(tmp: Path) -> dict[str, Path]:
    """Each fixture's planted mismatch as fixtures/README.md describes it, in a copy."""
    dfl = tmp / "dflash"
    shutil.copytree(FIX / "dflash-draft", dfl)
    cfg = json.loads((dfl / "config.json").read_text())
    cfg["eagle_aux_hidden_state_layer_ids"] = cfg["dflash_config"]["target_layer_ids"]
    (dfl / "config.json").write_text(json.dumps(cfg))
    pe = tmp / "peagle"
    shutil.copytree(FIX / "peagle-draft", pe)
    cfg = json.loads((pe / "config.json").read_text())
    cfg.update(speculators_model_type="eagle3", architectures=["Eagle3Speculator"])
    (pe / "config.json").write_text(json.dumps(cfg))
    return {"mtp": FIX / "mtp-speculators", "dflash": dfl, "peagle": pe}


def run(cmd: list[str], out: Path) -> dict:
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "eagle3_doctor", *cmd, "--json", str(out)], capture_output=True, text=True, cwd=ROOT
    )
    wall = time.perf_counter() - t0
    doc = json.loads(out.read_text()) if out.is_file() else None
    return {"command": " ".join(cmd), "exit": p.returncode, "wall_s": round(wall, 2), "stderr_tail": p.stderr[-600:],
            "reference": doc.get("reference") if doc else None, "difference": doc.get("difference") if doc else None,
            "findings": [f["code"] for f in doc.get("findings", [])] if doc else None}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        drafts = planted(tmp)
        common = ["-t", str(FIX / "target"), "--engine", "vllm", "--prompts", str(FIX / "prompts.jsonl"), "--max-new-tokens", "48",
                  "--device", args.device, "-q"]  # fmt: skip
        for dtype in args.dtypes.split(","):
            for name, d in drafts.items():
                ref = ["--reference-loop"] if name == "mtp" else []  # the EAGLE-3 estimator runs its loop when asked
                r = run(["acceptance", "-d", str(d), *common, "--dtype", dtype, *ref], tmp / f"{name}-{dtype}.json")
                rows.append({"drafter": name, "dtype": dtype, **r})
                print(json.dumps(rows[-1])[:400], flush=True)
        r = run(["diagnose", "-d", str(drafts["peagle"]), *common, "--dtype", "float32"], tmp / "peagle-diagnose.json")
        rows.append({"drafter": "peagle", "dtype": "float32", **r})
        print(json.dumps(rows[-1])[:400], flush=True)
    (args.out / "drafters_gpu.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
