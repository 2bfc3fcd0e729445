"""The engine rows for the drafters beside EAGLE-3, generated from the rules the doctor runs
(:mod:`.mtp.served`, :mod:`.dflash.taps`) into docs/engine-table.md; a test keeps the two in sync.

The MTP rows are the engines' own MTP code executed release by release (``data/mtp_serving.json``, written by
``make conformance``; tests/draft/test_mtp_conformance.py): the layout table is the newest release's, the
family table lists every span of releases that recycles the same state, with the file:line executed. The
DFlash rows are checked against the engines' own DFlash code executed release by release
(``data/dflash_serving.json``, written by ``make conformance``; tests/draft/test_dflash_conformance.py):
the table names the releases whose executed rows agree with the rule and the file:line executed.
"""

from __future__ import annotations

import json
from importlib import resources

from ..core.taps import format_spec
from .dflash.taps import served_taps, trained_taps
from .mtp.formats import DEFAULTS
from .mtp.served import FAMILIES, mtp_serving, span
from .mtp.served import table as mtp_table
from .peagle.table import peagle_table_markdown

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
    lines = [*_mtp_layouts(), "", *_mtp_families(), ""]
    lines += [
        "",
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
    lines += ["", *_dflash_coverage(), "", *peagle_table_markdown(), ""]
    return "\n".join(lines)


def _dflash_coverage() -> list[str]:
    """Which executed rows of data/dflash_serving.json the rules above are: the newest release's row of each
    engine (vLLM: the V2 runner, eagle3_utils.py), the releases it covers and the file:line it executed."""
    table = json.loads(resources.files("eagle3_doctor").joinpath("data/dflash_serving.json").read_text())
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
                   f"DFlash from {engine} {first}; each older release has its own executed row in data/dflash_serving.json.")  # fmt: skip
    return out


def _mtp_layouts() -> list[str]:
    lines = [
        "MTP heads: what the newest release of each engine hands the head (recycling executed, each release's own MTP "
        "code; step 1 a checked pattern; a layout the engine refuses says so in its own words).",
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
            if s.refusal:
                rec = f"**refused** (MTP003): {s.refusal}; measured as served in the layout it loads: {rec}"
            lines.append(
                f"| {engine} {s.release} | {fmt} | {trained} | `{s.hidden}` | {rec} | {s.hidden_source}; {s.recycle_source} |"
            )
    return lines


def _mtp_families() -> list[str]:
    """Every span of releases of one engine and family that recycles the same state, with what was executed."""
    t = mtp_table()
    rows = {r["id"]: r for r in t["rows"]}
    lines = [
        "MTP recycling per family and release (executed): what the next step reads, what the logits read.",
        "",
        "| engine | family | releases | recycled | logits read | executed (the span's newest row) |",
        "|---|---|---|---|---|---|",
    ]
    for engine in ("vllm", "sglang"):
        for fam in FAMILIES:
            spans: list[tuple[str, list[str], dict]] = []
            for v in t["releases"][engine]:
                r = rows[t["release_rows"][engine][v][fam]]
                b = r["behaviour"]
                if "absent" in b:
                    continue
                what = f"{b['recycle']} ({', '.join(b['recycle_norms']) or 'no norm'})"
                key = f"{what} | {', '.join(b['logits_norms'])}"
                if spans and spans[-1][0] == key:
                    spans[-1][1].append(v)
                    spans[-1] = (key, spans[-1][1], r)
                else:
                    spans.append((key, [v], r))
            for key, vs, r in spans:
                rel = vs[0] if len(vs) == 1 else f"{vs[0]}-{vs[-1]}"
                where = ", ".join(r["behaviour"]["executed"])
                lines.append(f"| {engine} | {fam} | {rel} | {key} | {where} (row {span(r)}) |")
    return lines
