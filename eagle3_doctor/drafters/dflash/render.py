"""The terminal report of acceptance on a DFlash draft: both paths' tokens per verify pass, their difference,
and the sequential loop's check."""

from __future__ import annotations

from typing import Any

from ...core.stats import Interval
from ...core.taps import format_spec


def render_dflash_acceptance(con: Any, res: Any) -> None:
    con.print(
        f"DFlash draft trained on blocks of {res.block_size} ({res.block_size - 1} proposals a pass), engine {res.engine}: "
        f"{res.prompts} prompts, {res.tokens} new tokens of the target's greedy continuation",
        markup=False, soft_wrap=True,
    )  # fmt: skip
    for p in (res.trained, res.served):
        if p is None:
            continue
        con.print(
            f"  {p.name:8s} {format_spec(p.spec)} in blocks of {p.block}: mean acceptance length {p.mean_acceptance_length.text()} "
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


def render_dflash_compare(con: Any, res: Any) -> None:
    con.print(f"DFlash slots over {res.tokens} prompt tokens, engine {res.engine}:", markup=False)
    for s in res.slots:
        same = s["served"] == s["trained"]
        con.print(
            f"  slot {s['slot']}: served {s['served']}, trained {s['trained']}"
            + ("  (the same tap)" if same else f": relative L2 {s['rel_l2']:.3f}, mean cosine {s['cosine']:.4f}"),
            markup=False, soft_wrap=True,
        )  # fmt: skip
    con.print()


def render_dflash_diagnosis(con: Any, res: Any) -> None:
    con.print(f"DFlash draft, engine {res.engine}, {res.prompts} prompts: tokens per verify pass with each lever", markup=False)
    for name, p in res.paths.items():
        m, g = p["mean_acceptance_length"], p["gain_over_served"]
        gain = "" if name == "served" else f"  gain over served {Interval(**g).text()}"
        con.print(f"  {name}: {Interval(**m).text()}{gain}", markup=False, soft_wrap=True)
    con.print(f"verdict: {res.verdict}", markup=False, soft_wrap=True)
    con.print()


def render_dflash_fix(con: Any, res: Any) -> None:
    for e in res.applied:
        con.print(f"{e.code}: {e.key}: {e.before} -> {e.after} (in {res.out}/config.json)", markup=False, soft_wrap=True)
    if not res.applied:
        con.print("no config edit to make: no DFL001 (a launch flag's fix is printed with its finding)", markup=False)
    for name, run in (("original", res.before), ("copy", res.after)):
        if run is None:
            continue
        served = run.served or run.trained
        con.print(f"{name}: served {served.mean_acceptance_length.text()} tokens per pass (trained {run.trained.mean_acceptance_length.text()})",
                  markup=False, soft_wrap=True)  # fmt: skip
    con.print()


def render_dflash_inspect(con: Any, checks: Any) -> None:
    for name, t in (("trained", checks.trained), ("served", checks.served)):
        spec = "unknown" if t is None or t.spec is None else ", ".join(map(str, t.spec))
        con.print(f"DFlash {name} taps: {spec}  ({t.source if t else ''})", markup=False, soft_wrap=True)
    taps = checks.fc_taps if checks.fc_taps is not None else "an unknown number of"
    con.print(f"the draft's fc takes {taps} taps", markup=False)
    con.print()
