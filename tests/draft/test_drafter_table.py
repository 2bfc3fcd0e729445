"""The engine rows for MTP and DFlash in docs/engine-table.md are the rules the commands run, regenerated."""

from __future__ import annotations

from conftest import ROOT


def test_docs_drafter_table_is_generated_from_the_drafter_rules():
    from eagle3_doctor.draft.drafter_table import drafter_table_markdown

    doc = (ROOT / "docs" / "engine-table.md").read_text()
    inner = doc.split("<!-- drafter-table:begin -->\n", 1)[1].split("<!-- drafter-table:end -->", 1)[0]
    assert inner == drafter_table_markdown(), "docs/engine-table.md's drafter section is stale: regenerate it (see its header)"


def test_the_dflash_rows_show_the_copied_eagle_ids_trap_under_vllm_alone():
    """A DFlash config with its ids copied into the EAGLE-3 key: vLLM reads the copy first, as EAGLE-3 ids
    (one lower in the capture vocabulary), SGLang reads the DFlash ids; the table shows exactly that."""
    from eagle3_doctor.draft.drafter_table import drafter_table_markdown

    row = next(r for r in drafter_table_markdown().splitlines() if r.startswith("| the same, and"))
    trained, sglang, vllm = (c.strip() for c in row.strip("|").split("|")[1:])
    assert trained == sglang == "layer_out[1], layer_out[15], layer_out[28]"
    assert vllm == "layer_out[0], layer_out[14], layer_out[27]"
