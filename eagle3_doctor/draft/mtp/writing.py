"""An MTP head written in a released layout (the fixtures, ``fix``'s corrected copy, the tests' round trips)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .formats import _SPEC, HIDDEN_KEY, RECYCLE_KEY


def _layer_config(head: Any) -> dict[str, Any]:
    c = head.config.layer
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "qwen3" if c.qk_norm else "llama",
        "hidden_size": c.hidden_size,
        "intermediate_size": c.intermediate_size,
        "num_attention_heads": c.num_attention_heads,
        "num_key_value_heads": c.num_key_value_heads,
        "head_dim": c.head_dim,
        "num_hidden_layers": 1,
        "vocab_size": c.vocab_size,
        "rms_norm_eps": c.rms_norm_eps,
        "rope_theta": c.rope_theta,
        "rope_scaling": c.rope_scaling,
        "max_position_embeddings": c.max_position_embeddings,
        "hidden_act": c.hidden_act,
        "attention_bias": c.attention_bias,
        "tie_word_embeddings": False,
    }


def speculators_config(head: Any, verifier: str, num_steps: int) -> dict[str, Any]:
    """speculators' MTPConfig as it serialises (models/mtp/config.py), plus the doctor's record of the training."""
    return {
        "architectures": ["MTPDraftModel"],
        "speculators_model_type": "mtp",
        "num_nextn_predict_layers": 1,
        "transformer_layer_config": _layer_config(head),
        "speculators_config": {
            "algorithm": "mtp",
            "default_proposal_method": "greedy",
            "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": num_steps}],
            "verifier": {"architectures": ["LlamaForCausalLM"], "name_or_path": verifier},
        },
        HIDDEN_KEY: head.config.hidden,
        RECYCLE_KEY: head.config.recycle,
    }


def _stored(head: Any, fmt: str, L: int | None) -> dict[str, Any]:
    back = {v: k for k, v in _SPEC.items()}
    out = {}
    for k, v in head.state_dict().items():
        if k == "embed_tokens.weight":
            continue  # the target's, shared (stored by write_mtp in the deepseek layout only)
        if fmt == "speculators":
            if k == "shared_head.head.weight":
                continue  # the verifier's lm_head (core.py _keys_to_ignore_on_save)
            pre = next(p for p in ("enorm.", "hnorm.", "eh_proj.", "shared_head.norm.", "layer.") if k.startswith(p))
            name = back[pre] + k[len(pre) :]
        else:
            name = f"model.layers.{L}." + (k[len("layer.") :] if k.startswith("layer.") else k)
        out[name] = v.detach().contiguous().cpu()
    return out


def write_mtp(
    head: Any,
    path: str | os.PathLike,
    fmt: str,
    *,
    verifier: str = "",
    num_steps: int = 3,
    target_dir: str | None = None,
    layer: int | None = None,
) -> None:
    """Save the head: ``speculators`` (its own directory) or ``deepseek`` (a copy of ``target_dir`` with
    ``model.layers.{L}.*`` added or replaced, L = ``layer`` or the target's ``num_hidden_layers``,
    ``num_nextn_predict_layers`` set and the shared embeddings stored in the layer)."""
    from safetensors.torch import load_file, save

    from ...io.copies import copy_regular_files, write_file

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    # serialised here and written by Python, so a full disk is an OSError (fix's stage names it in one line)
    if fmt == "speculators":
        write_file(out / "model.safetensors", save(_stored(head, fmt, None), metadata={"format": "pt"}))
        cfg = speculators_config(head, verifier, num_steps)
    else:
        assert target_dir is not None, "the deepseek layout lives inside a target checkpoint"
        if not (Path(target_dir) / "model.safetensors").is_file():
            from ...core.errors import BadInput

            raise BadInput(
                f"{target_dir} is not a single model.safetensors: the deepseek-layout copy is written for one-file checkpoints only",
                "apply the printed hnorm rewrite to the shard holding model.layers.{L}.hnorm.weight",
            )
        copy_regular_files(target_dir, out, "--draft", skip=("model.safetensors",))
        cfg = json.loads((Path(target_dir) / "config.json").read_text())
        L = cfg["num_hidden_layers"] if layer is None else layer
        tensors = load_file(str(Path(target_dir) / "model.safetensors"))
        tensors.update(_stored(head, fmt, L))
        if "model.embed_tokens.weight" in tensors:
            tensors[f"model.layers.{L}.embed_tokens.weight"] = tensors["model.embed_tokens.weight"].clone()
        write_file(out / "model.safetensors", save(tensors, metadata={"format": "pt"}))
        cfg.update(
            {
                "num_nextn_predict_layers": cfg.get("num_nextn_predict_layers") or 1,
                HIDDEN_KEY: head.config.hidden,
                RECYCLE_KEY: head.config.recycle,
            }
        )
    write_file(out / "config.json", (json.dumps(cfg, indent=2, sort_keys=True) + "\n").encode())
