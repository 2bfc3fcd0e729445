"""inspect: what is wrong with a draft checkpoint and its config, without running a prompt."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...core.errors import BadInput
from ...core.findings import Finding
from ...draft.formats import DraftInfo, read_checkpoint
from ...engines.families import arch_family
from ...engines.releases import ENGINES
from .config_checks import _dtype_and_flag_findings, _layer_id_findings, _registration_findings
from .forensics import Forensics, examine, geometry_fact, tensor_fact
from .rope import _position_findings
from .serving import _capture_findings, _quant_findings, _served_findings, _serving
from .target_files import read_target_config
from .weights import _weight_findings

SCHEMA = "eagle3-doctor/inspect/1"


@dataclass
class InspectResult:
    draft: dict[str, Any]
    target: dict[str, Any]
    engine: str
    findings: list[Finding]
    facts: list[tuple[str, str]] = field(default_factory=list)
    forensics: Forensics | None = None  # every tensor, dimension and config key (forensics.py)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "draft": self.draft,
            "target": self.target,
            "engine": self.engine,
            "facts": [list(f) for f in self.facts],
            "findings": [f.to_dict() for f in self.findings],
            **({"forensics": self.forensics.to_dict()} if self.forensics is not None else {}),
        }


def inspect(
    target: str, draft: str, *, engine: str = "sglang", engine_version: str | None = None, draft_format: str | None = None
) -> InspectResult:
    if engine not in ENGINES:
        raise BadInput(f"unknown --engine {engine!r}", f"use one of {', '.join(ENGINES)}")
    tcfg = read_target_config(target)
    L = int(tcfg.get("num_hidden_layers") or tcfg.get("n_layer") or 0)
    tH = int(tcfg.get("hidden_size") or 0)
    tV = int(tcfg.get("vocab_size") or 0)
    family = arch_family(tcfg)
    try:
        d = read_checkpoint(draft, fmt=draft_format)
    except BadInput as e:
        # a config whose dimensions the tensors contradict is a finding with the implied values, not a refusal
        fx = _forensics_or_raise(draft, draft_format, e)
        return InspectResult(
            {"path": draft},
            {"path": target, "num_layers": L, "hidden_size": tH, "vocab_size": tV, "family": family},
            engine,
            fx.findings,
            [("geometry", geometry_fact(fx)), ("tensors", tensor_fact(fx))],
            fx,
        )
    info = d.info
    fx = examine(draft, info.format, d.tensors, target)
    cfg = d.config
    facts = _size_facts(cfg, info, tcfg, family, L, tH, tV) + [("geometry", geometry_fact(fx)), ("tensors", tensor_fact(fx))]
    config_ids, id_findings = _layer_id_findings(info, L, engine)
    # with CFG001 the engine's capture is not defined: compare-hidden refuses those ids too
    serving = _serving(info, engine, engine_version, family, L, config_ids) if L and not _has(id_findings, "CFG001") else None
    out = _weight_findings(d, info, target, tH, tV, serving) + fx.findings + id_findings
    if serving is not None:
        spec_findings, spec_facts = _capture_findings(info, serving, L, family)
        out += spec_findings
        facts += spec_facts
    out += _position_findings(cfg, info, tcfg)
    flag_findings, flag_facts = _dtype_and_flag_findings(info, tcfg, engine, engine_version)
    out += flag_findings
    facts += flag_facts
    served_findings, served_facts = _served_findings(d, info, target, tcfg, engine, engine_version, tV)
    out += served_findings
    facts += served_facts
    out += _registration_findings(info, engine)
    q_findings, q_facts = _quant_findings(target, tcfg, info, fx, engine, engine_version)
    out += q_findings
    facts += q_facts
    return InspectResult(
        _draft_summary(info),
        {"path": target, "num_layers": L, "hidden_size": tH, "vocab_size": tV, "family": family},
        engine,
        out,
        facts,
        fx,
    )


def _draft_summary(info: DraftInfo) -> dict[str, Any]:
    return {
        "path": info.path,
        "format": info.format,
        "format_reason": info.format_reason,
        "layer_ids": info.layer_ids,
        "layer_ids_key": info.layer_ids_key,
        "dtype": info.weight_dtype,
        "has_lm_head": info.has_lm_head,
        "has_d2t": info.has_d2t,
        "has_t2d": info.has_t2d,
        "has_embed": info.has_embed,
        "unexpected": info.unexpected,
    }


def _forensics_or_raise(draft: str, draft_format: str | None, error: BadInput) -> Forensics:
    """The forensics of a draft read_draft refused, when they explain the refusal; else the refusal."""
    try:
        fx = examine(draft, draft_format)
    except BadInput:
        raise error from None
    if not fx.geometry_findings:
        raise error
    return fx


def _size_facts(cfg: Any, info: DraftInfo, tcfg: dict[str, Any], family: str, L: int, tH: int, tV: int) -> list[tuple[str, str]]:
    return [
        ("format", f"{info.format} ({info.format_reason})"),
        (
            "draft",
            f"hidden {cfg.hidden_size}, target hidden {cfg.target_hidden_size}, vocab {cfg.vocab_size}, "
            f"draft vocab {cfg.draft_vocab_size}, {cfg.num_aux_states} aux states, {info.weight_dtype}",
        ),
        (
            "target",
            f"{tcfg.get('architectures', ['?'])[0]} ({family}), {L} layers, hidden {tH}, vocab {tV}, "
            f"{tcfg.get('torch_dtype') or tcfg.get('dtype')}",
        ),
    ]


def _has(findings: list[Finding], code: str) -> bool:
    return any(f.code == code for f in findings)
