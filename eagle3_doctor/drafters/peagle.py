"""P-EAGLE drafts: an EAGLE-3 draft with parallel mask slots, run in parallel or as a chain as each vLLM release
reads its config (draft/peagle/served.py, executed per release). compare-hidden is EAGLE-3's: the taps are."""

from __future__ import annotations

from typing import Any, Optional

from .kind import Command, Kind, Outcome
from .parallel import MEASURE, agrees, served_figures, target_and_prompts
from .run import Run

_OK = "the engine runs the P-EAGLE draft as it was trained"
_K = frozenset({"engine_version", "num_steps"})


def detect(cfg: dict[str, Any], names: list[str]) -> Optional[str]:
    from ..draft.peagle.formats import peagle_evidence

    parallel = peagle_evidence(cfg, names)
    return None if parallel is None else f"a P-EAGLE draft: {parallel}"


def _outcome(res: Any, show: Any, ok: str, **kw: Any) -> Outcome:
    from ..report.render import render_findings

    def render(con: Any) -> None:
        show(con, res)
        render_findings(con, res.findings, ok)

    return Outcome(res.findings, res.to_dict, render, **kw)


def _served_k(run: Run) -> Optional[int]:
    """The tokens a pass the launch line asks for (num_speculative_tokens, or --num-steps), else the config's."""
    return run.opt("num_steps") or (run.serve.num_steps if run.serve is not None and run.serve.num_steps else None)


def inspect(run: Run) -> Outcome:
    from ..analyses.peagle import inspect_peagle
    from ..report.peagle import render_peagle_inspect

    assert run.draft is not None
    res = inspect_peagle(run.target, run.draft, run.engine, run.release)
    return _outcome(res, render_peagle_inspect, _OK, level="warning", trust_remote_code=False)


def _measure(run: Run, what: str) -> Any:
    tgt, prompts = target_and_prompts(run)
    assert run.draft is not None
    args = (tgt, run.draft, run.engine, run.release, prompts, run.opt("max_new_tokens"))
    with run.progress() as cb:
        if what == "acceptance":
            from ..analyses.peagle import peagle_acceptance

            return peagle_acceptance(*args, cb, k=_served_k(run))
        from ..analyses import peagle_levers as lv

        if what == "diagnose":
            return lv.peagle_diagnose(*args, cb, k=_served_k(run))
        return lv.peagle_fix(*args, run.opt("out"), cb, k=_served_k(run))


def acceptance(run: Run) -> Outcome:
    from ..report.peagle import render_peagle_acceptance

    res = _measure(run, "acceptance")
    name = "served" if "served" in res.ways else "trained"
    served = served_figures(res.figures[name], res.passes[name])
    return _outcome(res, render_peagle_acceptance, _OK, served=served, agrees=agrees(res.reference))


def diagnose(run: Run) -> Outcome:
    from ..report.peagle import render_peagle_diagnosis

    res = _measure(run, "diagnose")  # diagnose runs no sequential loop
    return _outcome(res, render_peagle_diagnosis, _OK)


def fix(run: Run) -> Outcome:
    from ..report.peagle import render_peagle_fix

    res = _measure(run, "fix")
    ok = all(agrees(x.reference) for x in (res.before, res.after) if x is not None)
    return _outcome(res, render_peagle_fix, "the copy runs as the draft was trained", agrees=ok)


def _compare_hidden(run: Run) -> Outcome:
    from .eagle3 import compare_hidden

    return compare_hidden(run)


KIND = Kind(
    "peagle",
    "P-EAGLE drafts",
    "a P-EAGLE draft",
    detect,
    {
        "inspect": Command(inspect, frozenset({"engine_version"})),
        "compare-hidden": Command(_compare_hidden, None),
        "acceptance": Command(acceptance, _K | MEASURE),
        "diagnose": Command(diagnose, _K),
        "fix": Command(fix, _K),
    },
    draft_config_checked=True,
)
