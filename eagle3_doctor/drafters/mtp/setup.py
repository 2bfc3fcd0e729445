"""The loaded world of an MTP run: the target, the head, and both paths as capture points, in the same
:class:`~eagle3_doctor.model.setup.Setup` the EAGLE-3 measurements take (the head is a drafter: one slot)."""

from __future__ import annotations

from typing import Any

from ...draft.mtp.served import mtp_family
from ...engines.families import arch_family
from ...engines.releases import check_engine
from ...engines.serving import Serving
from ...model.setup import Setup
from ...model.target import Target, load_target
from .checks import MTPChecks, mtp_checks


def assemble_mtp(tgt: Target, draft: str, engine: str, engine_version: str | None) -> tuple[Setup, MTPChecks]:
    """A Setup around a loaded target with the MTP head at ``draft``: serving = the state the engine hands it,
    training = the one it was trained on; and the symbolic checks."""
    from ...draft.mtp.formats import read_mtp

    head_w = tgt.model.get_output_embeddings().weight
    head, info = read_mtp(
        draft, device=str(tgt.capture_device or tgt.device), dtype=tgt.dtype, target_embed=tgt.embed_weight(), target_head=head_w
    )
    L = tgt.num_layers
    version = check_engine(engine, engine_version)
    mt = getattr(tgt.config, "model_type", None)
    c = head.config
    checks = mtp_checks(info, c.hidden, c.recycle, c.hidden_source, engine, L, engine_version, mtp_family(mt), mt)
    family = arch_family(tgt.config)
    s = checks.serving
    serving = Serving(engine, version, family, L, (s.hidden,), None, f"MTP step 1: {s.hidden_source}")
    train = (checks.trained,)
    setup = Setup(tgt, head, None, serving, train, f"MTP head trained on {checks.trained}: {checks.trained_source}", family)
    setup.notes += checks.notes
    return setup, checks


def load_mtp_setup(*, target: str, draft: str, engine: str, engine_version: str | None, dtype: str, device: str, **kw: Any):
    tgt = load_target(target, dtype=dtype, device=device, trust_remote_code=kw.get("trust_remote_code", False))
    return assemble_mtp(tgt, draft, engine, engine_version)
