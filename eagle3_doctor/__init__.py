"""eagle3-doctor: find out why an EAGLE-3 draft accepts fewer tokens in serving than in training."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    # looked up on first use, not at import: importing the package runs before the console entry takes
    # SIGINT/SIGTERM, and importlib.metadata's scan of the installed distributions widened that window
    if name != "__version__":
        raise AttributeError(f"module 'eagle3_doctor' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        # the installed distribution's, which setuptools-scm derived from the git tag at build (or editable install) time
        found = version("eagle3-doctor")
    except PackageNotFoundError:  # imported from a source tree that was never installed
        found = "0+unknown"
    globals()["__version__"] = found
    return found
