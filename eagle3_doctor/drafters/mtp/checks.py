"""MTP findings decided without a forward pass: the trained state against the state the engine hands the
head (MTP001), and the recycled state between steps (MTP002)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...core.findings import DRAFT_WEIGHTS, Finding, Fix
from ...core.taps import CapturePoint, final_norm, layer_out
from ...draft.mtp.formats import HIDDEN_KEY, MTPInfo
from ...draft.mtp.served import MTPServing, first_release_recycling, mtp_family, mtp_serving

SCHEMA = "eagle3-doctor/mtp/1"


def trained_point(hidden: str, num_layers: int) -> CapturePoint:
    return layer_out(num_layers - 1) if hidden == "layer_out_last" else final_norm()


def fold_fix(path: str | None) -> Fix:
    """MTP001's fix: a corrected copy (``eagle3-doctor fix`` writes it), the weight rewrite beside it."""
    return Fix(
        f"run `eagle3-doctor fix` on the head: it writes a copy with the target's final-norm weight folded into "
        f'hnorm, records "{HIDDEN_KEY}": "final_norm" and measures the chain on it (the fold is exact for step 1 only: '
        "hnorm also reads the recycled state); where the copy accepts less, retrain the head on final_norm",
        file=DRAFT_WEIGHTS,
        key="hnorm.weight",
        op="rewrite",
        snippet="hnorm.weight = hnorm.weight / final_norm.weight * final_norm.weight.pow(2).mean().sqrt()",
        path=None if path is None else f"{path}/model.safetensors",
    )


def hidden_finding(trained: CapturePoint, served: CapturePoint, source: str, serving: MTPServing, info: MTPInfo) -> Finding:
    return Finding(
        "MTP001",
        f"the MTP head is fed {served} by {serving.engine} but was trained on {trained}",
        evidence=[f"trained on {trained}: {source}", f"served {served}: {serving.hidden_source}"],
        fix=fold_fix(info.path),
        data={"trained": str(trained), "served": str(served), "engine": serving.engine, "layout": info.format},
    )


def recycle_finding(trained: str, serving: MTPServing, fmt: str = "deepseek") -> Finding:
    """MTP002, naming the release whose recycling it read and the first later one that recycles as trained."""
    e, rel, want = serving.engine, serving.release, trained.replace("_", "-")
    got = serving.recycle.replace("_", "-") if serving.recycle else "?"
    up = first_release_recycling(e, fmt, serving.family or "deepseek_v3", rel, trained)
    fix = (
        f"upgrade to {e} {up}, the first release that recycles the {want} state the head was trained with; or retrain "
        f"the head recycling the {got} state"
        if up
        else f"serve the head with an engine release that recycles the {want} state (no {e} release after {rel} does), "
        f"or retrain it recycling the {got} state"
    )
    return Finding(
        "MTP002",
        f"{e}{f' {rel}' if rel else ''} recycles the {got} state between MTP steps; training recycled the {want} one",
        evidence=[f"served: {serving.recycle_source}"],
        fix=fix,
        data={"trained": trained, "served": serving.recycle, "engine": e, "release": rel, "upgrade": up},
    )


def refusal_finding(serving: MTPServing, info: MTPInfo) -> Finding:
    """MTP003: the engine's own refusal; the fix is the layout it does load, where its sources serve the
    verifier's model type there, or undetermined with what would decide it."""
    layer = info.config.get("transformer_layer_config")
    mt = layer.get("model_type") if isinstance(layer, dict) else info.config.get("model_type")
    e, rel, k = serving.engine, serving.release, info.num_speculative_tokens or 3
    if mt in serving.served_targets:
        fix = (
            f"serve the head inside its target, the layout {e} {rel} loads: write num_nextn_predict_layers = 1 and the "
            "head's tensors as model.layers.{L}.* (enorm, hnorm, eh_proj, shared_head.norm and the layer's own) into the "
            f'target checkpoint, then start {e} with --speculative-config \'{{"method": "mtp", "num_speculative_tokens": {k}}}\''
        )
    else:
        t = serving.served_targets
        where = (
            f"for {len(t)} target model types ({', '.join(t[:6])}, ...: {serving.served_targets_source})"
            if t
            else "through its NextN/MTP model classes (deepseek_nextn.py, glm4_moe_nextn.py, qwen3_next_mtp.py, qwen3_5_mtp.py)"
        )
        fix = (
            f"undetermined: {e} {rel} serves an MTP head only inside its target, {where}; a {mt} verifier is not among "
            f"them. What would decide it: a {e} release whose speculators reader registers an mtp algorithm, or an MTP "
            f"model for {mt}"
        )
    return Finding(
        "MTP003",
        f"{e} {rel} does not load this {info.format} MTP checkpoint",
        evidence=[f"refused: {serving.refusal}"],
        fix=fix,
        data={"engine": e, "release": rel, "layout": info.format, "refusal": serving.refusal, "verifier_model_type": mt},
    )


@dataclass
class MTPChecks:
    info: MTPInfo
    serving: MTPServing
    trained: CapturePoint
    trained_source: str
    recycle: str
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self, command: str = "inspect") -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "command": command,
            "drafter": "mtp",
            "layout": self.info.format,
            "layout_reason": self.info.format_reason,
            "trained_hidden": str(self.trained),
            "trained_hidden_source": self.trained_source,
            "trained_recycle": self.recycle,
            "served_hidden": str(self.serving.hidden),
            "served_hidden_source": self.serving.hidden_source,
            "served_recycle": self.serving.recycle,
            "served_recycle_source": self.serving.recycle_source,
            "served_release": self.serving.release,
            "served_refusal": self.serving.refusal,
            "findings": [f.to_dict() for f in self.findings],
            "notes": self.notes,
        }


def mtp_checks(
    info: MTPInfo,
    hidden: str,
    recycle: str,
    source: str,
    engine: str,
    num_layers: int,
    version: str | None = None,
    family: str = "deepseek_v3",
    target_type: str | None = None,
) -> MTPChecks:
    serving = mtp_serving(engine, info.format, version, family)
    trained = trained_point(hidden, num_layers)
    out = MTPChecks(info, serving, trained, source, recycle)
    if serving.refusal is not None:
        out.findings.append(refusal_finding(serving, info))
    elif serving.served_targets and target_type and target_type not in serving.served_targets:
        out.notes.append(
            f"{engine} {serving.release} turns only {len(serving.served_targets)} target model types into an MTP draft "
            f"({serving.served_targets_source}); this target's {target_type} is not among them: the rows above are the "
            f"{serving.family} MTP model's, as if it were served"
        )
    if trained != serving.hidden:
        out.findings.append(hidden_finding(trained, serving.hidden, source, serving, info))
    if serving.recycle is None:
        out.notes.append(f"recycling between steps as {engine} serves this layout is undetermined ({serving.recycle_source})")
    elif serving.recycle != recycle:
        out.findings.append(recycle_finding(recycle, serving, info.format))
    return out


def inspect_mtp(target: str, draft: str, engine: str, engine_version: str | None = None) -> MTPChecks:
    """The MTP checkpoint against the target's config and the engine, without torch."""
    from pathlib import Path

    from ...core.errors import BadInput
    from ...draft.mtp.formats import read_mtp_checkpoint
    from ...io.safeio import read_json_object

    cfg, info, _ = read_mtp_checkpoint(draft)
    tcfg = read_json_object(Path(target) / "config.json", "point --target at the model directory")
    text = tcfg.get("text_config")
    tc: dict[str, Any] = text if isinstance(text, dict) else tcfg
    L = tc.get("num_hidden_layers")
    for key, mine in (("hidden_size", cfg.hidden_size), ("vocab_size", cfg.vocab_size)):
        if tc.get(key) != mine:
            raise BadInput(
                f"the MTP head's {key} is {mine}, the target's {tc.get(key)}", "pass the target the head was trained for"
            )
    if not isinstance(L, int) or L < 1:
        raise BadInput("the target's config.json has no num_hidden_layers", "restore the target's config.json")
    from ...analyses.inspect.tensors import checkpoint_finite

    mt = tc.get("model_type")
    checks = mtp_checks(info, cfg.hidden, cfg.recycle, cfg.hidden_source, engine, L, engine_version, mtp_family(mt), mt)
    checks.findings += checkpoint_finite(draft)
    return checks
