"""Prompt sources: JSONL chat messages (rendered with the target's chat template) or plain text."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import BadInput

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


def _parse_jsonl_line(obj: Any, path: Path, lineno: int) -> list[dict[str, str]] | str:
    if isinstance(obj, dict):
        if "messages" in obj:
            msgs = obj["messages"]
        elif "conversations" in obj:
            msgs = obj["conversations"]
        elif isinstance(obj.get("text"), str):
            return obj["text"]
        elif isinstance(obj.get("prompt"), str):
            return obj["prompt"]
        else:
            raise BadInput(
                f"{path} line {lineno}: expected an object with 'messages', 'text' or 'prompt'",
                'write {"messages": [{"role": "user", "content": "..."}]} per line',
            )
    elif isinstance(obj, list):
        msgs = obj
    elif isinstance(obj, str):
        return obj
    else:
        raise BadInput(f"{path} line {lineno}: expected a JSON object", 'write {"messages": [...]} per line')
    if (
        not isinstance(msgs, list)
        or not msgs
        or not all(
            isinstance(m, dict) and isinstance(m.get("content"), str) and isinstance(m.get("role", m.get("from")), str)
            for m in msgs
        )
    ):
        raise BadInput(
            f"{path} line {lineno}: messages must be a non-empty list of {{role, content}} objects",
            'write {"messages": [{"role": "user", "content": "..."}]}',
        )
    return [{"role": m.get("role", m.get("from")), "content": m["content"]} for m in msgs]


MAX_PROMPTS_BYTES = 1 << 30  # over 1 GiB is a dump or a model, not prompts


def read_prompt_file(path: str | Path) -> list[list[dict[str, str]] | str]:
    """JSONL (one chat or text per line) when the file ends in .jsonl/.json or its first line is
    JSON; plain text (one prompt per non-empty line) otherwise."""
    from .safeio import loads_json, read_regular_bytes

    p = Path(path)
    fix = "pass --prompts FILE (JSONL chat messages or text lines)"
    if not p.exists() and not p.is_symlink():
        raise BadInput(f"prompts file {p} not found", fix)
    try:
        lines = read_regular_bytes(p, "prompts file", fix, MAX_PROMPTS_BYTES).decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise BadInput(f"prompts file {p} is not UTF-8 text", "save it as UTF-8") from None
    nonempty = [(i + 1, ln) for i, ln in enumerate(lines) if ln.strip()]
    if not nonempty:
        raise BadInput(f"prompts file {p} is empty", "add one prompt per line")
    is_json = p.suffix in (".jsonl", ".json") or nonempty[0][1].lstrip().startswith(("{", "["))
    out: list[list[dict[str, str]] | str] = []
    for lineno, ln in nonempty:
        if is_json:
            try:
                obj = loads_json(ln, f"{p} line {lineno}", "fix that line")
            except json.JSONDecodeError as e:
                raise BadInput(f"{p} line {lineno} is not valid JSON ({e.msg} at column {e.colno})", "fix that line") from None
            out.append(_parse_jsonl_line(obj, p, lineno))
        else:
            out.append(ln)
    return out


def render(tokenizer: Any, item: list[dict[str, str]] | str) -> str:
    if isinstance(item, str):
        return item
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(item, tokenize=False, add_generation_prompt=item[-1]["role"] != "assistant")
    return "\n".join(f"{m['role']}: {m['content']}" for m in item) + "\nassistant:"


def load_prompts(
    tokenizer: Any,
    path: str | Path | None,
    *,
    max_tokens: int | None,
    max_positions: int | None = None,
    limit: int | None = None,
) -> list[Prompt]:
    items = read_prompt_file(path) if path else list(DEFAULT_PROMPTS)
    if limit:
        items = items[:limit]
    prompts = []
    for item in items:
        text = render(tokenizer, item)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
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
