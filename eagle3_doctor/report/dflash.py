"""The terminal report of acceptance on a DFlash draft: both paths' tokens per verify pass, their difference,
and the sequential loop's check."""

from __future__ import annotations

from typing import Any

from ..core.taps import format_spec


def render_dflash_acceptance(con: Any, res: Any) -> None:
    con.print(
        f"DFlash draft, blocks of {res.block_size} ({res.block_size - 1} proposals a pass), engine {res.engine}: "
        f"{res.prompts} prompts, {res.tokens} new tokens of the target's greedy continuation",
        markup=False, soft_wrap=True,
    )  # fmt: skip
    for p in (res.trained, res.served):
        if p is None:
            continue
        con.print(
            f"  {p.name:8s} {format_spec(p.spec)}: mean acceptance length {p.mean_acceptance_length.text()} "
            f"over {p.passes} passes  ({p.source})",
            markup=False, soft_wrap=True,
        )  # fmt: skip
    if res.difference is not None:
        con.print(f"  served - trained: {res.difference.text()}", markup=False)
    ref = res.reference
    ok = ref["tokens_equal_greedy"] and ref["passes_equal_estimator"]
    con.print(
        f"reference sequential loop ({ref['path']} path, {ref['prompts']} prompts): "
        + ("tokens equal greedy decoding, passes equal the estimator's" if ok else "DISAGREES with the estimator (see JSON 'reference')"),
        markup=False, soft_wrap=True,
    )  # fmt: skip
    for n in res.notes:
        con.print(f"note: {n}", markup=False, soft_wrap=True)
    con.print()
