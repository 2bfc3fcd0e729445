"""The served settings beside the forward flags that change the draft's forward, per release: how many aux hidden
states the release's draft takes (FWD012), and the steps drafted past the depth the checkpoint records it was trained
for (FWD013, with the rates acceptance measured). Each rule is executed from the release's own code
(conformance/draft_exec.py, read through engines/draft_table.py); the checkpoint's side is read from its files."""

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


DEPTH_KEY = "speculators_config.proposal_methods[0].speculative_tokens"


def trained_depth(config: dict[str, Any]) -> int | None:
    """The draft steps the checkpoint records it was trained for (speculators writes the proposal's
    speculative_tokens from its training-time-test depth); None where the config records none."""
    sc = config.get("speculators_config")
    methods = sc.get("proposal_methods") if isinstance(sc, dict) else None
    first = methods[0] if isinstance(methods, list) and methods and isinstance(methods[0], dict) else {}
    v = first.get("speculative_tokens")
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def depth_finding(info: Any, accepted: Any, steps: int, engine: str, version: str, setting: str) -> Any:
    """FWD013 where the chain as served drafts more steps than the checkpoint records it was trained for, with the
    measured per-position rate within and past that depth; None where it drafts no more."""
    from ..core.findings import Finding
    from ..core.stats import MIN_PROMPTS, acceptance_counts, acceptance_intervals
    from ..engines.draft_table import speculators_steps_key
    from ..engines.releases import release_label

    depth = trained_depth((info.config or {}) if info is not None else {})
    if depth is None or steps <= depth:
        return None
    label = release_label(engine, version)
    ev = [f"trained for {depth} steps ({DEPTH_KEY} = {depth}); measured: {steps} steps a pass ({setting} {steps})"]
    past: list[float] = []
    if len(accepted) >= MIN_PROMPTS:
        rates = acceptance_intervals(acceptance_counts(accepted, None, None, steps), steps).per_position_rate
        ev.append(
            "per-position rate (passes reaching position k), 95% intervals over prompts: within the trained depth "
            + ", ".join(f"{k + 1}: {r.text()}" for k, r in enumerate(rates[:depth]))
            + "; past it "
            + ", ".join(f"{k + 1}: {r.text()}" for k, r in enumerate(rates) if k >= depth)
        )
        past = [round(float(r.point), 4) for r in rates[depth:]]
    else:
        ev.append(f"the per-position rates are not shown: fewer than {MIN_PROMPTS} prompts")
    key = speculators_steps_key(engine, version)
    if key == "num_speculative_tokens":
        ev.append(
            f"{label} serving this checkpoint with no num_speculative_tokens drafts its speculative_tokens (executed: "
            "transformers_utils/configs/speculators/base.py build_vllm_speculative_config)"
        )
        fix = f"leave num_speculative_tokens out of --speculative-config ({label} then drafts {depth}), or set it to {depth}"
    else:
        fix = f"draft {depth} steps a pass ({setting} {depth})"
    return Finding(
        "FWD013",
        f"the chain drafts {steps} steps a pass on {label}, the draft was trained for {depth}",
        ev,
        fix + f", or retrain with training-time test over {steps} steps; eagle3-doctor speedup measures which is faster",
        data={"trained_depth": depth, "served_steps": steps, "past_depth_rates": past},
    )
