"""The training side as an engine: a trainer release (``--trained-with specforge==0.2.0``) -> the capture it
trained the draft on, from data/trainer_capture.json (conformance/trainers_exec.py executed each release's own
layer selection; its pins come from the release's own metadata).

Each release trains through one capture: SpecForge 0.1.0 through Hugging Face ``output_hidden_states`` (index 0
the embeddings), SpecForge 0.2.0 through SGLang's ``set_eagle3_layers_to_capture`` at the SGLang it pins,
speculators 0.3.0-0.4.x through its own vLLM worker loop (the residual stream after each listed layer; the last
id is the verifier's state, not a draft input) and speculators 0.5.0+ through a vLLM server's own capture, at
no pinned vLLM release. The engine captures are the engine table's rules (capture.RULES), at the pinned release
and the target's family; with no pin, every modelled release must agree, or the training side is undetermined.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

from ..core.errors import BadInput
from ..core.taps import FeatureSpec, from_hs_index, layer_out
from .releases import newest_modelled

TABLE = "conformance/trainers_table.json"
PREFIX = "trained-with:"  # how --trained-with travels in the run's train recipe (one training side per run)


@cache
def trainer_table() -> dict[str, Any]:
    return json.loads(resources.files("eagle3_doctor").joinpath("data/trainer_capture.json").read_text())


def _releases(trainer: str) -> dict[str, Any]:
    return trainer_table()["trainers"][trainer]


def known() -> str:
    """The trainer releases that train an EAGLE-3 draft, for help and error text."""
    return "; ".join(f"{t} {', '.join(v for v, r in rs.items() if r['trains'])}" for t, rs in trainer_table()["trainers"].items())


def check_trained_with(text: str) -> tuple[str, str, dict[str, Any]]:
    """``TRAINER==VERSION`` -> (trainer, version, its row), refused in one line (no torch, no model)."""
    m = re.fullmatch(r"\s*([A-Za-z][\w-]*)\s*==\s*(\S+)\s*", text or "")
    if m is None:
        raise BadInput(f"--trained-with {text!r} is not TRAINER==VERSION", f"write e.g. specforge==0.2.0 (known: {known()})")
    trainer, version = m.group(1).lower(), m.group(2)
    table = trainer_table()["trainers"]
    if trainer not in table:
        raise BadInput(f"unknown trainer {trainer!r} in --trained-with", f"use one of: {known()}")
    row = table[trainer].get(version)
    if row is None:
        raise BadInput(f"--trained-with: {trainer} {version} is not a release the trainer table holds", f"use one of: {known()}")
    if not row["trains"]:
        first = next(v for v, r in table[trainer].items() if r["trains"])
        raise BadInput(
            f"--trained-with: {trainer} {version} trains no EAGLE-3 draft ({row['why']})",
            f"the first {trainer} release that does is {first}: name the release that made the draft",
        )
    return trainer, version, row


def default_ids(row: dict[str, Any], L: int) -> list[int]:
    """The row's default formula (``1, L//2-1, L-4``) at L; the harness checked it against the executed code."""
    out = []
    for term in row["default"].split(","):
        m = re.fullmatch(r"\s*(L//2|L)?([+-]?\d+)?\s*", term)
        assert m is not None and (m.group(1) or m.group(2)), term
        base = {"L//2": L // 2, "L": L, None: 0}[m.group(1)]
        out.append(base + int(m.group(2) or 0))
    return out


def training_side(text: str, family: str, L: int, declared: list[int] | None = None) -> tuple[FeatureSpec | None, str]:
    """The capture ``--trained-with`` names for this target, and the source line; spec None when undetermined.

    ``declared``: the ids the draft's config holds, which both trainers read before their default."""
    trainer, version, row = check_trained_with(text)
    ids = list(declared) if declared else default_ids(row, L)
    whose = "the draft config's ids" if declared else f"{trainer}'s default {row['default']} ({row['source']})"
    if row["drop_last"] and not declared:
        ids = ids[:-1]  # the worker's last state is the verifier's, the draft's target (capture_source)
        whose += ", the last id the verifier's state, not a draft input"
    head = f"{trainer} {version} (--trained-with)"
    if row["convention"] == "hs-index":
        spec = tuple(from_hs_index(i, L) for i in ids)
        return spec, f"{head} through transformers {row['engine_version']} output_hidden_states{ids} ({whose}; {TABLE})"
    if row["convention"] == "after-layer":
        spec = tuple(layer_out(i) for i in ids)
        return spec, (
            f"{head} through its own vLLM worker loop (vllm{row['pin']}): layer_out{ids}, the residual stream "
            f"after each layer ({whose}; {row['source'].split(';')[-1].strip()}; {TABLE})"
        )
    return _through_engine(row, trainer, version, family, L, ids, f"{head} ", whose)


def _through_engine(
    row: dict[str, Any], trainer: str, version: str, family: str, L: int, ids: list[int], head: str, whose: str
) -> tuple[FeatureSpec | None, str]:
    from .table import SGLANG_ROWS, VLLM_ROWS

    engine, pinned = row["through"], row["engine_version"]
    if pinned is not None:
        got = _rule(engine, pinned, family, L, ids)
        if got is None:
            return None, (
                f"undetermined: {trainer} {version} trains through {engine} {pinned} (its pinned release), whose "
                f"capture of a {family} target the engine table does not model; pass --train-recipe spec:POINTS"
            )
        if got.failure is not None:
            raise BadInput(
                f"--trained-with {trainer}=={version}: it trains through {engine} {pinned} (its pinned release), "
                f"which refuses a {family} target: {got.failure.message}",
                _first_supporting(trainer, family, L),
            )
        return (
            got.spec,
            f"{head}through {engine} {pinned}, the release it pins ({engine}{row['pin']}): ids {ids} ({whose}; {TABLE})",
        )
    table = VLLM_ROWS if engine == "vllm" else SGLANG_ROWS
    rows = table.get(family) or table["llama"]  # as engine_row reads a family the table names no rows for
    specs: dict[tuple, list[str]] = {}
    refusal = "the engine table does not model it"
    for r in rows:
        got = _rule(engine, r.first, family, L, ids)
        if got is not None and got.failure is None:
            specs.setdefault(tuple(got.spec), []).append(r.first)
        elif got is not None and got.failure is not None:
            refusal = got.failure.message
    why = f"{trainer} {version} pins no {engine} release (its metadata names none)"
    if len(specs) == 1:
        spec, firsts = next(iter(specs.items()))
        return spec, f"{head}through {engine}: {why}, and every modelled {engine} release serving {family} captures ids {ids} the same ({whose}; {TABLE})"  # fmt: skip
    if not specs:
        raise BadInput(f"--trained-with {trainer}=={version}: no modelled {engine} release captures a {family} target ({refusal})", _first_supporting(trainer, family, L))  # fmt: skip
    split = "; ".join(f"from {firsts[0]}: {', '.join(map(str, s))}" for s, firsts in specs.items())
    return None, f"undetermined: {why}, and the {engine} releases capture ids {ids} differently for {family} ({split}); pass --train-recipe spec:POINTS"  # fmt: skip


def _rule(engine: str, release: str, family: str, L: int, ids: list[int]) -> Any:
    """The engine table's capture at ``release``; None where the table does not model the family there."""
    from .capture import RULES

    try:
        return RULES[engine](release, family, L, ids)
    except BadInput:  # the release serves the family through code the harness could not model
        return None


def _first_supporting(trainer: str, family: str, L: int) -> str:
    """The fix for a trainer release whose capture cannot serve the family: the releases of that trainer that can."""
    ok = []
    for v, r in _releases(trainer).items():
        if not r["trains"]:
            continue
        if r["convention"] != "engine":  # its own loop or transformers' hidden states: any family with decoder layers
            ok.append(f"{v} (through {r['engine']})")
            continue
        release = r["engine_version"] or newest_modelled(r["through"]) or ""
        got = _rule(r["through"], release, family, L, default_ids(r, L))
        if got is not None and got.failure is None:
            ok.append(f"{v} (through {r['through']} {release})")
    if not ok:
        return f"no {trainer} release in the trainer table captures a {family} target; pass --train-recipe spec:POINTS"
    return f"{trainer} releases whose capture serves {family}: {', '.join(ok)}; name the release that made the draft"


def checkpoint_note(config: dict[str, Any]) -> str | None:
    """What a speculators ``config.json`` says of the release that wrote it (SpecForge writes no version)."""
    version = config.get("speculators_version")
    if not isinstance(version, str):
        return None
    row = _releases("speculators").get(version)
    if row is None or not row["trains"]:  # a converter or an unknown release: the ids say all there is
        return None
    if row["convention"] == "after-layer":
        return (
            f"undetermined which numbering: config.json was written by speculators {version}, whose own training "
            f"captured after each layer (layer_out[k]); if it trained this draft rather than converted it, pass "
            f"--trained-with speculators=={version}"
        )
    return f"config.json written by speculators {version}, whose training reads these ids as {row['through']} does"


def recipe_of(trained_with: str | None, train_recipe: str | None) -> str | None:
    """The run's one training recipe: --trained-with travels as ``trained-with:TRAINER==VERSION``."""
    if trained_with and train_recipe:
        raise BadInput("--trained-with and --train-recipe both name the training side", "pass one of them")
    return PREFIX + trained_with if trained_with else train_recipe
