"""How the engine rotates the draft's RoPE (NeoX or GPT-J-interleaved) and whether it applies the
draft's q/k norms, against what training used, with the findings and the weight rewrite that fixes a
layout."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .served import DraftServing, FlagRule, ServedForward, json_bool, lookup, served_flag

if TYPE_CHECKING:
    from ..core.findings import Fix

_TRAINERS = {
    "speculators": "speculators 0.9.0 (transformers' Llama/Qwen3 attention, rotate-half)",
    "sglang": "SpecForge 0.2.0 (llama3_eagle.py:126-141, rotate-half)",
    "eagle": "EAGLE (eagle/model/cnets.py, rotate-half)",
}


_LLAMA4 = ("llama4", "llama4_text")


def _layer_config(config: dict[str, Any]) -> dict[str, Any]:
    tl = config.get("transformer_layer_config")
    return tl if isinstance(tl, dict) else {}


def trained_rope_interleaved(info: Any, target_config: dict[str, Any] | None = None) -> tuple[bool | None, str]:
    """(interleaved, why) for the RoPE layout the draft was trained with: True = GPT-J pairs,
    False = NeoX halves, None = undetermined (a Llama 4 target, whose own RoPE is interleaved, and
    a draft config that names no layout: no weight statistic tells the two apart reliably)."""
    c, tl = info.config, _layer_config(info.config)
    for key, node in (("rope_is_neox_style", c), ("transformer_layer_config.rope_is_neox_style", tl)):
        v = node.get("rope_is_neox_style")
        if isinstance(v, bool):
            return (not v), f"{key} = {json_bool(v)}"
    tc = target_config or {}
    llama4 = {
        str(c.get("model_type", "")).lower(),
        str(tl.get("model_type", "")).lower(),
        str(tc.get("model_type", "")).lower(),
    } & set(_LLAMA4) or any("llama4" in str(a).lower() for a in (tc.get("architectures") or []))
    if llama4:
        return None, (
            "Llama 4: its transformers model rotates GPT-J-interleaved pairs (modeling_llama4.py:225-231) and "
            "TensorRT-LLM PR #19036 reports a Llama 4 drafter trained that way, while SpecForge and "
            "speculators train NeoX; the draft config names no layout (rope_is_neox_style)"
        )
    trainer = _TRAINERS.get(info.format, "every EAGLE-3 trainer the doctor models")
    return False, f"no rope_is_neox_style: NeoX, the only layout {trainer} trains"


def neox_fix(cfg: Any, key: str = "rope_is_neox_style") -> Any:
    """The weight rewrite that turns a GPT-J-trained draft into the same function under NeoX RoPE:
    per head, rotary rows (0, 2, 4, ..., 1, 3, 5, ...) of q_proj and k_proj (vLLM's own
    permute_qk_weight_for_rotary for Llama 4, restricted to the rotary dims)."""
    from ..core.findings import DRAFT_WEIGHTS, Fix, json_snippet
    from .rope import rope_inv_freq

    d, r = int(cfg.head_dim), 2 * int(rope_inv_freq(cfg).numel())
    nq, nkv = cfg.num_attention_heads, cfg.num_key_value_heads
    code = (
        "import torch; from safetensors.torch import load_file, save_file; sd = load_file(p); "
        f"f = lambda w, n: (lambda x: torch.cat([x[:, 0:{r}:2], x[:, 1:{r}:2], x[:, {r}:]], 1).reshape(w.shape))"
        f"(w.reshape(n, {d}, -1)); "
        f"sd = {{k: f(v, {nq} if 'q_proj' in k else {nkv}) if ('q_proj' in k or 'k_proj' in k) else v "
        "for k, v in sd.items()}; save_file(sd, p)"
    )
    return Fix(
        f"rewrite q_proj/k_proj (weights and any bias) in NeoX order, then set {json_snippet(key, True)} in the "
        f"draft's config.json (python, for each *.safetensors file p: {code})",
        file=DRAFT_WEIGHTS,
        key="q_proj, k_proj",
        op="rewrite",
        snippet=code,
    )


def _rope_name(interleaved: bool) -> str:
    return "GPT-J-interleaved" if interleaved else "NeoX (rotate-half)"


def rope_findings(info: Any, cfg: Any, sf: ServedForward | None, label: str, target_config: dict[str, Any] | None) -> list[Any]:
    """FWD006 where the engine rotates in another layout than training; FWD007 where the trained
    layout is undetermined."""
    from ..core.findings import Finding

    if sf is None or sf.serving.rope_neox is None:
        return []
    rule = sf.serving.rope_neox
    neox, why = served_flag(rule, info.config)
    trained, twhy = trained_rope_interleaved(info, target_config)
    served_ev = f"served by {label}: {_rope_name(not neox)}: {why}"
    if trained is None:
        return [_rope_undetermined_finding(label, neox, twhy, served_ev)]
    if trained == (not neox):
        return []
    ev = [
        f"trained: {_rope_name(trained)} ({twhy})",
        served_ev,
        "each q/k pair is rotated by another frequency than in training: attention scores lose their positions "
        "(TensorRT-LLM PR #19036: acceptance length 1.01)",
    ]
    fix, unread = _rope_fix(rule, info, cfg, trained, label)
    ev += unread
    return [
        Finding(
            "FWD006",
            f"{label} rotates the draft's RoPE {_rope_name(not neox)}, it was trained {_rope_name(trained)}",
            ev,
            fix,
            data={"trained_interleaved": trained, "served_interleaved": not neox},
        )
    ]


def _rope_undetermined_finding(label: str, neox: bool, twhy: str, served_ev: str) -> Any:
    """FWD007: only the user knows the layout training used; the config key settles it for the engines that read it."""
    from ..core.findings import DRAFT_CONFIG, Finding, Location

    return Finding(
        "FWD007",
        f"undetermined whether the draft was trained with NeoX or GPT-J-interleaved RoPE; {label} runs it {_rope_name(not neox)}",
        [f"trained: undetermined: {twhy}", served_ev],
        'write the layout training used into the draft\'s config.json: "rope_is_neox_style": true '
        "(NeoX: SpecForge, speculators) or false (GPT-J); `eagle3-doctor acceptance` measures the "
        "draft under both and names the one its weights fit",
        data={"trained": None, "served_interleaved": not neox},
        location=Location(DRAFT_CONFIG, "rope_is_neox_style"),
    )


def _rope_fix(rule: FlagRule, info: Any, cfg: Any, trained: bool, label: str) -> tuple[Any, list[str]]:
    """(fix, evidence about keys the engine ignores) for FWD006: an engine that reads the layout
    gets the key; one that always rotates NeoX needs the weights permuted instead."""
    from ..core.findings import config_fix, json_snippet

    unread: list[str] = []
    fix: Fix | str  # a text fix where no edit applies
    if rule.keys:
        fix = config_fix(f"set {json_snippet(rule.keys[0], not trained)} in the draft's config.json", rule.keys[0], not trained)
        moved = [
            k
            for k in ("transformer_layer_config.rope_is_neox_style",)
            if lookup(info.config, k) is not None and k not in rule.keys
        ]
        if moved:
            unread.append(f"{label} never reads {', '.join(moved)}")
    elif trained:
        fix = neox_fix(
            cfg,
            next(
                (
                    k
                    for k in ("rope_is_neox_style", "transformer_layer_config.rope_is_neox_style")
                    if isinstance(lookup(info.config, k), bool)
                ),
                "rope_is_neox_style",
            ),
        )
    else:  # trained NeoX, engine GPT-J: no modelled engine does this
        fix = f"{label} cannot rotate NeoX-style: serve with an engine that does"
    return fix, unread


def served_qk_norm(row: DraftServing, info: Any) -> bool:
    """Whether the engine row runs q_norm/k_norm for this checkpoint."""
    if row.qk_norm != "qwen3":
        return False
    if info.format == "speculators":
        return _layer_config(info.config).get("model_type") == "qwen3"
    return any(
        "Qwen3ForCausalLM" in str(a) and "Eagle3" in str(a) or str(a) == "PeagleQwen3ForCausalLM"
        for a in info.config.get("architectures") or []
    )


def qk_norm_findings(info: Any, cfg: Any, sf: ServedForward | None, label: str) -> list[Any]:
    """FWD008 where the draft's attention was trained with Qwen3's q/k norms and the engine runs
    (or loads) it without them."""
    from ..core.findings import Finding, config_fix, json_snippet

    if sf is None or not cfg.qk_norm or served_qk_norm(sf.serving, info):
        return []
    row = sf.serving
    trained = [
        "trained: q_norm/k_norm over head_dim before RoPE ("
        + ", ".join(
            b
            for b in (
                f"transformer_layer_config.model_type = {_layer_config(info.config).get('model_type')!r}"
                if _layer_config(info.config).get("model_type")
                else "",
                "weights hold self_attn.q_norm.weight / k_norm.weight"
                if any(k.endswith("q_norm.weight") for k in info.weight_keys)
                else "",
            )
            if b
        )
        + ")",
        f"served by {label}: no q/k norm ({row.qk_norm_source})",
    ]
    if row.engine == "vllm" and row.qk_norm == "never":
        fix = f"{label} has no Qwen3 EAGLE-3 draft: upgrade to vLLM 0.33.0 or later (--engine-version 0.33.0 models it)"
    elif row.engine == "vllm" and row.qk_norm == "qwen3":
        trained.append(
            f"{label} runs q/k norms for architectures Eagle3Qwen3ForCausalLM (registry.py:705) or a "
            "speculators config whose transformer_layer_config.model_type is qwen3"
        )
        # what vLLM's check reads (served_qk_norm): the layer config's type in the speculators format,
        # the registered class otherwise
        key, value = (
            ("transformer_layer_config.model_type", "qwen3")
            if info.format == "speculators"
            else ("architectures", ["Eagle3Qwen3ForCausalLM"])
        )
        fix = config_fix(f"set {json_snippet(key, value)} in the draft's config.json", key, value)
    else:
        fix = (
            f"{label} cannot run a Qwen3 draft layer: serve with vLLM 0.33.0 or later (speculators format, "
            'transformer_layer_config.model_type "qwen3"), or retrain the draft with a Llama layer'
        )
    return [
        Finding(
            "FWD008",
            f"{label} runs the draft's attention without the q_norm/k_norm it was trained with",
            trained,
            fix,
            data={"weight": "q_norm/k_norm"},
        )
    ]
