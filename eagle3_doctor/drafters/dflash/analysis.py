"""inspect on a DFlash draft: its trained taps against the taps the engine feeds it, the fc's width, and the block
the launch serves against the block it was trained on, without a forward pass (DFL001-003, DFL005)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.errors import BadInput
from ...core.findings import Finding, config_fix
from ...core.taps import format_spec
from ...draft.dflash.taps import Taps, first_release_as_trained, served_taps, tap_edit, trained_taps

SCHEMA = "eagle3-doctor/dflash/1"


@dataclass
class DFlashChecks:
    engine: str
    trained: Taps
    served: Taps | None
    fc_taps: int | None
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        def taps(t: Taps | None) -> dict[str, Any] | None:
            if t is None:
                return None
            return {"spec": None if t.spec is None else [str(p) for p in t.spec], "ids": t.ids, "key": t.key,
                    "source": t.source, "guessed": t.guessed}  # fmt: skip

        return {"schema": SCHEMA, "command": "inspect", "drafter": "dflash", "engine": self.engine,
                "trained": taps(self.trained), "served": taps(self.served), "fc_taps": self.fc_taps,
                "findings": [f.to_dict() for f in self.findings]}  # fmt: skip


def fc_taps(draft: Path, target_hidden: int) -> int | None:
    """How many target states the draft's fc takes (its weight's input width / the target's hidden size)."""
    from ...io.hub import weight_files
    from ...io.safeio import check_safetensors_header

    for f in weight_files(draft):
        if f.suffix != ".safetensors":
            continue
        for name, meta in check_safetensors_header(f).items():
            if name.endswith("fc.weight") and isinstance(meta, dict) and len(meta.get("shape", [])) == 2:
                width = meta["shape"][1]
                return width // target_hidden if width % target_hidden == 0 else None
    return None


def _fix(served: Taps, trained: Taps) -> Any:
    assert trained.ids is not None
    if served.key == "eagle_aux_hidden_state_layer_ids":  # vLLM reads it first, in its own (+1) convention
        return config_fix(
            f'set "eagle_aux_hidden_state_layer_ids": {[i + 1 for i in trained.ids]} (vLLM ids: the DFlash ids + 1)',
            "eagle_aux_hidden_state_layer_ids",
            [i + 1 for i in trained.ids],
        )
    return config_fix(
        f'set "dflash_config": {{"target_layer_ids": {trained.ids}}} (DFlash ids: after layer i)',
        "dflash_config.target_layer_ids",
        trained.ids,
    )


def tap_fix(engine: str, config: dict[str, Any], L: int, release: str, trained: Taps) -> Any:
    """DFL001's fix for ``release``: the config edit after which that release feeds the trained taps (found by
    running its own reading on the edited config), and, where a later release feeds this very config as
    trained, that release to upgrade to."""
    up = first_release_as_trained(engine, config, L, release, trained)
    upgrade = f"upgrade to {engine} {up}, the first release that feeds this config the trained taps" if up else ""
    edit = tap_edit(engine, config, L, release, trained)
    if edit is None:
        text = "write the ids the draft was trained on into the key the engine reads first"
        return text + (f"; or {upgrade}" if upgrade else "")
    key, value, words = edit
    shown = (
        f'"dflash_config": {{"target_layer_ids": {value}}}' if key == "dflash_config.target_layer_ids" else f'"{key}": {value}'
    )
    return config_fix(f"set {shown} ({words})" + (f"; or {upgrade}" if upgrade else ""), key, value)


def dflash_findings(trained: Taps, served: Taps, n_fc: int | None, fix: Any = None) -> list[Finding]:
    """DFL001-003 from the two readings; ``fix`` the taps' fix (tap_fix), else the edit in the key the engine read."""
    out: list[Finding] = []
    ev = [f"trained: {trained.source}", f"served: {served.source}"]
    if fix is None and trained.ids is not None:
        fix = _fix(served, trained)
    if served.spec is not None and n_fc is not None and len(served.spec) != n_fc:
        fix = fix if trained.ids is not None and not trained.guessed else (
            "write the ids the draft was trained on into dflash_config.target_layer_ids")  # fmt: skip
        out.append(Finding("DFL002", f"the engine feeds {len(served.spec)} taps; the draft's fc takes {n_fc}",
                           evidence=ev, fix=fix, data={"served": len(served.spec), "fc": n_fc}))  # fmt: skip
    elif trained.spec is not None and served.spec is not None and trained.spec != served.spec and not trained.guessed:
        by = f" by {served.release}" if served.release else ""
        out.append(Finding("DFL001", f"served {format_spec(served.spec)}{by}, trained {format_spec(trained.spec)}", evidence=ev,
                           fix=fix, data={"served": [str(p) for p in served.spec], "trained": [str(p) for p in trained.spec],
                                          "release": served.release}))  # fmt: skip
    if served.guessed or trained.guessed:
        out.append(Finding("DFL003", "no target_layer_ids in the draft config: the taps are a guess", evidence=ev,
                           fix="write the ids the draft was trained on into dflash_config.target_layer_ids (DFlash ids: after layer i)"))  # fmt: skip
    return out


@dataclass(frozen=True)
class ServedBlock:
    """The block the engine drafts, anchor included: ``size``, where it was read (``source``), and the launch flag
    that set it (None where no launch flag did: --num-draft-tokens)."""

    size: int
    source: str
    flag: str | None = None


VLLM_BLOCK_KEY = "--speculative-config.num_speculative_tokens"  # vLLM drafts that many masks after the anchor


def block_finding(engine: str, served: ServedBlock | None, trained: int) -> Finding | None:
    """DFL005 where the engine drafts blocks of another size than the draft's config was trained on; its fix sets the
    launch flag that decided the served block (vLLM: num_speculative_tokens, the masks after the anchor)."""
    from ...core.findings import SERVER_COMMAND, Fix
    from ...engines.sglang_tree import DFLASH_FLAG

    if served is None or served.size == trained:
        return None
    if engine == "vllm":
        text = f'set "num_speculative_tokens": {trained - 1} in --speculative-config (blocks of {trained}: the anchor and {trained - 1} masks)'
        fix = Fix(text, file=SERVER_COMMAND, key=VLLM_BLOCK_KEY, value=trained - 1)
    else:
        flag = served.flag if served.flag == DFLASH_FLAG else "--speculative-num-draft-tokens"
        text = f"launch with {flag} {trained}" + (
            "" if flag == DFLASH_FLAG else " (or leave it unset: SGLang then drafts the block the draft's config names)"
        )
        fix = Fix(text, file=SERVER_COMMAND, key=flag, value=trained)
    return Finding(
        "DFL005",
        f"{engine} drafts blocks of {served.size}; the draft was trained on blocks of {trained}",
        evidence=[
            f"served: blocks of {served.size} ({served.source}): {_proposals(served.size)} a pass",
            f"trained: block_size {trained} in the draft's config.json: {_proposals(trained)} a pass",
        ],
        fix=fix,
        data={"served": served.size, "trained": trained, "source": served.source},
    )


def _proposals(block: int) -> str:
    return f"{block - 1} proposal" + ("s" if block != 2 else "")


def inspect_dflash(
    target: str, draft: str, engine: str, engine_version: str | None = None, block: ServedBlock | None = None
) -> DFlashChecks:
    """DFL001-003, DFL005 and the mask token on the files alone, for ``engine`` in ``engine_version`` (None: the
    newest modelled release) serving blocks of ``block`` (None: the draft's own)."""
    from ...engines.releases import rules_release
    from ...io.safeio import read_json_object

    cfg = read_json_object(Path(draft) / "config.json", "point --draft at the DFlash checkpoint")
    tcfg = read_json_object(Path(target) / "config.json", "point --target at the model directory")
    text = tcfg.get("text_config")
    tc: dict[str, Any] = text if isinstance(text, dict) else tcfg
    L, H = tc.get("num_hidden_layers"), tc.get("hidden_size")
    if not isinstance(L, int) or not isinstance(H, int) or L < 1 or H < 1:
        raise BadInput("the target's config.json lacks num_hidden_layers / hidden_size", "restore the target's config.json")
    release = rules_release(engine, engine_version)
    trained, served = trained_taps(cfg, L), served_taps(engine, cfg, L, release)
    n_fc = fc_taps(Path(draft), int(cfg.get("target_hidden_size") or H))
    checks = DFlashChecks(engine, trained, served, n_fc)
    if served is None:
        raise BadInput(f"DFlash serving is modelled for sglang and vllm, not {engine}", "pass --engine sglang or vllm")
    from ...analyses.inspect.tensors import checkpoint_finite
    from ...analyses.mask_token import mask_token_findings
    from ...draft.served_files import sidecars_of

    mask = (cfg.get("dflash_config") or {}).get("mask_token_id")
    own = cfg.get("block_size")
    size = block_finding(engine, block, own) if isinstance(own, int) else None
    checks.findings = (
        dflash_findings(trained, served, n_fc, tap_fix(engine, cfg, L, release, trained))
        + ([size] if size is not None else [])
        + mask_token_findings(target, mask if isinstance(mask, int) else None, "dflash_config.mask_token_id", "DFlash draft")
        + checkpoint_finite(draft)
        + sidecars_of(draft, engine, release)
    )
    return checks
