"""The served settings beside the forward flags that change the draft's forward, per release: how many aux hidden
states the release's draft takes (FWD012). Each rule is executed from the release's own draft model
(conformance/draft_exec.py, read through engines/draft_table.py); the checkpoint's side is read from its weights."""

from __future__ import annotations

from typing import Any

from .served import ENGINE_NAME


def aux_findings(info: Any, cfg: Any, engine: str, version: str, label: str) -> list[Any]:
    """FWD012 where the release builds the draft's fc for another number of aux hidden states than the checkpoint's
    fc.weight takes; quiet where they agree."""
    from ..core.findings import DRAFT_CONFIG, Finding, Location
    from ..engines.draft_table import aux_rule, speculators_model_config

    rule = aux_rule(engine, version) if engine in ENGINE_NAME and "fc.weight" in _canonical_keys(info) else None
    if rule is None:
        return []
    trained = int(cfg.num_aux_states)
    config = info.config or {}
    # a speculators checkpoint reaches vLLM's draft model through update_eagle3, which passes on only some keys
    model_config = speculators_model_config(engine, version, config) if info.format == "speculators" else None
    served, key = rule.served(config if model_config is None else model_config)
    if served == trained:
        return []
    th, h = int(cfg.target_hidden_size), int(cfg.hidden_size)
    took = (
        f"takes {served} from {key}"
        if key
        else (
            f"reads {', '.join(rule.keys)}, none of them in this config, and takes its default {served}"
            if rule.keys
            else f"takes {served} whatever the config says (no key read)"
        )
    )
    evidence = [
        f"trained: fc.weight is [{h}, {trained * th}], {trained} aux hidden states of target_hidden_size {th}",
        f"{rule.source}: the draft {took}",
        f"the checkpoint's fc.weight [{h}, {trained * th}] does not fit the fc [{h}, {served * th}] the release builds, "
        "so no forward of the draft runs there to measure",
    ]
    fix = _aux_fix(rule, trained, served, model_config, engine, version, label)
    return [
        Finding(
            "FWD012",
            f"{label} builds the draft's fc for {served} aux hidden states, the checkpoint takes {trained}",
            evidence,
            fix,
            location=Location(DRAFT_CONFIG, key=key or (rule.keys[0] if rule.keys else "eagle_config")),
            data={"trained": trained, "served": served, "key": key, "keys_read": list(rule.keys)},
        )
    ]


def _canonical_keys(info: Any) -> set[str]:
    return {k.split(".", 1)[1] if k.startswith("model.") else k for k in info.weight_keys}


def _aux_fix(rule: Any, trained: int, served: int, model_config: Any, engine: str, version: str, label: str) -> Any:
    from ..core.findings import config_fix, json_snippet
    from ..engines.draft_table import speculators_aux_passed

    name = ENGINE_NAME[engine]
    if rule.keys[:1] == ("num_aux_hidden_states",):
        # a speculators config's own keys reach vLLM's model only through transformer_layer_config
        passed = speculators_aux_passed(engine, version) if model_config is not None else None
        where = "transformer_layer_config." if passed is not None and "num_aux_hidden_states" not in passed else ""
        return config_fix(
            f"set {json_snippet(where + 'num_aux_hidden_states', trained)} in the draft's config.json ({label} reads it first)",
            where + "num_aux_hidden_states",
            trained,
        )
    if rule.keys:
        return (
            f"state the draft's {trained} capture layer ids under {rule.keys[0]} (the ids `eagle3-doctor inspect` "
            f"gives for {label}): {label} counts the aux states from that list"
        )
    if rule.first_reading:
        return f"upgrade to {name} >= {rule.first_reading}, whose draft model takes the count from the draft config"
    return f"no {name} release takes another count than {served}: serve the draft where one does, or retrain with {served}"
