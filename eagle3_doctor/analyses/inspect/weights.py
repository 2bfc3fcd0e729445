"""DRF001-DRF010 from the loaded draft: its head, its vocabulary maps (d2t, t2d), its sizes against the
target and the states the engine feeds, its embeddings and the weights its format does not use."""

from __future__ import annotations

import numpy as np

from ...core.findings import DRAFT_CONFIG, DRAFT_WEIGHTS, Finding, Fix, Location
from ...draft.config import DraftConfig
from ...draft.formats import DraftCheckpoint, DraftInfo
from ...engines.serving import Serving
from ..compare.engine_failures import served_state_findings
from .target_files import read_target_tensor


def _weight_findings(
    d: DraftCheckpoint, info: DraftInfo, target: str, tH: int, tV: int, serving: Serving | None
) -> list[Finding]:
    """DRF*: what the checkpoint's tensors say, in the order a reader fixes them (head, maps, sizes, values);
    each tensor's own values (NaN, initialisation) are tensors.py's."""
    out: list[Finding] = []
    if not info.has_lm_head:
        out.append(
            Finding(
                "DRF001",
                "the draft checkpoint has no lm_head.weight",
                [f"weights: {', '.join(info.weight_keys[:8])}{' ...' if len(info.weight_keys) > 8 else ''}"],
                "re-export with the head (SGLang leaves a missing head random: accept length 1.00, sgl#27908)",
            )
        )
    out += _vocab_map_findings(d, info)
    out += _size_findings(d.config, info, tH, tV, serving)
    out += _embedding_findings(d, info, target)
    if info.unexpected:
        out.append(
            Finding(
                "DRF010",
                f"{len(info.unexpected)} weight(s) the {info.format} format does not use",
                [", ".join(info.unexpected[:6])],
                "check the export: loaders warn about these and drop them",
            )
        )
    return out


def fc_width_findings(cfg: DraftConfig, info: DraftInfo, tH: int, serving: Serving | None) -> list[Finding]:
    """DRF005/ENG002: the fc against the states the engine feeds after its rule (``serving``); with no
    resolved capture (ids out of range: CFG001), against one state per configured id, 3 by default."""
    if serving is not None:
        return served_state_findings(serving, cfg.fc_in_features, tH, cfg.hidden_size)
    n_aux = len(info.layer_ids) if info.layer_ids else 3
    if not tH or cfg.fc_in_features == n_aux * tH:
        return []
    return [
        Finding(
            "DRF005",
            f"fc takes {cfg.fc_in_features} inputs, the engine feeds {n_aux} aux states x target hidden {tH} = {n_aux * tH}",
            [f"fc.weight {[cfg.hidden_size, cfg.fc_in_features]}, target hidden_size {tH}, layer ids {info.layer_ids}"],
            "this draft was trained for another target, or its fc was cut; re-export the trained fc",
        )
    ]


def _size_findings(cfg: DraftConfig, info: DraftInfo, tH: int, tV: int, serving: Serving | None) -> list[Finding]:
    """DRF005/DRF008: shapes the engine cannot feed this draft (fc width, vocabulary, hidden size)."""
    out: list[Finding] = []
    out += fc_width_findings(cfg, info, tH, serving)
    if (tV and cfg.vocab_size != tV) or (tH and cfg.hidden_size != tH and not info.config.get("target_hidden_size")):
        out.append(
            Finding(
                "DRF008",
                "draft and target sizes disagree",
                [f"vocab: draft config {cfg.vocab_size}, target {tV}; hidden: draft {cfg.hidden_size}, target {tH}"],
                "use the draft trained for this target, or set vocab_size / target_hidden_size to the target's",
                location=Location(DRAFT_CONFIG, "vocab_size" if tV and cfg.vocab_size != tV else "target_hidden_size"),
            )
        )
    return out


def _vocab_map_findings(d: DraftCheckpoint, info: DraftInfo) -> list[Finding]:
    """DRF002-DRF004: d2t/t2d, the draft-to-target vocabulary map every engine trusts as is."""
    cfg = d.config
    out: list[Finding] = []
    if not info.has_d2t and cfg.draft_vocab_size < cfg.vocab_size:
        out.append(
            Finding(
                "DRF002",
                f"draft vocabulary {cfg.draft_vocab_size} < target {cfg.vocab_size} but no d2t",
                ["vLLM then maps draft id i to target id i; SGLang builds hot_token_id = d2t + arange"],
                "re-export the draft with the d2t tensor from training (target_id - draft_id)",
                location=Location(DRAFT_WEIGHTS, "d2t"),
            )
        )
    if not info.has_d2t:
        return out
    d2t = d.d2t
    tgt_ids = np.arange(cfg.draft_vocab_size) + d2t
    bad = np.flatnonzero((tgt_ids < 0) | (tgt_ids >= cfg.vocab_size))
    absolute = absolute_d2t(d2t, d.t2d if info.has_t2d else None, cfg.vocab_size)
    if bad.size:
        ev = [f"draft ids {bad[:5].tolist()} -> target ids {tgt_ids[bad[:5]].tolist()} (vocab {cfg.vocab_size})"]
        if absolute:
            out.append(_absolute_d2t_finding(ev + [absolute]))
        else:
            out.append(
                Finding(
                    "DRF003",
                    f"d2t maps {bad.size} draft id(s) outside the target vocabulary",
                    ev,
                    "re-create d2t from the draft vocabulary used in training",
                    location=Location(DRAFT_WEIGHTS, "d2t"),
                )
            )
    elif absolute and info.has_t2d:
        out.append(_absolute_d2t_finding([absolute]))
    elif info.has_t2d:
        out += _t2d_findings(d.t2d, tgt_ids, cfg.draft_vocab_size)
    return out


ABSOLUTE_D2T_FIX = Fix(
    "rewrite d2t as offsets: d2t_new = d2t - arange(draft_vocab_size) (python: sd = safetensors.torch."
    "load_file(p); sd['d2t'] = sd['d2t'] - torch.arange(sd['d2t'].numel()); save_file(sd, p)); "
    "engines then compute target id = draft id + d2t[draft id]",
    file=DRAFT_WEIGHTS,
    key="d2t",
    op="rewrite",
    snippet="sd = safetensors.torch.load_file(p); sd['d2t'] = sd['d2t'] - torch.arange(sd['d2t'].numel()); "
    "safetensors.torch.save_file(sd, p)",
)


def absolute_d2t(d2t: np.ndarray, t2d: np.ndarray | None, vocab: int) -> str | None:
    """Why ``d2t`` reads as absolute target ids, or None: ``d2t - arange`` is then a valid offset
    table (targets distinct, inside the vocabulary) and, where ``t2d`` exists, consistent with it,
    while ``d2t`` read as offsets is not."""
    n = d2t.size
    if n == 0 or bool((d2t < 0).any()) or bool((d2t >= vocab).any()) or np.unique(d2t).size != n:
        return None
    as_offsets = d2t + np.arange(n)
    if t2d is not None:
        marked = np.zeros(vocab, dtype=bool)
        marked[d2t] = True
        if not np.array_equal(marked, t2d.astype(bool)):
            return None
        reached = np.zeros(vocab, dtype=bool)
        reached[np.minimum(as_offsets, vocab - 1)] = True
        offsets_ok = bool((as_offsets < vocab).all()) and np.array_equal(reached, t2d.astype(bool))
    else:
        offsets_ok = bool((as_offsets < vocab).all()) and np.unique(as_offsets).size == n
    if offsets_ok:
        return None
    return (
        f"read as absolute ids, d2t is a valid table: {n} distinct target ids in 0..{vocab - 1}"
        + (", exactly the ids t2d marks" if t2d is not None else "")
        + f"; read as offsets it is not (draft id 0..{min(n, 3) - 1} -> {as_offsets[:3].tolist()} ...)"
    )


def _absolute_d2t_finding(ev: list[str]) -> Finding:
    """DRF003 for a d2t written as target ids: one finding whether or not some ids also overflow the vocabulary."""
    return Finding(
        "DRF003",
        "d2t holds absolute target ids, not offsets (target_id - draft_id)",
        ev,
        ABSOLUTE_D2T_FIX,
        data={"absolute_d2t": True},
    )


def _t2d_findings(t2d: np.ndarray, tgt_ids: np.ndarray, draft_vocab: int) -> list[Finding]:
    """DRF004: t2d must mark exactly the target ids d2t reaches."""
    from_d2t = np.zeros_like(t2d)
    from_d2t[tgt_ids] = True
    if np.array_equal(t2d, from_d2t) and int(t2d.sum()) == draft_vocab:
        return []
    diff = np.flatnonzero(t2d != from_d2t)
    return [
        Finding(
            "DRF004",
            f"t2d disagrees with d2t at {diff.size} target id(s)",
            [
                f"t2d marks {int(t2d.sum())} ids, d2t reaches {int(from_d2t.sum())}; first differences {diff[:5].tolist()}",
                "SGLang ignores t2d; tools that use it to pick training targets see another vocabulary",
            ],
            Fix(
                "rebuild t2d from d2t: t2d[arange(draft_vocab) + d2t] = True",
                file=DRAFT_WEIGHTS,
                key="t2d",
                op="rewrite",
                snippet="t2d = torch.zeros(vocab_size, dtype=torch.bool); t2d[torch.arange(draft_vocab_size) + d2t] = True",
            ),
        )
    ]


def _embedding_findings(d: DraftCheckpoint, info: DraftInfo, target: str) -> list[Finding]:
    if not info.has_embed:
        return []
    temb = read_target_tensor(target, ("model.embed_tokens.weight", "embed_tokens.weight"))
    demb = d.weight("embed_tokens.weight")
    if temb is None or demb is None:
        return []
    same = tuple(temb.shape) == tuple(demb.shape) and bool(np.allclose(np.asarray(temb), demb, atol=1e-3, rtol=1e-3))
    if same:
        return []
    return [
        Finding(
            "DRF007",
            "the draft ships its own embed_tokens and they differ from the target's",
            [
                f"draft {tuple(demb.shape)} vs target {tuple(temb.shape)}",
                "SGLang always uses the target's embeddings; vLLM keeps the draft's when they differ",
            ],
            "drop embed_tokens from the draft, or make sure every engine uses the same ones",
        )
    ]
