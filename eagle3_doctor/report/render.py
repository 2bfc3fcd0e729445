"""Rendering: terminal (rich) and Markdown reports (with the PNGs from plots.py). Data in, text out;
nothing here computes, and files are written through io/outputs.py."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..core.findings import Finding, Location, by_severity, display_path
from ..core.taps import format_spec
from .terminal import Column, fitted_tables, print_wrapped, wrap

if TYPE_CHECKING:
    from ..analyses.compare.comparison import CompareResult
    from ..analyses.compare.numeric import Matrix, SlotStats
    from ..analyses.results import AcceptanceRun, PathResult, RunSettings, ScanRow
    from ..core.taps import FeatureSpec

SEV_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
MATRIX_COLUMNS = ("row", "best match", "rel L2", "cos", "runner-up", "rel L2 ", "margin")


def render_findings(console: Console, findings: list[Finding], ok_text: str) -> None:
    if not findings:
        console.print(Text(f"OK  {ok_text}", style="bold green"))
        return
    # broken only between words, each part indented under its label (rustc's layout), so a narrow
    # terminal never cuts a key or an id in two; a JSON value in a fix stays on one line where it fits
    for f in by_severity(findings):
        code = f"{f.severity}[{f.code}]"
        lines = wrap(f"{code}: {f.title}", console.width, rest=" " * (len(code) + 2))
        console.print(Text.assemble((code, SEV_STYLE[f.severity or "info"]), (lines[0][len(code) :], "bold")), soft_wrap=True)
        for line in lines[1:]:
            console.print(Text(line, style="bold"), soft_wrap=True)
        if f.location is not None:
            print_wrapped(console, _where(f.location), " --> ", "     ", "bold blue")
        for line in f.evidence:
            print_wrapped(console, line, "   | ", "   |   ")
        for r in f.data.get("related", []):  # the same root cause, seen by another check (core.findings.by_root_cause)
            print_wrapped(console, f"{r['code']}: {r['title']}", "   = also: ", " " * 11, "bold")
        if f.fix:
            print_wrapped(console, str(f.fix), "   = fix: ", " " * 10, "bold green")
        if f.help:
            print_wrapped(console, f.help, "   = help: ", " " * 11, "bold")
        console.print()


def _where(loc: Location) -> str:
    """A location as rustc and ruff print one: a file below the working directory relative to it, others whole."""
    return str(replace(loc, path=display_path(loc.path))) if loc.path else str(loc)


def _fmt(x: Any, nd: int = 3) -> str:
    if isinstance(x, float):
        return "n/a" if math.isnan(x) else f"{x:.{nd}f}"  # nothing measured there (a continuation shorter than K)
    return str(x)


def render_compare(console: Console, res: CompareResult) -> None:
    # paths and sources are user text: escaped, so a path like run[1]/model is never read as markup
    console.print(f"[bold]target[/bold] {escape(str(res.target))} ({res.num_layers} layers)")
    if res.draft:
        dr = res.draft
        console.print(
            f"[bold]draft[/bold]  {escape(str(dr['path']))}  format {dr['format']} ({escape(str(dr['format_reason']))})"
        )
    console.print(f"[bold]serving[/bold] {escape(str(res.serving.label))}: {escape(str(res.serving.source))}")
    console.print(f"[bold]training[/bold] {escape(str(res.train_source))}")
    for table in _slot_table(console, res.train_spec, res.serving.spec, res.slots):
        console.print(table)
    worst = [(x.slot, x.worst[0]) for x in res.slots if x.worst and x.rel_mean > 0]
    if worst:
        console.print(
            "worst positions: "
            + "; ".join(
                f"slot {i} seq {w['sequence']} pos {w['position']} token {w['token']!r} cos {w['cos']:.4f} rel {w['rel_l2']:.4f}"
                for i, w in worst
            ),
            markup=False,
            highlight=False,
        )
    if res.matrix:
        render_matrix(console, res.matrix)
    if res.dump and res.dump.get("hidden_state"):
        h = res.dump["hidden_state"]
        console.print(
            f"dump hidden_state: rel L2 to final_norm {h['rel_l2_to_final_norm']:.4f} (best match {h['best']})", markup=False
        )
    for note in res.notes:
        console.print(f"note: {note}", style="dim", markup=False)
    console.print(f"{res.n_sequences} sequences, {res.n_tokens} tokens replayed")
    console.print()
    render_findings(console, res.findings, "the serving engine feeds the draft the capture points it was trained on")


def _slot_table(console: Console, trained: FeatureSpec, served: FeatureSpec, slots: list[SlotStats]) -> list[Table]:
    """Slot by slot: what was trained, what is served, how close; mismatched slots in red. On a narrow
    terminal the figures go into a second table that repeats slot, trained and served."""
    cols = ("slot", "trained", "served", "cos mean", "cos min", "cos p5", "rel L2 mean", "rel L2 p95", "max |diff|")
    nd = dict(zip(cols[3:], (5, 5, 5, 4, 4, 4)))
    stats = {x.slot: x for x in slots}
    rows, styles = [], []
    for i in range(max(len(trained), len(served))):
        tr = trained[i] if i < len(trained) else None
        sv = served[i] if i < len(served) else None
        st = stats.get(i)
        vals = (st.cos_mean, st.cos_min, st.cos_p05, st.rel_mean, st.rel_p95, st.maxabs) if st else ()
        shown = {c: _fmt(v, nd[c]) for c, v in zip(cols[3:], vals)}
        rows.append([str(i), str(tr) if tr is not None else "-", str(sv) if sv is not None else "- (not fed)"])
        rows[-1] += [shown.get(c, "-") for c in cols[3:]]
        styles.append("" if tr == sv else "red")
    columns = [Column(c, "left" if c in ("trained", "served") else "right") for c in cols]
    return fitted_tables(console, "feature slots", columns, rows, keys=3, row_styles=styles, show_lines=False)


def render_matrix(console: Console, m: Matrix) -> None:
    columns = [Column(c, "left" if c in ("row", "best match", "runner-up") else "right") for c in MATRIX_COLUMNS]
    rows = [
        [b.row, str(b.best), f"{b.rel_l2:.4f}", f"{b.cos:.4f}", str(b.runner_up), f"{b.runner_up_rel_l2:.4f}", f"{b.margin:.4f}"]
        for b in m.best
    ]
    for table in fitted_tables(console, "best-matching capture point (relative L2, lower is closer)", columns, rows):
        console.print(table)
    cols = [str(c) for c in m.cols]
    short = [c.replace("layer_out[", "L").replace("]", "").replace("final_norm", "fn").replace("embed", "emb") for c in cols]
    grid: list[list[str | Text]] = []
    for r, vals in zip(m.rows, m.rel_l2):
        best = min(range(len(vals)), key=lambda j: vals[j])
        grid.append([r, *[Text(f"{v:.2f}", style="bold green" if j == best else "") for j, v in enumerate(vals)]])
    columns = [Column("row"), *[Column(c, "right") for c in short]]
    for table in fitted_tables(console, "rel L2: rows x capture points", columns, grid, pad_edge=False):
        console.print(table)


def _bar(x: float, width: int = 30) -> str:
    n = 0 if math.isnan(x) else int(round(max(0.0, min(1.0, x)) * width))
    return "#" * n + "." * (width - n)


def render_acceptance(console: Console, run: AcceptanceRun) -> None:
    _acceptance_settings(console, run.settings)
    console.print(_acceptance_table(run))
    _acceptance_per_path(console, run)
    _acceptance_reference(console, run)
    if run.scan:
        _acceptance_scan(console, run.scan)
    for note in run.notes:
        console.print(f"note: {note}", style="dim", markup=False)
    console.print()
    render_findings(console, run.findings, "acceptance under the serving features matches the training features")


def _acceptance_settings(console: Console, s: RunSettings) -> None:
    """What was replayed: target, engine, K, data size, and the two feature sets."""
    console.print(
        f"[bold]target[/bold] {escape(str(s.target))}  [bold]engine[/bold] {escape(str(s.engine))}  K={s.num_steps}  "
        f"continuation={s.continuation}  {s.sequences} sequences / {s.tokens} tokens  {s.dtype} on {s.device}"
    )
    fed = format_spec(s.serving_spec) if s.serving_spec else "as the engine captured them"  # a dump-only run names none
    console.print(f"serving features: {fed}  ({s.serving_source})", markup=False)
    if s.training_spec:
        console.print(f"training features: {format_spec(s.training_spec)}  ({s.training_source})", markup=False)


def _at(values: list[float], k: int) -> str:
    """The k-th figure, or "-" where the list is shorter (no verify pass reached that far)."""
    return _fmt(values[k]) if k < len(values) else "-"


def _acceptance_table(run: AcceptanceRun) -> Table:
    """One column per feature path, one row per metric in each engine's convention."""
    s = run.settings
    t = Table(title="acceptance by feature path")
    # the labels wrap between words and the figures never: on a narrow terminal rich narrows the label
    # column instead of cutting a figure or a word
    t.add_column("metric", min_width=len("(SpecForge)"))
    paths = list(run.paths.values())
    for n in run.paths:
        t.add_column(n, justify="right", no_wrap=True)

    def row(label: str, fn: Callable[[PathResult], str]) -> None:
        t.add_row(label, *[fn(p) for p in paths])

    row("mean acceptance length (vLLM, SGLang accept_len; bonus in)", lambda p: _fmt(p.chain.mean_acceptance_length, 3))
    row("accepted per pass (bonus out)", lambda p: _fmt(p.chain.mean_accepted_without_bonus, 3))
    row("per-request mean acceptance length", lambda p: _fmt(p.per_request_mean_acceptance_length, 3))
    row("draft acceptance rate (vLLM)", lambda p: _fmt(p.chain.draft_acceptance_rate, 3))
    row("accept_rate (SGLang)", lambda p: _fmt(p.chain.sglang_accept_rate, 3))
    row("tau = 1 + sum prod acc_k", lambda p: _fmt(p.tau, 3))
    row("verify passes", lambda p: str(p.chain.passes))
    for k in range(s.num_steps):  # cells built here, not by row(): a lambda would need k bound as a default
        t.add_row(
            f"position {k + 1}: rate (vLLM) | acc_{k + 1} (SpecForge)",
            *[f"{_at(p.chain.per_position_rate, k)} | {_fmt(p.acc_k[k])}" for p in paths],
        )
    if any(p.tree is not None for p in paths):
        tr = s.tree
        what = (
            f"SGLang tree topk {tr.topk}, {tr.num_draft_tokens} tokens"
            if tr is not None and tr.kind == "sglang"
            else f"static tree, {tr.num_draft_tokens} tokens"
            if tr is not None
            else f"tree top-{s.topk}"
        )
        row(f"{what}: mean acceptance length (exact)", lambda p: _fmt(p.tree.mean_acceptance_length if p.tree else math.nan))
        for k in range(s.num_steps):
            t.add_row(
                f"  tree position {k + 1}: rate (vLLM)", *[_at(p.tree.per_position_rate, k) if p.tree else "-" for p in paths]
            )
    if any(p.temperature is not None for p in paths):
        row(
            f"T={s.temperature} ({s.temperature_mode}): expected length",
            lambda p: _fmt(p.temperature.expected_mean_acceptance_length if p.temperature else math.nan),
        )
    return t


def _acceptance_per_path(console: Console, run: AcceptanceRun) -> None:
    """Per feature path: intervals over prompts, per-position bars, triage hints; then the tree note."""
    for n, p in run.paths.items():  # issue 14: the noise over prompts beside every figure a decision rests on
        for i, line in enumerate(p.intervals.lines() if p.intervals else []):
            print_wrapped(console, line, f"{n}: " if i == 0 else "  ", "    ")
    for n, p in run.paths.items():
        console.print(f"[bold]{escape(n)}[/bold] per-position acceptance (vLLM convention)")
        for k, r in enumerate(p.chain.per_position_rate):
            console.print(f"  pos {k + 1} {_bar(r)} {r:.3f}", markup=False, highlight=False)
    for n, p in run.paths.items():
        for hint in p.triage:
            print_wrapped(console, hint, f"hint ({n}): ", "  ")
    if run.settings.tree is not None:
        console.print(f"note: {run.settings.tree.label}", style="dim", markup=False)


def _acceptance_reference(console: Console, run: AcceptanceRun) -> None:
    """Whether the reference sequential (and tree-verify) loops agree with the estimator."""
    if run.reference is None:
        return
    r = run.reference
    verdict = "[green]agrees exactly[/green]" if r.agrees_with_estimator else "[red]DISAGREES[/red]"
    console.print(
        f"reference sequential loop: mean acceptance length {r.chain.mean_acceptance_length:.3f}; "
        f"per-prompt accepted lengths {verdict} with the estimator"
    )
    if r.tree is not None:
        tv = "[green]agrees exactly[/green]" if r.tree.agrees_with_estimator else "[red]DISAGREES[/red]"
        console.print(
            f"reference tree-verify loop: mean acceptance length "
            f"{r.tree.metrics.mean_acceptance_length:.3f}; per-pass accepted depths {tv} "
            "with the tree estimator"
        )


def _acceptance_scan(console: Console, scan: list[ScanRow]) -> None:
    """The capture-point scan's ten best feature sets."""
    st = Table(title="capture-point scan (step-1 accuracy, teacher-forced)")
    st.add_column("rank", no_wrap=True)
    st.add_column("features", min_width=len("layer_out[99],"))  # wraps between capture points
    st.add_column("step-1 acc [95%]", justify="right", no_wrap=True)
    st.add_column("vs configured [95%]", justify="right", no_wrap=True)
    for i, r in enumerate(scan[:10]):
        d = r.diff_to_configured
        vs = "configured" if r.configured else (f"{d.point:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}]" if d else "-")
        lo, hi = r.step1_acc_ci
        st.add_row(str(i + 1), format_spec(r.spec), f"{r.step1_acc:.3f} [{lo:.3f}, {hi:.3f}]", vs)
    console.print(st)


# --------------------------------------------------------------------------- Markdown reports


def findings_markdown(findings: list[Finding]) -> str:
    if not findings:
        return "No findings.\n"
    out = []
    for f in by_severity(findings):
        out.append(f"- **{f.severity} {f.code}**: {f.title}")
        if f.location is not None:
            out.append(f"  - at `{f.location}`")
        for e in f.evidence:
            out.append(f"  - {e}")
        for r in f.data.get("related", []):
            out.append(f"  - also **{r['code']}**: {r['title']}")
        if f.fix:
            out.append(f"  - fix: `{f.fix}`")
        if f.edit is not None and f.edit.snippet:
            out.append(
                f"  - paste into `{f.edit.path or f.edit.file}`:\n\n    ```\n"
                + "\n".join("    " + x for x in f.edit.snippet.splitlines())
                + "\n    ```"
            )
        if f.help:
            out.append(f"  - help: {f.help}")
    return "\n".join(out) + "\n"


def render_gate(console: Console, res: Any) -> None:
    """The gate's checks as a table (failed rows red), the fingerprint verdict, then the findings."""
    t = Table(title=f"gate: {'PASS' if res.passed else 'FAIL'}")
    for col in ("check", "value", "threshold", "result"):
        t.add_column(col, no_wrap=col in ("value", "threshold"))
    for c in res.checks:
        t.add_row(
            c.name,
            "-" if c.value is None else f"{c.value:.4f}",
            "-" if c.threshold is None else f"{c.threshold:.4f}",
            ("pass " if c.passed else "FAIL ") + c.detail,
            style=None if c.passed else "red",
        )
    console.print(t)
    fp = res.fingerprint
    if fp is not None:
        print_wrapped(
            console,
            f"{fp.verdict} ({fp.settings['candidates']} candidates, {fp.seconds:.1f} s; eagle3-doctor fingerprint shows the ranking)",
            "fingerprint: ",
            "  ",
        )
    render_findings(console, res.findings, "no findings")


def render_inspect(console: Console, res: Any) -> None:
    t = Table(title="inspect", show_header=False)
    t.add_column("what", style="bold")
    t.add_column("")
    for k, v in res.facts:
        t.add_row(k, Text(v))
    console.print(t)
    console.print()
    if getattr(res, "forensics", None) is not None:
        render_modules(console, res.forensics.modules)
    render_findings(console, res.findings, "no problems found in the draft checkpoint or config")
    console.print(Text(INSPECT_UNSEEN, style="dim"), soft_wrap=True)


# inspect reads files and runs nothing: what only a forward pass can judge, said wherever it prints its verdict
INSPECT_UNSEEN = (
    "not looked at (inspect runs no forward pass): which capture points the weights fit and what the draft accepts; "
    "run eagle3-doctor diagnose"
)


def render_modules(console: Console, modules: list[Any]) -> None:
    """The draft's tensors by module, each with its verdict (forensics.ModuleRow)."""
    t = Table(title="draft tensors by module")
    for col in ("module", "tensors", "verdict"):
        t.add_column(col)
    for m in modules:
        t.add_row(
            m.name, Text("; ".join(m.tensors)), Text(m.verdict, style="green" if m.verdict.startswith("trained") else "bold")
        )
    console.print(t)
    console.print()


def compare_markdown(res: CompareResult, heatmap: bool) -> str:
    lines = [
        "# eagle3-doctor compare-hidden",
        "",
        f"- target: `{res.target}` ({res.num_layers} layers)",
        f"- serving: {res.serving.label}: {res.serving.source}",
        f"- training: {res.train_source}",
        "",
        "| slot | trained | served | cos mean | rel L2 mean |",
        "|---|---|---|---|---|",
    ]
    for s in res.slots:
        lines.append(f"| {s.slot} | {s.trained_label} | {s.served_label} | {s.cos_mean:.5f} | {s.rel_mean:.4f} |")
    lines += ["", "## Findings", "", findings_markdown(res.findings)]
    if heatmap:
        lines += ["![slot x capture point](heatmap.png)", ""]
    return "\n".join(lines)


def acceptance_markdown(run: AcceptanceRun) -> str:
    s = run.settings
    lines = [
        "# eagle3-doctor acceptance",
        "",
        f"- target: `{s.target}`, engine {s.engine}, K={s.num_steps}, {s.sequences} sequences",
        "",
        "| path | mean acceptance length | tau | acc_1 |",
        "|---|---|---|---|",
    ]
    for n, p in run.paths.items():
        lines.append(f"| {n} | {p.chain.mean_acceptance_length:.3f} | {p.tau:.3f} | {p.step1:.3f} |")
    for n, p in run.paths.items():
        lines += ["", f"**{n}**", ""] + [f"- {x}" for x in (p.intervals.lines() if p.intervals else [])]
    hints = [f"- {n}: {h}" for n, p in run.paths.items() for h in p.triage]
    # no hints is not "healthy" when a finding says otherwise: the two must never contradict
    bad = [f.code for f in run.findings if f.severity in ("error", "warning")]
    none_text = f"No pattern hint; see the findings below ({', '.join(bad)})." if bad else "None: the pattern looks healthy."
    lines += [
        "",
        "![per-position acceptance](acceptance.png)",
        "",
        "## Triage hints",
        "",
        *(hints or [none_text]),
        "",
        "## Findings",
        "",
        findings_markdown(run.findings),
    ]
    return "\n".join(lines)


def inspect_markdown(res: Any) -> str:
    lines = ["# eagle3-doctor inspect", ""] + [f"- {k}: {v}" for k, v in res.facts]
    return "\n".join(lines + ["", "## Findings", "", findings_markdown(res.findings)])


def write_compare_report(res: CompareResult, report_dir: str | None, plot: str | None) -> None:
    """--plot: the heatmap PNG alone; --report: compare-hidden.md with its heatmap, written as one set."""
    from ..io.outputs import OutputSet, write_output
    from . import plots

    marks, title = plots._compare_marks(res)
    if plot and res.matrix:
        write_output(plot, plots.heatmap_png(res.matrix, title, marks))
    if report_dir:
        with OutputSet(report_dir) as out:  # the Markdown and its PNG appear together or not at all
            if res.matrix:
                out.add("heatmap.png", plots.heatmap_png(res.matrix, title, marks))
            out.add("compare-hidden.md", compare_markdown(res, heatmap=res.matrix is not None).encode())


def write_acceptance_report(run: AcceptanceRun, report_dir: str | None, plot: str | None) -> None:
    from ..io.outputs import OutputSet, write_output
    from . import plots

    title = plots._acceptance_title(run)
    if plot:
        write_output(plot, plots.acceptance_png(run.paths, title))
    if report_dir:
        with OutputSet(report_dir) as out:
            out.add("acceptance.png", plots.acceptance_png(run.paths, title))
            out.add("acceptance.md", acceptance_markdown(run).encode())


def write_inspect_report(res: Any, report_dir: str) -> None:
    from ..io.outputs import OutputSet

    with OutputSet(report_dir) as out:
        out.add("inspect.md", inspect_markdown(res).encode())


def diagnosis_markdown(d: Any) -> str:
    """diagnose as a Markdown report: the verdict, the three tables, the findings."""

    out = [
        "# diagnose",
        "",
        f"**Verdict:** {d.verdict}",
        "",
        f"Mean acceptance length over {d.prompts} prompts (95% intervals): serving {d.serving.text(2)}, training "
        f"{d.training.text(2)}, gap {d.gap.text(2)}.",
        "",
        "![levers and module ablation](diagnose.png)",
        "",
        "## Levers: one serving difference set back to training",
        "",
        "| lever | what | acceptance length | recovers |",
        "|---|---|---|---|",
        *(f"| {r.name} | {r.what} | {r.mean_acceptance_length.text(2)} | {r.recovery.text(2)} |" for r in d.levers),
        "",
        f"## Module health: mean-ablated on the {d.base_path} features",
        "",
        "| module | step-1 ablated | costs | verdict |",
        "|---|---|---|---|",
        *(f"| {m.module} | {m.step1.text(3)} | {m.cost.text(3)} | {m.verdict} |" for m in d.modules),
        "",
        "## Step-1 accuracy along the context",
        "",
        "| positions | step-1 | positions measured |",
        "|---|---|---|",
        *(f"| {c.start}-{c.end} | {c.step1.text(3)} | {c.positions} |" for c in d.context),
        "",
        "## Findings",
        "",
        findings_markdown(d.findings),
    ]
    return "\n".join(out)


def write_diagnosis_report(d: Any, report_dir: str) -> None:
    from ..io.outputs import OutputSet
    from . import plots

    with OutputSet(report_dir) as out:
        out.add("diagnose.png", plots.attribution_png(d))
        out.add("diagnose.md", diagnosis_markdown(d).encode())
