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


def rope_config(info: Any) -> dict[str, Any] | None:
    """The config the draft's attention is built from, where the executed presentations hold: a config.json that
    transformers loads as a LlamaConfig (SGLang and EAGLE formats). None for a speculators checkpoint: vLLM builds its
    draft config from transformer_layer_config through its own SpeculatorsConfig, which sets the keys as written,
    not as LlamaConfig presents them (base.py), and the probe did not execute that path."""
    return None if info.format == "speculators" else (info.config or {})


def rope_read_findings(info: Any, cfg: Any, engine: str, version: str, label: str) -> list[Any]:
    """FWD014 where the release's draft, through a transformers its requirement admits, is built with another RoPE than
    the config states (transformers 5's reading, the trainer's); quiet where every admitted major reads it as trained."""
    from ..core.findings import DRAFT_CONFIG, Finding, Location
    from ..engines.draft_rope import rope_rule

    config = rope_config(info)
    rule = rope_rule(engine, version) if engine in ENGINE_NAME and config is not None else None
    if rule is None or config is None:
        return []
    trained = _trained_rope(config)
    served = rule.served(config, trained)
    if served is None:
        return []
    wrong = [s for s in served if s.rope is None or _parts(cfg, trained, s.rope) is not None]
    if not wrong:
        return []
    evidence = [f"trained: {_rope_text(trained)} (the config as transformers 5 reads it)"]
    for s in wrong:
        got = f"raises {s.error}" if s.rope is None else f"builds {_rope_text(s.rope)}"
        evidence.append(f"{rule.source}: under transformers {s.major}.x the draft {got}")
    evidence += list(dict.fromkeys(p for s in wrong if s.rope is not None and (p := _parts(cfg, trained, s.rope))))
    majors = ", ".join(f"{m}.x" for m in rule.majors)
    evidence.append(f"{label} requires transformers {rule.requirement or 'of any version'} (admits {majors})")
    key = "rope_parameters" if isinstance(config.get("rope_parameters"), dict) else "rope_theta"
    served_text = "; ".join(
        (_short(s.rope) if s.rope is not None else "fails at start-up") + f" under transformers {s.major}.x" for s in wrong
    )
    return [
        Finding(
            "FWD014",
            f"{label} builds the draft's RoPE with {served_text}; the config states {_short(trained)}",
            evidence,
            _rope_read_fix(rule, config, trained, engine, version, cfg),
            severity="warning" if len(wrong) < len(served) else None,
            location=Location(DRAFT_CONFIG, key=key),
            data={
                "trained": trained,
                "served": {str(s.major): s.rope if s.rope is not None else s.error for s in served},
                "misread_under": [s.major for s in wrong],
            },
        )
    ]


def _trained_rope(config: dict[str, Any]) -> dict[str, Any]:
    """The draft's RoPE as its trainer reads the config (transformers 5's reading of either layout), with the top-level
    partial_rotary_factor as the draft runs it."""
    from .rope import config_rope

    out = config_rope(config)
    if "partial_rotary_factor" in config:
        out["partial_rotary_factor"] = config["partial_rotary_factor"]
    return out


def _short(rope: dict[str, Any]) -> str:
    kind = rope["rope_type"]
    return f"theta {rope['rope_theta']:g} " + ("and no scaling" if kind == "default" else f"with {kind} scaling")


def _rope_text(rope: dict[str, Any]) -> str:
    extra = {k: v for k, v in rope.items() if k not in ("rope_type", "rope_theta")}
    more = ", " + ", ".join(f"{k} {v}" for k, v in sorted(extra.items())) if extra else ""
    return f"{rope['rope_type']} RoPE, theta {rope['rope_theta']:g}{more}"


def _parts(cfg: Any, trained: dict[str, Any], served: dict[str, Any]) -> str | None:
    """None where the two RoPE dicts rotate alike (transformers' frequencies and attention factor); else where they part:
    the pair whose frequency differs most and the position by which its rotation is off by a quarter turn."""
    import math
    from dataclasses import replace

    import numpy as np

    from .rope import rope_frequencies

    a, sa = rope_frequencies(replace(cfg, rope_scaling=dict(trained), rope_theta=trained["rope_theta"], extra={}))
    b, sb = rope_frequencies(replace(cfg, rope_scaling=dict(served), rope_theta=served["rope_theta"], extra={}))
    if a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-6, atol=0)) and abs(sa - sb) < 1e-9:
        return None
    if a.shape != b.shape:
        return f"computed: {a.shape[0]} rotary pairs trained, {b.shape[0]} served"
    d = np.abs(a - b)
    i = int(d.argmax())
    quarter = math.pi / 2 / float(d[i]) if d[i] > 0 else math.inf
    factor = f"; attention factor {sa:g} trained, {sb:g} served" if abs(sa - sb) >= 1e-9 else ""
    return (
        f"computed from the two: rotary pair {i} of {a.shape[0]} turns {a[i]:.4g} rad a position trained and "
        f"{b[i]:.4g} served, a quarter turn apart by position {math.ceil(quarter)}{factor}"
    )


def _layout4(config: dict[str, Any], trained: dict[str, Any]) -> dict[str, Any]:
    """The config with its RoPE in the transformers 4 layout (rope_theta, rope_scaling), which transformers 5 reads
    alike."""
    out = {k: v for k, v in config.items() if k not in ("rope_parameters", "rope_scaling", "rope_theta")}
    scaling = {k: v for k, v in trained.items() if k not in ("rope_theta", "partial_rotary_factor")}
    out["rope_theta"] = trained["rope_theta"]
    out["rope_scaling"] = None if scaling.get("rope_type") == "default" and len(scaling) == 1 else scaling
    return out


def _reads(rule: Any, config: dict[str, Any], trained: dict[str, Any], cfg: Any) -> tuple[int, ...]:
    """The transformers majors under which the release builds the draft with the trained RoPE from this config."""
    got = None if rule is None else rule.served(config, _trained_rope(config))
    return tuple(s.major for s in got or () if s.rope is not None and _parts(cfg, trained, s.rope) is None)


def _rope_read_fix(rule: Any, config: dict[str, Any], trained: dict[str, Any], engine: str, version: str, cfg: Any) -> str:
    """The config edit to the transformers 4 layout where it makes the release read the RoPE as trained, with the
    transformers to run where only some majors do; else the first later release that reads it (as is or edited)."""
    from ..core.findings import json_snippet
    from ..engines.draft_rope import rope_rule
    from ..engines.draft_table import table

    name = ENGINE_NAME[engine]
    edited = _layout4(config, trained)
    edit = (
        f"in the draft's config.json {json_snippet('rope_theta', edited['rope_theta'])}, "
        f"{json_snippet('rope_scaling', edited['rope_scaling'])}"
        + (
            " and delete rope_parameters (the transformers 4 layout; transformers 5 reads it alike)"
            if "rope_parameters" in config
            else ""
        )
    )
    as_is, after_edit = _reads(rule, config, trained, cfg), _reads(rule, edited, trained, cfg)
    if edited != config and set(after_edit) == set(rule.majors):
        return f"write {edit}"
    pin = {4: "'transformers<5'", 5: "'transformers>=5'"}
    if as_is:
        return f"run {name} {version} with transformers {as_is[0]}.x (pip install {pin[as_is[0]]} within its requirement {rule.requirement})"
    if edited != config and after_edit:
        return f"write {edit}, and run {name} {version} with transformers {after_edit[0]}.x (pip install {pin[after_edit[0]]})"
    order = list(table()["release_rows"][engine])  # the releases in order, whichever rows they share
    for v in order[order.index(version) + 1 :] if version in order else []:
        later = rope_rule(engine, v)
        if later is not None and set(_reads(later, config, trained, cfg)) == set(later.majors):
            return f"upgrade to {name} >= {v}, whose draft is built with the RoPE the config states"
        if later is not None and edited != config and set(_reads(later, edited, trained, cfg)) == set(later.majors):
            return f"upgrade to {name} >= {v} and write {edit}"
    return f"no {name} release builds the draft with this RoPE: serve it where one does"
