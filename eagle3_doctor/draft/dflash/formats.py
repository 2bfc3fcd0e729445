"""A DFlash checkpoint read into :class:`~.model.DFlashDraft`: the DFlash reference's layout, which SpecForge
and speculators export (config.json with ``dflash_config``, ``block_size``; weights ``fc``, ``hidden_norm``,
``layers.*``, ``norm``; no embedding or head, the target's are used)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...core.errors import BadInput
from .model import DFlashConfig, DFlashDraft


def read_dflash(path: str, target_hidden: int, vocab_size: int, device: Any, dtype: Any) -> tuple[DFlashDraft, dict[str, Any]]:
    """The draft on ``device`` in ``dtype`` and its raw config; refused in one line where it cannot run."""
    from ...io.checks import check_dflash_config
    from ...io.hub import load_weights_dir
    from ...io.safeio import read_json_object

    raw = read_json_object(Path(path) / "config.json", "point --draft at the DFlash checkpoint")
    check_dflash_config(raw, f"{path}/config.json")
    arrays = load_weights_dir(Path(path))
    sd = {k.removeprefix("model."): a.to_torch() for k, a in arrays.items()}
    fc = sd.get("fc.weight")
    if fc is None or fc.ndim != 2 or fc.shape[1] % target_hidden:
        raise BadInput(
            f"the DFlash draft in {path} has no fc taking a multiple of {target_hidden} inputs",
            "pass the draft this target was trained with",
        )
    if not isinstance(raw.get("block_size"), int) or raw["block_size"] < 2:
        raise BadInput(f"{path}/config.json has no block_size >= 2", "restore the DFlash draft's config.json")
    c = DFlashConfig.from_dict(raw, fc.shape[1] // target_hidden)
    if not 0 <= c.mask_token_id < vocab_size:
        raise BadInput(
            f"the DFlash draft's mask_token_id {c.mask_token_id} is not a token of the target's {vocab_size}",
            'set "dflash_config": {"mask_token_id": ID} to the id the draft was trained with',
        )
    draft = DFlashDraft(c)
    try:
        draft.load_state_dict(sd, strict=True)
    except RuntimeError as e:
        first = str(e).splitlines()[0][:200]
        raise BadInput(f"the DFlash draft in {path} does not match its config.json ({first})", "re-export the draft") from None
    inv_freq = draft.inv_freq  # float32: .to(dtype) below would round the frequencies, which every engine keeps in float32
    draft = draft.to(device=device, dtype=dtype).eval().requires_grad_(False)
    draft.inv_freq = inv_freq.to(device)
    return draft, raw


def write_dflash(draft: DFlashDraft, out: Path, target_layer_ids: list[int], num_target_layers: int) -> None:
    """The draft in the DFlash reference's layout (the fixture's build writes it so)."""
    import json

    from safetensors.torch import save_file

    c = draft.config
    out.mkdir(parents=True, exist_ok=True)
    cfg = {
        "architectures": ["DFlashDraftModel"], "model_type": "qwen3", "hidden_size": c.hidden_size,
        "intermediate_size": c.intermediate_size, "num_attention_heads": c.num_attention_heads,
        "num_key_value_heads": c.num_key_value_heads, "head_dim": c.head_dim, "num_hidden_layers": c.num_hidden_layers,
        "rms_norm_eps": c.rms_norm_eps, "rope_theta": c.rope_theta, "max_position_embeddings": c.max_position_embeddings,
        "attention_bias": c.attention_bias, "block_size": c.block_size, "num_target_layers": num_target_layers,
        "dflash_config": {"target_layer_ids": list(target_layer_ids), "mask_token_id": c.mask_token_id},
        "torch_dtype": "float32",
    }  # fmt: skip
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    save_file(
        {k: v.contiguous() for k, v in draft.state_dict().items()}, str(out / "model.safetensors"), metadata={"format": "pt"}
    )
