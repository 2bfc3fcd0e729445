"""Acceptance with the draft as the engine runs it (issue 13).

:mod:`eagle3_doctor.draft.served` says, without a forward, where an engine version runs the draft
differently from training (the ``FWD`` findings). Here the difference becomes a measured number:
the acceptance run feeds the same serving features to a second copy of the draft with every
served difference applied (flag values, the target's head or embeddings, a tied head, the RoPE
layout, q/k norms dropped), and each ``FWD`` finding gains step-1 accuracy and mean acceptance length "as trained"
vs "as served", each with its interval over prompts and the paired difference
(:mod:`eagle3_doctor.core.stats`).

Where the trained RoPE layout is undetermined (``FWD007``), the other layout is measured instead:
the draft's weights fit the layout they were trained with, so a clear gap decides it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from .results import PathResult

AS_SERVED = "as_served"  # path name: serving features, the engine's draft forward
OTHER_ROPE = "gptj_rope"  # path name: serving features, the canonical draft with the other RoPE layout
OTHER_ROPE_NEOX = "neox_rope"  # the same where the canonical draft is GPT-J
MEASURED = ("FWD001", "FWD003", "FWD004", "FWD006", "FWD008", "FWD009")  # what a served copy of the draft can reproduce


@dataclass
class ServedPaths:
    """The FWD findings for the setup and the extra drafts acceptance runs on the serving features."""

    findings: list[Any]
    drafts: dict[str, Any] = field(default_factory=dict)  # path name -> Eagle3Draft
    applied: list[str] = field(default_factory=list)  # what the as-served copy changes, for the evidence
    not_measured: list[str] = field(default_factory=list)
    # with two or more differences applied: per finding code, (what it changes, its finding, a copy that
    # runs every other served difference), so diagnose can set each back alone
    singles: dict[str, tuple[str, Any, Any]] = field(default_factory=dict)


def served_paths(setup: Any) -> ServedPaths:
    """FWD findings for the setup's draft under its engine version, and the drafts that measure them."""
    from ..draft.served_findings import diagnose

    draft, info, tgt = setup.draft, setup.info, setup.target
    if draft is None or info is None:
        return ServedPaths([])
    head = tgt.model.get_output_embeddings()
    t_head = head.weight.detach() if head is not None else None
    t_embed = tgt.embed_weight().detach()
    findings, sf = diagnose(
        draft,
        info,
        setup.serving.engine,
        setup.serving.version,
        target_vocab=tgt.vocab_size,
        target_head=t_head,
        target_embed=t_embed,
        target_config=tgt.config,
    )
    out = ServedPaths(findings)
    if sf is None:
        return out
    measured = [f for f in findings if f.code in MEASURED]
    if measured:
        served, done = _served_copy(draft, measured, t_head, t_embed)
        for f, why in zip(measured, done):
            (out.not_measured if why.startswith("not measured") else out.applied).append(f"{f.code}: {why}")
        if out.applied:
            out.drafts[AS_SERVED] = served
        applied = [(f, why) for f, why in zip(measured, done) if not why.startswith("not measured")]
        if len(applied) > 1:
            for f, why in applied:
                others = [g for g, _ in applied if g is not f]
                out.singles[f.code] = (why, f, _served_copy(draft, others, t_head, t_embed)[0])
    if any(f.code == "FWD007" for f in findings):
        other = _eager_copy(draft)
        other.config.rope_interleaved = not draft.config.rope_interleaved
        out.drafts[OTHER_ROPE if other.config.rope_interleaved else OTHER_ROPE_NEOX] = other.eval()
    return out


def _served_copy(draft: Any, findings: list[Any], t_head: torch.Tensor | None, t_embed: torch.Tensor) -> tuple[Any, list[str]]:
    """A copy of the draft running the findings' served differences, and what each changed (or why not)."""
    served = _eager_copy(draft)
    done = [_apply(served, f, t_head, t_embed) for f in findings]
    return served.eval(), done


def _eager_copy(draft: Any) -> Any:
    """A copy of the draft with its own config (shared by the copy's attention, as in the original),
    running eager: ``--compile`` (draft/fast.py) replaces step methods by compiled ones bound to the
    original object, which a copy would otherwise still call."""
    # the embeddings are never changed in place here (FWD003 attaches new ones): share them rather than
    # copy a [vocab, hidden] table (a GB at 128k x 4096 in bf16)
    emb = draft.embed_tokens
    c = copy.deepcopy(draft, memo={id(emb.weight): emb.weight} if emb is not None else None)
    for obj, names in ((c, ("_layer_in", "_first_out", "_fed_back", "logits")), (c.midlayer.self_attn, ("qkv",))):
        for n in names:
            obj.__dict__.pop(n, None)
    return c


def _apply(served: Any, f: Any, t_head: torch.Tensor | None, t_embed: torch.Tensor) -> str:
    """Make the copy run one served difference; returns what was done (or why it could not be)."""
    cfg, d = served.config, f.data or {}
    if f.code == "FWD001":
        flag, value = d["flag"], d["served"]
        if value and flag == "norm_before_fc" and not hasattr(served, "input_norm"):
            return "not measured: the engine would apply input_norm, which the checkpoint does not hold"
        if value and flag == "fc_norm" and not hasattr(served, "fc_norm"):
            return "not measured: the engine would apply fc_norm, which the checkpoint does not hold"
        setattr(cfg, flag, bool(value))
        return f"{flag} = {str(bool(value)).lower()}"
    if f.code == "FWD003":
        if d.get("weight") == "lm_head" and t_head is not None:
            served.lm_head.weight.data = t_head.to(served.lm_head.weight)
            return "the target's lm_head"
        served.set_embeddings(t_embed.to(served.fc.weight), own=False)
        return "the target's embed_tokens"
    if f.code == "FWD004":
        if cfg.draft_vocab_size != t_embed.shape[0]:
            return (
                f"not measured: embed_tokens has {t_embed.shape[0]} rows, the draft vocabulary "
                f"{cfg.draft_vocab_size}: the tied head does not map onto draft ids"
            )
        served.lm_head.weight.data = t_embed.to(served.lm_head.weight).clone()
        return "lm_head = the target's embed_tokens (tie_word_embeddings)"
    if f.code == "FWD006":
        cfg.rope_interleaved = bool(d["served_interleaved"])
        return "RoPE " + ("GPT-J-interleaved" if cfg.rope_interleaved else "NeoX")
    if f.code == "FWD008":
        cfg.qk_norm = False
        return "no q_norm/k_norm"
    if f.code == "FWD009":  # the engine's norm is absent from the checkpoint: it keeps its initial weight
        for layer in served.later_layers():
            layer.input_layernorm.weight.data = torch.ones_like(layer.input_layernorm.weight)
        return f"the later layers' {d['served_norm']} at its initial weight 1.0 before attention"
    return "not measured"


# --------------------------------------------------------------------------- measured evidence


def compare_line(
    results: dict[str, PathResult], base: str, other: str, K: int, names: tuple[str, str] = ("as trained", "as served")
) -> tuple[str, float, float, float, float]:
    """One evidence line: step-1 accuracy and mean acceptance length on two paths with their 95%
    intervals over prompts, and their paired differences (other - base). Returns (line, point, lo,
    hi) of the step-1 difference and the lower bound of the acceptance-length difference."""
    from ..core.stats import difference_interval, mean_acceptance_length

    a, b = results[base], results[other]
    acc1 = lambda s: s[..., 2 + K] / s[..., 2 + 2 * K]  # noqa: E731  (hits / positions at step 1)
    mal = mean_acceptance_length
    diff, how = difference_interval(b.counts(K), a.counts(K), acc1)
    dlen, _ = difference_interval(b.counts(K), a.counts(K), mal)
    ia, ib = a.intervals, b.intervals
    assert ia is not None and ib is not None  # path_results sets every path's intervals
    line = (
        f"measured on {ia.mean_acceptance_length.n} prompts, serving features: step-1 accuracy "
        f"{ia.acc_k[0].text()} {names[0]} -> {ib.acc_k[0].text()} {names[1]} "
        f"(difference {diff.point:+.3f} [{diff.lo:+.3f}, {diff.hi:+.3f}], {how}); mean acceptance length "
        f"{ia.mean_acceptance_length.text()} -> {ib.mean_acceptance_length.text()} "
        f"(difference {dlen.point:+.3f} [{dlen.lo:+.3f}, {dlen.hi:+.3f}])"
    )
    return line, diff.point, diff.lo, diff.hi, dlen.lo


def measured_findings(sp: ServedPaths, results: dict[str, PathResult], K: int) -> list[Any]:
    """The FWD findings, each with the measured cost where a path measured it."""
    out = []
    cost = compare_line(results, "serving", AS_SERVED, K) if AS_SERVED in results and "serving" in results else None
    other = next((n for n in (OTHER_ROPE, OTHER_ROPE_NEOX) if n in results), None)
    for f in sp.findings:
        f = copy.copy(f)
        f.evidence = list(f.evidence)
        if f.code in MEASURED and cost is not None:
            f.evidence.append(
                cost[0] + (f"; all served differences at once ({'; '.join(sp.applied)})" if len(sp.applied) > 1 else "")
            )
            f.data = {**(f.data or {}), "measured_step1_difference": [cost[1], cost[2], cost[3]]}
            if cost[2] > 0 or cost[4] > 0:
                f.evidence.append(
                    "the draft does better as served than as its config says it was trained: check that "
                    "the config describes training (the weights fit the engine's forward)"
                )
        elif f.code in MEASURED:
            f.evidence.append(next((w for w in sp.not_measured if w.startswith(f.code)), "not measured"))
        if f.code == "FWD007" and other is not None and "serving" in results:
            # the serving path ran the canonical layout (NeoX unless the config said otherwise)
            names = ("NeoX", "GPT-J") if other == OTHER_ROPE else ("GPT-J", "NeoX")
            line, _, lo, hi, _ = compare_line(results, "serving", other, K, names)
            f.evidence.append(line)
            fit = names[1] if lo > 0 else names[0] if hi < 0 else None
            if fit is None:
                f.evidence.append("the two layouts are within the noise over prompts: still undetermined")
            else:  # one layout fits the weights beyond the noise over prompts: that is how they were trained
                f.evidence.append(
                    f'the weights fit {fit} RoPE: write "rope_is_neox_style": {"true" if fit == "NeoX" else "false"}'
                )
                f.data = {**(f.data or {}), "measured_fit": fit}
        out.append(f)
    return out
