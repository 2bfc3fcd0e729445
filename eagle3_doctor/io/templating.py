"""Rendering a chat template, a program the user supplies: every way it can fail is one BadInput line naming the
template and the conversation, for the measuring commands' prompts and template-diff's conversations alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.errors import BadInput
from .deadline import DeadlinePassed, deadline

RENDER_SECONDS = 5.0  # per conversation: real templates render in milliseconds
RENDER_MAX_CHARS = 10_000_000  # the rendered prompt; the longest real contexts are a few million characters


def rendered(render: Callable[[], Any], source: str, where: str) -> str:
    """``render()`` (an ``apply_chat_template`` call), bounded, its output checked to be a chat prompt (a string of a
    plausible size); each failure one line: ``source`` fails on ``where``. transformers renders in Jinja's sandbox,
    which bounds neither nested loops, recursion nor the output's size."""
    from jinja2 import TemplateError

    try:
        with deadline(RENDER_SECONDS):
            text = render()
    except TemplateError as e:
        raise BadInput(
            f"{source} fails on {where}: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
            "fix the template or that conversation",
        ) from None
    except DeadlinePassed:
        raise BadInput(
            f"{source} did not finish rendering {where} within {RENDER_SECONDS:g} s (a loop or recursion "
            "that does not end on this conversation)",
            "fix the template's loops, or check it is the chat template you meant",
        ) from None
    except RecursionError:
        raise BadInput(
            f"{source} recurses without end on {where} (Python's recursion limit stopped it)",
            "fix the template's recursive macro or include",
        ) from None
    except MemoryError:
        raise BadInput(f"{source} ran out of memory rendering {where}", "fix the template's loops") from None
    if not isinstance(text, str):
        raise BadInput(f"{source} did not render a string", "pass a chat template, not a processor template")
    if len(text) > RENDER_MAX_CHARS:
        raise BadInput(
            f"{source} rendered {len(text):,} characters for {where}, more than the {RENDER_MAX_CHARS:,} "
            "a chat prompt plausibly holds",
            "fix the template's loops, or check it is the chat template you meant",
        )
    return text
