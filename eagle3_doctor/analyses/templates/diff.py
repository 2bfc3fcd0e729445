"""The same conversation rendered the training way and the serving way, diffed token by token, and each
kind of difference named as a finding with its fix (TPL001-TPL007)."""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...core.findings import REQUEST, SERVER_COMMAND, Finding, Fix
from ...io.conversations import Conversation
from .chat_template import Rendered, Template, prompt_view, region_of, render


@dataclass
class DiffSpan:
    kind: str  # bos, system, generation_prompt, whitespace, thinking, tools, layout
    region: str
    train_at: int
    serve_at: int
    train_tokens: list[str]
    serve_tokens: list[str]
    train_text: str = ""  # the whole differing stretch, decoded (empty: nothing on that side)
    serve_text: str = ""


@dataclass
class ConvDiff:
    where: str
    identical: bool
    train_len: int
    serve_len: int
    spans: list[DiffSpan]


def _tok_strs(tokenizer: Any, ids: Sequence[int], limit: int = 6) -> list[str]:
    out = [tokenizer.decode([i]) for i in ids[:limit]]
    if len(ids) > limit:
        out.append(f"... +{len(ids) - limit}")
    return out


def _snippet(tokenizer: Any, ids: Sequence[int], limit: int = 60) -> str:
    text = tokenizer.decode(list(ids))
    return text if len(text) <= limit else text[:limit] + "..."


def _classify(tokenizer: Any, tr: Rendered, sv: Rendered, a: tuple[int, int], b: tuple[int, int]) -> str:
    ta, sa = tr.ids[a[0] : a[1]], sv.ids[b[0] : b[1]]
    bos = tokenizer.bos_token_id
    if bos is not None and (bos in ta or bos in sa) and min(a[0], b[0]) <= 1:
        return "bos"
    t_text, s_text = tokenizer.decode(ta), tokenizer.decode(sa)
    if t_text.strip() == s_text.strip():
        return "whitespace"
    low = (t_text + " " + s_text).lower()
    if "think" in low:
        return "thinking"
    if "tool" in low:
        return "tools"
    reg = region_of(tr, a[0]) if a[0] < len(tr.ids) else region_of(sv, b[0])
    sreg = region_of(sv, b[0]) if b[0] < len(sv.ids) else reg
    if reg.startswith("system") or sreg.startswith("system") or ("system" in t_text.lower()) != ("system" in s_text.lower()):
        return "system"
    if reg in ("generation prompt", "end of prompt"):
        return "generation_prompt"
    return "layout"


def diff_conversation(tokenizer: Any, train: Template, serve: Template, conv: Conversation) -> ConvDiff:
    view = prompt_view(conv)
    tr, sv = render(tokenizer, train, view), render(tokenizer, serve, view)
    if tr.ids == sv.ids:
        return ConvDiff(conv.where, True, len(tr.ids), len(sv.ids), [])
    sm = difflib.SequenceMatcher(None, tr.ids, sv.ids, autojunk=False)
    spans = []
    for op, a0, a1, b0, b1 in sm.get_opcodes():
        if op == "equal":
            continue
        kind = _classify(tokenizer, tr, sv, (a0, a1), (b0, b1))
        region = region_of(tr, a0) if a0 < len(tr.ids) else region_of(sv, b0)
        # show a little of both sides even for pure insertions: the neighbour locates the gap
        spans.append(
            DiffSpan(
                kind,
                region,
                a0,
                b0,
                _tok_strs(tokenizer, tr.ids[a0 : max(a1, a0 + 1)]),
                _tok_strs(tokenizer, sv.ids[b0 : max(b1, b0 + 1)]),
                _snippet(tokenizer, tr.ids[a0:a1]),
                _snippet(tokenizer, sv.ids[b0:b1]),
            )
        )
    return ConvDiff(conv.where, False, len(tr.ids), len(sv.ids), spans)


KIND_CODE = {
    "layout": "TPL001",
    "bos": "TPL002",
    "system": "TPL003",
    "generation_prompt": "TPL004",
    "whitespace": "TPL005",
    "thinking": "TPL006",
    "tools": "TPL007",
}


KIND_TITLE = {
    "layout": "the serving template renders role tags / turn layout differently from training",
    "bos": "BOS handling differs: one side starts with a BOS the other lacks (or has it twice)",
    "system": "a system prompt is present on one side only",
    "generation_prompt": "the generation prompt (the assistant header the draft continues from) differs",
    "whitespace": "the renderings differ only in whitespace",
    "thinking": "the thinking section is rendered on one side only",
    "tools": "the tool section differs",
}


def server_template_fix(train: Template, write_hint: str) -> Fix:
    if train.path:
        return Fix(
            f"launch the server with --chat-template {train.path} (SGLang and vLLM both take the flag), "
            "the template the draft was trained on",
            file=SERVER_COMMAND,
            key="--chat-template",
            value=str(train.path),
            snippet=f"--chat-template {train.path}",
        )
    return Fix(
        f"write the training template to a file ({write_hint}) and launch the server with --chat-template FILE (SGLang and vLLM)",
        file=SERVER_COMMAND,
        key="--chat-template",
        snippet="--chat-template FILE",
    )


def written_template_fix(path: str) -> Fix:
    """The fix once `template-diff --write-template PATH` has written the training template there."""
    return Fix(
        f"launch the server with --chat-template {path} (SGLang and vLLM), the training template written there",
        file=SERVER_COMMAND,
        key="--chat-template",
        value=path,
        snippet=f"--chat-template {path}",
    )


def _fix_for(kind: str, train: Template, serve: Template, example: ConvDiff, write_hint: str) -> str | Fix:
    if kind == "system" and train.system_prompt is not None and serve.system_prompt is None:
        msg = {"role": "system", "content": train.system_prompt}
        return Fix(
            f"the training recipe inserted the system prompt {train.system_prompt!r} into every conversation "
            f"without one: send it as the first message of every request "
            f'({{"role": "system", "content": {json.dumps(train.system_prompt)}}}), or retrain without it',
            file=REQUEST,
            key="messages[0]",
            value=msg,
            snippet=json.dumps(msg),
        )
    if kind == "bos" and train.add_special_tokens != serve.add_special_tokens:
        return (
            "the training side tokenized the rendered text with add_special_tokens="
            f"{train.add_special_tokens}: retrain tokenizing with add_special_tokens=False (the template already "
            "places BOS), as SpecForge's parser does"
        )
    if kind == "thinking":
        kw = {k: v for k, v in train.kwargs.items()}
        if kw:
            return Fix(
                f'send "chat_template_kwargs": {json.dumps(kw)} in every request (the values training rendered with), '
                "or " + server_template_fix(train, write_hint),
                file=REQUEST,
                key="chat_template_kwargs",
                value=kw,
                snippet=f'"chat_template_kwargs": {json.dumps(kw)}',
            )
    return server_template_fix(train, write_hint)


def diff_findings(
    tokenizer: Any,
    train: Template,
    serve: Template,
    diffs: list[ConvDiff],
    write_hint: str = "eagle3-doctor template-diff ... --write-template train.jinja",
) -> list[Finding]:
    """One finding per kind of difference, naming the first differing tokens of the first conversation
    that shows it, and how many conversations show it."""
    out: list[Finding] = []
    total = len(diffs)
    by_kind: dict[str, list[tuple[ConvDiff, DiffSpan]]] = {}
    for d in diffs:
        seen: set[str] = set()
        for s in d.spans:
            if s.kind not in seen:
                by_kind.setdefault(s.kind, []).append((d, s))
                seen.add(s.kind)
    for kind in KIND_CODE:
        hits = by_kind.get(kind)
        if not hits:
            continue
        d, s = hits[0]
        regions = sorted({sp.region.split(" (")[0] for dd, _ in hits for sp in dd.spans if sp.kind == kind})
        ev = [
            f"{len(hits)} of {total} conversation(s); first at {d.where}",
            f"first difference in the {s.region}: training token {s.train_at} {s.train_tokens} "
            f"vs serving token {s.serve_at} {s.serve_tokens}",
            f"differing text: training {s.train_text!r} vs serving {s.serve_text!r}",
            f"regions affected: {', '.join(regions)}",
            f"prompt length: training {d.train_len} tokens, serving {d.serve_len}",
        ]
        out.append(
            Finding(
                KIND_CODE[kind],
                f"{KIND_TITLE[kind]} ({len(hits)} of {total} prompts)",
                ev,
                _fix_for(kind, train, serve, d, write_hint),
                data={"count": len(hits), "total": total, "first": s.__dict__, "where": d.where},
            )
        )
    return out
