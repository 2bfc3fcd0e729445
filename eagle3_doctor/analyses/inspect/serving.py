"""What the engine does with this draft: the capture points it feeds (CAP/ENG), the draft forward as it runs
it (FWD) and the quantization it builds the draft with (QNT)."""

from __future__ import annotations

from typing import Any

from ...core.findings import Finding
from ...core.taps import format_spec
from ...draft.formats import DraftInfo, spec_from_info
from ...engines.releases import release_label, rules_release
from ...engines.serving import Serving, resolve_serving
from ..compare.symbolic import diagnose_specs
from ..quantization import quant_findings, target_quant
from .forensics import Forensics
from .target_files import read_target_tensor


def _serving(
    info: DraftInfo, engine: str, engine_version: str | None, family: str, L: int, config_ids: dict[str, list[int]]
) -> Serving:
    """What the engine feeds this draft, from every id list its config holds."""
    ec_all = e if isinstance(e := info.config.get("eagle_config"), dict) else {}
    return resolve_serving(
        engine, engine_version, family, L, config_ids, use_aux_hidden_state=ec_all.get("use_aux_hidden_state", True) is not False
    )


def _capture_findings(info: DraftInfo, serving: Serving, L: int, family: str) -> tuple[list[Finding], list[tuple[str, str]]]:
    """The capture points the draft was trained on against those the engine feeds, with both as facts."""
    train, where = spec_from_info(info, L, family)
    facts = [
        ("trained on", f"{format_spec(train)} ({where})"),
        (f"{serving.label} feeds", f"{format_spec(serving.spec)} ({serving.source})"),
    ]
    return diagnose_specs(train, where, serving), facts


def _served_findings(
    d: Any, info: DraftInfo, target: str, tcfg: dict[str, Any], engine: str, engine_version: str | None, tV: int
) -> tuple[list[Finding], list[tuple[str, str]]]:
    """The draft's own forward as the engine runs it (issue 13), and the flags it runs with as a fact."""
    from ...draft import served, served_findings

    version = rules_release(engine, engine_version)  # a release newer than modelled runs the newest rules (ENG005)
    fwd, sf = served_findings.diagnose(
        d,
        info,
        engine,
        version,
        target_vocab=tV or None,
        target_head=read_target_tensor(target, ("lm_head.weight",)) if info.has_lm_head else None,
        target_embed=read_target_tensor(target, ("model.embed_tokens.weight", "embed_tokens.weight")) if info.has_embed else None,
        target_config=tcfg,
    )
    if sf is None:
        return fwd, []
    return fwd, [
        (
            f"{release_label(engine, version)} runs",
            ", ".join(f"{k}={served.json_bool(v)}" for k, (v, _) in sf.flags.items())
            + (f"; undetermined: {', '.join(sf.undetermined)}" if sf.undetermined else ""),
        )
    ]


def _quant_findings(
    target: str, tcfg: dict[str, Any], info: DraftInfo, fx: Forensics, engine: str, engine_version: str | None = None
) -> tuple[list[Finding], list[tuple[str, str]]]:
    """Target and draft quantization, and the scheme the engine builds the draft with (engines/quant.py), its fix
    within the flags of the release the run names."""
    sc = info.config.get("speculators_config")
    ver = sc.get("verifier") if isinstance(sc, dict) else None
    verifier = ver.get("name_or_path") if isinstance(ver, dict) else None
    tensors = [(t.name, t.dtype) for t in fx.tensors]
    return quant_findings(target_quant(target, tcfg), info.config, tensors, engine, verifier, engine_version)
