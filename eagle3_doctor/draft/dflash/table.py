"""The DFlash rows of docs/engine-table.md, generated from the rules the commands run (:mod:`.taps`): what the draft
was trained on and what each engine feeds, checked against the engines' own DFlash code executed release by release
(``draft/dflash/serving.json``, written by ``make conformance``; tests/draft/test_dflash_conformance.py); the
coverage lines name the releases whose executed rows agree with the rule and the file:line executed."""

from __future__ import annotations

import json
from importlib import resources

from ...core.taps import format_spec
from .taps import served_taps, trained_taps

DFLASH_TARGET_LAYERS = 32
# configs a DFlash draft for a 32-layer target ships with: its own ids, the same ids copied into the
# EAGLE-3 key (a converted or merged config), and no ids at all with a 3-layer draft
DFLASH_CASES: tuple[tuple[str, dict], ...] = (
    ("`dflash_config.target_layer_ids` [1, 15, 28]", {"dflash_config": {"target_layer_ids": [1, 15, 28]}}),
    (
        "the same, and `eagle_aux_hidden_state_layer_ids` [1, 15, 28] copied beside it",
        {"dflash_config": {"target_layer_ids": [1, 15, 28]}, "eagle_aux_hidden_state_layer_ids": [1, 15, 28]},
    ),
    ("no ids, `num_hidden_layers` 3", {"dflash_config": {}, "num_hidden_layers": 3}),
)


def dflash_table_markdown() -> list[str]:
    lines = [
        f"DFlash taps on a {DFLASH_TARGET_LAYERS}-layer Qwen3 target: what the draft was trained on and what each engine"
        " feeds (executed: the engines' own code, per release; a guess is marked).",
        "",
        "| config | trained on | sglang feeds | vllm feeds |",
        "|---|---|---|---|",
    ]
    L = DFLASH_TARGET_LAYERS
    for label, cfg in DFLASH_CASES:
        cells = []
        for t in (trained_taps(cfg, L), served_taps("sglang", cfg, L), served_taps("vllm", cfg, L)):
            assert t is not None
            spec = format_spec(t.spec) if t.spec is not None else "refused"
            cells.append(spec + (" (guessed)" if t.guessed else ""))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return [*lines, "", *_dflash_coverage()]


def _dflash_coverage() -> list[str]:
    """Which executed rows of draft/dflash/serving.json the rules above are: the newest release's row of each
    engine (vLLM: the V2 runner, eagle3_utils.py), the releases it covers and the file:line it executed."""
    table = json.loads(resources.files("eagle3_doctor").joinpath("draft/dflash/serving.json").read_text())
    rows = {r["id"]: r for r in table["rows"]}
    out = []
    for engine, runner, keys in (
        ("sglang", "default", ("parse_dflash_draft_config", "build_target_layer_ids", "set_dflash_layers_to_capture")),
        ("vllm", "v2", ("v2_reader", "fc")),
    ):
        row = rows[table["release_rows"][engine][table["releases"][engine][-1]][runner]]
        first = next(r["executed_from"] for r in table["rows"] if r["engine"] == engine and r["present"])
        rel = row["releases"]
        span = rel[0] if len(rel) == 1 else f"{rel[0]}-{rel[-1]}"
        where = ", ".join(row["sources"][k] for k in keys)
        out.append(f"- {engine} {span} ({runner} runner), executed from {row['executed_from']}: {where}. "
                   f"DFlash from {engine} {first}; each older release has its own executed row in draft/dflash/serving.json.")  # fmt: skip
    return out
