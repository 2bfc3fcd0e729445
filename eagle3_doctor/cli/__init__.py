"""The command line: the typer app and error boundary (app), the preflight that rejects bad
arguments before heavy imports (validate) and the CI gate (gate). Nothing imports this layer."""
