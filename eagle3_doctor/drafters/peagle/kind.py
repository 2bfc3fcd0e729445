"""P-EAGLE drafts: an EAGLE-3 draft with parallel mask slots, run in parallel or as a chain as each vLLM release
reads its config (draft/peagle/served.py, executed per release). compare-hidden is EAGLE-3's: the taps are."""

from __future__ import annotations

from typing import Any, Optional

from ..eagle3.kind import compare_hidden
from ..kind import Command, Kind, Outcome
from ..parallel import MEASURE, agrees, served_figures, target_and_prompts
from ..run import Run

_OK = "the engine runs the P-EAGLE draft as it was trained"
_K = frozenset({"engine_version", "num_steps"})


def detect(cfg: dict[str, Any], names: list[str]) -> Optional[str]:
    from ...draft.peagle.formats import peagle_evidence

    parallel = peagle_evidence(cfg, names)
    return None if parallel is None else f"a P-EAGLE draft: {parallel}"


def _outcome(res: Any, show: Any, ok: str, **kw: Any) -> Outcome:
    from ...report.render import render_findings

    def render(con: Any) -> None:
        show(con, res)
        render_findings(con, res.findings, ok)

    return Outcome(res.findings, res.to_dict, render, **kw)


def _served_k(run: Run) -> Optional[int]:
    """The tokens a pass the launch line asks for (num_speculative_tokens, or --num-steps), else the config's."""
    return run.opt("num_steps") or (run.serve.num_steps if run.serve is not None and run.serve.num_steps else None)


def inspect(run: Run) -> Outcome:
    from .analysis import inspect_peagle
    from .render import render_peagle_inspect

    assert run.draft is not None
    res = inspect_peagle(run.target, run.draft, run.engine, run.release)
    return _outcome(res, render_peagle_inspect, _OK, level="warning", trust_remote_code=False)


def _args(run: Run) -> tuple[Any, str, str, Optional[str], list[list[int]], int]:
    """What every P-EAGLE measurement starts from: the target, the draft, the engine and release, the prompts and
    the tokens to continue them by."""
    tgt, prompts = target_and_prompts(run)
    assert run.draft is not None
    return tgt, run.draft, run.engine, run.release, prompts, run.opt("max_new_tokens")


def acceptance(run: Run) -> Outcome:
    from .analysis import peagle_acceptance
    from .render import render_peagle_acceptance

    args = _args(run)
    with run.progress() as cb:
        res = peagle_acceptance(*args, cb, k=_served_k(run), layer_ids=run.opt("layer_ids"))
    name = "served" if "served" in res.ways else "trained"
    served = served_figures(res.figures[name], res.passes[name], res.ways[name].k)
    return _outcome(res, render_peagle_acceptance, _OK, served=served, agrees=agrees(res.reference))


def diagnose(run: Run) -> Outcome:
    from .levers import peagle_diagnose
    from .render import render_peagle_diagnosis

    args = _args(run)
    with run.progress() as cb:
        res = peagle_diagnose(*args, cb, k=_served_k(run), layer_ids=run.opt("layer_ids"))  # no sequential loop
    run.amend_verdict(res)
    return _outcome(res, render_peagle_diagnosis, _OK)


def fix(run: Run) -> Outcome:
    from .levers import peagle_fix
    from .render import render_peagle_fix

    args = _args(run)
    with run.progress() as cb:
        res = peagle_fix(*args, run.opt("out"), cb, k=_served_k(run))
    ok = all(agrees(x.reference) for x in (res.before, res.after) if x is not None)
    return _outcome(res, render_peagle_fix, "the copy runs as the draft was trained", agrees=ok)


KIND = Kind(
    "peagle",
    "P-EAGLE drafts",
    "a P-EAGLE draft",
    detect,
    {
        "inspect": Command(inspect, frozenset({"engine_version"})),
        "compare-hidden": Command(compare_hidden, None),  # EAGLE-3's: the taps and their paths are
        # --layer-ids: what the server feeds, read as EAGLE-3's are (the taps are EAGLE-3's)
        "acceptance": Command(acceptance, _K | MEASURE | {"layer_ids"}),
        "diagnose": Command(diagnose, _K | {"layer_ids"}),
        "fix": Command(fix, _K),
    },
    draft_config_checked=True,
)
