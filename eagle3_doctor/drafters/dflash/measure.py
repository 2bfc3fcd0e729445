"""acceptance on a DFlash draft: its blocks over the target's own greedy continuation, drafted from the taps it
was trained on and from the taps the engine reads from its config, checked against a sequential loop.

A pass starts at an anchor (the last token the target produced), drafts ``block_size - 1`` tokens in one
forward and keeps the leading ones the target's greedy choice agrees with, plus the target's own next token;
the next anchor is that token. The estimator drafts every anchor of a sequence in one forward
(:meth:`~eagle3_doctor.draft.dflash.model.DFlashDraft.blocks`) and walks the passes over it; the reference loop
runs them one by one, a fresh target forward for each verify, and must give the same passes and the same
tokens as greedy decoding. Passes stop at the continuation's end (accepted tokens are capped there).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ...analyses.passes import continue_prompts, leading_accepted, replay_passes, sequential_loop
from ...core.findings import Finding
from ...core.stats import Interval, paired_mean_lengths
from ...core.taps import FeatureSpec, format_spec

SCHEMA = "eagle3-doctor/dflash-acceptance/1"


@dataclass(frozen=True)
class Drafting:
    """How a DFlash draft is run on one path: the taps its fc is fed and the block it drafts (anchor included)."""

    spec: FeatureSpec
    block: int

    def text(self) -> str:
        return f"{format_spec(self.spec)} in blocks of {self.block}"


@torch.inference_mode()
def accepts_at_every_anchor(
    draft: Any, taps: torch.Tensor, ids: torch.Tensor, start: int, embed: Any, head: Any, block: int | None = None
) -> list[int]:
    """ids [T] one sequence (prompt + greedy continuation), taps [T, n*H]: the tokens accepted at each anchor
    start..T-1 (leading proposals equal to the sequence's next tokens), drafting blocks of ``block`` (None: the
    draft's own)."""
    anchors = torch.arange(start, ids.shape[0], device=ids.device)
    h = draft.blocks(taps[None], ids[None], anchors, embed, block)[0]  # [A, bs-1, H]
    return leading_accepted(head(h.to(head.weight.dtype)).argmax(-1), ids, anchors)


def reference_loop(target: Any, draft: Any, way: Drafting, prompt: list[int], end: int) -> tuple[list[int], list[int]]:
    """(tokens, passes): the speculative loop run pass by pass, the target's verify a fresh forward each time."""
    embed, head = target.model.get_input_embeddings(), target.model.get_output_embeddings()

    def propose(taps: torch.Tensor, seq: list[int], a: int) -> list[int]:
        dev = target.device
        h = draft.blocks(taps[None], torch.tensor([seq], device=dev), torch.tensor([a], device=dev), embed, way.block)
        return head(h[0, 0].to(head.weight.dtype)).argmax(-1).tolist()

    return sequential_loop(target, way.spec, prompt, end, way.block - 1, propose)


@dataclass
class DFlashPath:
    name: str
    spec: FeatureSpec
    source: str
    mean_acceptance_length: Interval
    passes: int
    accepted: list[list[int]]  # per prompt, accepted draft tokens per pass (the bonus token not counted)
    block: int  # the block drafted, anchor included

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "spec": [str(p) for p in self.spec], "block_size": self.block, "source": self.source,
                "mean_acceptance_length": self.mean_acceptance_length.to_dict(), "passes": self.passes,
                "accepted_per_pass": self.accepted}  # fmt: skip


@dataclass
class DFlashAcceptance:
    engine: str
    block_size: int
    prompts: int
    tokens: int
    trained: DFlashPath
    served: DFlashPath | None
    difference: Interval | None  # served - trained, paired over prompts
    reference: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "command": "acceptance", "drafter": "dflash", "engine": self.engine,
                "block_size": self.block_size, "prompts": self.prompts, "tokens": self.tokens,
                "trained": self.trained.to_dict(), "served": self.served.to_dict() if self.served else None,
                "difference": self.difference.to_dict() if self.difference else None, "reference": self.reference,
                "findings": [f.to_dict() for f in self.findings], "notes": self.notes}  # fmt: skip


def measure_paths(
    target: Any,
    draft: Any,
    ways: dict[str, Drafting],
    seqs: list[list[int]],
    starts: list[int],
    progress: Callable[[int, int], None],
) -> dict[str, list[list[int]]]:
    """Per path, per sequence: the passes the estimator walks over its continuation."""
    embed, head = target.model.get_input_embeddings(), target.model.get_output_embeddings()

    def accepts(name: str, taps: torch.Tensor, ids: torch.Tensor, start: int) -> list[int]:
        return accepts_at_every_anchor(draft, taps, ids, start, embed, head, ways[name].block)

    return replay_passes(target, {n: w.spec for n, w in ways.items()}, seqs, starts, progress, accepts)


def cost_finding(trained: Drafting, served: Drafting, t: Interval, s: Interval, diff: Interval, fix: Any,
                 evidence: list[str]) -> Finding | None:  # fmt: skip
    """DFL004: mean acceptance length served against trained, ``diff`` = served - trained paired over prompts, with
    the judgment's severity for a measured cost (analyses.judgment.cost_severity); None where it is neither."""
    from ...analyses.judgment import cost_severity

    judged = cost_severity(diff)
    if judged is None:
        return None
    return Finding(
        "DFL004",
        f"served {served.text()} accepts {s.point:.3f} tokens per pass, trained {trained.text()} {t.point:.3f}",
        severity=judged[0],
        evidence=[*evidence, f"served - trained: {diff.text()}: {judged[1]}"],
        fix=fix,
        data={"served": s.to_dict(), "trained": t.to_dict(), "difference": diff.to_dict()},
    )


@dataclass
class DraftSides:
    """A DFlash draft read against one target: the module, the taps it was trained on and the taps the engine
    release feeds it, the taps' fix for that release, and what inspect finds in those."""

    draft: Any
    trained: Any  # draft.dflash.taps.Taps
    served: Any
    findings: list[Finding]
    release: str = ""  # the release whose reading ``served`` is (check_engine's string)
    fix: Any = None  # DFL001's fix for that release (analysis.tap_fix)
    block: int = 0  # the block the engine drafts, anchor included (the draft's own where no launch names one)

    @property
    def ways(self) -> dict[str, Drafting]:
        """The trained way, and the served one where it differs and the engine can run it (its taps fit the fc)."""
        c = self.draft.config
        out = {"trained": Drafting(self.trained.spec, c.block_size)}
        s = self.served.spec
        if s is not None and len(s) == c.num_taps and Drafting(s, self.block) != out["trained"]:
            out["served"] = Drafting(s, self.block)
        return out

    def cost_fix(self) -> Any:
        """DFL004's fix: the taps' where they differ (DFL001, DFL002), else the block's (DFL005)."""
        cause = next((f for f in self.findings if f.code in ("DFL001", "DFL002", "DFL005")), None)
        return self.fix if cause is None or cause.code != "DFL005" else cause.fix


def read_sides(
    target: Any,
    draft_path: str,
    engine: str,
    engine_version: str | None = None,
    layer_ids: list[int] | None = None,
    block: Any = None,
) -> DraftSides:
    """The draft on the target's device and dtype, its two tap readings (the engine's in ``engine_version``,
    None: the newest modelled release; with ``layer_ids`` as if the config held them where that release reads
    them) and the block the engine drafts (``block``, an analysis.ServedBlock; None: the draft's own), refused in
    one line where the engine is not modelled or the config's taps do not fit the fc."""
    from pathlib import Path

    from ...core.errors import BadInput
    from ...draft.dflash.formats import read_dflash
    from ...draft.dflash.taps import served_taps, stated_config, trained_taps
    from ...engines.releases import rules_release
    from .analysis import block_finding, dflash_findings, fc_taps, tap_fix

    L = target.num_layers
    release = rules_release(engine, engine_version)
    draft, raw = read_dflash(draft_path, target.hidden_size, target.vocab_size, target.device, target.dtype)
    trained = trained_taps(raw, L)
    if layer_ids is not None:  # what the user says the server feeds: read through the release, the files untouched
        raw, key = stated_config(engine, raw, L, release, layer_ids)
        stated = served_taps(engine, raw, L, release)
        served = (
            dataclasses.replace(stated, source=f"--layer-ids {layer_ids} (as if written in {key}); {stated.source}")
            if stated
            else None
        )
    else:
        served = served_taps(engine, raw, L, release)
    if served is None:
        raise BadInput(f"DFlash serving is modelled for sglang and vllm, not {engine}", "pass --engine sglang or vllm")
    if trained.spec is None or len(trained.spec) != draft.config.num_taps:
        raise BadInput(
            f"the DFlash draft's config names {trained.ids} as its taps; its fc takes {draft.config.num_taps}",
            "write the ids the draft was trained on into dflash_config.target_layer_ids",
        )
    fix = tap_fix(engine, raw, L, release, trained)
    found = dflash_findings(trained, served, fc_taps(Path(draft_path), target.hidden_size), fix)
    size = block_finding(engine, block, draft.config.block_size)
    found += [size] if size is not None else []
    return DraftSides(draft, trained, served, found, release, fix, block.size if block else draft.config.block_size)


def dflash_acceptance(
    target: Any,
    draft_path: str,
    engine: str,
    prompts: list[list[int]],
    max_new_tokens: int,
    progress: Callable[[str, int, int], None],
    reference_prompts: int = 2,
    engine_version: str | None = None,
    layer_ids: list[int] | None = None,
    block: Any = None,
) -> DFlashAcceptance:
    """The DFlash draft on ``target`` (a loaded Target) over ``prompts`` (token ids), both paths measured; the
    served taps those ``engine`` feeds in ``engine_version`` (None: the newest modelled release), or those
    ``layer_ids`` state, in the block the launch serves (``block``; read_sides)."""
    side = read_sides(target, draft_path, engine, engine_version, layer_ids, block)
    draft, trained, served, ways = side.draft, side.trained, side.served, side.ways
    seqs = continue_prompts(target, prompts, max_new_tokens, progress)
    starts = [len(p) for p in prompts]
    walked = measure_paths(target, draft, ways, seqs, starts, lambda i, n: progress("dflash acceptance", i, n))
    figs, diff = paired_mean_lengths(walked)  # tokens per verify pass, whatever block each path drafts
    paths = {n: DFlashPath(n, w.spec, trained.source if n == "trained" else served.source, figs[n],
                           sum(map(len, walked[n])), walked[n], w.block) for n, w in ways.items()}  # fmt: skip
    on = "served" if "served" in ways else "trained"
    ref = _reference(target, draft, on, ways[on], prompts, seqs, walked[on], reference_prompts)
    res = DFlashAcceptance(engine, draft.config.block_size, len(prompts), sum(len(s) - st for s, st in zip(seqs, starts)),
                           paths["trained"], paths.get("served"), diff, ref, side.findings)  # fmt: skip
    if diff is not None:
        t, s = figs["trained"], figs["served"]
        ev = [f"served: {s.text()} ({served.source}; blocks of {side.block})", f"trained: {t.text()}"]
        cost = cost_finding(ways["trained"], ways["served"], t, s, diff, side.cost_fix(), ev)
        res.findings += [cost] if cost is not None else []
    elif served.spec == trained.spec:
        res.notes.append(f"served as trained ({ways['trained'].text()}): one path measured")
    if block is None:
        res.notes.append(f"blocks of {draft.config.block_size}, the draft's own: no launch names the served block "
                         "(--serve-cmd or --num-draft-tokens set it)")  # fmt: skip
    res.findings += dflash_health(figs, on, res.findings)
    return res


def dflash_health(figs: dict[str, Interval], served: str, found: list[Finding]) -> list[Finding]:
    """The health judgment of a DFlash run: the path the engine serves against every other path measured."""
    from ...analyses.judgment import health
    from ...draft.dflash.model import DFlashDraft

    sides = {_path_name(n, served): iv for n, iv in figs.items()}
    return health(DFlashDraft, figs[served], sides, found, served_name=_path_name(served, served),
                  unseen=["the weights' own fit to other taps (diagnose measures the tap levers)"])  # fmt: skip


def _path_name(name: str, served: str) -> str:
    return f"the {name} taps" + (" (as served)" if name == served and name != "served" else "")


def _reference(target: Any, draft: Any, name: str, way: Drafting, prompts: list[list[int]], seqs: list[list[int]],
               walked: list[list[int]], n: int) -> dict[str, Any]:  # fmt: skip
    """The sequential loop on the first ``n`` prompts, on the path the engine serves (``name``, drafted as ``way``,
    whose estimator passes are ``walked``): its tokens against greedy decoding, its passes against the estimator's."""
    same_tokens = same_passes = True
    for i in range(min(n, len(prompts))):
        toks, passes = reference_loop(target, draft, way, prompts[i], len(seqs[i]))
        same_tokens &= toks == seqs[i]
        same_passes &= passes == walked[i]
    return {"path": name, "prompts": min(n, len(prompts)), "tokens_equal_greedy": same_tokens,
            "passes_equal_estimator": same_passes}  # fmt: skip
