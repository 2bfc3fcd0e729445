"""The mask token of a parallel drafter (DFlash, P-EAGLE) against the target's embedding: a row that exists and
is not zero. Read from the target's checkpoint on disk (one row), so inspect needs no model load."""

from __future__ import annotations

from pathlib import Path

from ..core.findings import Finding


def mask_token_findings(target_dir: str, token: int | None, key: str, drafter: str) -> list[Finding]:
    """DRF014 for the mask token ``token`` (read from the draft config's ``key``), or nothing."""
    from ..io.hub import embedding_row

    if token is None:
        return []
    got = embedding_row(Path(target_dir), token)
    if got is None:  # no embedding under a known name: nothing to say either way
        return []
    row, rows = got
    if row is None:
        return [Finding("DRF014", f"the {drafter}'s mask token {token} is outside the target's {rows}-row embedding",
                        severity="error", evidence=[f"{key} = {token}", f"target embedding rows: {rows}"],
                        fix=f"write into {key} the mask token id the draft was trained with")]  # fmt: skip
    if not row.any():
        return [Finding("DRF014", f"the {drafter}'s mask token {token} has an all-zero embedding row in the target",
                        evidence=[f"{key} = {token}", f"embedding row {token}: {row.size} values, all 0 (a padding row)"],
                        fix="retrain with a mask token whose embedding row is not zero (a reserved special token); no "
                        "serving key can give the slots distinct inputs")]  # fmt: skip
    return []
