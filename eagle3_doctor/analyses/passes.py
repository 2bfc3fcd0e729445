"""What the drafters that draft a whole pass at once (DFlash, P-EAGLE) share: the target's greedy continuation the
passes run over, the walk from anchor to anchor, and fix's result (a corrected copy measured against the original)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.findings import Finding


def walk(accepts: Sequence[int], start: int, end: int) -> list[int]:
    """The passes over anchors start.. given the accepted count at every anchor (accepts[a - start])."""
    out, a = [], start
    while a < end:
        n = min(accepts[a - start], end - 1 - a)
        out.append(n)
        a += n + 1
    return out


def continue_prompts(
    target: Any, prompts: list[list[int]], max_new_tokens: int, progress: Callable[[str, int, int], None]
) -> list[list[int]]:
    """The target's greedy continuation of every prompt, in batches as large as memory allows."""
    from ..model.continuation import greedy_continue
    from ..model.runtime import auto_batch_size

    batch = auto_batch_size(target, max(map(len, prompts)) + max_new_tokens)
    return greedy_continue(target, prompts, max_new_tokens, batch, lambda k, n: progress("greedy continuation", k, n))


@dataclass
class CopyFix:
    """fix on a drafter: the config keys written into the copy at ``out`` (None: nothing to fix, nothing written),
    and acceptance on the original and on the copy (``schema`` and ``drafter`` name the document)."""

    schema: str
    drafter: str
    source: str
    out: str | None
    applied: list[Any]  # fixing.Edit
    before: Any  # the drafter's acceptance result on the original
    after: Any  # on the copy, or None

    @property
    def findings(self) -> list[Finding]:
        return self.after.findings if self.after is not None else self.before.findings

    def to_dict(self) -> dict[str, Any]:
        return {"schema": self.schema, "command": "fix", "drafter": self.drafter, "source": self.source, "out": self.out,
                "applied": [e.to_dict() for e in self.applied], "before": self.before.to_dict(),
                "after": self.after.to_dict() if self.after is not None else None,
                "findings": [f.to_dict() for f in self.findings]}  # fmt: skip
