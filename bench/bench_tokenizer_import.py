"""What the tokenizer costs a process before any token: transformers' import, its tokenizer's load, and the
tokenizers library alone on the same tokenizer.json, each in a fresh process (the way a user's command pays it).

    PYTHONPATH=. python bench/bench_tokenizer_import.py [--dir fixtures/target] [--repeats 3]

Prints one JSON line per way: the wall time of the whole child process (the interpreter's start included) and the
time the child measured around the way's own statements, best and median of the repeats; then a bare interpreter
for reference. The ways must agree on the token ids of a probe text (checked in each child, printed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

PROBE = "The quick brown fox jumps over the lazy dog. 12345 <|user|> hello"

WAYS = {
    "bare interpreter": "",
    "import transformers": "import transformers",
    "transformers AutoTokenizer": (
        "from transformers import AutoTokenizer\n"
        "tok = AutoTokenizer.from_pretrained(DIR)\n"
        "ids = tok(PROBE, add_special_tokens=False)['input_ids']"
    ),
    "tokenizers.Tokenizer": (
        "import tokenizers\n"
        "tok = tokenizers.Tokenizer.from_file(DIR + '/tokenizer.json')\n"
        "ids = tok.encode(PROBE, add_special_tokens=False).ids"
    ),
}

CHILD = """
import json, time
t0 = time.perf_counter()
DIR, PROBE = {dir!r}, {probe!r}
ids = None
{body}
print(json.dumps({{"inside_s": time.perf_counter() - t0, "ids": ids}}))
"""


def run(body: str, directory: str) -> tuple[float, float, list[int] | None]:
    code = CHILD.format(dir=directory, probe=PROBE, body=body)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return wall, got["inside_s"], got["ids"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="fixtures/target")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    ids_seen = {}
    for name, body in WAYS.items():
        run(body, a.dir)  # once untimed: the files in the page cache, the bytecode compiled
        walls, insides = [], []
        for _ in range(a.repeats):
            wall, inside, ids = run(body, a.dir)
            walls.append(wall)
            insides.append(inside)
        if ids is not None:
            ids_seen[name] = ids
        print(json.dumps({"way": name, "wall_s_best": round(min(walls), 3), "wall_s_median": round(statistics.median(walls), 3),
                          "inside_s_best": round(min(insides), 3), "inside_s_median": round(statistics.median(insides), 3)}))  # fmt: skip
    same = len({json.dumps(v) for v in ids_seen.values()}) == 1
    print(json.dumps({"probe_ids_equal": same, "ids": ids_seen}))


if __name__ == "__main__":
    main()
