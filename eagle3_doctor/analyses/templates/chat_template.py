"""A chat template on one side (the target's own, a Jinja file, a tokenizer_config.json or a tokenizer
directory), and a conversation rendered through it with transformers' apply_chat_template."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.errors import BadInput
from ...io.conversations import Conversation, read_text
from ...io.safeio import loads_json


@dataclass
class Template:
    text: str
    source: str  # human-readable origin
    path: str | None  # a file a server's --chat-template can take, when one exists
    system_prompt: str | None = None  # recipe-injected system prompt when a conversation has none
    add_special_tokens: bool = False  # tokenizer(text, add_special_tokens=...) after rendering
    kwargs: dict[str, Any] = field(default_factory=dict)  # extra template variables (enable_thinking, ...)


def _template_from_json(path: Path, data: Any) -> str:
    ct = data.get("chat_template") if isinstance(data, dict) else None
    if isinstance(ct, list):  # [{"name": "default", "template": "..."}, ...]
        named = {d.get("name"): d.get("template") for d in ct if isinstance(d, dict)}
        ct = named.get("default")
    if not isinstance(ct, str) or not ct:
        raise BadInput(f"{path} has no chat_template string", "pass the .jinja file or a tokenizer directory that has one")
    return ct


def load_template(
    spec: str | None,
    target_dir: str | None,
    target_tokenizer: Any,
    *,
    side: str,
    system_prompt: str | None = None,
    add_special_tokens: bool = False,
    kwargs: dict[str, Any] | None = None,
) -> Template:
    """Resolve a template: 'target' (the target tokenizer's own), a Jinja file, a tokenizer_config.json
    or a tokenizer directory. side names the option in error messages (train or serve)."""
    opt = f"--{side}-template"
    kw = dict(kwargs or {})
    if spec is None or spec == "target":
        text = getattr(target_tokenizer, "chat_template", None)
        if not isinstance(text, str) or not text:
            raise BadInput("the target tokenizer has no chat_template", f"pass {opt} FILE.jinja")
        tpath = None
        if target_dir and (Path(target_dir) / "chat_template.jinja").is_file():
            tpath = str(Path(target_dir) / "chat_template.jinja")
        return Template(text, "the target tokenizer's chat_template", tpath, system_prompt, add_special_tokens, kw)
    p = Path(spec)
    if p.is_dir():
        if (p / "chat_template.jinja").is_file():
            f = p / "chat_template.jinja"
            return Template(read_text(f, "template", f"fix {opt}"), f"{f}", str(f), system_prompt, add_special_tokens, kw)
        cfg = p / "tokenizer_config.json"
        if not cfg.is_file():
            raise BadInput(f"{opt} {p} has neither chat_template.jinja nor tokenizer_config.json", f"pass {opt} FILE.jinja")
        return load_template(
            str(cfg),
            target_dir,
            target_tokenizer,
            side=side,
            system_prompt=system_prompt,
            add_special_tokens=add_special_tokens,
            kwargs=kw,
        )
    if not p.is_file():
        raise BadInput(f"{opt} {spec!r} is not a file or directory", f"pass {opt} target, a .jinja file or a tokenizer directory")
    text = read_text(p, "template", f"fix {opt}")
    if p.suffix == ".json":
        try:
            data = loads_json(text, f"{opt} {p}", "pass the .jinja file instead")
        except json.JSONDecodeError as e:
            raise BadInput(f"{opt} {p} is not valid JSON ({e.msg})", "pass the .jinja file instead") from None
        return Template(_template_from_json(p, data), f"{p} (chat_template)", None, system_prompt, add_special_tokens, kw)
    if not text.strip():
        raise BadInput(f"{opt} {p} is empty", "pass the Jinja chat template the server uses")
    return Template(text, str(p), str(p), system_prompt, add_special_tokens, kw)


@dataclass
class Rendered:
    text: str
    ids: list[int]
    offsets: list[tuple[int, int]]
    messages: list[dict[str, Any]]  # what was passed to the template (system prompt injected, if any)
    content_spans: list[tuple[int, int] | None]  # char span of each message's content in text


def prompt_view(conv: Conversation) -> Conversation:
    """What a server is asked to render for this conversation: everything before the last assistant
    turn (history included), with a generation prompt."""
    msgs = conv.messages
    if conv.add_generation_prompt is None and msgs[-1]["role"] == "assistant":
        last = max(i for i, m in enumerate(msgs) if m["role"] == "assistant")
        if last == 0:
            raise BadInput(f"{conv.where}: the conversation starts with the assistant", "add the user turn it answers")
        msgs = msgs[:last]
    return Conversation(msgs, conv.where, conv.tools, conv.template_kwargs, conv.add_generation_prompt)


def render(tokenizer: Any, tpl: Template, conv: Conversation) -> Rendered:
    from ...io.templating import rendered

    msgs = [dict(m) for m in conv.messages]
    if tpl.system_prompt is not None and msgs[0]["role"] != "system":
        msgs.insert(0, {"role": "system", "content": tpl.system_prompt})
    agp = conv.add_generation_prompt if conv.add_generation_prompt is not None else msgs[-1]["role"] != "assistant"
    kwargs = {**tpl.kwargs, **conv.template_kwargs}
    text = rendered(
        lambda: tokenizer.apply_chat_template(
            msgs, chat_template=tpl.text, tools=conv.tools, tokenize=False, add_generation_prompt=agp, **kwargs
        ),
        tpl.source,
        conv.where,
    )
    enc = tokenizer(text, add_special_tokens=tpl.add_special_tokens, return_offsets_mapping=True)
    spans: list[tuple[int, int] | None] = []
    cur = 0
    for m in msgs:
        c = m.get("content")
        if not isinstance(c, str) or not c or (pos := text.find(c, cur)) < 0:
            spans.append(None)
            continue
        spans.append((pos, pos + len(c)))
        cur = pos + len(c)
    return Rendered(text, list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]], msgs, spans)


def region_of(r: Rendered, tok_index: int) -> str:
    """Where token tok_index sits: '<role> header' (what precedes message k's content, i.e. the end
    of the previous turn and the role tag), '<role> content', or 'generation prompt'."""
    if tok_index >= len(r.ids):
        return "end of prompt"
    c = r.offsets[tok_index][0] if tok_index < len(r.offsets) else len(r.text)
    if r.offsets[tok_index] == (0, 0) and tok_index == 0 and r.ids:
        return "start (special token)"
    for k, span in enumerate(r.content_spans):
        if span is None:
            continue
        role = r.messages[k]["role"]
        if c < span[0]:
            return f"{role} header (message {k})"
        if c < span[1]:
            return f"{role} content (message {k})"
    return "generation prompt"
