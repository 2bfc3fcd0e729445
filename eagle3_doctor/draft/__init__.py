"""Canonical EAGLE-3 draft and the checkpoint formats that map onto it."""

from .formats import FORMATS, DraftInfo, read_draft
from .writing import write_draft

__all__ = ["FORMATS", "DraftInfo", "read_draft", "write_draft"]
