"""Where an acceptance gap lives, measured rather than looked up in a list of known causes.

Three measurements, all on the same prompts and one target forward, each with its paired interval
over prompts (:func:`core.stats.paired`):

- **Levers.** Each lever is one difference between how the draft runs in serving and how it ran in
  training (the capture points the engine feeds; the draft forward as the engine runs it). Acceptance
  is measured with that one lever set back to the training side; "all levers" is the training side
  itself. A lever whose restoration recovers acceptance is where the gap lives, and its fix is the
  one the rules would print for it.
- **Module health.** Each module of the draft (fc, attention, MLP) is mean-ablated: its output is
  replaced by its mean over the batch's positions. A trained module costs step-1 accuracy when
  ablated; one whose ablation costs nothing is inconsistent with the rest of the checkpoint (saved at
  initialisation, loaded under another key, converted in the wrong layout).
- **Context.** Step-1 accuracy by absolute position in the sequence, per prompt; a drop past a
  position that the paired interval separates from the accuracy before it names that position.

The verdict says which branch the measurements point to (pipeline, checkpoint, context, runtime) and
"undetermined", with the evidence that would decide, when they point nowhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch

from ..core.findings import Finding
from ..core.stats import MIN_PROMPTS, Interval, paired, ratio
from ..core.typed_json import JsonFields
from .acceptance.estimator import unroll_outcomes
from .acceptance.findings import acc_fix
from .acceptance.measurement import Measurement, _labels_fn, path_results
from .acceptance.options import AcceptanceOptions, _no_progress
from .acceptance.run import acceptance_sequences

if TYPE_CHECKING:
    from ..core.taps import FeatureSpec
    from ..draft.model import Eagle3Draft
    from ..model.replay import ReplayBatch
    from ..model.setup import Setup
    from .results import PathResult

Progress = Callable[[str, int, int], None]
SERVING, TRAINING = "serving", "training"
WEIGHTS = "capture points the weights fit"  # the lever the scan finds, where the config's ids are not what was trained
# modules whose mean-ablation must cost a trained draft accuracy (norm weights are checked by inspect)
ABLATED = ("fc", "midlayer.self_attn", "midlayer.mlp")
MAL = lambda s: 1.0 + s[..., 1] / s[..., 0]  # noqa: E731  mean acceptance length from acceptance_counts rows
STEP1 = ratio(0, 1)  # step-1 accuracy from [hits, positions] rows
LOW_STEP1 = 0.3  # below this even as trained, the draft itself (or the data) is in question
CONTEXT_DROP = 0.15  # a fall in step-1 accuracy past a position that counts as a context finding
AFTER = 2  # buckets compared with everything before a cut


@dataclass
class LeverRow(JsonFields):
    """Acceptance with one serving-vs-training difference set back to training."""

    name: str
    what: str
    mean_acceptance_length: Interval
    recovery: Interval  # lever - serving, paired over prompts (mean acceptance length)
    step1_recovery: Interval
    fix: str | None


@dataclass
class ModuleRow(JsonFields):
    """Step-1 accuracy with one module mean-ablated, and what the ablation costs."""

    module: str
    step1: Interval
    cost: Interval  # unablated - ablated step-1 accuracy, paired over prompts
    consistent: bool  # False: the ablation costs nothing a trained module would
    verdict: str  # trained | contributes nothing | ablation helps | unclear


@dataclass
class ContextRow(JsonFields):
    """Step-1 accuracy over absolute positions ``start``..``end`` (one bucket), over the prompts reaching it."""

    start: int
    end: int
    step1: Interval
    positions: int


@dataclass
class Diagnosis(JsonFields):
    """The verdict, and the measurements it rests on."""

    branch: str  # pipeline | checkpoint | context | runtime | undetermined
    verdict: str
    serving: Interval  # mean acceptance length, serving side as the engine runs it
    training: Interval  # the same with every lever on the training side
    gap: Interval  # training - serving, paired
    base_path: str  # the path module health and context are measured on
    levers: list[LeverRow]
    modules: list[ModuleRow]
    context: list[ContextRow]
    findings: list[Finding]
    notes: list[str] = field(default_factory=list)
    prompts: int = 0

    JSON_SCHEMA: ClassVar = {"findings": {"type": "array", "items": {"$ref": "#/$defs/finding"}}}

    def to_dict(self) -> dict[str, Any]:
        from ..core.typed_json import fields_json

        return {**fields_json(self), "findings": [f.to_dict() for f in self.findings]}


SCHEMA = "eagle3-doctor/diagnose/1"


# --------------------------------------------------------------------------- the paths measured


@dataclass
class Plan:
    paths: dict[str, FeatureSpec]
    drafts: dict[str, Eagle3Draft]
    levers: list[tuple[str, str, str, str | None]]  # (name, what, path, fix)
    base: str
    notes: list[str]
    ablations: dict[str, Eagle3Draft] = field(default_factory=dict)  # module -> its mean-ablated copy
    aliases: dict[str, str] = field(default_factory=dict)  # path -> the path measuring the same thing
    step1: dict[str, np.ndarray] = field(default_factory=dict)  # "" (unablated) or module -> per prompt [hits, n]


def _plan(setup: Setup) -> Plan:
    """Serving as the engine runs it, training, one path per lever, and the path ablations run on."""
    from .as_served import AS_SERVED, served_paths

    assert setup.draft is not None
    draft, serving, notes = setup.draft, setup.serving, []
    n_aux = draft.config.num_aux_states
    sp = served_paths(setup)
    served = sp.drafts.get(AS_SERVED)
    fwd_fix = "; ".join(dict.fromkeys(f.fix for f in sp.findings if f.fix)) or None
    s_draft = served if served is not None else draft
    paths: dict[str, FeatureSpec] = {}
    drafts: dict[str, Eagle3Draft] = {}
    if serving.failure is None and len(serving.spec) == n_aux:
        paths[SERVING], drafts[SERVING] = serving.spec, s_draft
    else:
        notes.append(
            f"{serving.label} feeds no measurable features: {serving.failure.message if serving.failure else serving.spec}"
        )
    train = setup.train_spec
    aliases: dict[str, str] = {}
    if train is not None and len(train) == n_aux:
        if SERVING in paths and train == serving.spec and served is None:
            aliases[TRAINING] = SERVING  # the same features through the same draft: measured once
        else:
            paths[TRAINING], drafts[TRAINING] = train, draft
    levers: list[tuple[str, str, str, str | None]] = []
    if SERVING in paths and TRAINING in paths:  # (an alias means no lever: the sides are the same)
        if train != serving.spec and served is not None:
            paths["lever:capture"], drafts["lever:capture"] = train, s_draft
        if train != serving.spec:
            path = "lever:capture" if served is not None else TRAINING
            levers.append(("capture points", f"feed {_spec(train)} instead of {_spec(serving.spec)}", path, acc_fix(setup)))
        if served is not None:
            paths["lever:forward"], drafts["lever:forward"] = serving.spec, draft
            what = "run the draft as trained, not as the engine runs it (" + "; ".join(sp.applied) + ")"
            levers.append(("draft forward", what, "lever:forward", fwd_fix))
    base = TRAINING if TRAINING in paths else SERVING
    # module health is a step-1 measurement: the ablated copies run one step, not the K of the chains
    ablations = {mod: mean_ablated(draft, mod) for mod in ABLATED} if base in paths else {}
    return Plan(paths, drafts, levers, base, notes, ablations, aliases)


def _spec(spec: FeatureSpec | None) -> str:
    return "[" + ", ".join(str(p) for p in spec or ()) + "]"


def mean_ablated(draft: Eagle3Draft, module: str) -> Eagle3Draft:
    """A copy of ``draft`` whose ``module`` outputs its mean over the batch's positions at every call."""
    from .as_served import _eager_copy

    d = _eager_copy(draft)  # the embeddings shared, not copied; eager even where the draft was compiled
    target = d.get_submodule(module)
    # attention runs through its own methods (qkv, attend): its output is o_proj's
    hooked = target.o_proj if hasattr(target, "o_proj") else target

    def hook(_m: torch.nn.Module, _inp: Any, out: torch.Tensor) -> torch.Tensor:
        return out.mean(dim=tuple(range(out.dim() - 1)), keepdim=True).expand_as(out)

    hooked.register_forward_hook(hook)
    return d.eval()


# --------------------------------------------------------------------------- context


class ContextCounts:
    """Per prompt, step-1 [hits, positions] in absolute-position buckets of the base path."""

    def __init__(self, bucket: int, n_prompts: int):
        self.bucket = bucket
        self.counts: dict[int, np.ndarray] = {}
        self.n = n_prompts

    def add(self, rb: ReplayBatch, draft: Eagle3Draft, aux: torch.Tensor, labels: Callable, starts: list[int]) -> None:
        """Count step-1 hits at positions >= starts[row] of each sequence of the batch."""
        out = unroll_outcomes(draft, aux, rb.tokens, labels, rb.batch.lengths, 1)
        match, valid = out.match[:, 0].cpu().numpy(), out.valid[:, 0].cpu().numpy()
        for row, i in enumerate(rb.index):
            for t in np.nonzero(valid[row])[0]:
                if t < starts[row]:
                    continue
                b = int(t) // self.bucket
                c = self.counts.setdefault(b, np.zeros((self.n, 2)))
                c[i] += (float(match[row, t]), 1.0)

    def rows(self) -> list[ContextRow]:
        out = []
        for b in sorted(self.counts):
            c = self.counts[b][self.counts[b][:, 1] > 0]
            (iv,), _ = paired([c], STEP1, 0)
            out.append(ContextRow(b * self.bucket, (b + 1) * self.bucket - 1, iv, int(c[:, 1].sum())))
        return out

    def drop(self) -> tuple[int, Interval, Interval] | None:
        """(first position, accuracy before, after - before) of the earliest fall the prompts separate.

        "After" is the window of the next AFTER buckets, not the rest of the sequence: a gradual decay
        over a long context would otherwise put the break at the first bucket (measured on the fixture
        draft, trained on 128-token sequences: 0.79 up to position 160, then 0.53, 0.45, ... 0.05)."""
        keys = sorted(self.counts)
        for cut in keys[1:]:
            before = sum(self.counts[b] for b in keys if b < cut)
            after = sum(self.counts[b] for b in keys if cut <= b < cut + AFTER)
            both = (before[:, 1] > 0) & (after[:, 1] > 0)
            if both.sum() < MIN_PROMPTS:
                continue
            own, diff = paired([before[both], after[both]], STEP1, 0)
            if diff[1].hi < 0 and -diff[1].point >= CONTEXT_DROP:
                return cut * self.bucket, own[0], diff[1]
        return None


# --------------------------------------------------------------------------- prompts as text

# Chat markup of the families whose templates are common, as it shows when a client pastes a rendered
# conversation into one message: the server then renders it again, and the draft (trained on the
# template's real tokens around plain text) reads the markup as text it never saw.
CHAT_MARKUP: dict[str, tuple[str, ...]] = {
    "ChatML (Qwen, many fine-tunes)": ("<|im_start|>", "<|im_end|>"),
    "Llama 3": ("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"),
    "Llama 2 / Mistral": ("[INST]", "[/INST]"),
    "Gemma": ("<start_of_turn>", "<end_of_turn>"),
    "Phi / Zephyr": ("<|user|>", "<|assistant|>", "<|end|>"),
}


def markup_in_prompts(prompts_path: str | None, own_template: str | None) -> dict[str, list[int]]:
    """Family -> the prompts (1-based) whose text carries that family's chat markup, leaving out markup the
    target's own template writes (there it is the template's, not pasted text)."""
    from ..io.prompts import read_prompt_file

    if not prompts_path:
        return {}
    own = own_template or ""
    found: dict[str, list[int]] = {}
    for i, item in enumerate(read_prompt_file(prompts_path), start=1):
        text = item if isinstance(item, str) else "\n".join(str(m.get("content", "")) for m in item)
        for family, marks in CHAT_MARKUP.items():
            if any(m in text and m not in own for m in marks):
                found.setdefault(family, []).append(i)
    return found


def _markup_finding(found: dict[str, list[int]], n: int) -> Finding:
    lines = [f"{fam}: prompt(s) {', '.join(map(str, idx[:12]))}{' ...' if len(idx) > 12 else ''}" for fam, idx in found.items()]
    hit = len({i for idx in found.values() for i in idx})
    return Finding(
        "DGN006",
        f"{hit} of {n} prompt(s) carry another model family's chat markup as plain text",
        [*lines, "the server renders these turns with the target's own template around that text"],
        "send the conversation as structured messages (role and content per turn) so the server's template "
        "renders it, or strip the pasted markup",
        data={"families": sorted(found), "prompts": hit},
    )


# --------------------------------------------------------------------------- the measurement


def diagnose_gap(
    setup: Setup,
    opts: AcceptanceOptions,
    *,
    prompts_path: str | None = None,
    bucket: int = 32,
    progress: Progress = _no_progress,
) -> Diagnosis:
    """Levers, module ablations and context on one replay of the prompts, then the verdict."""
    return measure_gap(setup, opts, prompts_path=prompts_path, bucket=bucket, progress=progress)[0]


def measure_gap(
    setup: Setup,
    opts: AcceptanceOptions,
    *,
    prompts_path: str | None = None,
    bucket: int = 32,
    progress: Progress = _no_progress,
) -> tuple[Diagnosis, dict[str, PathResult]]:
    """:func:`diagnose_gap` with the per-path results the verdict rests on (fix reads the serving side)."""
    from ..core.errors import BadInput
    from ..model.replay import load_sources

    if setup.draft is None:
        raise BadInput("diagnose needs a draft", "pass --draft DIR")
    opts.check()
    if opts.topk != 1 or opts.num_draft_tokens or opts.token_tree:
        # the levers and ablations compare chains; the engine's own tree is acceptance's to measure
        opts = replace(opts, topk=1, num_draft_tokens=None, token_tree=None)
    src = load_sources(setup.target, prompts_path, None, opts.max_tokens, opts.limit, None)
    rep = acceptance_sequences(setup, src, opts, progress)
    plan = _plan(setup)
    if not plan.paths:
        raise BadInput(
            "neither the serving nor the training side feeds the draft's fc its width of features",
            "run eagle3-doctor inspect for the engine and draft findings",
        )
    cands = weight_candidates(plan.paths[plan.base], setup.target.num_layers)
    m = Measurement(setup, rep, plan.paths, None, plan.drafts, cands=cands)
    ctx = ContextCounts(bucket, len(rep.seqs))
    # one bucket spanning every position: per prompt step-1 [hits, positions], the unablated draft first
    step1 = {name: ContextCounts(1 << 40, len(rep.seqs)) for name in ("", *plan.ablations)}
    _replay(setup, rep, plan, m, ctx, step1, opts, progress)
    markup = markup_in_prompts(prompts_path, getattr(setup.target.tokenizer, "chat_template", None))
    results = path_results(m)
    for alias, real in plan.aliases.items():
        results[alias] = results[real]
    plan.step1 = {n: c.counts.get(0, np.zeros((len(rep.seqs), 2))) for n, c in step1.items()}
    extra = _weights_lever(setup, plan, rep, m.scan_result() or [], opts, progress)
    d = _verdict(setup, plan, results, ctx, opts.num_steps, rep.notes + plan.notes, len(rep.seqs), extra)
    if markup:
        d.findings.append(_markup_finding(markup, len(rep.seqs)))
    return d, results


def weight_candidates(spec: FeatureSpec, num_layers: int) -> list[FeatureSpec]:
    """The acceptance scan's wirings around ``spec`` plus the seed incident's inverse: a spec that starts
    with the embeddings shifted back up one slot (the weights of a draft whose config ids were "fixed"
    into [-1, a, b] fit (a, b, b + 1), which no single-slot change of the config reaches)."""
    from ..core.taps import layer_out
    from .acceptance.measurement import scan_candidates

    cands = scan_candidates(spec, num_layers)
    last = spec[-1]
    if spec and spec[0].is_embed() and last.is_layer_out() and int(last.layer) + 1 < num_layers:  # type: ignore[arg-type]
        up = (*spec[1:], layer_out(int(last.layer) + 1))  # type: ignore[arg-type]
        if len(set(up)) == len(up) and up not in cands:
            cands.append(up)
    return cands


def _weights_lever(
    setup: Setup, plan: Plan, rep: Any, rows: list[Any], opts: AcceptanceOptions, progress: Progress
) -> LeverRow | None:
    """Where the draft's weights fit other capture points than the configured ones (paired step-1 interval
    above zero on enough prompts), acceptance is measured on those points as a lever of its own, in a
    second replay: the general form of a config whose ids were edited after training."""
    from .compare.fixes import fix_for

    best = next((r for r in rows if not r.configured and r.diff_to_configured is not None), None)
    d = best.diff_to_configured if best is not None else None
    if best is None or d is None or d.lo <= 0 or d.n < MIN_PROMPTS or SERVING not in plan.paths:
        return None
    paths = {SERVING: plan.paths[SERVING], "lever:weights": best.spec}
    drafts = {n: plan.drafts[SERVING] for n in paths}
    m = Measurement(setup, rep, paths, None, drafts, cands=[])
    m.replay(opts.batch_size, "", _no_progress)  # a second, short replay: no second progress bar
    res = path_results(m)
    own, diff = _mal(res, [SERVING, "lever:weights"], opts.num_steps)
    _, s1 = _step1(res, [SERVING, "lever:weights"])
    fix, _ = fix_for(setup.serving, best.spec)
    what = f"feed {_spec(best.spec)}, which the weights fit best (step-1 {d.text()} above the configured points)"
    return LeverRow(WEIGHTS, what, own[1], diff[1], s1[1], fix or None)


def _replay(
    setup: Setup,
    rep: Any,
    plan: Plan,
    m: Measurement,
    ctx: ContextCounts,
    step1: dict,
    opts: AcceptanceOptions,
    progress: Progress,
) -> None:
    """One pass over the prompts: every path, the context buckets and the step-1 ablations, batch by batch."""
    from ..model.target import target_argmax

    greedy = opts.continuation == "greedy"

    def each(rb: ReplayBatch) -> None:
        # along the context the reference is the target's own next-token choice at every position, prompt
        # included: the greedy continuation alone would leave the first len(prompt) positions unmeasured
        amax = target_argmax(setup.target, rb.last)
        aux = torch.cat([rb.captured[p] for p in plan.paths[plan.base]], dim=-1)
        ctx.add(rb, plan.drafts[plan.base], aux, _labels_fn(rb, amax, False), [0] * len(rb.index))
        starts, labels = [rep.starts[i] for i in rb.index], _labels_fn(rb, amax, greedy)
        for name, counts in step1.items():
            counts.add(rb, plan.ablations.get(name, plan.drafts[plan.base]), aux, labels, starts)

    m.replay(opts.batch_size, "diagnose", progress, each)


def _mal(results: dict[str, PathResult], names: list[str], K: int) -> tuple[list[Interval], list[Interval]]:
    return paired([results[n].counts(K) for n in names], MAL, 0)


def _step1(results: dict[str, PathResult], names: list[str]) -> tuple[list[Interval], list[Interval]]:
    return paired([np.asarray(results[n].step1_counts, dtype=np.float64).reshape(-1, 2) for n in names], STEP1, 0)


def _levers(plan: Plan, results: dict[str, PathResult], K: int) -> list[LeverRow]:
    if SERVING not in results:
        return []
    names = [SERVING] + [p for _, _, p, _ in plan.levers]
    own, diff = _mal(results, names, K)
    _, s1 = _step1(results, names)
    rows = [LeverRow(name, what, own[i + 1], diff[i + 1], s1[i + 1], fix) for i, (name, what, _, fix) in enumerate(plan.levers)]
    return sorted(rows, key=lambda r: -r.recovery.point)


def _modules(plan: Plan) -> list[ModuleRow]:
    counts = [plan.step1[""]] + [plan.step1[mod] for mod in ABLATED]
    keep = counts[0][:, 1] > 0  # prompts with a measured position (a prompt with no continuation has none)
    own, diff = paired([c[keep] for c in counts], STEP1, 0)
    rows = []
    for i, mod in enumerate(ABLATED, start=1):
        cost = Interval(-diff[i].point, -diff[i].hi, -diff[i].lo, diff[i].level, diff[i].n, diff[i].B, diff[i].seed)
        rows.append(ModuleRow(mod, own[i], cost, cost.lo > 0, _module_verdict(cost)))
    return rows


NOTHING = 0.02  # |cost| of step-1 accuracy under which an ablation "changes nothing"


def _module_verdict(cost: Interval) -> str:
    # measured on the fixtures: trained modules cost 0.27-0.66; an attention saved at initialisation costs
    # exactly 0 (its output is near zero), and the MLP after it then costs -0.08 (ablating it helps: it was
    # trained to work with an attention that is no longer there)
    if cost.lo > 0:
        return "trained"
    if -NOTHING <= cost.lo and cost.hi <= NOTHING:
        return "contributes nothing"
    return "ablation helps" if cost.hi < 0 else "unclear"


# --------------------------------------------------------------------------- the verdict


def _verdict(
    setup: Setup,
    plan: Plan,
    results: dict[str, PathResult],
    ctx: ContextCounts,
    K: int,
    notes: list[str],
    n: int,
    extra: LeverRow | None = None,
) -> Diagnosis:
    sides = [x for x in (SERVING, TRAINING) if x in results]
    own, diff = _mal(results, sides, K)
    serving, training = own[0], own[-1]
    gap = diff[-1]  # training - serving, paired over prompts
    if len(sides) == 1:
        notes.append(f"only the {sides[0]} side is measurable: no gap between the sides, no levers")
    levers, modules, context = _levers(plan, results, K), _modules(plan), ctx.rows()
    if extra is not None:
        levers = sorted([*levers, extra], key=lambda r: -r.recovery.point)
    findings: list[Finding] = []
    branch = ""
    if (len(sides) == 2 and gap.lo > 0) or any(r.recovery.lo > 0 for r in levers):
        branch = "pipeline"
        findings.append(_pipeline_finding(gap, serving, training, levers))
    # the module that changes nothing is the cause. A module whose ablation helps is no cause by itself: it
    # shows wherever the draft fails for another reason (measured: past the training length of the
    # context, ablating the fixture draft's MLP raises step-1 accuracy by 0.07 with every weight intact)
    if SERVING not in results and setup.serving.failure is not None and setup.train_spec is not None:
        # the engine refuses, crashes or is not modelled: that is the finding, whatever the rest measures
        from .compare.engine_failures import engine_failure_finding

        findings.append(engine_failure_finding(setup.serving, setup.train_spec))
        branch = "undetermined" if setup.serving.failure.when == "undetermined" else "pipeline"
    bad = [r for r in modules if r.verdict == "contributes nothing"]
    if bad and len(bad) == len(modules):
        findings.append(_nothing_trained_finding(modules, results[plan.base].step1, plan.base))
    else:
        findings += [_module_finding(r, modules, plan.base) for r in bad]
    branch = branch or ("checkpoint" if bad else "")
    drop = ctx.drop()
    if drop is not None:
        findings.append(_context_finding(*drop, plan.base))
        branch = branch or "context"
    base_step1 = results[plan.base].step1
    if not branch and SERVING not in results:
        branch = "undetermined"
        findings.append(
            Finding(
                "DGN004",
                "undetermined: the serving side cannot be measured, so no gap can be placed",
                [*notes, f"measured instead: the {plan.base} side, step-1 accuracy {base_step1:.3f}"],
                "run eagle3-doctor inspect, which names what the engine feeds and why the draft cannot take it",
            )
        )
    if not branch:
        branch = "undetermined" if base_step1 < LOW_STEP1 else "runtime"
        findings.append(_undetermined_finding(base_step1, plan.base) if branch == "undetermined" else _runtime_finding(serving))
    verdict = _verdict_line(branch, findings)
    return Diagnosis(branch, verdict, serving, training, gap, plan.base, levers, modules, context, findings, notes, n)


def _verdict_line(branch: str, findings: list[Finding]) -> str:
    where = {
        "pipeline": "in the pipeline: how the engine feeds or runs the draft",
        "checkpoint": "in the checkpoint: the weights as saved",
        "context": "in the data: the prompts' context lengths",
        "runtime": "not in anything measurable offline: the offline prediction is healthy",
        "undetermined": "undetermined: no lever, module or position explains it",
    }[branch]
    return f"the gap lives {where} ({findings[0].code}: {findings[0].title})"


def _pipeline_finding(gap: Interval, serving: Interval, training: Interval, levers: list[LeverRow]) -> Finding:
    ev = [
        f"mean acceptance length: serving {serving.text(2)}, training {training.text(2)}, gap {gap.text(2)} (paired over {gap.n} prompts)"
    ]
    ev += [f"lever {r.name}: recovers {r.recovery.text(2)} ({r.what})" for r in levers]
    top = next((r for r in levers if r.recovery.lo > 0), None)
    sides = [r for r in levers if r.name != WEIGHTS]  # the weights lever is no part of the serving-training gap
    if sides and gap.lo > 0:
        rest = sum(r.recovery.point for r in sides) - gap.point
        ev.append(f"residual (gap not explained by the levers one at a time): {-rest:+.2f}")
    if top is not None:
        how = "feeding the capture points the weights fit" if top.name == WEIGHTS else f"setting the {top.name} back to training"
        title = f"{how} recovers {top.recovery.text(2)} of mean acceptance length"
        return Finding("DGN001", title, ev, top.fix or "apply the lever's training-side setting", data={"lever": top.name})
    title = f"serving loses {gap.text(2)} of mean acceptance length, and no single lever recovers it alone"
    return Finding(
        "DGN001",
        title,
        ev,
        "apply every lever's training-side setting together (the training side recovers the gap): the fixes of the FWD and CAP findings",
        data={"lever": None},
    )


def _module_finding(r: ModuleRow, modules: list[ModuleRow], base: str) -> Finding:
    others = ", ".join(f"{o.module} costs {o.cost.text()} ({o.verdict})" for o in modules if o is not r)
    what = "contributes nothing" if r.verdict == "contributes nothing" else "works against the rest of the draft"
    return Finding(
        "DGN002",
        f"the draft's {r.module} {what}: mean-ablating it costs {r.cost.text()} of step-1 accuracy",
        [
            f"on the {base} features, step-1 accuracy {r.step1.point:.3f} with {r.module} ablated; {others}",
            "a trained module costs accuracy when its output is replaced by its mean; this one does not, so it is "
            "inconsistent with the rest of the checkpoint (saved at initialisation, loaded under another key, or "
            "converted in another layout)",
        ],
        f"re-export the draft from its training checkpoint with a key map that loads {r.module}.* (check the converter's "
        "renames and a non-strict load's missing keys), then run eagle3-doctor inspect on the export",
        data={"module": r.module},
    )


def _nothing_trained_finding(modules: list[ModuleRow], step1: float, base: str) -> Finding:
    # with no module carrying anything, ablation cannot point at one: the whole checkpoint is in question
    return Finding(
        "DGN002",
        f"no module of the draft contributes anything: step-1 accuracy {step1:.3f}, and ablating any module changes nothing",
        [f"on the {base} features: " + ", ".join(f"{m.module} costs {m.cost.text()}" for m in modules)],
        "the draft is at initialisation or belongs to another target: re-export it from the trained checkpoint (check the "
        "converter's key map), then run eagle3-doctor inspect and fingerprint on it",
        data={"module": None},
    )


def _context_finding(pos: int, before: Interval, change: Interval, base: str) -> Finding:
    return Finding(
        "DGN003",
        f"step-1 accuracy falls by {-change.point:.3f} past position {pos} of the context",
        [
            f"on the {base} features: {before.point:.3f} before position {pos}, change after it {change.text()} "
            f"(paired over the {change.n} prompts that reach past it)",
            "the draft was most likely trained on sequences shorter than this (or with another RoPE scaling)",
        ],
        f"serve with contexts under {pos} tokens for speculation, or retrain the draft on sequences past {pos} "
        "tokens (SpecForge/speculators max length)",
        data={"position": pos},
    )


def _undetermined_finding(step1: float, base: str) -> Finding:
    return Finding(
        "DGN004",
        f"undetermined: step-1 accuracy is {step1:.3f} on the {base} features, and no lever, module or position explains it",
        [
            "every module of the draft costs accuracy when ablated (they are trained), the levers recover nothing, "
            "and accuracy does not fall along the context"
        ],
        "what would decide it: the draft's own training sample (compare-hidden --train-dump, and acceptance on it), "
        "the training chat template (template-diff), and the target revision it was trained on (fingerprint)",
    )


def _runtime_finding(serving: Interval) -> Finding:
    return Finding(
        "DGN005",
        f"offline, the draft accepts {serving.text(2)} tokens per verify pass as served: any gap in serving is the engine's runtime",
        [f"mean acceptance length as the engine feeds and runs the draft: {serving.text(2)}"],
        "compare with what the server measures: eagle3-doctor server-metrics (or acceptance --server-metrics), "
        "which names the engine, wiring or draft side of a live gap",
    )
