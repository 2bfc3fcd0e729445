"""The ranking as one finding: RTF001 a fault class, RTF002 the window, RTF003 fault-free, RTF004 undetermined,
RTF005 none fits; each with the live figures, the named prediction's, the fit and the margin to the next."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core.findings import Finding
from .attribute import DECISIVE, Fit, Ranking, not_excluded

if TYPE_CHECKING:
    from ..server_metrics.measured import Measured
    from .batches import BatchProfile


def _live(m: Measured | list[BatchProfile]) -> list[str]:
    if isinstance(m, list):
        return [f"at batch size {p.batch}: {line}" for p in m for line in _live(p.measured)]
    mal = f"{m.mean_acceptance_length:.3f}" + (
        f" [{m.mean_acceptance_length_ci[0]:.3f}, {m.mean_acceptance_length_ci[1]:.3f}]" if m.mean_acceptance_length_ci else ""
    )
    out = [f"live ({m.engine}, {m.source}): mean acceptance length {mal} over {m.passes:g} verify passes"]
    if m.per_position_rate is not None and m.per_position_ci is not None:
        out.append(
            "live per-position rate (Wilson 95%): "
            + ", ".join(
                f"{k + 1}: {r:.3f} [{lo:.3f}, {hi:.3f}]"
                for k, (r, (lo, hi)) in enumerate(zip(m.per_position_rate, m.per_position_ci))
            )
        )
    return out


def _pred(f: Fit) -> str:
    if f.parts is not None:
        return (
            f"{f.candidate.name}: "
            + "; ".join(f"at batch size {b}: {_figures(p)}" for b, p in f.parts)
            + f" (95% over {f.mean.n} prompts); fit chi2 {f.chi2:.1f} on {f.dof} positions"
            + (f" of {len(f.parts)} profiles" if len(f.parts) > 1 else "")
            + f", p {f.p:.3f}"
        )
    return (
        f"{f.candidate.name}: mean acceptance length {f.mean.text()}, per-position rate "
        + ", ".join(f"{k + 1}: {r.text()}" for k, r in enumerate(f.rates))
        + f" (95% over {f.mean.n} prompts); fit chi2 {f.chi2:.1f} on {f.dof} positions, p {f.p:.3f}"
    )


def _figures(f: Fit) -> str:
    return f"mean acceptance length {f.mean.text()}, per-position rate " + ", ".join(
        f"{k + 1}: {r.text()}" for k, r in enumerate(f.rates)
    )


def _runner_up(r: Ranking, named: Fit) -> Fit | None:
    return next((f for f in r.fits if f.applies and f.candidate.accepted is not named.candidate.accepted), None)


def _margin(named: Fit, other: Fit | None) -> str:
    if other is None:
        return "no other prediction to compare"
    return (
        f"margin to the next, {other.candidate.name}: chi2 {other.chi2:.1f} vs {named.chi2:.1f} "
        f"(+{other.chi2 - named.chi2:.1f}; decisive at +{DECISIVE}), its p {other.p:.3f}"
    )


def _separating(r: Ranking) -> str:
    s = r.separating
    if s is None:
        return "no second prediction to separate"
    where = f"batch size {s['batch_size']}, " if "batch_size" in s else ""
    at = f"{where}position {s['position']}: {s['a']} predicts {_iv(s['a_rate'])}, {s['b']} {_iv(s['b_rate'])}"
    if not s["per_position_available"]:
        return (
            at
            + "; the server's counters give no per-position rates: scrape vLLM's per-position counters or SGLang's accept histogram"
        )
    need = s["passes_needed"]
    more = (
        f"about {need} verify passes resolve that gap (the live workload had {s['passes_measured']:g})"
        if need
        else "the two predict the same rate there"
    )
    return f"{at}; {more}"


def _iv(d: dict) -> str:
    return f"{d['point']:.3f} [{d['lo']:.3f}, {d['hi']:.3f}]"


def ranking_finding(r: Ranking, m: Measured | list[BatchProfile], modelled: str) -> Finding:
    """The verdict of ``r`` as its finding (``m``: one live profile, or one per batch size); ``modelled``: the release
    the modelled prediction is for."""
    by = {f.candidate.name: f for f in r.fits}
    table = ["ranking (best first): " + "; ".join(
        f"{f.candidate.name} chi2 {f.chi2:.1f} p {f.p:.3f}" + ("" if f.applies else " (does not apply)") for f in r.fits)]  # fmt: skip
    data = r.to_dict()
    if r.verdict in ("undetermined", "none"):
        s = r.separating or {}
        a, b = s.get("a", "?"), s.get("b", "?")
        ev = _live(m) + [_pred(by[a])] + ([_pred(by[b])] if b in by else []) + table
        if r.verdict == "none":
            return Finding(
                "RTF005",
                f"no prediction fits the live profile (best: {a}, p {by[a].p:.3f} < 0.05); the two closest are {a} and {b}",
                ev + [f"what separates them: {_separating(r)}"],
                "undetermined: replay the server's own prompts with its settings, rerun eagerly and with one request at a "
                "time, and scrape before and after exactly that workload; the figure above decides between the two closest",
                data=data,
            )
        return Finding(
            "RTF004",
            f"undetermined between {a} and {b}: both fit the live profile within the decisive margin",
            ev + [f"what separates them: {_separating(r)}"],
            "undetermined: measure more verify passes of the same prompts (the passes named above) and rerun with both scrapes",
            data=data,
        )
    named = by[r.verdict]
    ev = _live(m) + [_pred(named), _margin(named, _runner_up(r, named))] + table
    fc = named.candidate.fault
    if fc is not None and fc.window:
        return Finding(
            "RTF002",
            f"the live profile is the modelled one: positions {named.useful + 1 if named.useful is not None else '?'}-"
            f"{r.num_steps} of the {r.num_steps} drafted a pass are reached by under 1% of verify passes",
            ev,
            f"draft {named.useful} tokens a pass; {fc.fix}",
            data=data,
        )
    if fc is not None:
        return Finding("RTF001", f"a runtime fault explains the live profile: {fc.title}", ev, fc.fix, data=data)
    keep = not_excluded(r)
    if keep:
        ev.append(
            "not excluded by these counts (within the decisive margin): "
            + "; ".join(f"{f.candidate.name} (predicts {f.mean.text()})" for f in keep)
        )
    where = "as trained" if named.candidate.name == "as trained" else f"as modelled for {modelled}"
    return Finding(
        "RTF003",
        f"the live profile fits the prediction {where}: no runtime fault class explains it better",
        ev,
        "no runtime fault to fix; where the live figure is still below training, the pipeline's levers (DGN001) or the "
        "draft itself say why",
        data=data,
    )
