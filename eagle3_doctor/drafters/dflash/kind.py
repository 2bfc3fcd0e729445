"""DFlash drafts: a block of slots drafted in one forward over the draft's own taps; each engine release
decides which taps it feeds (draft/dflash/taps.py, executed per release)."""

from __future__ import annotations

from typing import Any, Optional

from ..kind import Command, Kind, Outcome
from ..parallel import MEASURE, agrees, served_figures, target_and_prompts
from ..run import Run

_RELEASE = frozenset({"engine_version"})  # which taps the release feeds (draft/dflash/taps.py, executed per release)
_OK = "the engine feeds the DFlash draft the taps it was trained on"
# --layer-ids: what the user says the server feeds, read through the release as if the config held those ids
_STATED = frozenset({"layer_ids"})
# --num-draft-tokens: the block the server drafts, anchor included (SGLang's --speculative-num-draft-tokens)
_BLOCK = frozenset({"num_draft_tokens"})


def served_block(run: Run) -> Any:
    """The block the engine drafts (an analysis.ServedBlock): --num-draft-tokens, else the launch's, resolved as the
    release does (SGLang: --speculative-dflash-block-size, --speculative-num-draft-tokens, the draft's config;
    vLLM: num_speculative_tokens masks after the anchor) where it serves DFlash; None where neither names one (the
    draft's own)."""
    from ...core.errors import BadInput
    from .analysis import VLLM_BLOCK_KEY, ServedBlock

    n = run.opt("num_draft_tokens")
    sc = run.serve
    if n is not None:
        got = ServedBlock(n, f"--num-draft-tokens {n}")
    # under another algorithm the draft tokens are that algorithm's budget, not a DFlash block
    elif sc is not None and sc.num_draft_tokens and _serves_dflash(sc):
        n = sc.num_draft_tokens
        if sc.engine == "vllm":
            got = ServedBlock(n, f"--speculative-config num_speculative_tokens {n - 1}: the anchor and {n - 1} masks",
                              VLLM_BLOCK_KEY)  # fmt: skip
        else:
            src = sc.sources.get("num_draft_tokens", "the launch command")
            got = ServedBlock(n, src if not src.startswith("--") else f"{src} {n}", src if src.startswith("--") else None)
    else:
        return None
    if got.size < 2:
        raise BadInput(
            f"a DFlash block of {got.size} ({got.source}) drafts nothing: the block holds the anchor and the masks",
            "serve blocks of 2 or more (the draft's config names the block it was trained on)",
        )
    return got


def _serves_dflash(sc: Any) -> bool:
    """The launch names DFlash's algorithm: SGLang's DFLASH, vLLM's method "dflash" (engines/algorithm_names.py)."""
    from ...engines.algorithm_names import serves

    return sc.algorithm is not None and serves(sc.engine, "dflash", str(sc.algorithm))


def detect(cfg: dict[str, Any], _names: list[str]) -> Optional[str]:
    from ...draft.dflash.taps import is_dflash

    return "a DFlash config (dflash_config, DFlashDraftModel or speculators_model_type dflash)" if is_dflash(cfg) else None


def preflight(cfg: dict[str, Any], layer: dict[str, Any], weights: dict[str, Any], where: str) -> None:
    from ...io.checks import check_dflash_config, check_sizes_against_weights

    check_dflash_config(cfg, where, preflight=True)  # the block it drafts, before torch allocates one
    # no finding (as EAGLE-3's DRF012) names a size the weights contradict: its modules would be allocated at the
    # config's size before the load refused
    check_sizes_against_weights(layer, weights, where)


def _outcome(res: Any, show: Any, ok: str, level: str = "error", **kw: Any) -> Outcome:
    from ...report.render import render_findings

    def render(con: Any) -> None:
        show(con, res)
        render_findings(con, res.findings, ok)

    return Outcome(res.findings, res.to_dict, render, level=level, **kw)


def inspect(run: Run) -> Outcome:
    from .analysis import inspect_dflash
    from .render import render_dflash_inspect

    assert run.draft is not None
    checks = inspect_dflash(run.target, run.draft, run.engine, engine_version=run.release, block=served_block(run))
    return _outcome(checks, render_dflash_inspect, _OK, "warning", trust_remote_code=False)


def compare_hidden(run: Run) -> Outcome:
    from .levers import dflash_compare
    from .render import render_dflash_compare

    block = served_block(run)
    tgt, prompts = target_and_prompts(run)
    assert run.draft is not None
    with run.progress():
        res = dflash_compare(tgt, run.draft, run.engine, prompts, engine_version=run.release, layer_ids=run.opt("layer_ids"),
                             block=block)  # fmt: skip
    return _outcome(res, render_dflash_compare, _OK, "warning")


def acceptance(run: Run) -> Outcome:
    from .measure import dflash_acceptance
    from .render import render_dflash_acceptance

    block = served_block(run)  # refused before the target loads
    tgt, prompts = target_and_prompts(run)
    assert run.draft is not None
    with run.progress() as cb:
        res = dflash_acceptance(
            tgt,
            run.draft,
            run.engine,
            prompts,
            run.opt("max_new_tokens"),
            cb,
            engine_version=run.release,
            layer_ids=run.opt("layer_ids"),
            block=block,
        )
    path = res.served or res.trained
    served = served_figures(path.mean_acceptance_length, path.accepted, path.block - 1)
    return _outcome(res, render_dflash_acceptance, _OK, served=served, agrees=agrees(res.reference))


def diagnose(run: Run) -> Outcome:
    from .levers import dflash_diagnose
    from .render import render_dflash_diagnosis

    block = served_block(run)
    tgt, prompts = target_and_prompts(run)
    assert run.draft is not None
    with run.progress() as cb:
        res = dflash_diagnose(
            tgt,
            run.draft,
            run.engine,
            prompts,
            run.opt("max_new_tokens"),
            cb,
            engine_version=run.release,
            layer_ids=run.opt("layer_ids"),
            block=block,
        )
    run.amend_verdict(res)
    return _outcome(res, render_dflash_diagnosis, _OK)


def fix(run: Run) -> Outcome:
    from .levers import dflash_fix
    from .render import render_dflash_fix

    block = served_block(run)
    tgt, prompts = target_and_prompts(run)
    assert run.draft is not None
    with run.progress() as cb:
        res = dflash_fix(tgt, run.draft, run.engine, prompts, run.opt("max_new_tokens"), run.opt("out"), cb,
                         engine_version=run.release, block=block)  # fmt: skip
    return _outcome(
        res, render_dflash_fix, "the copy is fed the taps it was trained on", agrees=agrees(getattr(res, "reference", None))
    )


KIND = Kind(
    "dflash",
    "DFlash drafts",
    "a DFlash draft",
    detect,
    {
        "inspect": Command(inspect, _RELEASE),
        "compare-hidden": Command(compare_hidden, _RELEASE | _STATED),
        "acceptance": Command(acceptance, _RELEASE | MEASURE | _STATED | _BLOCK),
        "diagnose": Command(diagnose, _RELEASE | _STATED),
        "fix": Command(fix, _RELEASE),
    },
    preflight=preflight,
)
