"""PNG plots, as bytes: the slot x capture-point heatmap and per-position acceptance. matplotlib is an
optional dependency (the ``plots`` extra). report.py puts them beside its Markdown; io/outputs.py
writes the files."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.errors import BadInput

if TYPE_CHECKING:
    from ..analyses.compare.comparison import CompareResult
    from ..analyses.compare.numeric import Matrix
    from ..analyses.results import AcceptanceRun, PathResult
    from ..core.taps import CapturePoint


def _plt():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise BadInput("plots need matplotlib", "pip install 'matplotlib>=3.7' (the plots extra)") from None
    return plt


def _png(fig: Any) -> bytes:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    _plt().close(fig)
    return buf.getvalue()


def heatmap_png(
    matrix: Matrix, title: str = "feature slot x capture point", marks: dict[str, dict[int, CapturePoint]] | None = None
) -> bytes:
    """marks: {"trained"|"configured": {row index: capture point}} drawn as boxes (the cells to compare)."""
    plt = _plt()
    import numpy as np

    rel = np.asarray(matrix.rel_l2)
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * rel.shape[1] + 3), 0.6 * rel.shape[0] + 2))
    im = ax.imshow(np.minimum(rel, 1.5), cmap="viridis_r", aspect="auto")
    ax.set_xticks(range(len(matrix.cols)), [str(c) for c in matrix.cols], rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(matrix.rows)), matrix.rows, fontsize=8)
    for i in range(rel.shape[0]):
        j = int(rel[i].argmin())
        ax.text(j, i, "*", ha="center", va="center", color="red", fontsize=12)
    from matplotlib.patches import Rectangle

    styles = {"trained": ("white", "-", "trained"), "configured": ("red", "--", "configured (served)")}
    shown = set()
    for kind, cells in (marks or {}).items():
        color, ls, label = styles.get(kind, ("white", ":", kind))
        for i, point in cells.items():
            if point in matrix.cols and 0 <= i < rel.shape[0]:
                j = matrix.cols.index(point)  # type: ignore[arg-type]  # a compare matrix: its cols are capture points
                ax.add_patch(
                    Rectangle(
                        (j - 0.45, i - 0.45),
                        0.9,
                        0.9,
                        fill=False,
                        edgecolor=color,
                        linestyle=ls,
                        linewidth=2,
                        label=None if kind in shown else label,
                    )
                )
                shown.add(kind)
    if shown:
        ax.legend(loc="upper left", bbox_to_anchor=(1.25, 1.0), fontsize=8)
    fig.colorbar(im, ax=ax, label="relative L2 (lower = closer; * = best)")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return _png(fig)


def acceptance_png(paths: dict[str, PathResult], title: str = "per-position acceptance") -> bytes:
    plt = _plt()
    import numpy as np

    names = list(paths)
    K = max(len(p.chain.per_position_rate) for p in paths.values())
    fig, ax = plt.subplots(figsize=(7, 3.5))
    w = 0.8 / max(len(names), 1)
    for i, (n, p) in enumerate(paths.items()):
        r = p.chain.per_position_rate
        ax.bar(
            np.arange(1, len(r) + 1) + (i - (len(names) - 1) / 2) * w,
            r,
            width=w,
            label=f"{n} (mean length {p.chain.mean_acceptance_length:.2f})",
        )
    ax.set_xlabel("draft position")
    ax.set_ylabel("acceptance rate (vLLM convention)")
    ax.set_xticks(range(1, K + 1))
    ax.set_ylim(0, 1)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)


def _compare_marks(res: CompareResult) -> tuple[dict[str, dict[int, CapturePoint]], str]:
    """Which heatmap cells are the trained and the configured capture points, and a title naming both."""
    from ..core.taps import format_spec

    rows = res.matrix.rows if res.matrix is not None else []
    trained, served = list(res.train_spec or []), list(res.serving.spec)
    marks: dict[str, dict[int, CapturePoint]] = {"trained": {}, "configured": {}}
    for i, r in enumerate(rows):
        slot = _row_slot(r)
        if slot is None:
            continue
        if r.startswith("train slot") or r.startswith("dump"):
            if slot < len(trained):
                marks["trained"][i] = trained[slot]
        elif r.startswith("serve slot"):
            if slot < len(served):
                marks["configured"][i] = served[slot]
            if slot < len(trained):
                marks["trained"][i] = trained[slot]
    title = (
        f"{res.target}: slot x capture point ({res.serving.label})\n"
        f"trained {format_spec(trained) or '?'} | configured {format_spec(served)}"
    )
    return marks, title


def _row_slot(row: str) -> int | None:
    import re

    m = re.search(r"slot (\d+)", row)
    return int(m.group(1)) if m else None


def _acceptance_title(run: AcceptanceRun) -> str:
    """Two lines naming the target, engine, K and the served and trained features (shortened to fit)."""
    import textwrap

    from ..core.taps import format_spec

    s = run.settings
    tree = f", {s.tree.label}" if s.tree is not None else ""
    full = f"{s.target} ({s.engine}, K={s.num_steps}{tree})\nserved {format_spec(s.serving_spec)}" + (
        f" | trained {format_spec(s.training_spec)}" if s.training_spec else ""
    )
    return "\n".join(textwrap.shorten(x, 110) for x in full.split("\n"))


def attribution_png(d: Any) -> bytes:
    """diagnose: what each lever recovers (mean acceptance length) and what each module's ablation costs
    (step-1 accuracy), each bar with its 95% interval over prompts as a whisker."""
    plt = _plt()
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    rows = [(r.name, r.recovery) for r in d.levers] or [("no lever", None)]
    for ax, items, title, unit in (
        (a, rows, "levers: recovery when set back to training", "mean acceptance length recovered"),
        (b, [(m.module, m.cost) for m in d.modules], f"module ablation ({d.base_path} features)", "step-1 accuracy lost"),
    ):
        names = [n for n, _ in items]
        pts = [i.point if i is not None else 0.0 for _, i in items]
        err = [[max(0.0, i.point - i.lo) if i else 0 for _, i in items], [max(0.0, i.hi - i.point) if i else 0 for _, i in items]]
        ax.barh(range(len(names)), pts, xerr=err, color="#4c72b0", ecolor="black", capsize=3)
        ax.set_yticks(range(len(names)), names)
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(unit, fontsize=8)
    fig.suptitle(d.verdict[:110] + ("..." if len(d.verdict) > 110 else ""), fontsize=8)
    fig.tight_layout()
    return _png(fig)
