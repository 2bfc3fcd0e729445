"""Speculative settings as the engines name them, and the grid `speedup` predicts over.

A chain of K draft tokens is vLLM's ``num_speculative_tokens`` K and SGLang's ``--speculative-num-steps``
K with ``--speculative-eagle-topk 1`` (SGLang then forces ``--speculative-num-draft-tokens`` to K + 1,
see ``launch_config.py``). An SGLang tree is (steps, topk, num_draft_tokens); the target verifies
num_draft_tokens tokens per sequence (the root, i.e. the last bonus token, plus num_draft_tokens - 1
drafted nodes), a chain K + 1.

No torch here: the CLI's preflight parses ``--settings`` with this module before anything heavy loads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..core.errors import BadInput
from ..core.typed_json import JsonFields

CHAINS = tuple(range(1, 8))
# SGLang trees worth trying: its own default for Llama-family targets (server_args
# _auto_choose_speculative_params), and the (3, 4, 16) and (5, 8, 32) of its EAGLE/EAGLE-3 launch examples
SGLANG_TREES = ((5, 4, 8), (3, 4, 16), (5, 8, 32))
MAX_STEPS = 16
MAX_TOPK = 16
MAX_TREE_TOKENS = 256
_ITEM = re.compile(r"^(\d{1,3})(?:/(\d{1,3})/(\d{1,4}))?$")
SETTINGS_HELP = "comma-separated: K for a chain of K draft tokens, STEPS/TOPK/DRAFT_TOKENS for an SGLang tree; e.g. 1,3,5,5/4/8"


@dataclass(frozen=True)
class Setting(JsonFields):
    """One speculative setting: a chain of ``num_steps`` draft tokens, or an SGLang tree."""

    kind: str  # chain | sglang
    num_steps: int
    topk: int = 1
    num_draft_tokens: int = 0  # tokens verified per sequence (root included): K + 1 for a chain

    @property
    def label(self) -> str:
        if self.kind == "chain":
            return f"chain K={self.num_steps}"
        return f"tree {self.num_steps}/{self.topk}/{self.num_draft_tokens}"

    @property
    def verify_tokens(self) -> int:
        return self.num_draft_tokens


def chain(k: int) -> Setting:
    return Setting("chain", k, 1, k + 1)


def tree(steps: int, topk: int, num_draft_tokens: int) -> Setting:
    """An SGLang tree; topk 1 is a chain (SGLang forces its draft tokens to steps + 1)."""
    if topk == 1:
        return chain(steps)
    return Setting("sglang", steps, topk, num_draft_tokens)


def _check_tree(steps: int, topk: int, ndt: int, item: str) -> None:
    cands = topk + (steps - 1) * topk * topk  # what SGLang scores per pass (analyses/tree.py)
    if not 1 <= steps <= MAX_STEPS or not 1 <= topk <= MAX_TOPK:
        raise BadInput(f"--settings item {item!r}: steps must be 1..{MAX_STEPS} and topk 1..{MAX_TOPK}", SETTINGS_HELP)
    if topk > 1 and not 2 <= ndt <= min(cands + 1, MAX_TREE_TOKENS):
        raise BadInput(
            f"--settings item {item!r}: {ndt} draft tokens do not fit topk {topk} and {steps} steps "
            f"(SGLang keeps num_draft_tokens - 1 of {cands} candidates)",
            f"use draft tokens between 2 and {min(cands + 1, MAX_TREE_TOKENS)}",
        )


def parse_settings(text: str | None) -> list[Setting] | None:
    """``--settings`` as written (see SETTINGS_HELP); None when not given. Duplicates are dropped."""
    if text is None:
        return None
    items = [x.strip() for x in text.split(",")]
    if not text.strip() or any(not x for x in items):
        raise BadInput(f"--settings {text!r} has an empty item", SETTINGS_HELP)
    out: list[Setting] = []
    for x in items:
        m = _ITEM.match(x)
        if m is None:
            raise BadInput(f"--settings item {x!r} is neither K nor STEPS/TOPK/DRAFT_TOKENS", SETTINGS_HELP)
        steps = int(m.group(1))
        if m.group(2) is None:
            _check_tree(steps, 1, steps + 1, x)
            out.append(chain(steps))
        else:
            topk, ndt = int(m.group(2)), int(m.group(3))
            _check_tree(steps, topk, ndt, x)
            out.append(tree(steps, topk, ndt))
    return list(dict.fromkeys(out))


def parse_batch_sizes(text: str | None) -> list[int]:
    """``--batch-sizes`` as written ('1' or '1,8,32'): distinct positive integers, in the order given."""
    if text is None or not text.strip():
        raise BadInput("--batch-sizes is empty", "write e.g. --batch-sizes 1,8")
    parts = [x.strip() for x in text.split(",")]
    if any(not re.fullmatch(r"\d{1,5}", x) or int(x) < 1 for x in parts):
        raise BadInput(
            f"--batch-sizes {text!r} is not a comma-separated list of positive integers", "write e.g. --batch-sizes 1,8"
        )
    return list(dict.fromkeys(int(x) for x in parts))


def default_grid(engine: str) -> list[Setting]:
    """Chains K = 1..7 for every engine; SGLang's trees too where the engine is SGLang."""
    out = [chain(k) for k in CHAINS]
    if engine == "sglang":
        out += [tree(*t) for t in SGLANG_TREES]
    return out


def current_setting(serve: Any, engine: str) -> tuple[Setting | None, str | None]:
    """The setting a launch command configures (None where it configures none), and a note when it
    cannot be predicted here (a vLLM static token tree)."""
    if serve is None or not serve.num_steps:
        return None, None
    if getattr(serve, "token_tree", None):
        return None, "the launch command's vLLM speculative_token_tree is not among the settings predicted here"
    topk = serve.topk or 1
    if topk == 1 or engine != "sglang":
        return chain(int(serve.num_steps)), None
    ndt = serve.num_draft_tokens or (topk + (serve.num_steps - 1) * topk * topk + 1)
    return tree(int(serve.num_steps), int(topk), int(ndt)), None
