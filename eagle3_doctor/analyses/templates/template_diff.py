"""template-diff: the command's result, and the run that renders every conversation both ways and checks
the tokenizer and the training data beside it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.errors import BadInput
from ...core.findings import Finding
from ...io.conversations import Conversation, load_dataset, load_requests
from .chat_template import Template, load_template
from .diff import ConvDiff, diff_conversation, diff_findings
from .tokenizers import load_tokenizer, tokenizer_findings
from .training_data import data_report, loss_mask_findings, loss_mask_report

SCHEMA = "eagle3-doctor/template-diff/1"  # schemas/template-diff.v1.schema.json


@dataclass
class TemplateDiffResult:
    target: str
    train: Template
    serve: Template
    conversations: int
    identical: int
    diffs: list[ConvDiff]
    findings: list[Finding]
    data_report: dict[str, Any] | None = None
    tokenizer_report: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        def tpl(t: Template) -> dict[str, Any]:
            return {
                "source": t.source,
                "path": t.path,
                "system_prompt": t.system_prompt,
                "add_special_tokens": t.add_special_tokens,
                "kwargs": t.kwargs,
            }

        return {
            "schema": SCHEMA,
            "target": self.target,
            "train_template": tpl(self.train),
            "serve_template": tpl(self.serve),
            "conversations": self.conversations,
            "identical": self.identical,
            "diffs": [
                {
                    "where": d.where,
                    "identical": d.identical,
                    "train_len": d.train_len,
                    "serve_len": d.serve_len,
                    "spans": [s.__dict__ for s in d.spans],
                }
                for d in self.diffs
            ],
            "findings": [f.to_dict() for f in self.findings],
            "data_report": self.data_report,
            "tokenizer_report": self.tokenizer_report,
            "notes": self.notes,
        }


def parse_kwargs(text: str | None, opt: str) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        v = json.loads(text)
    except json.JSONDecodeError as e:
        raise BadInput(f"{opt} is not valid JSON ({e.msg})", f"write e.g. {opt} '{{\"enable_thinking\": false}}'") from None
    if not isinstance(v, dict):
        raise BadInput(f"{opt} must be a JSON object", f"write e.g. {opt} '{{\"enable_thinking\": false}}'")
    return v


def _conversations(
    requests: str | None, prompts: str | None, ds: Any, train_data: str | None, limit: int | None
) -> tuple[list[Conversation], list[str]]:
    """The conversations to render both ways: the server's requests, else the prompts, else the training data's."""
    convs: list[Conversation] = []
    notes: list[str] = []
    if requests:
        convs = load_requests(requests)
        notes.append(f"conversations: {len(convs)} serving request(s) from {requests}")
    elif prompts:
        convs = load_dataset(prompts, "prompts file").conversations
        notes.append(f"conversations: {len(convs)} from {prompts}")
    elif ds is not None and ds.conversations:
        convs = ds.conversations
        notes.append(f"conversations: {len(convs)} from the training data {train_data}, each cut before its last assistant turn")
    return (convs[:limit] if limit else convs), notes


def template_diff(
    target: str,
    *,
    train_template: str | None = None,
    serve_template: str | None = None,
    train_system_prompt: str | None = None,
    train_add_special_tokens: bool = False,
    train_kwargs: dict[str, Any] | None = None,
    serve_kwargs: dict[str, Any] | None = None,
    train_data: str | None = None,
    requests: str | None = None,
    prompts: str | None = None,
    limit: int | None = None,
    train_tokenizer: str | None = None,
) -> TemplateDiffResult:
    """Render the same conversations the training way and the serving way; diff token by token.
    train_tokenizer: the tokenizer the draft's data was made with (compared with the target's)."""
    tok = load_tokenizer(target)
    train = load_template(
        train_template,
        target,
        tok,
        side="train",
        system_prompt=train_system_prompt,
        add_special_tokens=train_add_special_tokens,
        kwargs=train_kwargs,
    )
    serve = load_template(serve_template, target, tok, side="serve", kwargs=serve_kwargs)
    ds = load_dataset(train_data) if train_data else None
    convs, notes = _conversations(requests, prompts, ds, train_data, limit)
    tok_rep, drep = None, None
    pre: list[Finding] = []
    if (
        train_tokenizer is None
        and train_template
        and Path(train_template).is_dir()
        and (Path(train_template) / "tokenizer_config.json").is_file()
    ):
        train_tokenizer = train_template  # the template came with a tokenizer: compare that one too
    if train_tokenizer:
        tok_rep, tf = tokenizer_findings(tok, load_tokenizer(train_tokenizer, "--train-tokenizer"), train_tokenizer)
        pre += tf
    if ds is not None:
        drep = data_report(ds)
        if ds.tokenized:
            lm = loss_mask_report(tok, train, ds.tokenized)
            drep["loss_mask"] = lm
            pre += loss_mask_findings(lm, str(ds.path))
    if not convs and (tok_rep is not None or (ds is not None and ds.tokenized)):
        notes.append("no conversations with messages: tokenizer and data checks only")
        return TemplateDiffResult(target, train, serve, 0, 0, [], pre, drep, tok_rep, notes)
    if not convs:
        raise BadInput("no conversations to render", "pass --requests FILE, --prompts FILE or --train-data FILE with messages")
    diffs = [diff_conversation(tok, train, serve, c) for c in convs]
    findings = pre + diff_findings(tok, train, serve, diffs)
    return TemplateDiffResult(
        target, train, serve, len(diffs), sum(d.identical for d in diffs), diffs, findings, drep, tok_rep, notes
    )
