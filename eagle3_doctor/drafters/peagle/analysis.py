"""inspect and acceptance on a P-EAGLE draft: how the engine runs it (in parallel, as an EAGLE-3 chain, with which
mask token, or not at all) against how it was trained, said by the checkpoint and measured.

inspect reads the config and the tensor headers only. acceptance reads the draft through the EAGLE-3 reader (its
taps, both tap paths and the vocabulary map are EAGLE-3's) plus ``mask_hidden``, and measures both ways of running
it on the target's own greedy continuation (:mod:`.measure`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...core.findings import Finding, config_fix
from ...core.stats import Interval
from ...core.taps import format_spec
from ...draft.peagle.served import VLLM_TYPE_FROM
from .measure import Way

SCHEMA = "eagle3-doctor/peagle-acceptance/1"
INSPECT_SCHEMA = "eagle3-doctor/peagle-inspect/1"
UPGRADE = f"vllm {VLLM_TYPE_FROM}"  # the first release that drafts a "peagle" config in parallel (executed)


def serving_findings(info: Any, s: Any, release: str | None = None) -> list[Finding]:
    """PEA001-PEA003 from the checkpoint and the engine's reading of it (``s`` a PEagleServing) in ``release``
    (check_engine's string; named in each title); a fix that needs a later release names the first one."""
    from ...engines.releases import release_key

    who = f"{s.engine} {release}" if release else s.engine
    ev = [f"checkpoint: {info.evidence}; mask_hidden {info.mask_hidden_shape}; mask_token_id {info.mask_token_id}; "
          f"trained to draft {info.depths} tokens a pass", f"{who}: {s.why} ({s.source})"]  # fmt: skip
    if s.mode == "refused":
        if "mask_token_id" in s.why:
            fix: Any = "write the mask_token_id the draft was trained with into config.json (speculators: --mask-token-id)"
        elif "mask_hidden" in s.why:
            fix = _mask_hidden_fix(info.path, ev)
        elif "no SGLang model class" in s.why:
            fix = f"serve it on {UPGRADE} or later: SGLang has no P-EAGLE class and no parallel drafting for EAGLE-3 drafts"
        elif "Expected one of" in s.why:
            fix = f'upgrade to {UPGRADE} or later, the first release that reads speculators_model_type "peagle"'
        else:
            fix = "serve it on vllm (P-EAGLE serving is modelled for vllm and sglang)"
        return [Finding("PEA002", f"{who} refuses the draft: {s.why}", evidence=ev, fix=fix)]
    if s.mode == "chain":
        if s.engine == "vllm":
            # a release before the type's first one refuses the edited config: the fix then needs the upgrade too
            old = release is not None and release_key(release) < release_key(VLLM_TYPE_FROM)
            then = (f"and upgrade to {UPGRADE}, the first release that then drafts it in parallel" if old else
                    f"(vLLM {VLLM_TYPE_FROM} and later then draft it in parallel)")  # fmt: skip
            fix = config_fix(f'set "speculators_model_type": "peagle" {then}', "speculators_model_type", "peagle")
        else:
            fix = (f'serve it on {UPGRADE} or later with speculators_model_type "peagle": SGLang has no parallel drafting '
                   "for EAGLE-3 drafts")  # fmt: skip
        return [Finding("PEA001", f"{who} drafts this P-EAGLE draft as an EAGLE-3 chain", evidence=ev, fix=fix)]
    if s.mask_token_id != info.mask_token_id:
        fix = config_fix("delete transformer_layer_config.mask_token_id (vLLM reads it before the top-level one)",
                         "transformer_layer_config.mask_token_id", op="delete")  # fmt: skip
        return [Finding("PEA003", f"{who} fills the parallel slots with token {s.mask_token_id}, trained with "
                        f"{info.mask_token_id}", evidence=ev, fix=fix)]  # fmt: skip
    return []


def _mask_hidden_fix(path: str, ev: list[str]) -> str:
    """Export the tensor, or, where it is already saved in a file the index does not name (the loader reads only the
    files the index names), the index entry that makes the release load it."""
    from ...draft.peagle.formats import mask_hidden_name
    from ...draft.served_files import INDEX, unindexed_holding

    side = unindexed_holding(path, mask_hidden_name)
    if side is None:
        return "export mask_hidden with the draft's weights (speculators saves it beside the layers)"
    file, name = side
    ev.append(f"{file} beside the checkpoint holds {name}; {INDEX} does not name {file}, so the release never loads it")
    return f'add "{name}": "{file}" to {INDEX}\'s weight_map (the tensor is saved; the index does not name its file)'


@dataclass
class PEagleInspect:
    engine: str
    info: Any  # PEagleInfo
    serving: Any  # PEagleServing
    findings: list[Finding]

    def to_dict(self) -> dict[str, Any]:
        return {"schema": INSPECT_SCHEMA, "command": "inspect", "drafter": "peagle", "engine": self.engine,
                "checkpoint": self.info.to_dict(), "serving": self.serving.to_dict(),
                "findings": [f.to_dict() for f in self.findings]}  # fmt: skip


def inspect_peagle(target_dir: str, draft_path: str, engine: str, version: str | None) -> PEagleInspect:
    from ...analyses.inspect.tensors import checkpoint_finite
    from ...analyses.mask_token import mask_token_findings
    from ...draft.peagle.formats import peagle_info
    from ...draft.peagle.served import peagle_serving
    from ...engines.releases import check_engine

    info = peagle_info(draft_path)
    release = check_engine(engine, version) if engine in ("vllm", "sglang") else version
    s = peagle_serving(engine, release, info)
    found = serving_findings(info, s, release) + mask_token_findings(
        target_dir, info.mask_token_id, "mask_token_id", "P-EAGLE draft"
    )
    from ...draft.served_files import sidecars_of

    return PEagleInspect(engine, info, s, found + checkpoint_finite(draft_path) + sidecars_of(draft_path, engine, release))


@dataclass
class PEagleSides:
    """The draft read against one target: the module, the two ways of running it and the checkpoint's findings."""

    pe: Any
    info: Any
    serving: Any
    trained: Way
    served: Way | None
    findings: list[Finding]


def read_sides(
    target: Any, draft_path: str, engine: str, version: str | None, k: int | None = None, layer_ids: list[int] | None = None
) -> PEagleSides:
    """The draft and its two ways; ``k`` the tokens a pass the launch line asks for (None: the config's);
    ``layer_ids`` what the server feeds as its key would hold them (--layer-ids, read as EAGLE-3's are)."""
    from ...core.errors import BadInput
    from ...draft.peagle.formats import with_mask_hidden
    from ...draft.peagle.served import peagle_serving
    from ...model.setup import assemble

    setup = assemble(target, draft_path, None, engine, version, layer_ids)
    assert setup.draft is not None and setup.train_spec is not None  # a draft was given; speculators drafts name their taps
    pe, info = with_mask_hidden(setup.draft, draft_path)
    s = peagle_serving(engine, setup.serving.version, info)
    if s.mode == "refused" and engine not in ("vllm", "sglang"):
        raise BadInput(s.why, "pass --engine vllm or sglang")
    trained = Way("trained", "parallel", setup.train_spec, pe.depths, pe.mask_token_id, "offset",
                  f"speculators' P-EAGLE training: {pe.depths} slots in one forward; taps {setup.train_source}")  # fmt: skip
    served = None
    found = serving_findings(info, s, setup.serving.version)
    if s.mode != "refused":
        served = Way("served", s.mode, setup.serving.spec, k or s.k or pe.depths, s.mask_token_id, "offset",
                     f"{s.why} ({s.source}); taps {setup.serving.source}")  # fmt: skip
        if k is not None and k != pe.depths:
            found.append(_k_finding(k, pe.depths, s.engine))
    return PEagleSides(pe, info, s, trained, served, found)


def _k_finding(k: int, depths: int, engine: str) -> Finding:
    return Finding("PEA006", f"{engine} drafts {k} tokens a pass; the draft was trained for {depths}",
                   evidence=[f"served: num_speculative_tokens {k} (the launch line or --num-steps)",
                             f"trained: speculative_tokens {depths} in the draft's config.json"],
                   fix=f"launch with num_speculative_tokens {depths} (vLLM --speculative-config), the depths the draft was trained for")  # fmt: skip


@dataclass
class PEagleAcceptance:
    engine: str
    prompts: int
    tokens: int
    ways: dict[str, Way]
    figures: dict[str, Interval]
    passes: dict[str, list[list[int]]]
    difference: Interval | None  # served - trained, paired over prompts
    reference: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        paths = {n: {**w.to_dict(), "mean_acceptance_length": self.figures[n].to_dict(), "passes": sum(map(len, self.passes[n])),
                     "accepted_per_pass": self.passes[n]} for n, w in self.ways.items()}  # fmt: skip
        return {"schema": SCHEMA, "command": "acceptance", "drafter": "peagle", "engine": self.engine,
                "prompts": self.prompts, "tokens": self.tokens, "paths": paths,
                "difference": self.difference.to_dict() if self.difference else None, "reference": self.reference,
                "findings": [f.to_dict() for f in self.findings], "notes": self.notes}  # fmt: skip


def differs(a: Way, b: Way) -> bool:
    return (a.mode, a.spec, a.k, a.token, a.positions) != (b.mode, b.spec, b.k, b.token, b.positions)


def peagle_acceptance(
    target: Any, draft_path: str, engine: str, version: str | None, prompts: list[list[int]], max_new_tokens: int,
    progress: Callable[[str, int, int], None], reference_prompts: int = 2, k: int | None = None,
    layer_ids: list[int] | None = None,
) -> PEagleAcceptance:  # fmt: skip
    """Both ways of running the draft on ``target`` over ``prompts`` (token ids), the served one checked against a
    sequential loop on the first ``reference_prompts``."""
    from ...analyses.passes import continue_prompts
    from ...core.stats import paired_mean_lengths
    from .measure import measure_ways

    side = read_sides(target, draft_path, engine, version, k, layer_ids)
    ways = {"trained": side.trained}
    if side.served is not None and differs(side.served, side.trained):
        ways["served"] = side.served
    seqs = continue_prompts(target, prompts, max_new_tokens, progress)
    starts = [len(p) for p in prompts]
    walked = measure_ways(target, side.pe, ways, seqs, starts, lambda i, n: progress("p-eagle acceptance", i, n))
    figs, diff = paired_mean_lengths(walked)
    run_on = ways.get("served", side.trained)
    ref = _reference(
        target, side.pe, run_on, prompts, seqs, walked["served" if "served" in ways else "trained"], reference_prompts
    )
    res = PEagleAcceptance(engine, len(prompts), sum(len(s) - st for s, st in zip(seqs, starts)), ways, figs, walked, diff,
                           ref, side.findings)  # fmt: skip
    cost = cost_finding(ways["trained"], ways["served"], figs, diff, side.findings) if diff is not None else None
    if cost is not None:
        res.findings.append(cost)
    elif diff is not None and diff.lo >= 0:
        res.notes.append(f"the served way accepts no less than the trained one (served - trained {diff.text()})")
    elif diff is not None:
        res.notes.append(f"the served way's cost is under the practical size and its interval reaches 0 (served - "
                         f"trained {diff.text()})")  # fmt: skip
    elif side.served is not None:
        res.notes.append(f"{engine} runs the draft as it was trained ({side.trained.mode}, K {side.trained.k}, "
                         f"taps {format_spec(side.trained.spec)}): one path measured")  # fmt: skip
    from ...analyses.judgment import depth_finding

    served = "served" if "served" in ways else "trained"
    depth = depth_finding(walked[served], ways[served].k, "num_speculative_tokens")
    res.findings += [depth] if depth is not None else []
    res.findings += peagle_health(figs, res.findings)
    return res


def peagle_health(figs: dict[str, Interval], found: list[Finding]) -> list[Finding]:
    """The health judgment of a P-EAGLE run: the way the engine runs the draft against every other way measured."""
    from ...analyses.judgment import health
    from ...draft.peagle.model import PEagleDraft

    served = "served" if "served" in figs else "trained"

    def name(n: str) -> str:
        return f"the {n} way" + (" (as served)" if n == served and n != "served" else "")

    return health(PEagleDraft, figs[served], {name(n): iv for n, iv in figs.items()}, found, served_name=name(served))


def cost_finding(t: Way, s: Way, figs: dict[str, Interval], diff: Interval, found: list[Finding]) -> Finding | None:
    """PEA004: served against trained, paired over prompts, with the judgment's severity for a measured cost
    (analyses.judgment.cost_severity; None where it is neither); the fix the cause carries."""
    from ...analyses.judgment import cost_severity

    judged = cost_severity(diff)
    if judged is None:
        return None
    cause = next((f for f in found if f.code in ("PEA001", "PEA003", "PEA006")), None)
    how = [f"{n}: {w.mode}, K {w.k}" + (f", mask token {w.token}" if w.mode == "parallel" else "") + f", taps {format_spec(w.spec)}"
           for n, w in (("trained", t), ("served", s))]  # fmt: skip
    return Finding(
        "PEA004",
        f"served ({s.mode}) accepts {figs['served'].point:.3f} tokens per pass, trained ({t.mode}) {figs['trained'].point:.3f}",
        severity=judged[0],
        evidence=[
            *how,
            f"served: {figs['served'].text()}",
            f"trained: {figs['trained'].text()}",
            f"served - trained: {diff.text()}: {judged[1]}",
        ],
        fix=cause.fix if cause is not None else "set the taps the draft was trained on (run inspect on it as an EAGLE-3 draft)",
        data={"served": figs["served"].to_dict(), "trained": figs["trained"].to_dict(), "difference": diff.to_dict()},
    )


def _reference(target: Any, pe: Any, way: Way, prompts: list[list[int]], seqs: list[list[int]], walked: list[list[int]],
               n: int) -> dict[str, Any]:  # fmt: skip
    from .measure import reference_loop

    same_tokens = same_passes = True
    for i in range(min(n, len(prompts))):
        toks, passes = reference_loop(target, pe, way, prompts[i], len(seqs[i]))
        same_tokens &= toks == seqs[i]
        same_passes &= passes == walked[i]
    return {"path": way.name, "prompts": min(n, len(prompts)), "tokens_equal_greedy": same_tokens,
            "passes_equal_estimator": same_passes}  # fmt: skip
