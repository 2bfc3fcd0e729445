"""The terminal form of template-diff's results: what each template renders and the acceptance by format."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .render import render_findings

if TYPE_CHECKING:
    from ..analyses.templates.by_format import FormatComparison
    from ..analyses.templates.template_diff import TemplateDiffResult


def render_template_diff(console: Any, res: TemplateDiffResult) -> None:
    console.print(f"target: {res.target}", markup=False, highlight=False)
    console.print(
        f"training template: {res.train.source}"
        + (f"; system prompt {res.train.system_prompt!r} when none is given" if res.train.system_prompt is not None else "")
        + ("; tokenized with add_special_tokens=True" if res.train.add_special_tokens else ""),
        markup=False,
        highlight=False,
    )
    console.print(f"serving template:  {res.serve.source}", markup=False, highlight=False)
    for n in res.notes:
        console.print(f"note: {n}", markup=False, highlight=False)
    if res.data_report:
        d = res.data_report
        line = f"training data {d['path']} ({', '.join(d['layouts'])}): {d['conversations']} conversation(s)"
        if d["conversations"]:
            line += (
                f", {d['with_system_prompt']} with a system prompt ({100 * d['share_with_system_prompt']:.0f}%), "
                f"{d['average_user_turns']:.2f} user turns on average, {d['with_tools']} with tools"
            )
        if d["tokenized_rows"]:
            line += f"; {d['tokenized_rows']} tokenized row(s)"
        console.print(line, markup=False, highlight=False)
        lm = d.get("loss_mask")
        if lm and lm["with_loss_mask"]:
            console.print(
                f"loss mask: {100 * lm['trained_share']:.1f}% of tokens trained; trained tokens by role "
                f"{lm['trained_tokens_by_role']}",
                markup=False,
                highlight=False,
            )
    if res.tokenizer_report:
        t = res.tokenizer_report
        console.print(
            f"tokenizers: target vocab {t['target']['vocab_size']} (hash {t['target']['vocab_hash']}), training "
            f"{t['training']['vocab_size']} (hash {t['training']['vocab_hash']})",
            markup=False,
            highlight=False,
        )
    console.print(f"{res.identical} of {res.conversations} prompt(s) render to identical tokens", markup=False, highlight=False)
    console.print()
    render_findings(console, res.findings, "the serving template renders every prompt exactly as training did")


def render_format_table(console: Any, cmp: FormatComparison) -> None:
    from rich.table import Table

    t = cmp.table
    tab = Table(title=f"acceptance by prompt format ({t['prompts']} prompts, {t['identical_prompts']} render identically)")
    for col in ("metric", "training format", "serving format", "serving - training (95% CI)"):
        tab.add_column(col)
    tr, sv = t["training_format"], t["serving_format"]
    mal, s1 = t["mean_acceptance_length_diff"], t["step1_accuracy_diff"]

    def ci(d: dict[str, float] | None) -> str:
        return "-" if d is None else f"{d['diff']:+.3f} ({d['lo']:+.3f} .. {d['hi']:+.3f})"

    tab.add_row("mean acceptance length", f"{tr['mean_acceptance_length']:.3f}", f"{sv['mean_acceptance_length']:.3f}", ci(mal))
    tab.add_row("step-1 accuracy", f"{tr['acc_k'][0]:.3f}", f"{sv['acc_k'][0]:.3f}", ci(s1))
    for k, (a, b) in enumerate(zip(tr["per_position_rate"] or [], sv["per_position_rate"] or [])):
        tab.add_row(f"acceptance at position {k + 1}", f"{a:.3f}", f"{b:.3f}", f"{b - a:+.3f}")
    console.print(tab)
