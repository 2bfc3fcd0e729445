"""The FWD findings: where an engine release runs the draft otherwise than it was trained (flags, whose
weights, the RoPE layout, q/k norms, the later layers), without a forward; analyses/as_served.py
then measures each."""

from __future__ import annotations

from typing import Any

import numpy as np

from .served import (
    ENGINE_NAME,
    DraftServing,
    ServedForward,
    flag_keys_present,
    json_bool,
    newest_release,
    served_forward,
    trained_where,
)
from .served_files import sidecar_findings
from .served_rope import qk_norm_findings, rope_findings
from .served_settings import aux_findings, rope_read_findings


def diagnose(
    draft: Any,
    info: Any,
    engine: str,
    version: str,
    *,
    target_vocab: int | None,
    target_head: Any = None,
    target_embed: Any = None,
    target_config: dict[str, Any] | None = None,
) -> tuple[list[Any], ServedForward | None]:
    """Findings where the engine runs the draft differently from how it was trained (no forward)."""
    from ..core.findings import DRAFT_CONFIG, Finding, Location

    out: list[Any] = []
    cfg = draft.config
    if cfg.norm_before_fc and cfg.fc_norm:
        out.append(
            Finding(
                "FWD005",
                "the draft has both norm_before_fc (input_norm) and fc_norm",
                [
                    f"norm_before_fc: {trained_where('norm_before_fc', info)}; fc_norm: {trained_where('fc_norm', info)}",
                    "speculators 0.9.0 rejects the pair (models/eagle3/config.py:89-96: 'mutually exclusive'); "
                    "the doctor runs input_norm first, then fc_norm, as speculators' forward would (core.py:236-243)",
                ],
                "keep the one training used: delete the other flag and its weights (input_norm.weight or fc_norm.*)",
                location=Location(DRAFT_CONFIG),
            )
        )
    sf = served_forward(info, engine, version, target_vocab=target_vocab, target_has_head=target_head is not None)
    if sf is None:
        return out, None
    from ..engines.releases import release_label

    label = release_label(engine, version)
    out += _flag_findings(cfg, info, sf, engine, version, label)
    out += _undetermined_findings(cfg, info, sf, label)
    out += _weight_source_findings(draft, cfg, sf, engine, version, label, target_head, target_embed)
    out += rope_findings(info, cfg, sf, label, target_config)
    out += qk_norm_findings(info, cfg, sf, label)
    out += layer_findings(info, cfg, engine, version, label)
    out += window_findings(info, engine, version, label)
    out += aux_findings(info, cfg, engine, version, label)
    out += rope_read_findings(info, cfg, engine, version, label)
    out += sidecar_findings(getattr(info, "path", ""), engine, version, label)
    return out, sf


def declared_window(config: dict[str, Any]) -> tuple[int, list[int], str] | None:
    """(window, the sliding layers, where): a draft config whose layer_types declares sliding attention with a
    sliding_window, at the top level or in a speculators transformer_layer_config (which vLLM reads as the model's)."""
    for where, c in (("", config), ("transformer_layer_config.", config.get("transformer_layer_config"))):
        if not isinstance(c, dict):
            continue
        types, w = c.get("layer_types"), c.get("sliding_window")
        if isinstance(types, list) and isinstance(w, int) and not isinstance(w, bool) and w > 0:
            sliding = [i for i, t in enumerate(types) if t == "sliding_attention"]
            if sliding:
                return w, sliding, where
    return None


def window_findings(info: Any, engine: str, version: str, label: str) -> list[Any]:
    """FWD011 where the release builds a declared sliding-window layer of the draft with full attention (or fails on
    it), both executed from the release's own draft model on its own base layer; quiet where the window is applied."""
    from ..core.findings import DRAFT_CONFIG, SERVER_COMMAND, Finding, Fix, Location
    from ..engines.draft_table import window_rule

    declared = declared_window(info.config or {})
    rule = window_rule(engine, version) if declared and engine in ENGINE_NAME else None
    if declared is None or rule is None or rule.config is True:
        return []
    w, sliding, where = declared
    name = ENGINE_NAME[engine]
    got = (
        f"raises {rule.config} at start-up"
        if isinstance(rule.config, str)
        else "builds the attention with no window"
        + (f" (it reads {', '.join(rule.keys)} and no window from them)" if rule.keys else " (it reads neither key)")
    )
    evidence = [
        f"the draft config declares {where}layer_types {sliding} sliding_attention with {where}sliding_window = {w}",
        f"{rule.source}: from a config declaring one sliding layer, the draft {got}",
    ]
    if rule.server and rule.first_server == version:
        fix: Any = Fix(
            f"launch with --speculative-draft-window-size {w} ({name} {version} takes the draft's window only from that "
            "server argument)",
            file=SERVER_COMMAND,
            key="--speculative-draft-window-size",
            value=w,
            op="set",
            snippet=f"--speculative-draft-window-size {w}",
        )
    elif rule.first_config:
        fix = f"upgrade to {name} >= {rule.first_config}, whose draft model applies the config's window"
    elif rule.first_server:
        fix = f"upgrade to {name} >= {rule.first_server} and launch with --speculative-draft-window-size {w}"
    else:
        fix = f"no {name} release applies the window: serve the draft where one does, or retrain it with full attention"
    return [
        Finding(
            "FWD011",
            f"{label} runs the draft's sliding-window attention (window {w}) as full attention"
            if not isinstance(rule.config, str)
            else f"{label} fails at start-up on the draft's sliding-window layer_types",
            evidence,
            fix,
            location=Location(DRAFT_CONFIG, key=f"{where}layer_types"),
            data={"window": w, "sliding_layers": sliding, "applied": rule.config, "server_argument": rule.server},
        )
    ]


def layer_findings(info: Any, cfg: Any, engine: str, version: str, label: str) -> list[Any]:
    """FWD010 where the release does not build every layer; FWD009 where it normalises the later ones
    with a weight the checkpoint does not hold (both from the release's executed draft model)."""
    from ..core.findings import DRAFT_WEIGHTS, Finding, Fix, Location
    from ..engines.draft_table import layers_rule, serving_elsewhere

    n = int(cfg.num_hidden_layers)
    rule = layers_rule(engine, version) if n > 1 and engine in ENGINE_NAME else None
    if rule is None:
        return []
    name = ENGINE_NAME[engine]
    executed = f"{rule.source}: for num_hidden_layers = 2 the constructor "
    if rule.two_layers != "built":
        return [_not_served(rule, n, label, name, executed, engine, info)]
    served = rule.later_norm
    if served is None or all(_holds(info, f"layers.{i}.{served}.weight") for i in range(1, n)):
        return []
    trained = "hidden_norm" if served == "input_layernorm" else "input_layernorm"
    code = (
        "from safetensors.torch import load_file, save_file; sd = load_file(p); "
        f"sd.update({{f'layers.{{i}}.{served}.weight': sd.pop(f'layers.{{i}}.{trained}.weight') for i in range(1, {n})}}); "
        "save_file(sd, p)"
    )
    other = serving_elsewhere(engine, trained)
    layers = f"layer{'s 1-' if n > 2 else ' '}{n - 1}"
    return [
        Finding(
            "FWD009",
            f"{label} normalises decoder {layers} with {served}, which this checkpoint does not hold",
            [
                f"trained: the layers after the first apply layers.N.{trained} before attention (the weights hold "
                f"layers.N.{trained}.weight{', as speculators builds the verifier decoder layer' if trained == 'input_layernorm' else ''})",
                executed + f"built every layer, and a later layer's forward applies {served} before its attention",
                f"the checkpoint has no layers.N.{served}.weight: {name} keeps its initial weight (1.0) and the trained "
                f"{trained} goes unused",
            ],
            Fix(
                f"in a copy of the draft for {name}, rename each later layer's {trained} weight to {served} "
                f"(python, for each *.safetensors file p: {code})"
                + (f"; or serve this checkpoint with {other}, which applies {trained}" if other else ""),
                file=DRAFT_WEIGHTS,
                key=f"layers.N.{served}.weight",
                # the same rename as data, which fix applies to its copy without running the snippet
                value={"rename": {f"layers.{i}.{trained}.weight": f"layers.{i}.{served}.weight" for i in range(1, n)}},
                op="rewrite",
                snippet=code,
            ),
            location=Location(DRAFT_WEIGHTS, key=f"layers.1.{trained}.weight"),
            data={"layers": n, "served_norm": served, "trained_norm": trained},
        )
    ]


def _not_served(rule: Any, n: int, label: str, name: str, executed: str, engine: str, info: Any) -> Any:
    from ..core.findings import Finding
    from ..engines.draft_table import serving_elsewhere

    held = "hidden_norm" if _holds(info, "layers.1.hidden_norm.weight") else "input_layernorm"
    other = serving_elsewhere(engine, held)

    got = rule.two_layers if rule.two_layers.startswith("built") else "raised " + rule.two_layers
    up = (
        f"upgrade to {name} >= {rule.first_serving}, which builds every layer"
        if rule.first_serving
        else "no release of it serves more than one layer"
    )
    return Finding(
        "FWD010",
        f"{label} does not serve this {n}-layer draft",
        [f"the checkpoint holds {n} decoder layers (num_hidden_layers = {n})", executed + got],
        up + (f" (or serve with {other})" if other else ""),
        data={"layers": n, "served": rule.two_layers},
    )


def _holds(info: Any, key: str) -> bool:
    return any(k == key or k.endswith("." + key) for k in info.weight_keys)


def _flag_findings(cfg: Any, info: Any, sf: ServedForward, engine: str, version: str, label: str) -> list[Any]:
    """FWD001: each forward flag the engine runs at another value than training used, with the edit that aligns it."""
    from ..core.findings import Finding, config_fix, json_snippet

    out: list[Any] = []
    for flag, (value, why) in sf.flags.items():
        trained = bool(getattr(cfg, flag))
        if value == trained:
            continue
        rule = sf.serving.flags[flag]
        assert rule is not None
        ev = [
            f"trained: {flag} = {json_bool(trained)} ({trained_where(flag, info)})",
            f"served by {label}: {flag} = {json_bool(value)}: {why}",
        ]
        if flag == "norm_before_lm_head":
            fix = (
                "no engine runs lm_head without the final norm: retrain with it (SpecForge: drop "
                '"norm_output": false; SpecForge after PR #879 always norms before lm_head)'
            )
        elif flag == "norm_output" and info.format == "sglang":
            ev.append(
                "SpecForge 0.2.0 trained norm_output as 'norm before lm_head' and fed back the pre-norm state "
                "(llama3_eagle.py:1690, 1773-1778); the engine reads the key as 'feed the normed state'"
            )
            fix = config_fix(
                "delete \"norm_output\" from the draft's config.json: SpecForge 0.2.0's default (norm before "
                f"lm_head, pre-norm state fed back) is what {label} runs when the key is absent",
                "norm_output",
                op="delete",
            )
        elif rule.keys:
            fix = config_fix(f"set {json_snippet(rule.keys[0], trained)} in the draft's config.json", rule.keys[0], trained)
            moved = [k for k in flag_keys_present(info.config, flag) if k not in rule.keys]
            if moved:
                ev.append(f"{label} never reads {', '.join(moved)}")
        elif engine == "declared":
            fix = (
                f"make {label} run the draft with {flag} = {json_bool(trained)}, as it was trained, or retrain with "
                f"{json_bool(value)}; if the engine does not do this, correct draft.{flag} in {version}"
            )
        else:
            newest = newest_release(engine)
            fix = (
                f"{label} cannot run this flag: "
                + (f"upgrade to {rule.fixed_by}" if rule.fixed_by else "no release of it reads a key for it")
                + (f" (--engine-version {newest} models one)" if rule.fixed_by and newest != version else "")
                + (f", or retrain without {flag}" if flag != "norm_before_lm_head" else "")
            )
        out.append(
            Finding(
                "FWD001",
                f"{label} runs the draft with {flag} = {json_bool(value)}, it was trained with {json_bool(trained)}",
                ev,
                fix,
                data={"flag": flag, "trained": trained, "served": value},
            )
        )
    return out


def _undetermined_findings(cfg: Any, info: Any, sf: ServedForward, label: str) -> list[Any]:
    from ..core.findings import Finding

    out: list[Any] = []
    for flag in sf.undetermined:
        trained = bool(getattr(cfg, flag))
        if trained == (flag == "norm_before_lm_head"):
            continue  # the flag is at its plain EAGLE-3 value: every version runs that
        out.append(
            Finding(
                "FWD002",
                f"undetermined whether {label} runs the draft with {flag} = {json_bool(trained)}",
                [
                    f"trained: {flag} = {json_bool(trained)} ({trained_where(flag, info)})",
                    f"which key {label} reads for {flag} is not pinned to a source (see draft/served.py)",
                ],
                f"check that the engine logs or applies {flag}, or name a modelled version with --engine-version",
            )
        )
    return out


def _weight_source_findings(
    draft: Any, cfg: Any, sf: ServedForward, engine: str, version: str, label: str, target_head: Any, target_embed: Any
) -> list[Any]:
    """FWD003/FWD004: trained weights the engine swaps for the target's or for embed_tokens."""
    out: list[Any] = []
    row = sf.serving
    if engine == "declared":
        up = f"make {label} keep the draft's own weights, or correct draft.embed / draft.lm_head in {version}"
    else:
        newest = newest_release(engine)
        up = f"upgrade to a release with {row.weights_fixed_by}" + (
            f" (--engine-version {newest} models one)" if newest != version else ""
        )
    # the draft's weights are copied to float32 only where a swap is in question: an embedding matrix is GBs
    if sf.embed_from_target and target_embed is not None and row.embed == "target-if-same-shape":
        embed = own_weight(draft, "embed_tokens")
        if embed is not None and tuple(target_embed.shape) == tuple(embed.shape):
            out += _replaced_weight_findings("embed_tokens", target_embed, embed, row, label, up)
    if sf.head_from_target and target_head is not None:
        head = own_weight(draft, "lm_head")
        if head is not None and tuple(target_head.shape) == tuple(head.shape):
            out += _replaced_weight_findings("lm_head", target_head, head, row, label, up)
    if sf.head_is_embed:
        out.append(_tied_head_finding(draft, cfg, row, label))
    return out


def own_weight(draft: Any, module: str) -> Any:
    """The draft's own ``embed_tokens`` or ``lm_head`` weight in float32 numpy, or None where it has none:
    from the checkpoint as read (inspect, no torch) or from a loaded Eagle3Draft."""
    from .formats import DraftCheckpoint

    if isinstance(draft, DraftCheckpoint):
        w = draft.weight(f"{module}.weight")
        if w is None and module == "lm_head":  # read_draft's stand-in for a missing head
            return np.zeros((draft.config.draft_vocab_size, draft.config.hidden_size), dtype=np.float32)
        return w
    m = getattr(draft, module)
    return None if m is None else _as_f32(m.weight)


def _embed_rows(draft: Any) -> int | None:
    from .formats import DraftCheckpoint

    if isinstance(draft, DraftCheckpoint):
        t = draft.state.get("embed_tokens.weight")
        return None if t is None else t.shape[0]
    return None if draft.embed_tokens is None else int(draft.embed_tokens.weight.shape[0])


def _as_f32(x: Any) -> Any:
    """float32 numpy of a numpy array, an array-like read on demand, or a torch tensor (any dtype, any device)."""
    if isinstance(x, np.ndarray):
        return x.astype(np.float32, copy=False)
    if not hasattr(x, "detach"):  # inspect's TargetTensor: numbers read from the file when asked
        return np.asarray(x, dtype=np.float32)
    return x.detach().float().cpu().numpy()


def _replaced_weight_findings(weight: str, target: Any, own: Any, row: DraftServing, label: str, up: str) -> list[Any]:
    """FWD003 for one weight, only where the target's copy differs from the draft's (a draft trained
    with the target's frozen weights loses nothing by the swap)."""
    from ..core.findings import Finding

    diff = float(np.abs(_as_f32(target) - own).max())
    if diff > 1e-3:
        return [
            Finding(
                "FWD003",
                f"{label} replaces the draft's own {weight} with the target's",
                [f"draft and target {weight} differ by up to {diff:.4g}", row.weights_source],
                up,
                data={"weight": weight},
            )
        ]
    return []


def _tied_head_finding(draft: Any, cfg: Any, row: DraftServing, label: str) -> Any:
    """FWD004: tie_word_embeddings makes the engine drop the trained lm_head for embed_tokens."""
    from ..core.findings import Finding, config_fix

    rows = _embed_rows(draft)
    shape_ok = rows is not None and rows == cfg.draft_vocab_size
    return Finding(
        "FWD004",
        f"tie_word_embeddings: true makes {label} use embed_tokens as the draft's lm_head",
        [
            f"{row.weights_source}",
            f"the trained lm_head.weight [{cfg.draft_vocab_size}, {cfg.hidden_size}] is ignored"
            + ("" if shape_ok else f"; embed_tokens has {cfg.vocab_size} rows, the draft vocabulary {cfg.draft_vocab_size}"),
        ],
        config_fix('set "tie_word_embeddings": false in the draft\'s config.json', "tie_word_embeddings", False),
    )
