"""The calibration corpus: clean and broken pairs of every drafter kind, run through the CLI as a user types it at
several run sizes, and the judgment's false-alarm rate, miss rate and stability measured on them.

    python tools/calibrate.py              # prints the table docs/diagnose.md shows
    python tools/calibrate.py --json OUT   # every run's conclusion, for a closer look

A run's **conclusion** is what a user acts on: the verdict's branch (diagnose) and the codes of its warnings and
errors, plus the health code (HLT001, HLT002 or HLT003). A **false alarm** is a clean case with any warning or error
(an undetermined verdict included) or a non-zero exit; a **miss** is a broken case without the code it plants, at the
recommended size (the largest) whatever it says and at a smaller size where it decides something else; a case is
**stable** when its decided conclusions agree at every size (an undetermined one, which asks for more prompts,
agrees with any). `tests/test_calibration.py` runs this corpus and holds it to 0 false alarms,
0 misses and 100% stability, and holds docs/diagnose.md's table to this output.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
F = ROOT / "fixtures"
PROMPTS = F / "prompts.jsonl"
SIZES = ((5, 32), (8, 64), (16, 128))  # (--limit, --max-new-tokens); 16 x 128 is what the docs recommend
# a clean case's diagnose once more, past the 128 positions of each sequence the weights' fit and the module ablations
# count: a verdict that moves with the run's length (the module costs over every position drifted with it) shows here
LONG = (16, 256)
SGLANG_TREE = (
    "python -m sglang.launch_server --model-path {target} --speculative-algorithm EAGLE3 "
    "--speculative-draft-model-path {draft} --speculative-num-steps 3 --speculative-eagle-topk 2 "
    "--speculative-num-draft-tokens 6"
)
# a DFlash draft trained on blocks of 4 served in blocks of 2: SGLang drafts the launch's block (DFL005)
SGLANG_DFLASH_2 = (
    "python -m sglang.launch_server --model-path {target} --speculative-algorithm DFLASH "
    "--speculative-draft-model-path {draft} --speculative-num-draft-tokens 2"
)

# vLLM with no method: the release settles one from the draft's path (engines/vllm_method.py); a path naming none of
# the words it looks for is draft_model on 0.33.0
VLLM_NO_METHOD = 'vllm serve {target} --speculative-config \'{{"model": "{draft}", "num_speculative_tokens": 3}}\''


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # eagle3 | mtp | dflash | peagle
    draft: str  # a fixture directory, or the name of a variant built into the work folder
    engine: str
    commands: tuple[str, ...]
    expect: dict[str, str] = field(default_factory=dict)  # command -> the code a broken case must raise
    extra: tuple[str, ...] = ()
    serve: str = ""  # a launch line (SGLANG_TREE, SGLANG_DFLASH_2) read through --serve-cmd instead of --engine
    target: str = "target"  # a fixture directory or a built variant
    prompts: str = "prompts.jsonl"  # a file under fixtures/

    @property
    def clean(self) -> bool:
        return not self.expect


E3 = ("acceptance", "compare-hidden", "diagnose")
KINDS2 = ("acceptance", "diagnose")
CASES: tuple[Case, ...] = (
    Case("EAGLE-3 clean, README launch line (tree)", "eagle3", "draft-sglang", "sglang", E3, serve=SGLANG_TREE),
    Case("EAGLE-3 clean, speculators on vLLM", "eagle3", "draft-speculators", "vllm", E3),
    # vLLM detects eagle3 from the path (engines/vllm_method.py): the copy's name holds "eagle3", not "eagle-"
    Case(
        "EAGLE-3 clean, vLLM launch with no method, its path naming eagle3",
        "eagle3",
        "llama-eagle3",
        "vllm",
        ("inspect", *KINDS2),
        serve=VLLM_NO_METHOD,
    ),  # fmt: skip
    Case(
        "EAGLE-3 clean draft, prompts past its training length (the conversations)",
        "eagle3",
        "draft-sglang",
        "sglang",
        E3,
        {"diagnose": "DGN003"},
        prompts="conversations/openai.jsonl",
    ),  # fmt: skip
    Case("EAGLE-3 clean, embedding copied with the target's zero pad row", "eagle3", "e3-embed", "sglang", ("inspect", *E3)),
    Case(
        "EAGLE-3 seed incident in the config",
        "eagle3",
        "seed",
        "sglang",
        E3,
        {"acceptance": "ACC004", "compare-hidden": "ACC004", "diagnose": "DGN001"},
    ),
    Case(
        "EAGLE-3 served ids [-1, 1, 3]",
        "eagle3",
        "draft-sglang",
        "sglang",
        E3,
        {"acceptance": "ACC001", "compare-hidden": "CAP002", "diagnose": "DGN001"},
        ("--layer-ids=-1,1,3",),
    ),
    Case(
        "EAGLE-3 clean, drafting 16 a pass (its last positions accept nothing)",
        "eagle3",
        "draft-sglang",
        "sglang",
        KINDS2,
        {"acceptance": "HLT004", "diagnose": "HLT004"},
        ("--num-steps", "16"),
    ),  # fmt: skip
    Case(
        "EAGLE-3 no skill (weights at init)",
        "eagle3",
        "e3-rand",
        "sglang",
        KINDS2,
        {"acceptance": "HLT001", "diagnose": "HLT001"},
    ),
    Case("EAGLE-3 attention at init", "eagle3", "e3-attn", "sglang", KINDS2, {"acceptance": "HLT001", "diagnose": "DGN002"}),
    Case("DFlash clean", "dflash", "dflash-draft", "vllm", KINDS2),
    Case(
        "DFlash ids also under the EAGLE-3 key (vLLM reads them one layer early; small)",
        "dflash",
        "dflash-ids",
        "vllm",
        KINDS2,
        # the config as read is the error; its measured cost (0.05-0.10 tokens per pass) is a lead, not the verdict
        {"acceptance": "DFL001", "diagnose": "DFL001"},
    ),  # fmt: skip
    Case(
        "DFlash served in blocks of 2, trained on 4 (SGLang --speculative-num-draft-tokens 2)",
        "dflash",
        "dflash-draft",
        "sglang",
        ("inspect", *KINDS2),
        {"inspect": "DFL005", "acceptance": "DFL004", "diagnose": "DFL004"},
        serve=SGLANG_DFLASH_2,
    ),  # fmt: skip
    Case(
        "DFlash draft launched with the README's EAGLE3 line",
        "dflash",
        "dflash-draft",
        "sglang",
        ("inspect", *KINDS2),
        {"inspect": "CMD008", "acceptance": "CMD008", "diagnose": "CMD008"},
        serve=SGLANG_TREE,
    ),  # fmt: skip
    Case(
        "EAGLE-3 draft launched under SGLang's EAGLE (an EAGLE-1 line)",
        "eagle3",
        "draft-sglang",
        "sglang",
        ("inspect", *E3),
        {"inspect": "CMD008", "acceptance": "CMD008", "compare-hidden": "CMD008", "diagnose": "CMD008"},
        serve=SGLANG_TREE.replace("EAGLE3 ", "EAGLE "),
    ),  # fmt: skip
    Case(
        "EAGLE-3 draft on vLLM with no method, its path naming none (draft_model)",
        "eagle3",
        "e3-plain",
        "vllm",
        ("inspect", *KINDS2),
        {"inspect": "CMD008", "acceptance": "CMD008", "diagnose": "CMD008"},
        serve=VLLM_NO_METHOD,
    ),  # fmt: skip
    Case(
        "DFlash no skill (weights at init)",
        "dflash",
        "dflash-rand",
        "vllm",
        KINDS2,
        {"acceptance": "HLT001", "diagnose": "HLT001"},
    ),
    Case(
        "DFlash fc all NaN",
        "dflash",
        "dflash-nan",
        "vllm",
        ("inspect", *KINDS2),
        # nothing can be measured on a NaN fc: the measuring commands refuse it in one line naming the tensor
        {"inspect": "DRF009", "acceptance": "refused", "diagnose": "refused"},
    ),  # fmt: skip
    Case("P-EAGLE clean", "peagle", "peagle-draft", "vllm", KINDS2),
    Case(
        "P-EAGLE drafted as an EAGLE-3 chain (speculators_model_type eagle3)",
        "peagle",
        "peagle-chain",
        "vllm",
        KINDS2,
        {"acceptance": "PEA004", "diagnose": "PEA004"},
    ),  # fmt: skip
    Case(
        "P-EAGLE no skill (weights at init)",
        "peagle",
        "peagle-rand",
        "vllm",
        KINDS2,
        {"acceptance": "HLT001", "diagnose": "HLT001"},
    ),
    Case("MTP clean (DeepSeek layout, folded)", "mtp", "mtp-ds-fixed", "sglang", KINDS2, target="mtp-ds-fixed"),
    Case(
        "MTP no skill (weights at init)",
        "mtp",
        "mtp-rand",
        "sglang",
        KINDS2,
        {"acceptance": "HLT001", "diagnose": "HLT001"},
        target="mtp-rand",
    ),  # fmt: skip
)


def _copy(name: str, work: Path, src: Path) -> Path:
    out = work / name
    if not out.exists():
        shutil.copytree(src, out)
    return out


def _rewrite(d: Path, change: Callable[[str, Any], Any]) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    sd = load_file(d / "model.safetensors")
    g = torch.Generator().manual_seed(0)
    save_file({k: change(k, v, g) for k, v in sd.items()}, d / "model.safetensors", metadata={"format": "pt"})


def _at_init(select: Callable[[str], bool]) -> Callable[..., Any]:
    """Matrices picked by ``select`` redrawn as an initialiser leaves them: normal(0, 0.02)."""
    import torch

    def change(k: str, v: Any, g: Any) -> Any:
        return torch.randn(v.shape, generator=g) * 0.02 if v.dim() == 2 and v.is_floating_point() and select(k) else v

    return change


def _add_target_embedding(d: Path) -> None:
    """The draft with the target's own embedding saved beside its weights (the fixture target's row 0, a padding
    row, is exactly zero): an export that copies the embedding, as SpecForge's does."""
    from safetensors.torch import load_file, save_file

    sd = load_file(d / "model.safetensors")
    if "embed_tokens.weight" not in sd:
        sd["embed_tokens.weight"] = load_file(F / "target" / "model.safetensors")["model.embed_tokens.weight"].clone()
        save_file(sd, d / "model.safetensors", metadata={"format": "pt"})


def _draft_matrices(k: str) -> bool:
    return not any(x in k for x in ("embed", "lm_head", "d2t", "t2d"))


def build(work: Path) -> None:
    """The broken variants (and the clean MTP pair) in ``work``: every one a copy, no fixture touched."""
    import torch

    seed = _copy("seed", work, F / "draft-sglang")
    cfg = json.loads((seed / "config.json").read_text())
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [-1, 1, 3]  # the ids changed, the weights not
    (seed / "config.json").write_text(json.dumps(cfg, indent=1))
    _rewrite(_copy("e3-rand", work, F / "draft-sglang"), _at_init(_draft_matrices))
    _rewrite(_copy("e3-attn", work, F / "draft-sglang"), _at_init(lambda k: "self_attn" in k))
    _add_target_embedding(_copy("e3-embed", work, F / "draft-sglang"))
    _copy("e3-plain", work, F / "draft-sglang")
    _copy("llama-eagle3", work, F / "draft-sglang")  # under the work folder: the checkout's own path may name "eagle3"
    _rewrite(_copy("dflash-rand", work, F / "dflash-draft"), _at_init(_draft_matrices))
    ids = _copy("dflash-ids", work, F / "dflash-draft")
    cfg = json.loads((ids / "config.json").read_text())  # a copy-paste between recipes: vLLM reads this key first
    (ids / "config.json").write_text(
        json.dumps({**cfg, "eagle_aux_hidden_state_layer_ids": cfg["dflash_config"]["target_layer_ids"]})
    )
    _rewrite(
        _copy("dflash-nan", work, F / "dflash-draft"), lambda k, v, g: torch.full_like(v, float("nan")) if k == "fc.weight" else v
    )
    _rewrite(_copy("peagle-rand", work, F / "peagle-draft"), _at_init(lambda k: _draft_matrices(k) and "mask" not in k))
    chain = _copy("peagle-chain", work, F / "peagle-draft")  # the config a converter writes for an EAGLE-3 engine path
    cfg = json.loads((chain / "config.json").read_text())
    (chain / "config.json").write_text(
        json.dumps({**cfg, "speculators_model_type": "eagle3", "architectures": ["Eagle3Speculator"]}, indent=1)
    )
    _mtp(work)


def _mtp(work: Path) -> None:
    """The MTP fixture head written in DeepSeek's layout inside a copy of the target (the layout SGLang loads) and
    folded by `fix` (docs/drafters.md: quiet afterwards); and the same layout with the head's matrices at init."""
    from safetensors.torch import load_file

    from eagle3_doctor.draft.mtp.formats import read_mtp
    from eagle3_doctor.draft.mtp.writing import write_mtp

    if (work / "mtp-ds-fixed").exists():
        return
    sd = load_file(F / "target" / "model.safetensors")
    head, _ = read_mtp(F / "mtp-speculators", target_embed=sd["model.embed_tokens.weight"], target_head=sd["lm_head.weight"])
    write_mtp(head, work / "mtp-ds", "deepseek", target_dir=str(F / "target"))
    code = _invoke(["fix", "-t", work / "mtp-ds", "-d", work / "mtp-ds", "--engine", "sglang", "--out", work / "mtp-ds-fixed",
                    "--prompts", PROMPTS, "--limit", "2", "--max-new-tokens", "16", "--quiet"])[0]  # fmt: skip
    if code not in (0, 1) or not (work / "mtp-ds-fixed").exists():
        raise RuntimeError(f"fix on the DeepSeek-layout MTP head exited {code}")
    rand = _copy("mtp-rand", work, work / "mtp-ds-fixed")
    _rewrite(rand, _at_init(lambda k: k.startswith("model.layers.8.") and "embed" not in k and "shared_head.head" not in k))


def _invoke(argv: list[Any]) -> tuple[int, str]:
    from typer.testing import CliRunner

    from eagle3_doctor.cli.app import app

    r = CliRunner().invoke(app, [str(a) for a in argv], prog_name="eagle3-doctor")
    return r.exit_code, r.output


def _path(work: Path, name: str) -> Path:
    return F / name if (F / name).exists() else work / name


def argv(case: Case, command: str, size: tuple[int, int] | None, work: Path, out: Path) -> list[Any]:
    target, draft = _path(work, case.target), _path(work, case.draft)
    if case.serve:
        args: list[Any] = [command, "--serve-cmd", case.serve.format(target=target, draft=draft)]
    else:
        args = [command, "-t", target, "-d", draft, "--engine", case.engine]
    if command != "inspect":
        args += ["--prompts", F / case.prompts, "--quiet", "--dtype", "float32", "--device", "cpu"]
        assert size is not None
        args += ["--limit", size[0]] + (["--max-new-tokens", size[1]] if command != "compare-hidden" else [])
    return [*args, *case.extra, "--json", out]


@dataclass
class Run:
    case: str
    command: str
    size: str
    exit: int
    conclusion: str  # the verdict's branch (diagnose), then the codes of its warnings and errors and its health code
    codes: list[str]
    error: str = ""


def undetermined(r: Run) -> bool:
    """A run that asks for more evidence instead of deciding: diagnose's undetermined branch, HLT003 elsewhere."""
    return r.conclusion.startswith("undetermined") or "HLT003" in r.codes or "HLT005" in r.codes


def conclusion(doc: dict[str, Any], command: str) -> tuple[str, list[str]]:
    from eagle3_doctor.analyses.judgment import BRANCHES

    findings = doc.get("findings") or []
    codes = sorted({f["code"] for f in findings if f.get("severity") in ("warning", "error") or f["code"].startswith("HLT")})
    if command != "diagnose":
        return " ".join(codes) or "-", codes
    verdict = doc.get("verdict") or ""
    branch = next((b for b, words in BRANCHES.items() if verdict.startswith(words)), doc.get("branch") or "?")
    return f"{branch}: " + (" ".join(codes) or "-"), codes


def sizes(case: Case, command: str) -> tuple[tuple[int, int], ...]:
    """The run sizes a (case, command) runs at: :data:`SIZES`, and :data:`LONG` for a clean case's diagnose."""
    return SIZES + ((LONG,) if case.clean and command == "diagnose" else ())


def run_case(case: Case, work: Path) -> list[Run]:
    runs = []
    for command in case.commands:
        for size in (None,) if command == "inspect" else sizes(case, command):
            out = work / "out.json"
            out.unlink(missing_ok=True)
            code, text = _invoke(argv(case, command, size, work, out))
            label = "-" if size is None else f"{size[0]} x {size[1]}"
            if not out.exists():
                line = text.strip().splitlines()[-1:][0] if text else ""
                # a refusal (exit 2, one line) is a conclusion: "refused", with the codes it names; anything else
                # without a document (a crash) concludes nothing
                refused = code == 2 and line.startswith("eagle3-doctor: error:")
                named = sorted(set(re.findall(r"\b[A-Z]{3}\d{3}\b", line))) if refused else []
                concl = ("refused" + (f" ({' '.join(named)})" if named else "")) if refused else "no document"
                runs.append(Run(case.name, command, label, code, concl, ["refused"] if refused else [], line))
                continue
            concl, codes = conclusion(json.loads(out.read_text()), command)
            runs.append(Run(case.name, command, label, code, concl, codes))
    return runs


@dataclass
class Calibration:
    runs: list[Run]

    def by_case(self) -> dict[tuple[str, str], list[Run]]:
        out: dict[tuple[str, str], list[Run]] = {}
        for r in self.runs:
            out.setdefault((r.case, r.command), []).append(r)
        return out

    def false_alarms(self) -> list[Run]:
        """Clean runs with any warning or error (an undetermined verdict included) or a non-zero exit."""
        clean = {c.name for c in CASES if c.clean}
        return [r for r in self.runs if r.case in clean and (r.exit != 0 or any(x != "HLT002" for x in r.codes))]

    def misses(self) -> list[Run]:
        """Broken runs without the planted code: at the recommended size whatever they say, and at a smaller size
        where they decide something else (an undetermined verdict there asks for more prompts: it misses nothing)."""
        expect = {c.name: c.expect for c in CASES}
        last = f"{SIZES[-1][0]} x {SIZES[-1][1]}"
        return [
            r
            for r in self.runs
            if r.command in expect[r.case]
            and expect[r.case][r.command] not in r.codes
            and (r.size in (last, "-") or not undetermined(r))
        ]

    def unstable(self) -> list[tuple[str, str]]:
        """(case, command) pairs whose decided conclusions differ between run sizes (undetermined agrees with all)."""
        return [k for k, rs in self.by_case().items() if len({r.conclusion for r in rs if not undetermined(r)}) > 1]

    def table(self) -> str:
        clean_runs = [r for r in self.runs if not {c.name: c.expect for c in CASES}[r.case]]
        broken_runs = [r for r in self.runs if r not in clean_runs]
        groups = self.by_case()
        lines = [
            "| case | command | expected | conclusion at "
            + ", ".join(f"{a} x {b}" for a, b in SIZES)
            + f" (a clean diagnose also at {LONG[0]} x {LONG[1]}) | stable |",
            "|---|---|---|---|---|",
        ]
        for (case, command), rs in groups.items():
            exp = next(c for c in CASES if c.name == case).expect.get(command, "no warning")
            concl = "; ".join(dict.fromkeys(r.conclusion for r in rs))
            stable = (case, command) not in self.unstable()
            lines.append(f"| {case} | {command} | {exp} | {concl} | {'yes' if stable else 'NO'} |")
        fa, miss, unstable = self.false_alarms(), self.misses(), self.unstable()
        lines += [
            "",
            f"false alarms: {len(fa)} of {len(clean_runs)} clean runs; misses: {len(miss)} of {len(broken_runs)} broken runs; "
            f"stable: {len(groups) - len(unstable)} of {len(groups)} (case, command) pairs across the run sizes",
        ]
        return "\n".join(lines)


def calibrate(work: Path | None = None, cases: tuple[Case, ...] = CASES) -> Calibration:
    with tempfile.TemporaryDirectory() as tmp:
        w = work or Path(tmp)
        build(w)
        runs = [r for c in cases for r in run_case(c, w)]
    return Calibration(runs)


def main(args: list[str]) -> int:
    cal = calibrate()
    print(cal.table())
    if "--json" in args:
        Path(args[args.index("--json") + 1]).write_text(json.dumps([r.__dict__ for r in cal.runs], indent=1))
    return 0 if not (cal.false_alarms() or cal.misses() or cal.unstable()) else 1


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main(sys.argv[1:]))
