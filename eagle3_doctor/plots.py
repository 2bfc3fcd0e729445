"""Markdown reports with PNG plots. matplotlib is an optional extra (``pip install eagle3-doctor[plots]``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import BadInput


def _plt():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise BadInput("plots need matplotlib", "pip install 'eagle3-doctor[plots]'") from None
    return plt


def _save(fig: Any, path: Path | None) -> bytes:
    """PNG bytes of a figure; also written to ``path`` atomically when one is given."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    _plt().close(fig)
    data = buf.getvalue()
    if path is not None:
        from .safeio import write_output

        write_output(path, data)
    return data


def heatmap_png(matrix: dict[str, Any], path: Path | None, title: str = "feature slot x capture point",
                marks: dict[str, dict[int, str]] | None = None) -> bytes:
    """marks: {"trained"|"configured": {row index: capture point}} drawn as boxes (the cells to compare)."""
    plt = _plt()
    import numpy as np

    rel = np.asarray(matrix["rel_l2"])
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * rel.shape[1] + 3), 0.6 * rel.shape[0] + 2))
    im = ax.imshow(np.minimum(rel, 1.5), cmap="viridis_r", aspect="auto")
    ax.set_xticks(range(len(matrix["cols"])), matrix["cols"], rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(matrix["rows"])), matrix["rows"], fontsize=8)
    for i in range(rel.shape[0]):
        j = int(rel[i].argmin())
        ax.text(j, i, "*", ha="center", va="center", color="red", fontsize=12)
    from matplotlib.patches import Rectangle

    styles = {"trained": ("white", "-", "trained"), "configured": ("red", "--", "configured (served)")}
    shown = set()
    for kind, cells in (marks or {}).items():
        color, ls, label = styles.get(kind, ("white", ":", kind))
        for i, point in cells.items():
            if point in matrix["cols"] and 0 <= i < rel.shape[0]:
                j = matrix["cols"].index(point)
                ax.add_patch(Rectangle((j - 0.45, i - 0.45), 0.9, 0.9, fill=False, edgecolor=color, linestyle=ls,
                                       linewidth=2, label=None if kind in shown else label))
                shown.add(kind)
    if shown:
        ax.legend(loc="upper left", bbox_to_anchor=(1.25, 1.0), fontsize=8)
    fig.colorbar(im, ax=ax, label="relative L2 (lower = closer; * = best)")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def acceptance_png(paths: dict[str, dict[str, Any]], path: Path | None, title: str = "per-position acceptance") -> bytes:
    plt = _plt()
    import numpy as np

    names = list(paths)
    K = max(len(p["chain"].get("per_position_rate", [])) for p in paths.values())
    fig, ax = plt.subplots(figsize=(7, 3.5))
    w = 0.8 / max(len(names), 1)
    for i, n in enumerate(names):
        r = paths[n]["chain"].get("per_position_rate", [])
        ax.bar(np.arange(1, len(r) + 1) + (i - (len(names) - 1) / 2) * w, r, width=w,
               label=f"{n} (mean length {paths[n]['chain'].get('mean_acceptance_length', float('nan')):.2f})")
    ax.set_xlabel("draft position")
    ax.set_ylabel("acceptance rate (vLLM convention)")
    ax.set_xticks(range(1, K + 1))
    ax.set_ylim(0, 1)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def write_compare_report(res: Any, report_dir: str | None, plot: str | None) -> None:
    from .report import findings_markdown
    from .safeio import OutputSet

    marks, title = _compare_marks(res)
    if plot and res.matrix:
        heatmap_png(res.matrix, Path(plot), title, marks)
    if report_dir:
        with OutputSet(report_dir) as out:  # the Markdown and its PNG appear together or not at all
            if res.matrix:
                out.add("heatmap.png", heatmap_png(res.matrix, None, title, marks))
            data = res.to_dict()
            lines = ["# eagle3-doctor compare-hidden", "", f"- target: `{data['target']}` ({data['num_layers']} layers)",
                     f"- serving: {res.serving.label}: {data['serving']['source']}", f"- training: {data['training']['source']}", "",
                     "| slot | trained | served | cos mean | rel L2 mean |", "|---|---|---|---|---|"]
            for s in data["slots"]:
                lines.append(f"| {s['slot']} | {s['trained']} | {s['served']} | {s['cos_mean']:.5f} | {s['rel_mean']:.4f} |")
            lines += ["", "## Findings", "", findings_markdown(res.findings)]
            if res.matrix:
                lines += ["![slot x capture point](heatmap.png)", ""]
            out.add("compare-hidden.md", "\n".join(lines).encode())


def _compare_marks(res: Any) -> tuple[dict[str, dict[int, str]], str]:
    """Which heatmap cells are the trained and the configured capture points, and a title naming both."""
    m = res.matrix or {}
    rows = m.get("rows", [])
    trained = [str(p) for p in (res.train_spec or [])]
    served = [str(p) for p in res.serving.spec]
    marks: dict[str, dict[int, str]] = {"trained": {}, "configured": {}}
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
    title = (f"{res.target}: slot x capture point ({res.serving.label})\n"
             f"trained {', '.join(trained) or '?'} | configured {', '.join(served)}")
    return marks, title


def _row_slot(row: str) -> int | None:
    import re

    m = re.search(r"slot (\d+)", row)
    return int(m.group(1)) if m else None


def _acceptance_title(run: Any) -> str:
    s = run.settings
    tree = f", {s['tree_note']}" if s.get("tree_note") else ""
    return (f"{s['target']} ({s['engine']}, K={s['num_steps']}{tree})\n"
            f"served {', '.join(s['serving_spec'])}" + (f" | trained {', '.join(s['training_spec'])}" if s.get("training_spec") else ""))


def write_acceptance_report(run: Any, report_dir: str | None, plot: str | None) -> None:
    from .report import findings_markdown
    from .safeio import OutputSet

    import textwrap

    title = "\n".join(textwrap.shorten(x, 110) for x in _acceptance_title(run).split("\n"))
    if plot:
        acceptance_png(run.paths, Path(plot), title)
    if report_dir:
        with OutputSet(report_dir) as out:
            out.add("acceptance.png", acceptance_png(run.paths, None, title))
            s = run.settings
            lines = ["# eagle3-doctor acceptance", "", f"- target: `{s['target']}`, engine {s['engine']}, K={s['num_steps']}, "
                     f"{s['sequences']} sequences", "", "| path | mean acceptance length | tau | acc_1 |", "|---|---|---|---|"]
            for n, p in run.paths.items():
                lines.append(f"| {n} | {p['chain'].get('mean_acceptance_length', float('nan')):.3f} | {p['tau']:.3f} | {p['acc_k'][0]:.3f} |")
            from .stats import interval_lines

            for n, p in run.paths.items():
                lines += ["", f"**{n}**", ""] + [f"- {x}" for x in interval_lines(p.get("intervals"))]
            hints = [f"- {n}: {h}" for n, p in run.paths.items() for h in p.get("triage", [])]
            # no hints is not "healthy" when a finding says otherwise: the two must never contradict
            bad = [f.code for f in run.findings if f.severity in ("error", "warning")]
            none_text = (f"No pattern hint; see the findings below ({', '.join(bad)})." if bad
                         else "None: the pattern looks healthy.")
            lines += ["", "![per-position acceptance](acceptance.png)", "", "## Triage hints", "", *(hints or [none_text]),
                      "", "## Findings", "", findings_markdown(run.findings)]
            out.add("acceptance.md", "\n".join(lines).encode())


def write_inspect_report(res: Any, report_dir: str) -> None:
    from .report import findings_markdown
    from .safeio import OutputSet

    with OutputSet(report_dir) as out:
        lines = ["# eagle3-doctor inspect", ""] + [f"- {k}: {v}" for k, v in res.facts] + ["", "## Findings", "", findings_markdown(res.findings)]
        out.add("inspect.md", "\n".join(lines).encode())
