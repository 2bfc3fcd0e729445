"""The tokenizers: the target's loaded without running its own code, and the draft's training tokenizer
compared with it (vocabulary, special and added tokens, BOS/EOS: TPL009, TPL010)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...core.errors import BadInput
from ...core.findings import Finding


def load_tokenizer(path: str, what: str = "--target") -> Any:
    """The tokenizer of ``path`` through the one loader the measuring commands use (model.target), never its own
    Python (auto_map): transformers would otherwise ask on stdin, and a `yes |` in a script answers for the user;
    this command has no option to allow it."""
    from transformers.utils import logging as hf_logging

    from ...model.tokenizer import load_tokenizer as load

    hf_logging.set_verbosity_error()
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise BadInput(f"{what} {p} is a file, not a tokenizer directory", f"point {what} at the model directory")
    untrusted = (
        f"template-diff has no option to run it: point {what} at a copy whose tokenizer_config.json names a "
        "built-in tokenizer_class (with tokenizer.json), or use the model's official tokenizer"
    )
    return load(path, False, what=f"{what} tokenizer", untrusted_fix=untrusted)


def _vocab_hash(tok: Any) -> str:
    import hashlib

    items = sorted(tok.get_vocab().items())
    return hashlib.sha256(json.dumps(items).encode()).hexdigest()[:16]


def tokenizer_facts(tok: Any) -> dict[str, Any]:
    probe = "hello"
    plain = tok(probe, add_special_tokens=False)["input_ids"]
    special = tok(probe)["input_ids"]
    return {
        "vocab_size": len(tok),
        "vocab_hash": _vocab_hash(tok),
        "bos_token": tok.bos_token,
        "eos_token": tok.eos_token,
        "pad_token": tok.pad_token,
        "unk_token": tok.unk_token,
        "added_tokens": sorted(str(t) for t in tok.get_added_vocab()),
        "adds_bos": bool(len(special) > len(plain) and tok.bos_token_id is not None and special[0] == tok.bos_token_id),
        "adds_eos": bool(len(special) > len(plain) and tok.eos_token_id is not None and special[-1] == tok.eos_token_id),
        "chat_template_hash": _text_hash(getattr(tok, "chat_template", None)),
    }


def _text_hash(text: Any) -> str | None:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:16] if isinstance(text, str) else None


def tokenizer_findings(target_tok: Any, draft_tok: Any, draft_src: str) -> tuple[dict[str, Any], list[Finding]]:
    """The draft's training tokenizer vs the target's: vocabulary, special and added tokens, BOS/EOS."""
    t, d = tokenizer_facts(target_tok), tokenizer_facts(draft_tok)
    out: list[Finding] = []
    if t["vocab_hash"] != d["vocab_hash"]:
        tv, dv = target_tok.get_vocab(), draft_tok.get_vocab()
        moved = sorted(k for k in set(tv) & set(dv) if tv[k] != dv[k])
        ev = [
            f"target: {t['vocab_size']} tokens, hash {t['vocab_hash']}; draft training tokenizer ({draft_src}): "
            f"{d['vocab_size']} tokens, hash {d['vocab_hash']}",
            f"{len(set(tv) - set(dv))} token(s) only in the target, {len(set(dv) - set(tv))} only in the training "
            f"tokenizer, {len(moved)} with another id" + (f" (first: {moved[:3]})" if moved else ""),
        ]
        out.append(
            Finding(
                "TPL009",
                "the draft was trained with another tokenizer than the target's",
                ev,
                "retrain the draft on data tokenized with the target's own tokenizer (ids must mean the same tokens)",
            )
        )
    diffs = [
        f"{k}: target {t[k]!r}, training {d[k]!r}"
        for k in ("bos_token", "eos_token", "pad_token", "unk_token", "adds_bos", "adds_eos")
        if t[k] != d[k]
    ]
    only_t = sorted(set(t["added_tokens"]) - set(d["added_tokens"]))
    only_d = sorted(set(d["added_tokens"]) - set(t["added_tokens"]))
    if only_t or only_d:
        diffs.append(f"added tokens only in the target: {only_t[:8]}; only in training: {only_d[:8]}")
    if diffs:
        out.append(
            Finding(
                "TPL010",
                "special tokens or BOS/EOS handling differ between the training tokenizer and the target's",
                diffs,
                "tokenize the training data with the target's tokenizer files (tokenizer.json, tokenizer_config.json) "
                "and retrain, or serve with the training tokenizer's special tokens",
            )
        )
    return {"target": t, "training": d, "training_source": draft_src}, out
