"""The gate's policy: what `eagle3-doctor gate` (inspect + compare-hidden + acceptance, for CI) decides on.

Policy (TOML, table ``[gate]``; every key optional, flags override the file):

    engine = "sglang"            # and engine_version
    fail_on = "error"            # findings at or above this severity fail the gate
    min_cosine = 0.999           # mean cosine of every serving slot vs its training slot
    min_step1_accuracy = 0.5     # serving path acc_1
    min_tau = 2.0                # serving path tau
    max_regression = 0.02        # allowed drop vs --baseline in acc_1 and mean acceptance length / tau (absolute)
    num_steps = 5
    max_new_tokens = 64
    limit = 16                   # prompts
    training_from_config = "warning"   # GATE002's severity when the engine's own config is the only training truth
    decide_on = "lower_bound"    # thresholds/baselines decide on the 95% bootstrap interval's lower bound, or "point"
    fingerprint = true           # recover the trained capture points from the draft's weights (FPR001-FPR003)
    fingerprint_steps = 3

A ``[training]`` table names the training side independently of the config the engine reads
(flags ``--train-recipe`` / ``--train-dump`` override it):

    [training]
    recipe = "specforge"         # a --train-recipe name (hf-hidden-states, specforge, speculators, modelopt, ...)
    ids = [1, 3, 4]              # the ids the training run used, in that recipe's convention
    # dump = "path/to/specforge-dump"   # or a training feature dump (relative paths: from the working directory)
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ..core.errors import BadInput


@dataclass
class Policy:
    engine: str = "sglang"
    engine_version: str | None = None
    fail_on: str = "error"
    min_cosine: float | None = 0.999
    min_step1_accuracy: float | None = None
    min_tau: float | None = None
    max_regression: float | None = 0.02
    num_steps: int = 5
    max_new_tokens: int = 64
    limit: int | None = 16
    training_from_config: str = "warning"
    decide_on: str = "lower_bound"  # thresholds and baselines decide on the interval's lower bound, or "point"
    fingerprint: bool = True  # recover the trained capture points from the draft's weights
    fingerprint_steps: int = 3
    training: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | None, overrides: dict[str, Any]) -> Policy:
        data: dict[str, Any] = {}
        if path:
            try:
                import tomllib  # type: ignore[import-not-found]  # stdlib from 3.11; mypy checks as 3.10
            except ImportError:  # Python 3.10
                raise BadInput("--policy needs Python 3.11+ (tomllib)", "pass the thresholds as flags instead") from None
            from ..io.safeio import read_regular_text

            p = Path(path)
            if not p.exists() and not p.is_symlink():
                raise BadInput(f"policy file {p} not found", "pass --policy FILE.toml")
            try:
                raw = tomllib.loads(read_regular_text(p, "policy file", "pass --policy FILE.toml", 4 << 20))
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
                raise BadInput(f"policy file {p} is not valid TOML ({e})", "fix the file") from None
            data = dict(raw.get("gate", raw))
            data.pop("training", None)
            known = {f.name for f in fields(cls)} - {"training"}
            unknown = sorted(set(data) - known)
            if unknown:
                raise BadInput(f"policy file {p}: unknown key(s) {', '.join(unknown)}", f"use only {', '.join(sorted(known))}")
            data["training"] = _training_table(raw.get("training", {}), p)
        data.update({k: v for k, v in overrides.items() if v is not None})
        pol = cls(**data)
        if pol.fail_on not in ("error", "warning", "info"):
            raise BadInput(f"fail_on = {pol.fail_on!r}", "use error, warning or info")
        if pol.decide_on not in ("lower_bound", "point"):
            raise BadInput(f"decide_on = {pol.decide_on!r}", 'use "lower_bound" (the 95% interval\'s) or "point"')
        if pol.training_from_config not in ("error", "warning", "info"):
            raise BadInput(f"training_from_config = {pol.training_from_config!r}", "use error, warning or info")
        return pol

    def train_recipe(self) -> str | None:
        """The [training] table as a --train-recipe string (recipe[:ids])."""
        rec = self.training.get("recipe")
        if not rec:
            return None
        ids = self.training.get("ids")
        return f"{rec}:{','.join(str(i) for i in ids)}" if ids else str(rec)


TRAINING_KEYS = ("recipe", "ids", "dump")


def _training_table(t: Any, path: Path) -> dict[str, Any]:
    if not isinstance(t, dict):
        raise BadInput(
            f"policy file {path}: [training] must be a table", 'write [training] with recipe = "specforge" and ids = [...]'
        )
    unknown = sorted(set(t) - set(TRAINING_KEYS))
    if unknown:
        raise BadInput(
            f"policy file {path}: unknown key(s) {', '.join(unknown)} in [training]", f"use only {', '.join(TRAINING_KEYS)}"
        )
    if "ids" in t and (
        not isinstance(t["ids"], list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in t["ids"])
    ):
        raise BadInput(
            f"policy file {path}: [training] ids = {t['ids']!r} is not a list of integers", "write e.g. ids = [1, 3, 4]"
        )
    if "ids" in t and "recipe" not in t:
        raise BadInput(
            f"policy file {path}: [training] ids without a recipe",
            'add recipe = "specforge" (or speculators, modelopt, hf-hidden-states)',
        )
    if "recipe" in t and "dump" in t:
        raise BadInput(f"policy file {path}: [training] has both recipe and dump", "keep one: the dump is the stronger evidence")
    for k in ("recipe", "dump"):
        if k in t and not isinstance(t[k], str):
            raise BadInput(f"policy file {path}: [training] {k} must be a string", f'write {k} = "..."')
    return dict(t)
