"""Prompts as text: another model family's chat markup pasted into a message (DGN006)."""

from __future__ import annotations

from ...core.findings import Finding

# Chat markup of the families whose templates are common, as it shows when a client pastes a rendered
# conversation into one message: the server then renders it again, and the draft (trained on the
# template's real tokens around plain text) reads the markup as text it never saw.
CHAT_MARKUP: dict[str, tuple[str, ...]] = {
    "ChatML (Qwen, many fine-tunes)": ("<|im_start|>", "<|im_end|>"),
    "Llama 3": ("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"),
    "Llama 2 / Mistral": ("[INST]", "[/INST]"),
    "Gemma": ("<start_of_turn>", "<end_of_turn>"),
    "Phi / Zephyr": ("<|user|>", "<|assistant|>", "<|end|>"),
}


def markup_in_prompts(prompts_path: str | None, own_template: str | None) -> dict[str, list[int]]:
    """Family -> the prompts (1-based) whose text carries that family's chat markup, leaving out markup the
    target's own template writes (there it is the template's, not pasted text)."""
    from ...io.conversations import TokenizedSample
    from ...io.prompts import read_prompt_file

    if not prompts_path:
        return {}
    own = own_template or ""
    found: dict[str, list[int]] = {}
    for i, item in enumerate(read_prompt_file(prompts_path), start=1):
        if isinstance(item, TokenizedSample):
            continue  # ids, no text a client pasted
        text = item if isinstance(item, str) else "\n".join(str(m.get("content", "")) for m in item)
        for family, marks in CHAT_MARKUP.items():
            if any(m in text and m not in own for m in marks):
                found.setdefault(family, []).append(i)
    return found


def _markup_finding(found: dict[str, list[int]], n: int) -> Finding:
    lines = [f"{fam}: prompt(s) {', '.join(map(str, idx[:12]))}{' ...' if len(idx) > 12 else ''}" for fam, idx in found.items()]
    hit = len({i for idx in found.values() for i in idx})
    return Finding(
        "DGN006",
        f"{hit} of {n} prompt(s) carry another model family's chat markup as plain text",
        [*lines, "the server renders these turns with the target's own template around that text"],
        "send the conversation as structured messages (role and content per turn) so the server's template "
        "renders it, or strip the pasted markup",
        data={"families": sorted(found), "prompts": hit},
    )
