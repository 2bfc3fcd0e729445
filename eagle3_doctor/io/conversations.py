"""Training data, prompts and serving requests read into conversations (or tokenized rows), whichever layout
the recipes store them in: OpenAI messages, ShareGPT, SpecForge, input_ids/loss_mask, chat-completions bodies.
The one reader of these files (``read_records``) and the one layout detection (``parse_record``): the
preflight, the prompts, the data verdict and template-diff all read through them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import BadInput

# ShareGPT speaker names -> chat roles (the mapping SpecForge and speculators apply on load)
SHAREGPT_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "bing": "assistant",
    "model": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "tool",
    "observation": "tool",
    "ipython": "tool",
}


DATA_FIX = "pass a JSONL file of OpenAI messages, ShareGPT/SpecForge conversations or input_ids/loss_mask rows"
CONV_FIX = 'write one conversation per line: {"messages": [{"role": "user", "content": "..."}, ...]}'


@dataclass
class Conversation:
    messages: list[dict[str, Any]]  # role, content (+ tool_calls etc. passed through to the template)
    where: str  # "file line N": every message names its source
    tools: list[Any] | None = None
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    add_generation_prompt: bool | None = None  # None: add one when the last message is not the assistant's


@dataclass
class TokenizedSample:
    input_ids: list[int]
    loss_mask: list[int] | None
    where: str


@dataclass
class Dataset:
    path: str
    layouts: list[str]  # openai, sharegpt, specforge, tokenized, request
    conversations: list[Conversation]
    tokenized: list[TokenizedSample]


MAX_TEXT_FILE = 4 << 30  # training data JSONL can be large; it is still read into memory whole
# One record (a JSONL line, an item of a JSON array) longer than this is refused before it is parsed: 16 Mi
# characters are about 4M tokens, beyond any context served, and a 200 MB line used to be parsed, tokenized and
# held in 20 GB of memory until the machine killed the run.
MAX_RECORD_CHARS = 16 << 20


def _record_too_long(where: str, size: int, fix: str) -> BadInput:
    return BadInput(
        f"{where} is {size:,} characters, over the {MAX_RECORD_CHARS >> 20} Mi one record may hold (about 4M tokens, "
        "longer than any context a draft is served at)",
        f"split or cut that record; {fix}",
    )


def _text_size(v: Any, limit: int) -> int:
    """The characters of a parsed JSON value's strings, counted without recursion; stops once past ``limit``."""
    n, stack = 0, [v]
    while stack and n <= limit:
        x = stack.pop()
        if isinstance(x, str):
            n += len(x)
        elif isinstance(x, dict):
            stack.extend(x.values())
            n += sum(len(k) for k in x)
        elif isinstance(x, list):
            stack.extend(x)
    return n


def read_text(path: Path, what: str, fix: str, max_bytes: int = MAX_TEXT_FILE) -> str:
    from .safeio import read_regular_bytes

    if not path.exists() and not path.is_symlink():
        raise BadInput(f"{what} {path} not found", fix)
    raw = read_regular_bytes(path, what, fix, max_bytes)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"{what} {path} is not UTF-8 text (byte {e.start})", "save it as UTF-8") from None


_RECORD_KEYS = ("messages", "conversations", "input_ids")


def _is_messages(v: Any) -> bool:
    """A bare message list (one conversation), as against an array of records."""
    return (
        isinstance(v, list)
        and bool(v)
        and all(isinstance(m, dict) and ("role" in m or "from" in m) and not any(k in m for k in _RECORD_KEYS) for m in v)
    )


def read_records(path: Path, what: str, fix: str, max_bytes: int = MAX_TEXT_FILE) -> list[tuple[str, Any]]:
    """(where, JSON value) pairs: a whole-file JSON array (of records, or one bare message list) or object,
    else JSONL, one value a line."""
    return records_of(read_text(path, what, fix, max_bytes), path, what, fix)


def records_of(text: str, path: Path, what: str, fix: str) -> list[tuple[str, Any]]:
    """read_records on text already read from ``path``."""
    if not text.strip():
        raise BadInput(f"{what} {path} is empty", fix)
    from .safeio import jsonl_lines, loads_json

    lines = jsonl_lines(text)
    if text.lstrip().startswith("{") and len(lines[0][1]) > MAX_RECORD_CHARS:  # one object: one record, unparsed
        raise _record_too_long(f"{path} line {lines[0][0]}", len(lines[0][1]), fix)
    if text.lstrip().startswith(("[", "{")):
        try:
            whole = loads_json(text, f"{what} {path}", fix)
        except json.JSONDecodeError:
            whole = None
        if isinstance(whole, list) and not _is_messages(whole):
            if not whole:
                raise BadInput(f"{what} {path} is an empty JSON array", fix)
            items = [(f"{path} item {i}", v) for i, v in enumerate(whole)]
            for where, v in items:
                if _text_size(v, MAX_RECORD_CHARS) > MAX_RECORD_CHARS:
                    raise _record_too_long(where, _text_size(v, 1 << 62), fix)
            return items
        if isinstance(whole, (dict, list)):
            where = f"{path} line {lines[0][0]}" if len(lines) == 1 else f"{path}"
            if len(text) > MAX_RECORD_CHARS and _text_size(whole, MAX_RECORD_CHARS) > MAX_RECORD_CHARS:
                raise _record_too_long(where, len(text), fix)
            return [(where, whole)]
    out = []
    for lineno, line in lines:
        where = f"{path} line {lineno}"
        if len(line) > MAX_RECORD_CHARS:  # refused before the parser builds it
            raise _record_too_long(where, len(line), fix)
        try:
            out.append((where, loads_json(line, where, fix)))
        except json.JSONDecodeError as e:
            raise BadInput(f"{where} is not valid JSON ({e.msg} at column {e.colno})", fix) from None
    return out


def _content(value: Any, where: str, k: int, role: str, has_calls: bool) -> Any:
    if isinstance(value, str):
        return value
    if value is None and has_calls:
        return None
    if isinstance(value, list) and all(
        isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in value
    ):
        return "".join(p["text"] for p in value)  # OpenAI content parts, text only
    raise BadInput(
        f"{where}: message {k} ({role}) content is {type(value).__name__}, not a string or text parts",
        'write "content": "..." (images and audio are not rendered)',
    )


def _messages(raw: Any, where: str, layout: str) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not raw:
        raise BadInput(
            f"{where}: '{'messages' if layout in ('openai', 'request') else 'conversations'}' must be a non-empty list", CONV_FIX
        )
    out = []
    for k, m in enumerate(raw):
        if not isinstance(m, dict):
            raise BadInput(f"{where}: message {k} is a {type(m).__name__}, not an object", CONV_FIX)
        if layout == "sharegpt":
            who = m.get("from")
            if not isinstance(who, str):
                raise BadInput(f"{where}: message {k} has no 'from' speaker", 'write {"from": "human", "value": "..."}')
            role = SHAREGPT_ROLES.get(who.lower())
            if role is None:
                raise BadInput(
                    f"{where}: message {k} has unknown speaker {who!r}", f"use one of {', '.join(sorted(SHAREGPT_ROLES))}"
                )
            out.append({"role": role, "content": _content(m.get("value"), where, k, role, False)})
            continue
        role = m.get("role")
        if not isinstance(role, str) or not role:
            raise BadInput(f"{where}: message {k} has no 'role'", CONV_FIX)
        msg = {kk: v for kk, v in m.items() if kk not in ("role", "content")}
        msg = {"role": role, "content": _content(m.get("content"), where, k, role, bool(m.get("tool_calls"))), **msg}
        out.append(msg)
    return out


def _int_list(v: Any, where: str, name: str) -> list[int]:
    if not isinstance(v, list) or not v or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise BadInput(f"{where}: '{name}' must be a non-empty list of integers", f'write "{name}": [1, 2, ...]')
    return v


def parse_record(obj: Any, where: str) -> tuple[str, Conversation | TokenizedSample]:
    """One JSON record -> (layout, conversation or tokenized sample): the one place a layout is told apart."""
    if isinstance(obj, list) and obj and all(isinstance(m, dict) for m in obj):
        return "openai", Conversation(_messages(obj, where, "openai"), where)  # a bare message list
    if not isinstance(obj, dict):
        raise BadInput(f"{where}: expected a JSON object, got {type(obj).__name__}", CONV_FIX)
    if "input_ids" in obj:
        ids = _int_list(obj["input_ids"], where, "input_ids")
        mask = obj.get("loss_mask")
        if mask is not None:
            mask = _int_list(mask, where, "loss_mask")
            if len(mask) != len(ids) or any(x not in (0, 1) for x in mask):
                raise BadInput(
                    f"{where}: loss_mask must be 0/1 and as long as input_ids ({len(ids)})", "re-export the tokenized data"
                )
        return "tokenized", TokenizedSample(ids, mask, where)
    if "messages" in obj:
        layout = (
            "request" if any(k in obj for k in ("model", "tools", "chat_template_kwargs", "add_generation_prompt")) else "openai"
        )
        msgs = _messages(obj["messages"], where, layout)
    elif "conversations" in obj:
        raw = obj["conversations"]
        layout = "sharegpt" if isinstance(raw, list) and raw and isinstance(raw[0], dict) and "from" in raw[0] else "specforge"
        msgs = _messages(raw, where, layout)
    else:
        raise BadInput(f"{where}: no 'messages', 'conversations' or 'input_ids'", CONV_FIX)
    kwargs = obj.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise BadInput(
            f"{where}: chat_template_kwargs must be an object", 'write "chat_template_kwargs": {"enable_thinking": false}'
        )
    tools = obj.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise BadInput(f"{where}: tools must be a list", "write the OpenAI tools array")
    agp = obj.get("add_generation_prompt")
    if agp is not None and not isinstance(agp, bool):
        raise BadInput(f"{where}: add_generation_prompt must be true or false", "write true or false")
    return layout, Conversation(msgs, where, tools, dict(kwargs), agp)


def load_dataset(path: str | Path, what: str = "training data") -> Dataset:
    """Conversations or tokenized rows from JSON/JSONL, any of the layouts above (mixed is fine)."""
    p = Path(path)
    fix = DATA_FIX
    layouts: list[str] = []
    convs: list[Conversation] = []
    toks: list[TokenizedSample] = []
    for where, obj in read_records(p, what, fix):
        layout, item = parse_record(obj, where)
        if layout not in layouts:
            layouts.append(layout)
        if isinstance(item, TokenizedSample):
            toks.append(item)
        else:
            convs.append(item)
    return Dataset(str(p), layouts, convs, toks)


def load_requests(path: str | Path) -> list[Conversation]:
    """Serving requests: OpenAI chat-completions bodies (one object, an array, or JSONL)."""
    ds = load_dataset(path, "requests file")
    if ds.tokenized:
        raise BadInput(
            f"{ds.tokenized[0].where}: a chat-completions request has 'messages', not input_ids",
            'write {"model": "...", "messages": [...]} per request',
        )
    return ds.conversations
