"""eagle3-doctor explain: the long form of a finding code."""

from __future__ import annotations

from typing import Any

from ...core.errors import EXIT_OK
from ..options import CODE, options


@options(code=CODE)
def explain_cmd(**given: Any) -> int:
    """The long form of a finding code: what it means, why acceptance drops, how to confirm it."""
    from ...core.findings.explain import explain, list_codes
    from ..output import text_width

    code, width = given["code"], text_width()
    text = explain(code, width) if code is not None else list_codes(width)
    print(text, end="")
    return EXIT_OK
