"""P-EAGLE checkpoints: speculators' layout (``speculators_model_type: "peagle"``, ``PEagleSpeculatorConfig``),
an EAGLE-3 speculators draft plus one tensor, ``mask_hidden`` [1, 1, n_taps * H] (speculators
``models/peagle/core.py``), and the config keys ``mask_token_id`` and the proposal's ``speculative_tokens`` (the
depths it was trained to draft, ``from_training_args``: ``speculative_tokens=num_depths``).

A checkpoint whose config says EAGLE-3 but whose weights hold ``mask_hidden`` is read as P-EAGLE too: the tensor
is what parallel training leaves, whatever a converter wrote into the config.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.errors import BadInput

MASK_HIDDEN = "mask_hidden"


def mask_hidden_name(names: Any) -> str | None:
    """The name the checkpoint stores mask_hidden under (bare, or under a module prefix), or None."""
    return next((n for n in names if n == MASK_HIDDEN or n.endswith("." + MASK_HIDDEN)), None)


def peagle_evidence(config: dict[str, Any], names: list[str]) -> str | None:
    """Why a checkpoint is a P-EAGLE draft, or None."""
    if config.get("speculators_model_type") == "peagle":
        return 'speculators_model_type "peagle"'
    if mask_hidden_name(names) is not None:
        return f"a {MASK_HIDDEN} tensor beside an EAGLE-3 draft's (config type {config.get('speculators_model_type')!r})"
    return None


def trained_depths(config: dict[str, Any]) -> int | None:
    """The K the proposal names (speculators writes num_depths there), or None."""
    methods = (config.get("speculators_config") or {}).get("proposal_methods") or []
    k = methods[0].get("speculative_tokens") if methods and isinstance(methods[0], dict) else None
    return int(k) if isinstance(k, int) and k > 0 else None


@dataclass
class PEagleInfo:
    path: str
    model_type: Any  # the config's speculators_model_type, as written
    mask_token_id: int | None
    depths: int | None
    mask_hidden_shape: list[int] | None
    evidence: str
    config: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "speculators_model_type": self.model_type, "mask_token_id": self.mask_token_id,
                "depths": self.depths, "mask_hidden_shape": self.mask_hidden_shape, "evidence": self.evidence}  # fmt: skip


def peagle_info(path: str | os.PathLike) -> PEagleInfo:
    """What the checkpoint says of its parallel drafting, from config.json and the tensor headers (no weights read)."""
    from ...io.checks import check_draft_counts
    from ...io.hub import tensor_shapes
    from ...io.safeio import read_json_object

    d = Path(path)
    cfg = read_json_object(d / "config.json", "point --draft at a directory holding config.json and *.safetensors")
    check_draft_counts(cfg, str(d / "config.json"))  # the depths and mask token a pass is allocated from
    info = info_from_config(cfg, tensor_shapes(d), str(d))
    if info is None:
        raise BadInput(f"{d} holds no P-EAGLE draft", f'write speculators_model_type "peagle" or a {MASK_HIDDEN} tensor')
    return info


def info_from_config(cfg: dict[str, Any], shapes: dict[str, list[int]], path: str = "") -> PEagleInfo | None:
    """What a config and its tensors' shapes say of the parallel drafting, or None for no P-EAGLE draft."""
    why = peagle_evidence(cfg, sorted(shapes))
    if why is None:
        return None
    name = mask_hidden_name(shapes)
    tok = cfg.get("mask_token_id")
    return PEagleInfo(path, cfg.get("speculators_model_type"), tok if isinstance(tok, int) else None,
                      trained_depths(cfg), shapes[name] if name else None, why, cfg)  # fmt: skip


def with_mask_hidden(draft: Any, path: str) -> tuple[Any, PEagleInfo]:
    """(PEagleDraft, PEagleInfo) around the EAGLE-3 module the EAGLE-3 reader built from ``path``; refused in one line
    where the draft cannot be run as it was trained (no mask_hidden, no mask token, or a misshapen tensor)."""
    from ...io.hub import load_weights_dir
    from .model import PEagleDraft

    info = peagle_info(path)
    if info.mask_hidden_shape is None:
        raise BadInput(f"{path} is configured for P-EAGLE but holds no {MASK_HIDDEN} tensor, so its parallel slots "
                       "cannot be run", f"export {MASK_HIDDEN} with the draft (speculators saves it beside the layers)")  # fmt: skip
    if info.mask_token_id is None:
        raise BadInput(f"{path}: config.json has no integer mask_token_id, the parallel slots' token",
                       "write the mask_token_id the draft was trained with into config.json")  # fmt: skip
    tensors = load_weights_dir(Path(path))
    name = mask_hidden_name(tensors)
    assert name is not None  # info.mask_hidden_shape came from the same tensors' headers
    mh = tensors[name].to_torch().reshape(-1)
    if mh.numel() != draft.config.fc_in_features:
        raise BadInput(f"{path}: {MASK_HIDDEN} holds {mh.numel()} values, the fc takes {draft.config.fc_in_features}",
                       f"export {MASK_HIDDEN} in the concatenated-taps space, one value per fc input")  # fmt: skip
    mh = mh.to(device=draft.fc.weight.device, dtype=draft.fc.weight.dtype)
    return PEagleDraft(draft, mh, info.mask_token_id, info.depths or 1), info


def write_peagle(peagle: Any, out: Path, spec: Any, num_layers: int, *, verifier: str, model_type: str = "peagle") -> None:
    """speculators' P-EAGLE layout: the EAGLE-3 speculators checkpoint, mask_hidden beside it, the P-EAGLE keys."""
    from safetensors.torch import load_file, save_file

    from ..writing import write_draft

    write_draft(peagle.draft, out, "speculators", spec, num_layers, verifier=verifier)
    cfg = json.loads((out / "config.json").read_text())
    cfg.update(speculators_model_type=model_type, architectures=["PEagleSpeculator"], mask_token_id=peagle.mask_token_id)
    cfg["speculators_config"]["algorithm"] = model_type
    cfg["speculators_config"]["proposal_methods"][0]["speculative_tokens"] = peagle.depths
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    w = out / "model.safetensors"
    sd = load_file(w)
    sd[MASK_HIDDEN] = peagle.mask_hidden.detach().float().cpu().reshape(1, 1, -1).contiguous()
    save_file(sd, w)
