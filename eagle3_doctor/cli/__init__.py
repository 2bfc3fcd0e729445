"""The command line: the typer app and error boundary (app), the preflight that rejects bad
arguments before heavy imports (validate) and the CI gate (gate). Nothing imports this layer."""


def run() -> None:
    """Console-script entry point (also under its earlier name, ``eagle3_doctor.cli:run``)."""
    from .app import run as _run

    _run()
