"""Prompt sources: conversations in any layout io/conversations.py reads (rendered with the target's chat
template), tokenized rows (fed as written) or plain text."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import BadInput
from .conversations import TokenizedSample, parse_record, read_text, records_of

DEFAULT_PROMPTS = [
    [{"role": "user", "content": "Write a Python function that returns the n-th Fibonacci number."}],
    [{"role": "user", "content": "Show me how to read a CSV file and sum one column."}],
    [{"role": "user", "content": "Explain what a context manager is, with an example class."}],
    [{"role": "user", "content": "Write a function that checks whether a string is a palindrome."}],
]


@dataclass
class Prompt:
    text: str  # rendered text fed to the tokenizer
    ids: list[int]
    truncated_from: int | None = None  # original token count when --max-tokens cut it


PromptItem = list[dict[str, Any]] | str | TokenizedSample

MAX_PROMPTS_BYTES = 1 << 30  # over 1 GiB is a dump or a model, not prompts


def _item(obj: Any, where: str) -> PromptItem:
    """A text prompt (a JSON string, or an object with only 'text' or 'prompt'), else whatever
    parse_record detects: a conversation's messages or a tokenized row."""
    if isinstance(obj, str):
        return obj
    if isinstance(obj, dict) and not any(k in obj for k in ("messages", "conversations", "input_ids")):
        for key in ("text", "prompt"):
            if isinstance(obj.get(key), str):
                return str(obj[key])
        raise BadInput(
            f"{where}: expected an object with 'messages', 'conversations', 'input_ids', 'text' or 'prompt'",
            'write {"messages": [{"role": "user", "content": "..."}]} per line',
        )
    _, item = parse_record(obj, where)
    return item if isinstance(item, TokenizedSample) else item.messages


def read_prompt_file(
    path: str | Path, what: str = "prompts file", fix: str = "pass --prompts FILE (JSONL chat messages or text lines)"
) -> list[PromptItem]:
    """JSON or JSONL when the file ends in .jsonl/.json or starts with '{' or '[': each record in any layout
    of io/conversations.py (OpenAI messages, ShareGPT, SpecForge, input_ids/loss_mask) or a text prompt;
    plain text (one prompt per non-empty line) otherwise."""
    from .safeio import jsonl_lines

    p = Path(path)
    text = read_text(p, what, fix, MAX_PROMPTS_BYTES)
    lines = jsonl_lines(text)
    if not lines:
        raise BadInput(f"{what} {p} is empty", "add one prompt per line")
    if not (p.suffix in (".jsonl", ".json") or lines[0][1].lstrip().startswith(("{", "["))):
        return [ln for _, ln in lines]
    return [_item(obj, where) for where, obj in records_of(text, p, what, fix)]


def render(tokenizer: Any, item: list[dict[str, Any]] | str, where: str) -> str:
    """The prompt's text: a conversation through the target's chat template (a program the user supplies: bounded,
    its failures one line), a text prompt as written."""
    from .templating import rendered

    if isinstance(item, str):
        return item
    if getattr(tokenizer, "chat_template", None):
        agp = item[-1]["role"] != "assistant"
        return rendered(
            lambda: tokenizer.apply_chat_template(item, tokenize=False, add_generation_prompt=agp),
            f"the target's chat template ({getattr(tokenizer, 'name_or_path', '') or 'its tokenizer'})",
            where,
        )
    return "\n".join(f"{m['role']}: {m['content']}" for m in item) + "\nassistant:"


def _check_ids(tokenizer: Any, row: TokenizedSample) -> None:
    n = len(tokenizer)
    bad = next((t for t in row.input_ids if not 0 <= t < n), None)
    if bad is not None:
        raise BadInput(
            f"{row.where}: token id {bad} is outside the target tokenizer's {n} ids",
            "pass rows tokenized with the target's tokenizer",
        )


def tokenized(tokenizer: Any, path: str | Path | None, limit: int | None) -> list[tuple[str, list[int]]]:
    """Each prompt's text and ids before any cut: a conversation through the chat template, a text as written, a
    tokenized row fed as the trainer wrote it (its ids checked against the tokenizer)."""
    items = read_prompt_file(path) if path else list(DEFAULT_PROMPTS)
    if limit:
        items = items[:limit]
    rows = []
    source = f"{path}" if path else "the built-in prompts"
    for n, item in enumerate(items, 1):
        if isinstance(item, TokenizedSample):
            # already tokenized by the trainer: fed as written, as it trained the draft
            _check_ids(tokenizer, item)
            rows.append(("", list(item.input_ids)))
        else:
            text = render(tokenizer, item, f"prompt {n} of {source}")
            rows.append((text, list(tokenizer(text, add_special_tokens=False)["input_ids"])))
    return rows


def load_prompts(
    tokenizer: Any,
    path: str | Path | None,
    *,
    max_tokens: int | None,
    max_positions: int | None = None,
    limit: int | None = None,
) -> list[Prompt]:
    """The prompts cut to ``max_tokens``, each within the target's positions. A tokenizer that was given them
    tokenized ahead (``model.tokenizer.AheadTokenizer``) hands those over."""
    ahead = getattr(tokenizer, "tokenized_ahead", None)
    rows = ahead(path, limit) if callable(ahead) else None
    prompts = []
    for text, ids in rows if rows is not None else tokenized(tokenizer, path, limit):
        if not ids:
            continue
        cut = None
        if max_tokens and len(ids) > max_tokens:
            cut, ids = len(ids), ids[:max_tokens]
        if max_positions and len(ids) > max_positions:
            raise BadInput(
                f"a prompt has {len(ids)} tokens, more than the target's {max_positions} positions",
                f"pass --max-tokens {max_positions} or shorter prompts",
            )
        prompts.append(Prompt(text, list(ids), cut))
    if not prompts:
        raise BadInput("no prompt produced any tokens", "check the prompts file")
    return prompts
