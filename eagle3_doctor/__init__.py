"""eagle3-doctor: find out why an EAGLE-3 draft accepts fewer tokens in serving than in training."""

from importlib.metadata import PackageNotFoundError, version

try:
    # the installed distribution's, which setuptools-scm derived from the git tag at build (or editable install) time
    __version__ = version("eagle3-doctor")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
