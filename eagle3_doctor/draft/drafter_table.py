"""The engine rows for the drafters beside EAGLE-3, generated from the rules the doctor runs
(:mod:`.mtp.served`, :mod:`.dflash.taps`) into docs/engine-table.md; a test keeps the two in sync.

Every row was read in the engine's source at the commit its source names; none was executed (neither
engine's MTP or DFlash path runs on a CPU), which the table says.
"""

from __future__ import annotations

from ..core.taps import format_spec
from .dflash.taps import served_taps, trained_taps
from .mtp.formats import DEFAULTS
from .mtp.served import mtp_serving

_POINT = {"layer_out_last": "layer_out[L-1]"}  # the layouts' defaults, in the capture vocabulary
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


def drafter_table_markdown() -> str:
    lines = [
        "MTP heads: what each engine hands the head (read, not executed).",
        "",
        "| engine | checkpoint layout | trained on (layout default) | step 1 receives | recycled between steps | source |",
        "|---|---|---|---|---|---|",
    ]
    for engine in ("vllm", "sglang"):
        for fmt in ("deepseek", "speculators"):
            s = mtp_serving(engine, fmt)
            hidden, recycle, _ = DEFAULTS[fmt]
            trained = f"`{_POINT.get(hidden, hidden)}`; recycles {recycle}"
            rec = s.recycle or "undetermined"
            lines.append(f"| {engine} | {fmt} | {trained} | `{s.hidden}` | {rec} | {s.hidden_source}; {s.recycle_source} |")
    lines += [
        "",
        f"DFlash taps on a {DFLASH_TARGET_LAYERS}-layer target: what the draft was trained on and what each engine feeds"
        " (read, not executed; a guess is marked).",
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
    src = served_taps("vllm", DFLASH_CASES[0][1], L)
    s_src = served_taps("sglang", DFLASH_CASES[0][1], L)
    assert src is not None and s_src is not None
    lines += ["", f"Sources: {s_src.source.split(' reads ')[0]}; {src.source.split(': ')[0]}.", ""]
    return "\n".join(lines)
