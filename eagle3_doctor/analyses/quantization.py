"""inspect's quantization findings: the target's and the draft's scheme, and what the engine builds the draft with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.findings import DRAFT_CONFIG, SERVER_COMMAND, Finding, Fix, Location
from ..engines.quant import DraftQuantRule, Quant, draft_rule, quantized_tensors, read_quant


def target_quant(target: str, tcfg: dict[str, Any]) -> Quant | None:
    """The target's scheme: config.json, or a local ModelOpt export's hf_quant_config.json."""
    extra = None
    p = Path(target) / "hf_quant_config.json"
    if p.is_file():
        from ..io.safeio import read_json_object

        extra = read_json_object(p, "restore hf_quant_config.json from the quantized export")
    return read_quant(tcfg, extra)


def quant_findings(
    tq: Quant | None,
    dcfg: dict[str, Any],
    tensors: list[tuple[str, str]],
    engine: str,
    verifier: str | None,
    release: str | None = None,
) -> tuple[list[Finding], list[tuple[str, str]]]:
    """QNT001-QNT005 for a target scheme ``tq``, the draft's config and its stored (name, dtype) pairs; ``release``: the
    engine release the run names (None: the newest), whose flags the fix may use."""
    dq = read_quant(dcfg)
    qt = quantized_tensors(tensors)
    out = _checkpoint_findings(dq, qt)
    if tq is None and dq is None:
        return out, []
    facts = [("quantization", f"target {tq.scheme if tq else 'none'}; draft {dq.scheme if dq else 'none (16-bit)'}")]
    rule = draft_rule(engine)
    out += _engine_findings(rule, tq, dq, release)
    if tq is not None:
        out.append(_shift_finding(tq, verifier))
    return out, facts


def _checkpoint_findings(dq: Quant | None, qt: list[str]) -> list[Finding]:
    if dq is not None and not qt:
        return [
            Finding(
                "QNT002",
                f"the draft config names {dq.scheme} but no stored tensor is quantized",
                [f"{dq.source}: quant_method {dq.method!r}", "no scale, packed or 8-bit tensor in the checkpoint"],
                Fix(
                    "delete quantization_config from the draft's config.json (the weights are 16-bit), or re-export "
                    "the quantized weights with their scales",
                    file=DRAFT_CONFIG,
                    key="quantization_config",
                    op="delete",
                ),
            )
        ]
    if dq is None and qt:
        return [
            Finding(
                "QNT002",
                "the draft stores quantized tensors but its config.json names no quantization_config",
                [f"{len(qt)} quantized tensor(s), e.g. {', '.join(qt[:3])}"],
                "copy the quantization_config the quantizer wrote into the draft's config.json (an engine without it "
                "loads the bytes as 16-bit weights or rejects the scale tensors)",
                location=Location(DRAFT_CONFIG, "quantization_config"),
            )
        ]
    return []


def _engine_findings(rule: DraftQuantRule, tq: Quant | None, dq: Quant | None, release: str | None = None) -> list[Finding]:
    ev = [f"{rule.engine}: {rule.says}", f"source: {rule.cite}"]
    draft = dq.scheme if dq else "16-bit (no quantization_config)"
    target = tq.scheme if tq else "unquantized"
    lacks = _flag_lacked(rule, release)
    if rule.inherits == "flag" and tq is not None and dq is None:
        return [_sglang_inherits(rule, tq, ev, lacks)]
    if rule.inherits == "flag" and dq is not None:
        # under a release without the flag the fix says which release has it (engines.launch.fixes_within_release)
        ev += [lacks[1]] if lacks else []
        return [
            Finding(
                "QNT001",
                f"SGLang builds the draft with the server's --quantization, not the draft's own {dq.scheme}",
                ev
                + [
                    "whether SGLang then rejects the draft's own scheme is undetermined: read "
                    "python/sglang/srt/configs/model_config.py ModelConfig._verify_quantization"
                ],
                Fix(
                    f"add `{rule.draft_flag} {dq.method}` to the launch command",
                    file=SERVER_COMMAND,
                    key=rule.draft_flag,
                    value=dq.method,
                ),
                severity="warning",
            )
        ]
    if rule.inherits == "own":
        return [
            Finding(
                "QNT004",
                f"{rule.engine} builds the draft with its own scheme ({draft}), not the target's ({target})",
                ev,
                f"nothing to change for the precision; to quantize the draft, export it quantized or set {rule.draft_flag}"
                if rule.draft_flag
                else "nothing to change for the precision; to quantize the draft, export it quantized",
            )
        ]
    return [
        Finding(
            "QNT005",
            f"undetermined whether {rule.engine} builds the draft with the target's quantization ({target}) or its own ({draft})",
            ev,
            f"read {rule.cite} before serving; measure acceptance as served",
        )
    ]


def _flag_lacked(rule: DraftQuantRule, release: str | None) -> tuple[str, str] | None:
    """(the first release with the rule's draft flag, the evidence line) where ``release`` lacks that flag (its
    parser's names, engines/flag_releases.py); None where it has it or nothing is known."""
    if rule.draft_flag is None or release is None:
        return None
    from ..engines.flag_releases import absent_flags

    absent = absent_flags(rule.engine, release, [rule.draft_flag])
    a = absent[0] if absent else None
    if a is None or a.first_after is None:
        return None
    return a.first_after, (
        f"{rule.engine} {a.release} has no {rule.draft_flag} (from {a.first_after}): its draft takes --quantization with "
        "no way to set it apart (ModelConfig.from_server_args passes server_args.quantization; read in 0.5.2)"
    )


def _sglang_inherits(rule: DraftQuantRule, tq: Quant, ev: list[str], lacks: tuple[str, str] | None = None) -> Finding:
    return Finding(
        "QNT001",
        f"SGLang builds this 16-bit draft with the server's --quantization: launched with --quantization {tq.method} "
        f"for the {tq.scheme} target, the draft is quantized too (start-up failure, or a draft run in another precision "
        "than trained)",
        ev
        + [
            f"target: {tq.scheme} ({tq.source}); draft: no quantization_config",
            "without --quantization on the launch command the draft's own config decides; whether SGLang fills "
            "--quantization from the target's config.json is undetermined (read python/sglang/srt/server_args.py)",
            *([lacks[1]] if lacks else []),
        ],
        Fix(
            f"add `{rule.draft_flag} unquant` to the launch command (the draft runs in 16-bit, as trained)",
            file=SERVER_COMMAND,
            key=rule.draft_flag,
            value="unquant",
        )
        if lacks is None
        else Fix(
            f"drop --quantization from the launch command (each model's own config then decides: the draft's has none), "
            f"or upgrade to sglang >= {lacks[0]} and add `{rule.draft_flag} unquant`",
            file=SERVER_COMMAND,
            key="--quantization",
            op="delete",
        ),
        severity="warning",
    )


def _shift_finding(tq: Quant, verifier: str | None) -> Finding:
    ev = [f"target: {tq.scheme} ({tq.source})"]
    if verifier:
        ev.append(f"the draft names its training verifier {verifier!r}")
    return Finding(
        "QNT003",
        f"the target is quantized ({tq.scheme}): unless the draft was trained on this quantized target, the features "
        "it is fed shift from training",
        ev,
        "measure the shift: run `eagle3-doctor compare-hidden` and `acceptance` once with the bf16 target the draft was "
        "trained on and once with this one; if acceptance drops, fine-tune the draft on features of the quantized target",
    )
