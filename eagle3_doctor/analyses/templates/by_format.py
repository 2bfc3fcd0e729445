"""Acceptance under both prompt formats: the same conversations rendered the training way and the serving
way, replayed, and compared with paired bootstrap intervals over prompts (TPL008)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...core.errors import BadInput
from ...core.findings import Finding
from ...io.conversations import Conversation
from .chat_template import Template, prompt_view, render
from .diff import diff_conversation, diff_findings, server_template_fix

if TYPE_CHECKING:
    from ..results import AcceptanceRun, PathResult


def paired_bootstrap(
    num_a: Sequence[float],
    den_a: Sequence[float],
    num_b: Sequence[float],
    den_b: Sequence[float],
    *,
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, float]:
    """Interval on ratio_b - ratio_a (ratio = sum(num) / sum(den)), resampling prompts with the same
    indices for both sides (the prompts are paired: one conversation, two renderings). Seeded, so a
    report is reproducible."""
    import numpy as np

    na, da, nb, db = (np.asarray(x, dtype=np.float64) for x in (num_a, den_a, num_b, den_b))
    n = na.size
    point = float(nb.sum() / db.sum() - na.sum() / da.sum())
    if n < 2:
        return {"diff": point, "lo": float("nan"), "hi": float("nan"), "n_prompts": int(n), "n_boot": 0, "level": level}
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    with np.errstate(invalid="ignore", divide="ignore"):
        diffs = nb[idx].sum(1) / db[idx].sum(1) - na[idx].sum(1) / da[idx].sum(1)
    diffs = diffs[np.isfinite(diffs)]
    lo, hi = np.quantile(diffs, [(1 - level) / 2, 1 - (1 - level) / 2])
    return {
        "diff": point,
        "lo": float(lo),
        "hi": float(hi),
        "n_prompts": int(n),
        "n_boot": int(n_boot),
        "level": level,
        "seed": seed,
    }


def render_prompt_ids(tokenizer: Any, tpl: Template, convs: Sequence[Conversation], max_tokens: int | None) -> list[list[int]]:
    out = []
    for c in convs:
        ids = render(tokenizer, tpl, prompt_view(c)).ids
        out.append(ids[:max_tokens] if max_tokens else ids)
    return out


@dataclass
class FormatComparison:
    train: AcceptanceRun  # the prompts rendered the training way
    serve: AcceptanceRun  # the same prompts rendered the serving way
    table: dict[str, Any]
    findings: list[Finding]

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "findings": [f.to_dict() for f in self.findings],
            "training_format_run": self.train.to_dict(),
            "serving_format_run": self.serve.to_dict(),
        }


def _per_prompt(res: PathResult) -> tuple[list[float], list[float], list[float], list[float]]:
    acc = [float(sum(a)) for a in res.accepted_lengths]
    passes = [float(len(a)) for a in res.accepted_lengths]
    s1 = res.step1_counts
    return acc, passes, [float(h) for h, _ in s1], [float(n) for _, n in s1]


def acceptance_by_format(
    setup: Any,
    convs: Sequence[Conversation],
    train: Template,
    serve: Template,
    opts: Any,
    *,
    seed: int = 0,
    n_boot: int = 2000,
    progress: Any = None,
) -> FormatComparison:
    """Replay the same conversations rendered the training way and the serving way through
    :func:`acceptance.measure_acceptance` with ``opts`` (the serving feature path both times, so only the format
    differs) and compare per-position acceptance and step-1 accuracy, with paired bootstrap intervals over prompts."""
    from dataclasses import replace

    from ..acceptance.run import measure_acceptance

    tok = setup.target.tokenizer
    diffs = [diff_conversation(tok, train, serve, c) for c in convs]
    runs = {}
    for side, tpl in (("training", train), ("serving", serve)):
        ids = render_prompt_ids(tok, tpl, convs, opts.max_tokens)
        # convs are already cut to --limit; a static --serve-cmd token tree is not applied to this comparison
        kw = {"progress": progress} if progress is not None else {}
        runs[side] = measure_acceptance(setup, replace(opts, limit=None, token_tree=None), prompt_ids=ids, **kw)
    rt, rs = runs["training"].paths.get("serving"), runs["serving"].paths.get("serving")
    if rt is None or rs is None:
        raise BadInput(
            "the serving feature path is not measurable with this draft", "fix the slot count first (see acceptance notes)"
        )
    at, pt, ht, nt = _per_prompt(rt)
    as_, ps, hs, ns = _per_prompt(rs)
    # mean acceptance length = 1 + accepted / passes: the interval of the difference is that of accepted/passes
    mal = paired_bootstrap(at, pt, as_, ps, n_boot=n_boot, seed=seed)
    s1 = paired_bootstrap(ht, nt, hs, ns, n_boot=n_boot, seed=seed + 1) if ht and hs else None
    table = {
        "prompts": len(convs),
        "identical_prompts": sum(d.identical for d in diffs),
        "training_format": _format_figures(rt),
        "serving_format": _format_figures(rs),
        "mean_acceptance_length_diff": mal,
        "step1_accuracy_diff": s1,
        "template_train": train.source,
        "template_serve": serve.source,
    }
    findings = diff_findings(tok, train, serve, diffs)
    if mal["hi"] < 0:
        fix = next(
            (f.fix for f in findings), server_template_fix(train, "eagle3-doctor template-diff ... --write-template train.jinja")
        )
        findings.append(_format_cost_finding(table, len(convs), fix))
    return FormatComparison(runs["training"], runs["serving"], table, findings)


def _format_figures(path: PathResult) -> dict[str, Any]:
    """One format's row of the comparison: the serving path's figures with prompts in that format."""
    chain = path.chain.to_dict()  # as written: a run without a verify pass has no figures
    return {
        "mean_acceptance_length": chain.get("mean_acceptance_length"),
        "per_position_rate": chain.get("per_position_rate"),
        "acc_k": path.acc_k,
        "tau": path.tau,
    }


def _format_cost_finding(table: dict[str, Any], n_convs: int, fix: str | None) -> Finding:
    """TPL008: the serving format costs acceptance, with both paired intervals over prompts."""
    mal, s1 = table["mean_acceptance_length_diff"], table["step1_accuracy_diff"]
    serving, training = table["serving_format"], table["training_format"]
    ev = [
        f"mean acceptance length: serving format {serving['mean_acceptance_length']:.3f}, "
        f"training format {training['mean_acceptance_length']:.3f}; difference {mal['diff']:+.3f} "
        f"({int(100 * mal['level'])}% CI {mal['lo']:+.3f} .. {mal['hi']:+.3f}, paired bootstrap over {mal['n_prompts']} prompts, seed {mal['seed']})",
    ]
    if s1 is not None:
        ev.append(
            f"step-1 accuracy: serving format {serving['acc_k'][0]:.3f}, training format {training['acc_k'][0]:.3f}; "
            f"difference {s1['diff']:+.3f} (CI {s1['lo']:+.3f} .. {s1['hi']:+.3f})"
        )
    ev.append(f"{table['identical_prompts']} of {n_convs} prompts render identically both ways")
    return Finding(
        "TPL008",
        f"acceptance is significantly lower with prompts in the serving format "
        f"({serving['mean_acceptance_length']:.2f} vs {training['mean_acceptance_length']:.2f} mean acceptance length)",
        ev,
        fix,
        data={"mean_acceptance_length_diff": mal, "step1_accuracy_diff": s1},
    )
