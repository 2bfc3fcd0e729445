"""CFG003/CFG004: positions the draft encodes otherwise than the target it reads states from (rope_theta,
the RoPE parameters in either transformers layout, max_position_embeddings)."""

from __future__ import annotations

import json
from typing import Any

from ...core.findings import DRAFT_CONFIG, Finding, Fix, config_fix, json_snippet
from ...draft.formats import DraftInfo
from ...draft.rope import config_rope


def normalised_rope(c: dict[str, Any]) -> dict[str, Any]:
    """A config's RoPE in one form, whichever layout it uses: transformers 4 (``rope_theta`` +
    ``rope_scaling`` + top-level ``partial_rotary_factor``) or 5 (``rope_parameters``); the factor 1.0 where
    it is not set, so two configs that leave it out compare equal."""
    return config_rope(c, 1.0)


def rope_findings(cfg: Any, dl: dict[str, Any], tcfg: dict[str, Any], nested: str | None) -> list[Finding]:
    """CFG004 when draft and target RoPE differ once both layouts are normalised; decided on the
    frequencies transformers computes for each (rope_theta is CFG003's, so both use the draft's)."""
    dn, tn = normalised_rope(dl), normalised_rope(tcfg)
    strip = lambda d: {k: v for k, v in d.items() if k != "rope_theta"}  # noqa: E731
    if strip(dn) == strip(tn):
        return []
    theta = dn["rope_theta"]
    if _same_rope_frequencies(cfg, dn, tn, theta):
        return []
    fix = _rope_fix(dl, dn, tn, theta, nested)
    diff = sorted(k for k in set(strip(dn)) | set(strip(tn)) if dn.get(k) != tn.get(k))
    return [
        Finding(
            "CFG004",
            f"RoPE differs between draft and target: {', '.join(diff)}",
            [
                f"draft  (normalised): {json.dumps(strip(dn), sort_keys=True)}",
                f"target (normalised): {json.dumps(strip(tn), sort_keys=True)}",
                "compared on the inverse frequencies and attention factor transformers computes for each",
            ],
            fix,
        )
    ]


def _same_rope_frequencies(cfg: Any, dn: dict[str, Any], tn: dict[str, Any], theta: float) -> bool:
    """Whether the two normalised RoPE dicts give the same inverse frequencies and attention factor:
    dicts that differ in spelling only (e.g. an explicit default) rotate identically."""
    from dataclasses import replace

    import numpy as np

    from ...draft.rope import rope_frequencies

    same = False
    try:
        a = rope_frequencies(replace(cfg, rope_scaling={**dn, "rope_theta": theta}, extra={}))
        b = rope_frequencies(replace(cfg, rope_scaling={**tn, "rope_theta": theta}, extra={}))
        same = a[0].shape == b[0].shape and bool(np.allclose(a[0], b[0], rtol=1e-6, atol=0)) and abs(a[1] - b[1]) < 1e-9
    except Exception:  # a rope the installed transformers cannot build: compare the dicts only
        same = False
    return same


def _rope_fix(dl: dict[str, Any], dn: dict[str, Any], tn: dict[str, Any], theta: float, nested: str | None) -> Fix:
    """CFG004's edit, in the layout the draft config already uses (transformers 5 or 4)."""
    prefix = f"{nested}." if nested else ""
    if isinstance(dl.get("rope_parameters"), dict):  # the draft speaks transformers 5: one dict
        want = {**{k: v for k, v in tn.items() if not (k == "partial_rotary_factor" and v == 1.0)}, "rope_theta": theta}
        fix = config_fix(
            f"set {json_snippet(prefix + 'rope_parameters', want)} in the draft's config.json", prefix + "rope_parameters", want
        )
    else:  # transformers 4: rope_scaling without rope_theta, partial_rotary_factor at the top
        scaling = {k: v for k, v in tn.items() if k not in ("rope_theta", "partial_rotary_factor")}
        body = {"rope_scaling": None if scaling == {"rope_type": "default"} else scaling}
        if tn["partial_rotary_factor"] != dn["partial_rotary_factor"]:
            body["partial_rotary_factor"] = tn["partial_rotary_factor"]
        text = "set " + ", ".join(json_snippet(prefix + k, v) for k, v in body.items()) + " in the draft's config.json"
        if nested:
            text = f"set {json_snippet(nested, body)} in the draft's config.json"
        # the edit as one key: rope_scaling alone, or the section holding both keys
        fix = (
            config_fix(text, nested, body)
            if nested
            else (
                config_fix(text, prefix + "rope_scaling", body["rope_scaling"])
                if len(body) == 1
                else Fix(
                    text,
                    file=DRAFT_CONFIG,
                    key=prefix.rstrip(".") or None,
                    value=body,
                    snippet=", ".join(json_snippet(prefix + k, v) for k, v in body.items()),
                )
            )
        )
    return fix


def _position_findings(cfg: Any, info: DraftInfo, tcfg: dict[str, Any]) -> list[Finding]:
    """CFG003/CFG004: positions the draft encodes otherwise than the target it reads states from."""
    out: list[Finding] = []
    for key in ("rope_theta",):
        dv = info.config.get(key, (info.config.get("transformer_layer_config") or {}).get(key))
        if dv is None and isinstance(info.config.get("rope_parameters"), dict):
            dv = info.config["rope_parameters"].get("rope_theta")
        tv = tcfg.get(key) if tcfg.get(key) is not None else (tcfg.get("rope_parameters") or {}).get("rope_theta")
        if dv is not None and tv is not None and float(dv) != float(tv):
            out.append(
                Finding(
                    "CFG003",
                    f"rope_theta: draft {dv}, target {tv}",
                    ["the draft attends with other rotary frequencies than it was trained with if the converter changed it"],
                    config_fix(f'set "rope_theta": {tv} in the draft config (the value used in training)', "rope_theta", tv),
                )
            )
    dl = info.config.get("transformer_layer_config") or info.config
    out += rope_findings(cfg, dl, tcfg, nested="transformer_layer_config" if dl is not info.config else None)
    dv, tv = dl.get("max_position_embeddings"), tcfg.get("max_position_embeddings")
    mpe_key = ("transformer_layer_config." if dl is not info.config else "") + "max_position_embeddings"
    if dv and tv and dv < tv:
        out.append(
            Finding(
                "CFG004",
                f"max_position_embeddings: draft {dv}, target {tv}",
                ["converters often copy a shorter context length; rope types that scale with it then drift"],
                config_fix(f"set {json_snippet(mpe_key, tv)} in the draft's config.json", mpe_key, tv),
            )
        )
    return out
