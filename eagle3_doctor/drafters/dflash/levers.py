"""compare-hidden and diagnose on a DFlash draft.

compare-hidden: each of the draft's slots, the tap it was trained on against the tap the engine feeds there,
over the replayed prompts (relative L2 and mean cosine, as for EAGLE-3's slots). diagnose: where the gap
between the served and the trained path lives, by intervention: each slot the engine feeds differently is set
back to its trained tap alone, and the block the launch serves back to the trained block, and the tokens per
verify pass measured again on the same prompts (paired intervals against the served path), beside all of them at
once (the trained path).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from ...analyses.passes import CopyFix, continue_prompts
from ...core.findings import Finding
from ...core.stats import Interval, acceptance_counts, mean_acceptance_length, paired
from ...core.taps import FeatureSpec, format_spec
from .measure import Drafting, cost_finding, dflash_health, measure_paths, read_sides

COMPARE_SCHEMA = "eagle3-doctor/dflash-compare/1"
DIAGNOSE_SCHEMA = "eagle3-doctor/dflash-diagnose/1"


@dataclass
class DFlashCompare:
    engine: str
    tokens: int
    slots: list[dict[str, Any]]  # per slot: trained, served, rel_l2, cosine
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": COMPARE_SCHEMA, "command": "compare-hidden", "drafter": "dflash", "engine": self.engine,
                "tokens": self.tokens, "slots": self.slots, "findings": [f.to_dict() for f in self.findings]}  # fmt: skip


@torch.inference_mode()
def dflash_compare(
    target: Any,
    draft_path: str,
    engine: str,
    prompts: list[list[int]],
    engine_version: str | None = None,
    layer_ids: list[int] | None = None,
    block: Any = None,
) -> DFlashCompare:
    """Each slot's served tap against its trained one over ``prompts``; served as ``engine`` feeds them in
    ``engine_version`` (None: the newest modelled release), or as ``layer_ids`` state, with the launch's ``block``
    named where it differs (DFL005, as every DFlash command names it; read_sides)."""
    from ...model.replay import iter_captures
    from ...model.runtime import auto_batch_size

    side = read_sides(target, draft_path, engine, engine_version, layer_ids, block)
    t_spec: FeatureSpec = side.trained.spec
    s_spec: FeatureSpec | None = side.served.spec if side.served.spec and len(side.served.spec) == len(t_spec) else None
    pairs = list(zip(t_spec, s_spec or t_spec))
    acc = [[0.0, 0.0, 0.0] for _ in pairs]  # squared difference, squared trained, summed cosine
    n = 0
    pts = {p for pr in pairs for p in pr}
    for rb in iter_captures(target, prompts, pts, batch_size=auto_batch_size(target, max(map(len, prompts)))):
        m = rb.mask
        for a, (tp, sp) in zip(acc, pairs):
            t, s = rb.captured[tp][m].double(), rb.captured[sp][m].double()  # the real tokens, padding left out
            a[0] += float(((s - t) ** 2).sum())
            a[1] += float((t**2).sum())
            a[2] += float(torch.nn.functional.cosine_similarity(s, t, dim=-1).sum())
        n += int(m.sum())
    slots = [{"slot": i, "trained": str(tp), "served": str(sp), "rel_l2": (a[0] / a[1]) ** 0.5 if a[1] else None,
              "cosine": a[2] / n if n else None} for i, ((tp, sp), a) in enumerate(zip(pairs, acc))]  # fmt: skip
    for f in side.findings:
        if f.code == "DFL001":
            f.evidence += [f"slot {s['slot']}: served {s['served']} against trained {s['trained']}: relative L2 "
                           f"{s['rel_l2']:.3f}, mean cosine {s['cosine']:.4f} over {n} tokens" for s in slots if s["served"] != s["trained"]]  # fmt: skip
    return DFlashCompare(engine, n, slots, side.findings)


@dataclass
class DFlashDiagnosis:
    engine: str
    prompts: int
    paths: dict[str, dict[str, Any]]  # name -> spec, mean acceptance length, gain over served
    verdict: str
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": DIAGNOSE_SCHEMA, "command": "diagnose", "drafter": "dflash", "engine": self.engine,
                "prompts": self.prompts, "paths": self.paths, "verdict": self.verdict,
                "findings": [f.to_dict() for f in self.findings]}  # fmt: skip


def levers(trained: Drafting, served: Drafting) -> dict[str, Drafting]:
    """served, each differing slot set back to its trained tap alone, the block set back to the trained one, then
    trained (all of them)."""
    out = {"served": served}
    for i, (t, s) in enumerate(zip(trained.spec, served.spec)):
        if t != s:
            spec = tuple(t if j == i else x for j, x in enumerate(served.spec))
            out[f"slot {i} as trained ({s} -> {t})"] = replace(served, spec=spec)
    if served.block != trained.block:
        out[f"block as trained ({served.block} -> {trained.block})"] = replace(served, block=trained.block)
    out["trained"] = trained
    return out


def dflash_diagnose(
    target: Any,
    draft_path: str,
    engine: str,
    prompts: list[list[int]],
    max_new_tokens: int,
    progress: Callable[[str, int, int], None],
    engine_version: str | None = None,
    layer_ids: list[int] | None = None,
    block: Any = None,
) -> DFlashDiagnosis:
    """The tap and block levers measured one by one against the taps ``engine`` feeds in ``engine_version`` (None:
    the newest modelled release), or those ``layer_ids`` state, in the block the launch serves (``block``;
    read_sides)."""
    side = read_sides(target, draft_path, engine, engine_version, layer_ids, block)
    t_spec, s_spec = side.trained.spec, side.served.spec
    if s_spec is not None and len(s_spec) != len(t_spec):
        return DFlashDiagnosis(engine, len(prompts), {}, "no tap lever: the engine cannot run this draft (DFL002)", side.findings)
    seqs = continue_prompts(target, prompts, max_new_tokens, progress)
    # with the draft served as trained there is no lever, and the one path is still measured: health needs a figure
    two = side.ways
    ways = levers(two["trained"], two["served"]) if "served" in two else two
    walked = measure_paths(target, side.draft, ways, seqs, [len(p) for p in prompts], lambda i, n: progress("diagnose", i, n))
    counts = [acceptance_counts(walked[n], None, None, w.block - 1) for n, w in ways.items()]
    own, gain = paired(counts, mean_acceptance_length, 0)
    paths = {n: {"spec": [str(p) for p in w.spec], "block_size": w.block, "mean_acceptance_length": o.to_dict(),
                 "gain_over_served": g.to_dict()} for (n, w), o, g in zip(ways.items(), own, gain)}  # fmt: skip
    figs = dict(zip(ways, own))
    total, parts = None, []
    if "served" in ways:
        total = gain[-1]
        parts = [f"{n}: {g.text()}" for n, g in zip(ways, gain) if n not in ("served", "trained")]
        ev = [f"served: {own[0].text()}", f"trained: {own[-1].text()}", f"gain of each lever over served: {'; '.join(parts)}"]
        cost = cost_finding(ways["trained"], ways["served"], own[-1], own[0], total.negated(), side.cost_fix(), ev)
        side.findings += [cost] if cost is not None else []
    side.findings += dflash_health(figs, "served" if "served" in ways else "trained", side.findings)
    verdict = _verdict(figs, total, parts, ways["trained"], ways.get("served", ways["trained"]), side.findings)
    return DFlashDiagnosis(engine, len(prompts), paths, verdict, side.findings)


def _differs(t: Drafting, s: Drafting) -> str:
    """What the served way changes: the taps, the block, or both, each as served against trained."""
    out = [f"the taps ({format_spec(s.spec)} served, {format_spec(t.spec)} trained)"] if s.spec != t.spec else []
    out += [f"the block ({s.block} served, {t.block} trained)"] if s.block != t.block else []
    return " and ".join(out)


def _verdict(figs: dict[str, Interval], total: Interval | None, parts: list[str], t: Drafting, s: Drafting,
             found: list[Finding]) -> str:  # fmt: skip
    """The judgment's verdict line: the levers decide by size and interval, after the draft's absolute health."""
    from ...analyses.judgment import lever_verdict

    gain = total.text() if total is not None else ""
    return lever_verdict(
        figs.get("served", figs["trained"]), total, figs, found,
        decided=f"{_differs(t, s)}: serving {t.text()} instead of {s.text()} gains {gain} tokens per pass ({'; '.join(parts)})",
        leaning=f"{_differs(t, s)} differ but their measured gain {gain} reaches 0 on these prompts; more prompts or "
                "longer continuations would decide it",
        as_trained=f"served as trained: {t.text()}",
    )  # fmt: skip


FIX_SCHEMA = "eagle3-doctor/dflash-fix/1"


def dflash_fix(
    target: Any, draft_path: str, engine: str, prompts: list[list[int]], max_new_tokens: int, out: str,
    progress: Callable[[str, int, int], None], engine_version: str | None = None, block: Any = None,
) -> CopyFix:  # fmt: skip
    """acceptance on the draft; the copy at ``out`` with every tap fix its findings carry (config keys, in the
    convention ``engine`` reads in ``engine_version``, None: the newest modelled release); acceptance on the
    copy, which must then feed the trained taps in that same release. Both in the block the launch serves
    (``block``): DFL005's fix is a launch flag, not a file edit, so the copy keeps it."""
    from ...analyses.fixing import write_copy
    from ...core.findings import Fix
    from .measure import dflash_acceptance

    def measure(path: str) -> Any:
        return dflash_acceptance(target, path, engine, prompts, max_new_tokens, progress, engine_version=engine_version,
                                 block=block)  # fmt: skip

    before = measure(draft_path)
    edits = [(f.code, f.fix) for f in before.findings if f.code == "DFL001" and isinstance(f.fix, Fix) and f.fix.key]
    if not edits:
        return CopyFix(FIX_SCHEMA, "dflash", draft_path, None, [], before, None)
    applied = write_copy(draft_path, out, edits)
    after = measure(out)
    return CopyFix(FIX_SCHEMA, "dflash", draft_path, out, applied, before, after)
