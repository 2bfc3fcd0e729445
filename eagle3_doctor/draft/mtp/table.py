"""The MTP rows of docs/engine-table.md: the engines' own MTP code executed release by release
(``draft/mtp/serving.json``, written by ``make conformance``; tests/draft/test_mtp_conformance.py): the layout table
is the newest release's, the family table lists every span of releases that recycles the same state, with the
file:line executed."""

from __future__ import annotations

from .formats import DEFAULTS
from .served import FAMILIES, mtp_serving, span
from .served import table as mtp_table

_POINT = {"layer_out_last": "layer_out[L-1]"}  # the layouts' defaults, in the capture vocabulary


def mtp_table_markdown() -> list[str]:
    return [*_mtp_layouts(), "", *_mtp_families()]


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
