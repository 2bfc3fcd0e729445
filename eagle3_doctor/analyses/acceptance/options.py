"""How acceptance is measured (the engine's speculative settings, and the replay's), and the replay it walks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...core.errors import BadInput
from ...model.replay import Sources

Progress = Callable[[str, int, int], None]


def _no_progress(_label: str, _done: int, _total: int) -> None:
    pass


@dataclass
class AcceptanceOptions:
    """How acceptance is measured (the engine's speculative settings, and the replay's)."""

    num_steps: int = 7
    continuation: str = "greedy"  # greedy: the target's own continuation; text: the text as given
    max_new_tokens: int = 128
    max_tokens: int | None = 512
    batch_size: int = 8
    # --batch-size auto: the greedy continuation takes its own batch, as many sequences as a static cache of their
    # length fits (a decode step holds a KV cache, not a forward's activations; model.static.decode_batch_size)
    continuation_auto: bool = False
    temperature: float = 0.0
    temp_mode: str = "sampled"
    topk: int = 1
    num_draft_tokens: int | None = None
    token_tree: Sequence[Sequence[int]] | None = None
    reference: bool = False
    scan: bool = False
    limit: int | None = None

    def check(self) -> None:
        if self.continuation not in ("greedy", "text"):
            raise BadInput(f"unknown --continuation {self.continuation!r}", "use greedy or text")
        if self.num_steps < 1:
            raise BadInput("--num-steps must be at least 1", "use e.g. --num-steps 7")


def options_from_serve(
    serve: Any, num_steps: int | None, topk: int | None, num_draft_tokens: int | None
) -> tuple[int, int, int | None]:
    """(num_steps, topk, num_draft_tokens): explicit values win, then the launch command's, then 7 / 1 / None."""
    if num_steps is None:
        num_steps = serve.num_steps if serve is not None and serve.num_steps else 7
    if topk is None:
        topk = serve.topk if serve is not None and serve.topk else 1
    if num_draft_tokens is None and serve is not None and topk == serve.topk:
        num_draft_tokens = serve.num_draft_tokens
    return num_steps, topk, num_draft_tokens


@dataclass
class Replay:
    """The sequences acceptance walks, and where in each the decode begins."""

    src: Sources
    seqs: list[list[int]]
    starts: list[int]  # first base a decode reaches: the prompt's last position (greedy), else 0
    opts: AcceptanceOptions  # continuation is "text" for a dump, whatever was asked
    notes: list[str]
