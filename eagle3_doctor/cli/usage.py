"""click's own usage errors, reached through whichever click typer runs on (it vendors one from 0.26)."""

from __future__ import annotations

from typing import Any, NoReturn

import typer


def click_exceptions() -> Any:
    """typer >= 0.26 vendors click as typer._click; older typers use click itself."""
    vendored = getattr(typer.core, "_click", None)
    if vendored is not None:
        return vendored.exceptions
    import click

    return click.exceptions


def missing_option(flag: str, what: str) -> NoReturn:
    """The same one-line usage error click gives for a required option (--serve-cmd may stand in for it)."""
    vendored = getattr(typer.core, "_click", None)
    if vendored is not None:
        ctx = vendored.globals.get_current_context(silent=True)
    else:
        import click

        ctx = click.get_current_context(silent=True)
    raise click_exceptions().UsageError(f"Missing option '{flag}' (or a --serve-cmd that names {what})", ctx=ctx)
