"""Every command's JSON on the shipped fixtures, normalised, as committed golden files.

The golden files pin what a refactor must not change: `tests/test_golden.py` reruns each case and
compares with `tests/golden/<case>.json`. Normalising removes only what differs between
two honest runs: wall-clock fields, the process's argv, the absolute paths of the checkout and the temporary folder,
floats past five significant digits, figures at float32 round-off (ROUND_OFF) and where such a figure peaks.
Regenerate (after a change that is meant to alter the output) with `python tools/gen_golden.py`.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
F = "fixtures"
S = f"{F}/serving"
SMALL = ["--limit", "4", "--max-new-tokens", "24"]

# (case, argv); "{tmp}" is a fresh temporary folder per case, "{incident}" a copy of the SGLang draft
# in it with the seed incident's ids ([-1, 1, 3]) written into its config
CASES: list[tuple[str, list[str]]] = [
    ("inspect-sglang", ["inspect", "-t", f"{F}/target", "--draft", f"{F}/draft-sglang", "--engine", "sglang"]),
    ("inspect-speculators", ["inspect", "-t", f"{F}/target", "--draft", f"{F}/draft-speculators", "--engine", "vllm"]),
    (
        "compare-hidden-incident",
        ["compare-hidden", "-t", f"{F}/target", "--draft", f"{F}/draft-sglang", "--engine", "sglang"]
        + ["--layer-ids=-1,1,3", "--prompts", f"{F}/prompts.jsonl", "--limit", "4"],
    ),
    (
        "compare-hidden-dump-matrix",
        ["compare-hidden", "-t", f"{F}/target", "--draft", f"{F}/draft-sglang", "--engine", "sglang"]
        + ["--train-dump", f"{F}/specforge-dump", "--matrix"],
    ),
    (
        "acceptance-incident",
        ["acceptance", "-t", f"{F}/target", "--draft", f"{F}/draft-sglang", "--engine", "sglang"]
        + ["--layer-ids=-1,1,3", "--prompts", f"{F}/prompts.jsonl", "--num-steps", "3", *SMALL],
    ),
    (
        "diagnose-incident",
        ["diagnose", "-t", f"{F}/target", "--draft", f"{F}/draft-sglang", "--engine", "sglang"]
        + ["--layer-ids=-1,1,3", "--prompts", f"{F}/prompts.jsonl", *SMALL],
    ),
    (
        "fix-incident",
        ["fix", "-t", f"{F}/target", "--draft", "{incident}", "--engine", "sglang"]
        + ["--out", "{tmp}/fixed", "--prompts", f"{F}/prompts.jsonl", "--limit", "8"],
    ),
    (
        "fingerprint-sglang",
        ["fingerprint", "-t", f"{F}/target", "--draft", f"{F}/draft-sglang", "--prompts", f"{F}/prompts.jsonl"]
        + ["--limit", "4", "--max-new-tokens", "16"],
    ),
    (
        "template-diff-requests",
        ["template-diff", "-t", f"{F}/target", "--serve-template", f"{F}/templates/chatml.jinja"]
        + ["--requests", f"{F}/conversations/requests.jsonl"],
    ),
    (
        "server-metrics-vllm-wiring",
        ["server-metrics", "--metrics", f"{S}/vllm-after-wiring.prom", "--before", f"{S}/vllm-before.prom"],
    ),
    *(
        (
            f"{command}-{kind}",
            [command, "-t", f"{F}/target", "--draft", f"{F}/{folder}", "--engine", "vllm"]
            + ([] if command == "inspect" else ["--prompts", f"{F}/prompts.jsonl", "--limit", "3"])
            + (["--max-new-tokens", "16"] if command in ("acceptance", "diagnose", "fix") else [])
            + (["--out", "{tmp}/fixed"] if command == "fix" else []),
        )
        # every drafter kind beside EAGLE-3 through every command that runs it: the seam they share is pinned here
        for kind, folder in (("mtp", "mtp-speculators"), ("dflash", "dflash-draft"), ("peagle", "peagle-draft"))
        for command in ("inspect", "compare-hidden", "acceptance", "diagnose", "fix")
    ),
    (
        "gate-shipped-policy",
        ["gate", "-t", f"{F}/target", "--draft", f"{F}/draft-sglang", "--policy", "examples/ci/policy.toml"]
        + ["--prompts", f"{F}/prompts.jsonl", "--limit", "4"],
    ),
]

# wall-clock and host facts: they differ between two honest runs of the same case
_VOLATILE = re.compile(r"(^|_)(seconds|wall|elapsed|s|ms)$")


# float32 round-off: a relative difference or an absolute one under this is the last bits of a sum, which differ
# between CPUs, BLAS builds and library releases; such a figure is 0 in a golden file
ROUND_OFF = 1e-5
# where a difference at round-off peaks is arbitrary: a worst row at 0 keeps its figures, not its place
_PLACE = ("position", "sequence", "token")


def _normalise(doc: Any, tmp: str) -> Any:
    if isinstance(doc, dict):
        # tool.command is the process's argv, which in-process is the test runner's
        out = {k: _normalise(v, tmp) for k, v in doc.items() if not _VOLATILE.search(k) and k != "command"}
        if out.get("rel_l2") == 0.0 and "position" in out:
            out.update({k: None for k in _PLACE if k in out})
        return out
    if isinstance(doc, list):
        return [_normalise(v, tmp) for v in doc]
    if isinstance(doc, str):
        return doc.replace(tmp, "<TMP>").replace(str(ROOT), "<ROOT>")
    if isinstance(doc, float):
        # five significant digits: a refactor that changes a figure shows; the last bits of a float32
        # sum, which differ between CPUs with different vector units, do not
        return 0.0 if abs(doc) < ROUND_OFF else float(f"{doc:.5g}")
    return doc


def close(got: Any, want: Any, rel: float = 1e-4) -> bool:
    """The same document up to the fifth digit's rounding: a figure a hair either side of a rounding boundary
    prints one unit apart in its last digit; anything else, a key, a string, a code, must be equal."""
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(close(got[k], want[k], rel) for k in got)
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(close(a, b, rel) for a, b in zip(got, want))
    if isinstance(got, float) and isinstance(want, float):
        return abs(got - want) <= rel * max(abs(got), abs(want))
    return type(got) is type(want) and got == want


def _incident_copy(dst: Path) -> None:
    import shutil

    shutil.copytree(ROOT / F / "draft-sglang", dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [-1, 1, 3]
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))


def run_case(argv: list[str]) -> tuple[int, str]:
    """Run one case in-process from the checkout root; (exit code, normalised JSON text)."""
    from typer.testing import CliRunner

    from eagle3_doctor.cli.app import app

    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "out.json")
        cwd = os.getcwd()
        os.chdir(ROOT)
        try:
            if "{incident}" in argv:
                _incident_copy(Path(tmp) / "incident")
            args = [a.replace("{incident}", f"{tmp}/incident").replace("{tmp}", tmp) for a in argv]
            r = CliRunner().invoke(app, [*args, "--json", out], prog_name="eagle3-doctor")
        finally:
            os.chdir(cwd)
        if not Path(out).exists():
            raise RuntimeError(f"{argv[0]} wrote no JSON (exit {r.exit_code}): {r.output[-2000:]}")
        doc = _normalise(json.loads(Path(out).read_text()), tmp)
        doc.get("tool", {}).pop("version", None)  # the commit's own version (from the VCS tag): differs per commit
    return r.exit_code, json.dumps({"exit_code": r.exit_code, "result": doc}, indent=1, sort_keys=True) + "\n"


def main(names: list[str]) -> int:
    import torch

    torch.set_num_threads(min(2, os.cpu_count() or 1))
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name, argv in CASES:
        if names and name not in names:
            continue
        _, text = run_case(argv)
        (GOLDEN / f"{name}.json").write_text(text)
        print(f"wrote tests/golden/{name}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
