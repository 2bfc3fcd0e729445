"""MTP checkpoint layouts, read into :class:`MTPHead` and written back.

| layout            | where                                   | names                                              | head, embeddings |
|-------------------|-----------------------------------------|----------------------------------------------------|------------------|
| ``deepseek``      | inside the target: ``num_nextn_predict_layers`` in its config, tensors ``model.layers.{L}.*`` (L = ``num_hidden_layers``) | ``enorm``, ``hnorm``, ``eh_proj``, ``shared_head.{norm,head}``, the decoder layer's own names | ``shared_head.head`` and ``embed_tokens`` stored in the layer (vLLM ``deepseek_mtp.py`` ``_rewrite_spec_layer_name``) |
| ``speculators``   | its own directory: ``speculators_model_type: "mtp"``, architectures ``MTPDraftModel`` | ``mtp_layers.0.{token_layernorm, hidden_layernorm, input_proj, final_layernorm}`` + the layer's | not stored: the verifier's (``models/mtp/core.py`` ``_keys_to_ignore_on_save``) |

speculators' names are its converter's renames of Qwen3-Next's ``mtp.*`` (``convert/mtp/converter.py``:
``mtp.fc`` -> ``input_proj``, ``mtp.norm`` -> ``final_layernorm``, ``pre_fc_norm_hidden`` ->
``hidden_layernorm``, ``pre_fc_norm_embedding`` -> ``token_layernorm``); its layer concatenates
``[token_layernorm(embed), hidden_layernorm(h)]`` in DeepSeek's order (``model_definitions.py``).

Only Llama/Qwen3-style decoder layers are modelled (q/k/v/o, SwiGLU MLP); DeepSeek-V3's own MLA and MoE
layer is refused with one line, never read half-way.

What the head was trained on is not in either layout. The doctor reads its own record, the config key
``mtp_trained_hidden`` (``layer_out_last`` or ``final_norm``, written by ``fixtures/build.py`` and by ``fix``),
and otherwise a per-layout default, named as such in every report.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.errors import BadInput
from ..config import DraftConfig
from .config import MTPConfig

HIDDEN_KEY = "mtp_trained_hidden"
RECYCLE_KEY = "mtp_trained_recycle"
_SPEC = {
    "mtp_layers.0.token_layernorm.": "enorm.",
    "mtp_layers.0.hidden_layernorm.": "hnorm.",
    "mtp_layers.0.input_proj.": "eh_proj.",
    "mtp_layers.0.final_layernorm.": "shared_head.norm.",
    "mtp_layers.0.": "layer.",
}
_OWN = ("enorm.", "hnorm.", "eh_proj.", "shared_head.", "embed_tokens.")
_MLA = ("q_a_proj", "kv_a_proj_with_mqa", "kv_b_proj", "mlp.experts.", "mlp.gate.weight")
# trained-side defaults when the checkpoint records nothing, each with its source
DEFAULTS = {
    "speculators": (
        "layer_out_last",
        "post_norm",
        "speculators trains MTP on verifier_last_hidden_states (models/mtp/data.py), made by vLLM's "
        "extract_hidden_states, whose id L is the pre-norm last layer; its layer hands final_layernorm(out) on "
        "(models/mtp/model_definitions.py, core.py)",
    ),
    "deepseek": (
        "final_norm",
        "pre_norm",
        "DeepSeek publishes no MTP training code: taken as what vLLM feeds it (the target forward's normed output, "
        "v1/worker/gpu_model_runner.py, deepseek_v2.py) and recycles (deepseek_mtp.py: residual + hidden_states)",
    ),
}


@dataclass
class MTPInfo:
    """What was found in an MTP checkpoint, beside the weights."""

    path: str
    format: str
    format_reason: str
    config: dict[str, Any]
    weight_keys: list[str] = field(default_factory=list)
    layer_index: int | None = None  # deepseek layout: the L of model.layers.{L}
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    has_head: bool = False
    weight_dtype: str | None = None
    num_speculative_tokens: int | None = None
    hidden_source: str = ""


def detect_mtp(config: dict[str, Any], keys: list[str]) -> tuple[str, str] | None:
    """(layout, why) when the directory holds an MTP head; None otherwise (an EAGLE-3 draft, or no drafter)."""
    a = config.get("architectures")
    archs: list[Any] = a if isinstance(a, list) else []
    if config.get("speculators_model_type") == "mtp" or "MTPDraftModel" in archs:
        return "speculators", "config has speculators_model_type mtp / architectures MTPDraftModel"
    n = config.get("num_nextn_predict_layers")
    L = config.get("num_hidden_layers")
    if isinstance(n, int) and n > 0 and isinstance(L, int):
        if f"model.layers.{L}.eh_proj.weight" in keys:
            return "deepseek", f"num_nextn_predict_layers = {n} and model.layers.{L}.eh_proj.weight in the target's weights"
        if n == L and "model.layers.0.eh_proj.weight" in keys:
            # SGLang's NextN export: the one layer alone, as model.layers.0 (deepseek_nextn.py load_weights asserts
            # num_nextn_predict_layers == num_hidden_layers and reads the prefix "model.layers.0")
            return (
                "deepseek",
                f"num_nextn_predict_layers = num_hidden_layers = {n} and model.layers.0.eh_proj.weight (SGLang's NextN export)",
            )
    return None


def layer_index(config: dict[str, Any], keys: list[str]) -> int | None:
    """The L of ``model.layers.{L}.*`` that holds the head in the deepseek layout (0 in SGLang's NextN export)."""
    L = config.get("num_hidden_layers")
    if not isinstance(L, int):
        return None
    return L if f"model.layers.{L}.eh_proj.weight" in keys else 0


def canonical_names(fmt: str, keys: list[str], layer_index: int | None) -> dict[str, str]:
    """Stored name -> MTPHead name, for the tensors that belong to the head."""
    out: dict[str, str] = {}
    for k in keys:
        if fmt == "speculators":
            pre = next((p for p in _SPEC if k.startswith(p)), None)
            if pre is not None:
                out[k] = _SPEC[pre] + k[len(pre) :]
        elif k.startswith(f"model.layers.{layer_index}."):
            rest = k[len(f"model.layers.{layer_index}.") :]
            out[k] = rest if rest.startswith(_OWN) else "layer." + rest
    return out


def _layer_fields(c: dict[str, Any], where: str) -> DraftConfig:
    from ...io.checks import check_draft_layer_config

    check_draft_layer_config(c, where)
    need = ("hidden_size", "intermediate_size", "num_attention_heads", "vocab_size")
    lacking = [k for k in need if not isinstance(c.get(k), int)]
    if lacking:
        raise BadInput(f"{where} lacks {', '.join(lacking)}", "restore the MTP checkpoint's config.json")
    keep = ("num_key_value_heads", "head_dim", "rms_norm_eps", "rope_theta", "rope_scaling", "max_position_embeddings")
    f = {k: c[k] for k in need + keep if c.get(k) is not None}
    f.setdefault("num_key_value_heads", f["num_attention_heads"])
    try:
        return DraftConfig(draft_vocab_size=f["vocab_size"], attention_bias=bool(c.get("attention_bias")), **f)
    except (TypeError, ValueError) as e:
        raise BadInput(f"{where} is not usable: {e}", "restore the MTP checkpoint's config.json") from None


def mtp_config(fmt: str, raw: dict[str, Any], state_keys: set[str]) -> MTPConfig:
    """The head's configuration from its layout's config.json and weights (qk norms by the weights)."""
    layer_cfg = raw.get("transformer_layer_config") if fmt == "speculators" else raw
    if not isinstance(layer_cfg, dict):
        raise BadInput("the speculators MTP config has no transformer_layer_config", "restore config.json")
    layer = _layer_fields(layer_cfg, "config.json" + (" transformer_layer_config" if fmt == "speculators" else ""))
    layer.qk_norm = "layer.self_attn.q_norm.weight" in state_keys
    hidden, recycle, why = DEFAULTS[fmt]
    source = f"{fmt} layout default ({why})"
    if raw.get(HIDDEN_KEY) is not None or raw.get(RECYCLE_KEY) is not None:
        hidden, recycle = raw.get(HIDDEN_KEY, hidden), raw.get(RECYCLE_KEY, recycle)
        source = f"{HIDDEN_KEY} = {json.dumps(hidden)} in config.json (the doctor's own record; no trainer writes it)"
    try:
        return MTPConfig(layer, hidden=hidden, recycle=recycle, hidden_source=source)
    except ValueError as e:
        raise BadInput(f"config.json: {e}", f"write {HIDDEN_KEY} as layer_out_last or final_norm") from None


def expected_names(cfg: MTPConfig) -> dict[str, tuple[int, ...]]:
    """MTPHead's stored tensors and shapes (shared_head.head optional: the target's when absent)."""
    from ..shapes import _layer

    H = cfg.hidden_size
    out = {"enorm.weight": (H,), "hnorm.weight": (H,), "eh_proj.weight": (H, 2 * H)}
    out.update(_layer("layer.", cfg.layer, first=False))
    out["shared_head.norm.weight"] = (H,)
    return out


def read_mtp_checkpoint(path: str | os.PathLike, fmt: str | None = None) -> tuple[MTPConfig, MTPInfo, dict[str, Any]]:
    """(config, info, {MTPHead name: StoredArray}) without torch: what inspect audits and read_mtp builds."""
    from ...io.hub import load_weights_dir
    from ...io.safeio import read_json_object

    d = Path(path)
    raw = read_json_object(d / "config.json", "point --draft at the MTP checkpoint (or the target holding its layer)")
    tensors = load_weights_dir(d)
    keys = sorted(tensors)
    found = detect_mtp(raw, keys)
    if found is None:
        raise BadInput(
            f"{d} holds no MTP head", "pass an MTP checkpoint (speculators mtp, or a target with num_nextn_predict_layers)"
        )
    fmt, why = found
    L = layer_index(raw, keys) if fmt == "deepseek" else None
    names = canonical_names(fmt, keys, L)
    if any(m in n for n in names for m in _MLA):
        raise BadInput(
            f"the MTP layer in {d} is an MLA/MoE layer (DeepSeek-V3's own): not modelled",
            "run the doctor on a head with a Llama/Qwen3-style decoder layer",
        )
    state = {names[k]: tensors[k] for k in names}
    cfg = mtp_config(fmt, raw, set(state))
    expected = expected_names(cfg)
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected and k not in ("shared_head.head.weight", "embed_tokens.weight")]
    bad = [k for k, s in expected.items() if k in state and tuple(state[k].shape) != s]
    if missing or bad:
        raise BadInput(
            f"the MTP head in {d} does not match its config: "
            + ", ".join(
                [f"missing {k}" for k in missing[:3]] + [f"{k} {tuple(state[k].shape)} != {expected[k]}" for k in bad[:3]]
            ),
            "re-export the MTP checkpoint",
        )
    steps = _speculative_tokens(raw)
    info = MTPInfo(
        str(d), fmt, why, raw, keys, L, missing, unexpected,
        has_head="shared_head.head.weight" in state, weight_dtype=state["eh_proj.weight"].dtype,
        num_speculative_tokens=steps, hidden_source=cfg.hidden_source,
    )  # fmt: skip
    return cfg, info, state


def _speculative_tokens(raw: dict[str, Any]) -> int | None:
    pm = (
        (raw.get("speculators_config") or {}).get("proposal_methods") if isinstance(raw.get("speculators_config"), dict) else None
    )
    if isinstance(pm, list) and pm and isinstance(pm[0], dict) and isinstance(pm[0].get("speculative_tokens"), int):
        return pm[0]["speculative_tokens"]
    return None


def read_mtp(path: str | os.PathLike, *, device: str = "cpu", dtype: Any = None, target_embed: Any, target_head: Any):
    """(MTPHead, MTPInfo): the head on ``device`` in ``dtype``, the target's embeddings attached and the
    target's lm_head as ``shared_head.head`` where the checkpoint stores none (speculators)."""
    import torch

    from .model import MTPHead

    cfg, info, state = read_mtp_checkpoint(path)
    dt = dtype or getattr(torch, info.weight_dtype or "float32")
    head = MTPHead(cfg)
    sd = {k: v.to_torch() for k, v in state.items() if k != "embed_tokens.weight"}
    if "shared_head.head.weight" not in sd:
        sd["shared_head.head.weight"] = target_head.detach().cpu()
    head.load_state_dict(sd, strict=True)
    head.to(device=device, dtype=dt)
    head.set_embeddings(target_embed.to(device=device, dtype=dt))
    head.eval().requires_grad_(False)
    return head, info
