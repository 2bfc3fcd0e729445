"""The P-EAGLE rows of docs/engine-table.md, generated from the rules the commands run (:mod:`.served`) over the
configs vLLM's own reader is executed on (``draft/peagle/serving.json``): each row names the releases whose executed
outcome the rule reproduces (tests/draft/test_peagle_conformance.py holds every release to it)."""

from __future__ import annotations

import json
from importlib import resources

from .formats import PEagleInfo, info_from_config
from .served import peagle_serving

# speculators saves mask_hidden with every P-EAGLE draft: the table's cases are such checkpoints
SAVED = {"mask_hidden": [1, 1, 384]}


def case_info(cfg: dict) -> PEagleInfo:
    """The checkpoint a case's config belongs to, as the doctor reads it."""
    info = info_from_config(cfg, SAVED)
    assert info is not None  # a mask_hidden tensor makes every config a P-EAGLE draft
    return info


def _cell(s) -> str:
    if s.mode == "refused":
        return f"refused: {s.why}"
    return f"{s.mode}, K {s.k}" + (f", mask token {s.mask_token_id}" if s.mode == "parallel" else "")


def peagle_table_markdown() -> list[str]:
    table = json.loads(resources.files("eagle3_doctor").joinpath("draft/peagle/serving.json").read_text())
    executed = [r for r in table["rows"] if r["outcome"]["peagle"]["mode"] != "absent"]
    lines = [
        "P-EAGLE drafts (speculators layout, mask_hidden in the weights, mask token 1, K 4): how each engine runs them "
        "(vLLM's config reading executed per release; SGLang read).",
        "",
        "| config | " + " | ".join(f"vllm {r['executed_from']}-{r['releases'][-1]}" for r in executed) + " | sglang 0.5.23 |",
        "|---|" + "---|" * (len(executed) + 1),
    ]
    for name, cfg in table["cases"].items():
        cells = [_cell(peagle_serving("vllm", r["executed_from"], case_info(cfg))) for r in executed]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {_cell(peagle_serving('sglang', None, case_info(cfg)))} |")
    first = executed[0]["executed_from"]
    lines += ["", f"- vllm: each release's `transformers_utils/configs/speculators/{{algos,base}}.py` and the proposer's "
              f"`_init_parallel_drafting_params`, executed (`conformance/peagle_exec.py`); releases before {first} read "
              "speculators configs with another shape and know no P-EAGLE."]  # fmt: skip
    return lines
