"""The terminal report of the P-EAGLE commands: how the engine runs the draft against how it was trained, the
tokens per verify pass of each way, the levers of diagnose, and the sequential loop's check."""

from __future__ import annotations

from typing import Any

from ...core.stats import Interval

SLOTS = {"offset": "anchor + d", "anchor": "the anchor"}


def _way(w: Any) -> str:
    slots = f", mask token {w['mask_token_id']}, slots at {SLOTS[w['positions']]}" if w["mode"] == "parallel" else ""
    return f"{w['mode']}, K {w['k']}{slots}, taps {', '.join(w['spec'])}"


def render_peagle_inspect(con: Any, res: Any) -> None:
    i, s = res.info, res.serving
    con.print(f"P-EAGLE draft ({i.evidence}): mask_hidden {i.mask_hidden_shape}, mask token {i.mask_token_id}, "
              f"trained to draft {i.depths} tokens a pass", markup=False, soft_wrap=True)  # fmt: skip
    k = f", K {s.k}" if s.k else ""
    con.print(f"{s.engine} runs it: {s.mode}{k} ({s.why}; {s.source})", markup=False, soft_wrap=True)
    con.print()


def render_peagle_acceptance(con: Any, res: Any) -> None:
    con.print(f"P-EAGLE draft, engine {res.engine}: {res.prompts} prompts, {res.tokens} new tokens of the target's greedy "
              "continuation", markup=False, soft_wrap=True)  # fmt: skip
    for name, w in res.ways.items():
        d = w.to_dict()
        con.print(f"  {name:8s} {_way(d)}: mean acceptance length {res.figures[name].text()} over "
                  f"{sum(map(len, res.passes[name]))} passes  ({w.source})", markup=False, soft_wrap=True)  # fmt: skip
    if res.difference is not None:
        con.print(f"  served - trained: {res.difference.text()}", markup=False)
    _reference(con, res.reference)
    for n in res.notes:
        con.print(f"note: {n}", markup=False, soft_wrap=True)
    con.print()


def _reference(con: Any, ref: dict[str, Any]) -> None:
    ok = ref["tokens_equal_greedy"] and ref["passes_equal_estimator"]
    con.print(f"reference sequential loop ({ref['path']} way, {ref['prompts']} prompts): "
              + ("tokens equal greedy decoding, passes equal the estimator's" if ok else "DISAGREES with the estimator (see JSON 'reference')"),
              markup=False, soft_wrap=True)  # fmt: skip


def render_peagle_diagnosis(con: Any, res: Any) -> None:
    con.print(f"P-EAGLE draft, engine {res.engine}, {res.prompts} prompts: tokens per verify pass with each lever", markup=False)
    first = next(iter(res.paths), None)
    for name, p in res.paths.items():
        m = p["mean_acceptance_length"]
        g = p.get(f"gain_over_{first}")
        gain = "" if name == first or g is None else f"  gain over {first} {_iv(g)}"
        if first != "trained" and "gain_over_trained" in p:
            gain += f", over trained {_iv(p['gain_over_trained'])}"
        con.print(f"  {name} ({_way(p)}): {_iv(m)}{gain}", markup=False, soft_wrap=True)
    con.print(f"verdict: {res.verdict}", markup=False, soft_wrap=True)
    con.print()


def _iv(d: dict[str, Any]) -> str:
    """An interval from a document's figures, written as every report writes it (Interval.text)."""
    return Interval(**d).text()


def render_peagle_fix(con: Any, res: Any) -> None:
    for e in res.applied or []:
        con.print(f"{e.code}: {e.op} {e.key}: {e.before!r} -> {e.after!r} in {res.out}/config.json", markup=False, soft_wrap=True)
    if not res.applied:
        con.print("nothing to fix: the engine runs the draft as it was trained", markup=False)
    for name, run in (("original", res.before), ("copy", res.after)):
        if run is None:
            continue
        figs = ", ".join(f"{n} {run.figures[n].text()}" for n in run.ways)
        con.print(f"{name}: mean acceptance length {figs}", markup=False, soft_wrap=True)
    con.print()
