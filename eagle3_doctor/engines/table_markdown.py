"""The engine table as Markdown (docs/engine-table.md, kept in sync by tests/engines/test_engines.py)."""

from __future__ import annotations

from .families import VLLM_MODEL_TYPE
from .keys import key_rule
from .releases import MODELOPT_FIRST, TRTLLM_RELEASE, TRTLLM_RELEASES, covering
from .table import SGLANG_ROWS, VLLM_CHECK, VLLM_ROWS, VLLM_V1_READS, VLLM_V2_DEFAULT_FROM, VLLM_V2_FIRST, Row
from .trtllm_table import metadata_src, trtllm_rows, trtllm_table


def _row_meaning(engine: str, r: Row) -> tuple[str, str]:
    """(what id k captures, what -1 / 0 / L do) for one engine-table row."""
    if r.rule == "unmodelled":
        return "not modelled (the doctor refuses to guess)", "-"
    if r.rule in ("unsupported", "absent"):
        what = "no `set_eagle3_layers_to_capture`" if engine == "sglang" else "no `SupportsEagle3`"
        return (
            f"start-up: {what} (ENG001)" if r.rule == "unsupported" else "start-up: architecture not registered (ENG001)"
        ), "-"
    if engine == "vllm":
        k = "`layer_out[k-1]` (0 = embed)"
        zero = "embed" if r.guard0 or r.loop == "after" else "crash (residual None)"
        end = "`layer_out[L-1]` (pre-norm)" if r.end or r.loop == "after" else "dropped"
        return k, f"-1 dropped; 0 {zero}; L {end}"
    k = {
        "default_only": "ids not read: default",
        "plus1": "`layer_out[k]` (+1)",
        "first1": "`layer_out[k]` if ids[0]==1 else `layer_out[k-1]`",
        "maxL": "raw if max(ids)==L else +1",
    }[r.rule]
    m1 = "embed" if r.guard0 else "crash (residual None)"
    if r.rule == "first1":
        m1 = "matches no layer (dropped)"
    tail = "IndexError at start-up" if r.index_check else ("`layer_out[L-1]`" if r.end else "dropped")
    extra = "; fewer captures than ids: AssertionError" if r.packer else ""
    if r.branch:
        k += "; but the layer's MLP branch, not the residual stream (ENG003)"
    return k, f"-1 {m1}; L-1 {tail}{extra}"


def engine_table_markdown() -> str:
    """The README/docs engine table, generated from SGLANG_ROWS / VLLM_ROWS (tests keep docs in sync)."""
    lines = [
        "| engine | from release | target family | id k captures | -1 / 0 / L | keys read | order | source |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for engine, table in (("sglang", SGLANG_ROWS), ("vllm", VLLM_ROWS)):
        for fam, rows in table.items():
            if engine == "sglang" and fam == "mistral":
                continue
            for r in rows:
                if r.first == "0.0":
                    continue
                k, special = _row_meaning(engine, r)
                keys = ", ".join(key_rule(engine, r.first).keys) or "none"
                if engine == "sglang" and r.aux_flag:
                    keys += " (+ use_aux_hidden_state)"
                if engine == "vllm":
                    lst = covering(VLLM_CHECK, r.first)[1]
                    mt = VLLM_MODEL_TYPE[fam]  # None: the checkpoint's text config decides (such rows are unmodelled)
                    if lst is not None and mt is not None and not any(x in mt for x in lst):
                        k, special = "start-up ValueError (target check)", "-"
                order = "layer order, duplicates collapse"
                lines.append(f"| {engine} | {r.first} | {fam} | {k} | {special} | {keys} | {order} | `{r.src}` |")
    lines.append("")
    lines.append(
        "vLLM V1 runner reads: "
        + "; ".join(f"from {v}: {k}" for v, k in VLLM_V1_READS)
        + f"; Model Runner V2 (from {VLLM_V2_FIRST}): top-level key only; default runner V2 from {VLLM_V2_DEFAULT_FROM} (hand-read)."
    )
    lines.append("")
    lines.append("| engine | from release | target family | id k captures | -1 / 0 / L | keys read | order | source |")
    lines.append("|---|---|---|---|---|---|---|---|")
    lines.append(
        f"| trtllm (executed) | {TRTLLM_RELEASES[0]} | llama, mistral, llama4; any other family without a row below "
        f"from {TRTLLM_RELEASE} (before it: undetermined, ENG004) | `layer_out[k]`; -1 = `final_norm` | one-model: "
        "sorted, -1 first; two-model: -1 last; id L (no such layer): slot never written, uninitialized memory "
        "(ENG003); no ids and L <= 5: start-up ValueError (ENG001) | `eagle3_layers_to_capture` | sorted set "
        f"| `{metadata_src()}` |"
    )
    for fam in sorted(trtllm_table()["families"]):
        for t in trtllm_rows(fam):
            k = "`layer_out[k]`" if t.capture == "stream" else "nothing: every slot uninitialized (ENG003)"
            how = "executed" if t.executed else "PR history"
            lines.append(f"| trtllm ({how}) | {t.first} | {fam} | {k} | as above | as above | as above | `{t.src}` |")
    lines.append(
        f"| modelopt (executed) | {MODELOPT_FIRST} | all | `layer_out[k]` (forward hook on layers[k]); default "
        "{1, max(0, L//2-1), max(0, L-4)}: fewer than 3 states for L < 7 | 0..L-1; a duplicate, -1 or L: fc shape "
        "error on the first forward (ENG002) | `eagle_config.eagle_aux_hidden_state_layer_ids` "
        "| layer order | `modelopt/torch/speculative/plugins/hf_eagle.py` |"
    )
    return "\n".join(lines) + "\n"
