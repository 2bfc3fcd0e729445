"""The fault signatures of one diagnose run: the target's rows of the replayed prompts for the serving and the
training features, every candidate simulated on them, ranked against the live figures."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...core.findings import Finding
from ...core.taps import FeatureSpec
from .attribute import Candidate, Ranking, rank
from .classes import CLASSES
from .simulate import simulate_all, traces

if TYPE_CHECKING:
    from ...draft.model import Eagle3Draft
    from ...model.replay import Recorded
    from ...model.setup import Setup
    from ...model.target import Target
    from ..acceptance.options import AcceptanceOptions, Replay
    from ..attribution.plan import Plan
    from ..attribution.result import Diagnosis
    from ..server_metrics.measured import Measured
    from .batches import BatchProfile


AS_TRAINED, AS_MODELLED = "as trained", "as modelled"

Progress = Callable[[str, int, int], None]


def candidates(
    target: Target,
    seqs: list[list[int]],
    starts: list[int],
    modelled: tuple[FeatureSpec, Eagle3Draft, str],
    trained: tuple[FeatureSpec, Eagle3Draft] | None,
    num_steps: int,
    batch_size: int,
    progress: Progress | None = None,
    recorded: Recorded | None = None,
) -> list[Candidate]:
    """As trained, as modelled (``modelled``: the engine's capture points, the draft as the release runs it, the
    release's label), and every fault class on the modelled path, each simulated on the same prompts (their rows read
    from ``recorded``, the continuation's decode, where it holds them)."""
    spec, served, release = modelled
    rows = traces(target, seqs, starts, spec, batch_size, recorded)
    total = sum(fc.proposal is None for fc in CLASSES) + 2
    if trained is None:  # training feeds and runs the draft as the release does: one fault-free prediction
        out = [
            Candidate(
                AS_TRAINED, f"as trained = as modelled for {release}", simulate_all(served, rows, num_steps, None, batch_size)
            )
        ]
    else:
        out = [Candidate(AS_MODELLED, f"as modelled for {release}: its capture points and draft forward, no runtime fault",
                         simulate_all(served, rows, num_steps, None, batch_size))]  # fmt: skip
    if trained is not None:
        t_spec, t_draft = trained
        t_rows = rows if t_spec == spec else traces(target, seqs, starts, t_spec, batch_size, recorded)
        out.append(Candidate(AS_TRAINED, "as trained: the training features and draft forward",
                             simulate_all(t_draft, t_rows, num_steps, None, batch_size)))  # fmt: skip
    if progress is not None:
        progress("fault signatures", len(out), total)
    for fc in CLASSES:
        if fc.proposal is not None:  # at temperature 0 the proposal is the greedy chain: no fault to simulate
            continue
        if fc.window:  # no perturbation: the modelled passes, judged for their dead tail (attribution)
            out.append(Candidate(fc.name, fc.title, out[0].accepted, fc))
        else:
            out.append(Candidate(fc.name, fc.title, simulate_all(served, rows, num_steps, fc, batch_size), fc))
        if progress is not None:
            progress("fault signatures", len(out), total)
    seen: dict[str, Candidate] = {}
    for c in out:  # one prediction under several names where the passes are the same, pass for pass
        first = seen.setdefault(repr(c.accepted), c)
        if first is not c:
            c.accepted = first.accepted  # the ranking counts one prediction once (attribute._key)
            if not (c.fault is not None and c.fault.window):
                c.same_as = first.name
    return out


def sampled_candidates(
    target: Target,
    seqs: list[list[int]],
    starts: list[int],
    modelled: tuple[FeatureSpec, Eagle3Draft],
    num_steps: int,
    temperature: float,
) -> list[Candidate]:
    """At temperature > 0: as trained (the draft samples from its distribution) and the argmax proposal, each pass's
    expected figures along one seeded sampled trajectory per prompt (sampled.py). The greedy loop's classes are not
    predicted here: their signatures are simulated on the target's greedy continuation."""
    from .sampled import expected_passes, target_forward

    spec, draft = modelled
    fwd = target_forward(target, spec, temperature)
    runs = [expected_passes(fwd, draft, s[: starts[i] + 1], len(s), num_steps, temperature) for i, s in enumerate(seqs)]
    fc = next(c for c in CLASSES if c.proposal == "argmax")
    return [
        Candidate(AS_TRAINED, f"as trained: the draft samples its proposal at temperature {temperature:g}",
                  [r.accepted for r in runs], reach=[r.sampled for r in runs]),
        Candidate(fc.name, fc.title, [list(r.accepted) for r in runs], fc, reach=[r.argmax for r in runs]),
    ]  # fmt: skip


@dataclass
class LiveAttribution:
    """The fault signatures of one run against the live figures: the ranking and its finding."""

    ranking: Ranking | None
    findings: list[Finding]
    notes: list[str]
    measured: Measured | list[BatchProfile]  # one profile, or one per batch size

    def to_dict(self) -> dict[str, Any]:
        m = self.measured
        return {
            "measured": m.to_dict() if not isinstance(m, list) else {"per_batch": [p.to_dict() for p in m]},
            "ranking": self.ranking.to_dict() if self.ranking is not None else None,
            "notes": self.notes,
        }


def attribute_live(
    setup: Setup, rep: Replay, plan: Plan, measured: Measured | list[BatchProfile], progress: Progress | None = None
) -> LiveAttribution:
    """Every candidate simulated on the replayed prompts at the server's K, ranked against ``measured`` (one profile,
    or one per batch size: ranked jointly, batches.py)."""
    from ..attribution.plan import SERVING, TRAINING
    from .findings import ranking_finding

    opts = rep.opts
    first = measured[0].measured if isinstance(measured, list) else measured
    K = first.num_spec_tokens or opts.num_steps
    notes = [f"fault signatures simulated at the server's {K} draft tokens a pass" if first.num_spec_tokens else
             f"fault signatures simulated at --num-steps {K} (the server's counters do not give its K)"]  # fmt: skip
    T = first.temperature
    why = None
    if opts.continuation != "greedy":
        why = "they follow the target's greedy continuation (--continuation greedy)"
    elif opts.topk > 1:
        why = "they simulate a chain (top-k 1)"
    elif SERVING not in plan.paths:
        why = "the engine feeds the draft no measurable features"
    if why is not None:
        return LiveAttribution(None, [], [f"fault signatures not simulated: {why}"], measured)
    modelled = (plan.paths[SERVING], plan.drafts[SERVING], setup.serving.label)
    trained = (plan.paths[TRAINING], plan.drafts[TRAINING]) if TRAINING in plan.paths else None
    if T > 0:
        notes.append(f"at the live profile's temperature {T:g}: as trained (a sampled proposal) against the argmax "
                     "proposal; the greedy loop's fault classes are simulated at temperature 0 only")  # fmt: skip
        cands = sampled_candidates(setup.target, rep.seqs, rep.starts, modelled[:2], K, T)
    else:
        cands = candidates(setup.target, rep.seqs, rep.starts, modelled, trained, K, opts.batch_size, progress, rep.recorded)
    if isinstance(measured, list):
        from .batches import rank_batches

        r = rank_batches(cands, measured, K, cands[0])  # cands[0]: the modelled prediction, whatever its name
    else:
        r = rank(cands, measured, K)
    notes += r.notes
    return LiveAttribution(r, [ranking_finding(r, measured, setup.serving.label)], notes, measured)


def diagnose_live(
    setup: Setup,
    opts: AcceptanceOptions,
    measured: Measured | list[BatchProfile],
    *,
    prompts_path: str | None,
    train_data: str | None,
    progress: Progress,
    serve: Any = None,
) -> tuple[Diagnosis, LiveAttribution]:
    """diagnose's measurement, then the fault signatures on its replay, ranked against the live figures; the
    ranking's finding joins the diagnosis's. ``serve``: the launch command, where one was given."""
    from ..attribution.measure import measure_gap

    got: list[LiveAttribution] = []

    def then(rep: Replay, plan: Plan, d: Diagnosis) -> None:
        live = attribute_live(setup, rep, plan, measured, progress)
        d.findings.extend(live.findings)
        d.notes.extend(live.notes)
        got.append(live)

    d, _ = measure_gap(setup, opts, prompts_path=prompts_path, train_data=train_data, progress=progress, then=then,
                       serve=serve)  # fmt: skip
    return d, got[0]
