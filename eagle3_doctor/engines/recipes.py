"""Training recipes: how a trainer made its features, as a capture rule applied to its ids.

--train-recipe, its help text and its error text all read RECIPE_TABLE.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..core.errors import BadInput
from ..core.taps import FeatureSpec, from_hs_index
from .capture import RULES
from .releases import MODELOPT_NEWEST, NEWEST


@dataclass(frozen=True)
class Recipe:
    """A training recipe: which engine's capture made its features (a row of the engine table), and the
    ids it uses when none are written. --train-recipe, its help text and its error text all read RECIPE_TABLE."""

    name: str
    usage: str  # how it is written after the name
    engine: str | None = None  # RULES key whose newest row the features went through; None: not an engine capture
    version: str | None = None
    default: Callable[[int], list[int]] | None = None  # ids when none are given (None: the engine's own default)
    explain: str = ""  # str.format(ids=..., L=...)


RECIPE_TABLE: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe(
            "hf-hidden-states",
            ":I,J,K",
            explain="output_hidden_states{ids}: hs[0]=embed, hs[i]=layer_out[i-1], hs[{L}]=final_norm",
        ),
        Recipe(
            "eagle-default",
            "",
            "eagle",
            "eagle3",
            explain="EAGLE reference: idx {{2, L//2, L-3}} before the layer (SafeAILab/EAGLE modeling_llama_kv.py)",
        ),
        # SpecForge eagle3_target_model.py: [1, L//2-1, L-4], captured through SGLang's setter (+1)
        Recipe(
            "specforge",
            "[:ids]",
            "sglang",
            NEWEST["sglang"],
            lambda L: [1, L // 2 - 1, L - 4],
            "SpecForge aux_hidden_states_layers {ids} (SGLang ids: layer_out[k])",
        ),
        # speculators' data generation is vLLM extract_hidden_states: vLLM numbering
        Recipe(
            "speculators",
            "[:ids]",
            "vllm",
            NEWEST["vllm"],
            lambda L: [2, L // 2, L - 3],
            "speculators (vLLM extract_hidden_states) ids {ids}: layer_out[k-1]",
        ),
        Recipe(
            "modelopt", "[:ids]", "modelopt", MODELOPT_NEWEST, None, "ModelOpt ids {ids}: forward hooks on layers[k], layer order"
        ),
        Recipe("spec", ":POINTS", explain="capture points given explicitly"),
        Recipe("draft-config", "", explain="the ids the draft config declares"),
    )
}
RECIPE_ALIASES = {"hf": "hf-hidden-states", "output_hidden_states": "hf-hidden-states"}
RECIPES = tuple(r.name + r.usage for r in RECIPE_TABLE.values())


def _ids(text: str, recipe: str) -> list[int]:
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x != ""]
    except ValueError:
        raise BadInput(f"--train-recipe {recipe!r}: ids must be integers", "write e.g. specforge:1,3,4") from None


def training_spec(recipe: str, num_layers: int) -> tuple[FeatureSpec, str]:
    """A training recipe -> (capture points, explanation)."""
    L = num_layers
    name, _, arg = recipe.partition(":")
    name = name.strip().lower()
    r = RECIPE_TABLE.get(RECIPE_ALIASES.get(name, name))
    if r is None or r.name == "draft-config":  # draft-config is resolved by the caller from the draft's own ids
        raise BadInput(f"unknown --train-recipe {recipe!r}", f"use one of: {', '.join(RECIPES)}")
    if r.name == "hf-hidden-states":
        if not arg:
            raise BadInput("--train-recipe hf-hidden-states needs indices", "write hf-hidden-states:2,4,5")
        idx = _ids(arg, recipe)
        return tuple(from_hs_index(i, L) for i in idx), r.explain.format(ids=idx, L=L)
    if r.name == "spec":
        from ..core.taps import parse_spec

        return parse_spec(arg), r.explain
    assert r.engine is not None and r.version is not None
    ids = _ids(arg, recipe) if arg else (r.default(L) if r.default else None)
    got = RULES[r.engine](r.version, "llama", L, ids)
    if got.failure is not None:
        raise BadInput(
            f"--train-recipe {recipe!r}: {r.engine} {r.version} fails on these ids: {got.failure.message}",
            "use distinct ids inside the target's depth, one per layer",
        )
    shown = ids if ids is not None else got.internal
    return got.spec, r.explain.format(ids=shown, L=L)
