"""Shared test fixtures: the committed tiny target and draft under fixtures/, loaded once."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
TARGET = FIX / "target"
DRAFTS = {fmt: FIX / f"draft-{fmt}" for fmt in ("eagle", "sglang", "speculators")}
DUMP = FIX / "specforge-dump"
PROMPTS = FIX / "prompts.jsonl"

torch.set_num_threads(min(2, os.cpu_count() or 1))


@pytest.fixture(scope="session")
def target():
    from eagle3_doctor.target import load_target

    return load_target(str(TARGET), dtype="float32", device="cpu")


@pytest.fixture(scope="session")
def setup_sglang():
    from eagle3_doctor.doctor import load_setup

    return load_setup(target=str(TARGET), draft=str(DRAFTS["sglang"]), engine="sglang", dtype="float32", device="cpu")


@pytest.fixture()
def tmp_copy(tmp_path):
    """Copy a fixture directory into tmp_path so a test can break it."""

    def copy(src: Path, name: str | None = None) -> Path:
        dst = tmp_path / (name or src.name)
        shutil.copytree(src, dst)
        return dst

    return copy
