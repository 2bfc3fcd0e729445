"""How fast a saved target's weights reach the GPU, each way the doctor could read them, one process each.

    PYTHONPATH=. python3 bench/check_load.py --dir /tmp/e2e      # the pair bench_e2e.py saved

Each way runs in a fresh process after torch is imported and CUDA initialised, so only the read is timed:
transformers' ``from_pretrained(device_map="cuda")``, safetensors' ``load_file(device="cuda")``, and the
native decoder's ``read_tensors`` both ways: mapped files copied tensor by tensor, and threaded preads into pinned
buffers (the default on a GPU); then the threaded read against ``load_file``'s tensors, bit for bit.
Prints one JSON object per way: seconds and GB/s over the checkpoint's bytes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

CODE = r"""
import json, sys, time
import torch
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
way, d = sys.argv[1], sys.argv[2]
from pathlib import Path
files = sorted(Path(d).glob("*.safetensors"))
t0 = time.perf_counter()
if way == "from_pretrained":
    from transformers import AutoModelForCausalLM
    t0 = time.perf_counter()  # its imports are not the read
    m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16, device_map="cuda")
    n = sum(p.numel() * p.element_size() for p in m.parameters())
elif way == "load_file":
    from safetensors.torch import load_file
    sd = {}
    for f in files:
        sd.update(load_file(str(f), device="cuda"))
    n = sum(t.numel() * t.element_size() for t in sd.values())
elif way == "equal":  # the threaded read against safetensors' own, tensor by tensor, bit for bit
    from safetensors.torch import load_file
    from eagle3_doctor.model.native.read import read_tensors
    got = read_tensors(files, torch.bfloat16, torch.device("cuda"))
    bad = [k for f in files for k, v in load_file(str(f), device="cuda").items() if not torch.equal(got.pop(k), v)]
    print(json.dumps({"way": way, "unequal": bad[:5], "left_over": sorted(got)[:5]}))
    sys.exit(1 if bad or got else 0)
else:  # "mapped", or "threaded[:THREADS:CHUNK_MB]"
    from eagle3_doctor.model.native import read
    parts = way.split(":")
    if len(parts) == 3:
        read.THREADS = int(parts[1])
    chunk = int(parts[2]) << 20 if len(parts) == 3 else read.CHUNK
    sd = read.read_tensors(files, torch.bfloat16, torch.device("cuda"), threaded=parts[0] == "threaded", chunk=chunk)
    n = sum(t.numel() * t.element_size() for t in sd.values())
torch.cuda.synchronize()
s = time.perf_counter() - t0
print(json.dumps({"way": way, "s": round(s, 2), "gb": round(n / 1e9, 2), "gb_per_s": round(n / 1e9 / s, 2)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/e2e")
    ap.add_argument("--ways", default="from_pretrained,load_file,mapped,threaded,threaded,equal",
                    help="comma-separated; threaded:T:M reads with T threads in spans of M MB")  # fmt: skip
    args = ap.parse_args()
    d = str(Path(args.dir) / "target")
    for way in args.ways.split(","):
        out = subprocess.run([sys.executable, "-c", CODE, way, d], capture_output=True, text=True)
        print(out.stdout.strip() or json.dumps({"way": way, "error": out.stderr[-400:]}), flush=True)


if __name__ == "__main__":
    main()
