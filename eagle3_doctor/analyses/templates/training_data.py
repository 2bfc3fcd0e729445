"""What the draft learned from: the training data's layouts, system prompts, turns and roles, and which
roles its loss mask trained on (TPL011, a duplicated BOS: TPL002)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ...core.findings import Finding
from ...io.conversations import Conversation, Dataset, TokenizedSample
from .chat_template import Template


def iter_roles(convs: Iterable[Conversation]) -> Iterable[str]:
    for c in convs:
        for m in c.messages:
            yield m["role"]


def role_headers(tokenizer: Any, tpl: Template, roles: Iterable[str]) -> dict[str, list[int]]:
    """The tokens a template puts right before a message's content, per role (rendered, never guessed):
    a sentinel content is rendered through the template and the tokens between the previous turn and
    the sentinel are that role's header."""
    sentinel = "\u2063SENTINEL\u2063"
    out: dict[str, list[int]] = {}
    for role in roles:
        alone = role in ("user", "system")
        msgs = (
            [{"role": role, "content": sentinel}]
            if alone
            else [{"role": "user", "content": "x"}, {"role": role, "content": sentinel}]
        )
        try:
            text = tokenizer.apply_chat_template(msgs, chat_template=tpl.text, tokenize=False, **tpl.kwargs)
        except Exception:  # a template that refuses the role: it has no header for it
            continue
        pos = text.find(sentinel)
        if pos <= 0:
            continue
        before = text[:pos].rstrip()  # trailing whitespace may merge with the content's first token
        if not alone:
            prev = tokenizer.apply_chat_template(msgs[:1], chat_template=tpl.text, tokenize=False, **tpl.kwargs)
            if before.startswith(prev):
                before = before[len(prev) :]
        ids = tokenizer(before, add_special_tokens=False)["input_ids"]
        if ids and tokenizer.bos_token_id is not None and ids[0] == tokenizer.bos_token_id and len(ids) > 1:
            ids = ids[1:]  # BOS opens the conversation, not the role
        if ids:
            out[role] = ids
    return out


def _find_all(seq: list[int], sub: list[int]) -> list[int]:
    n = len(sub)
    return [i for i in range(len(seq) - n + 1) if seq[i : i + n] == sub] if n else []


def loss_mask_report(tokenizer: Any, tpl: Template, samples: Sequence[TokenizedSample]) -> dict[str, Any]:
    """Which roles the loss mask trained on: each masked token is attributed to the role whose header
    (as the training template renders it) precedes it most closely."""
    headers = role_headers(tokenizer, tpl, ("system", "user", "assistant", "tool"))
    trained: dict[str, int] = {}
    total: dict[str, int] = {}
    bos = tokenizer.bos_token_id
    dup_bos = 0
    with_mask = [(s, s.loss_mask) for s in samples if s.loss_mask is not None]
    for s in samples:
        if bos is not None and len(s.input_ids) > 1 and s.input_ids[0] == bos and s.input_ids[1] == bos:
            dup_bos += 1
    for s, mask in with_mask:
        marks = sorted((i + len(h), r) for r, h in headers.items() for i in _find_all(s.input_ids, h))
        role_at = ["(before any header)"] * len(s.input_ids)
        for (start, r), nxt in zip(marks, marks[1:] + [(len(s.input_ids), "")]):
            for j in range(start, nxt[0]):
                role_at[j] = r
        for r, m in zip(role_at, mask):
            total[r] = total.get(r, 0) + 1
            trained[r] = trained.get(r, 0) + int(m)
    return {
        "samples": len(samples),
        "with_loss_mask": len(with_mask),
        "trained_tokens_by_role": trained,
        "tokens_by_role": total,
        "trained_share": (sum(trained.values()) / max(sum(total.values()), 1)) if with_mask else None,
        "duplicated_bos": dup_bos,
        "role_headers": {r: tokenizer.decode(h) for r, h in headers.items()},
    }


def loss_mask_findings(rep: dict[str, Any], where: str) -> list[Finding]:
    out: list[Finding] = []
    tr = rep["trained_tokens_by_role"]
    if rep["with_loss_mask"]:
        other = {r: n for r, n in tr.items() if r != "assistant" and n}
        if not tr.get("assistant"):
            out.append(
                Finding(
                    "TPL011",
                    "the training loss mask covers no assistant tokens",
                    [f"{where}: trained tokens by role {tr}"],
                    "rebuild the loss mask from the assistant turns (SpecForge: --chat-template matching the data's template)",
                )
            )
        elif other:
            out.append(
                Finding(
                    "TPL011",
                    f"the training loss mask also trains on {', '.join(sorted(other))} tokens; serving drafts only assistant replies",
                    [f"{where}: trained tokens by role {tr} (of {rep['tokens_by_role']})"],
                    "mask everything but the assistant turns (SpecForge's parser does; check the assistant header "
                    "in the recipe's template matches the data)",
                    severity="warning",
                )
            )
    if rep["duplicated_bos"]:
        out.append(
            Finding(
                "TPL002",
                f"{rep['duplicated_bos']} of {rep['samples']} tokenized training sample(s) start with two BOS tokens",
                [f"{where}: the template's BOS plus the tokenizer's own"],
                "retrain tokenizing the rendered text with add_special_tokens=False (the template already places BOS)",
            )
        )
    return out


def data_report(ds: Dataset) -> dict[str, Any]:
    """What the draft learned from, sampled: layouts, system prompts, turns, roles."""
    convs = ds.conversations
    n = len(convs)
    roles: dict[str, int] = {}
    for r in iter_roles(convs):
        roles[r] = roles.get(r, 0) + 1
    turns = [sum(m["role"] == "user" for m in c.messages) for c in convs]
    systems = [c.messages[0]["content"] for c in convs if c.messages[0]["role"] == "system"]
    common = max(set(systems), key=systems.count) if systems else None
    return {
        "path": ds.path,
        "layouts": ds.layouts,
        "conversations": n,
        "tokenized_rows": len(ds.tokenized),
        "with_system_prompt": len(systems),
        "share_with_system_prompt": (len(systems) / n) if n else None,
        "most_common_system_prompt": common,
        "average_user_turns": (sum(turns) / n) if n else None,
        "messages_by_role": roles,
        "with_tools": sum(1 for c in convs if c.tools),
    }
