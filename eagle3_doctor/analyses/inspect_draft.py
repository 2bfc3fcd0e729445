"""inspect: what is wrong with a draft checkpoint and its config, without running a prompt."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..core.errors import BadInput
from ..core.findings import DRAFT_CONFIG, DRAFT_WEIGHTS, Finding, Fix, Location, config_fix, json_snippet
from ..core.taps import format_spec
from ..draft.formats import DraftInfo, read_draft, spec_from_info
from ..draft.served import draft_serving
from ..engines.families import arch_family
from ..engines.keys import id_range
from ..engines.releases import ENGINES, rules_release
from ..engines.serving import Serving, resolve_serving
from .compare import diagnose_specs, served_state_findings
from .forensics import Forensics, examine, geometry_fact, tensor_fact
from .quantization import quant_findings, target_quant

SCHEMA = "eagle3-doctor/inspect/1"

# The draft architecture names each engine registers for EAGLE-3 (sglang srt/models/llama_eagle3.py
# EntryClass; vllm model_executor/models/registry.py _SPECULATIVE_DECODING_MODELS; speculators).
REGISTERED = {
    "sglang": {"LlamaForCausalLMEagle3", "Qwen3ForCausalLMEagle3", "LlamaForCausalLMEagle"},
    "vllm": {
        "Eagle3LlamaForCausalLM",
        "LlamaForCausalLMEagle3",
        "Eagle3Speculator",
        "Eagle3Qwen3vlForCausalLM",
        "Eagle3Qwen3ForCausalLM",
    },  # registry.py:700-705 (0.33.0)
    "modelopt": {"LlamaForCausalLMEagle3"},
}
PREFERRED = {"sglang": "LlamaForCausalLMEagle3", "vllm": "Eagle3Speculator", "modelopt": "LlamaForCausalLMEagle3"}


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


def read_target_config(target: str) -> dict[str, Any]:
    p = Path(target)
    from ..io.checks import looks_local

    if p.exists() or looks_local(target):
        from ..model.target import read_local_config

        cfg = read_local_config(target)
        if cfg is None:
            raise BadInput(f"target directory {target} does not exist", "pass --target DIR or a hub id like org/name")
        return cfg
    try:
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(target, trust_remote_code=False).to_dict()  # inspect runs no model code
    except (OSError, ValueError) as e:
        from ..model.target import _first_line, _hub_fix

        raise BadInput(f"cannot read the target config {target!r}: {_first_line(e)}", _hub_fix(target)) from None


def read_target_tensor(target: str, names: tuple[str, ...]) -> torch.Tensor | None:
    """One tensor from a local target's safetensors, without loading the model."""
    from safetensors import safe_open

    p = Path(target)
    if not p.is_dir():
        return None
    files = sorted(p.glob("*.safetensors"))
    idx = p / "model.safetensors.index.json"
    if idx.is_file():
        from ..io.safeio import read_json_object

        wm = read_json_object(idx, "restore model.safetensors.index.json from the checkpoint").get("weight_map", {})
        for n in names:
            if n in wm:
                files = [p / wm[n]]
                break
    for f in files:
        with safe_open(str(f), framework="pt") as st:
            for n in names:
                if n in st.keys():
                    return st.get_tensor(n)
    return None


def _ids_in_range(ids: list[int], L: int, engine: str) -> list[int]:
    # the same range compare-hidden takes (engines.id_range), so both commands accept the same ids
    lo, hi = id_range(engine, L)
    return [i for i in ids if i < lo or i > hi]


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


def absolute_d2t(d2t: torch.Tensor, t2d: torch.Tensor | None, vocab: int) -> str | None:
    """Why ``d2t`` reads as absolute target ids, or None: ``d2t - arange`` is then a valid offset
    table (targets distinct, inside the vocabulary) and, where ``t2d`` exists, consistent with it,
    while ``d2t`` read as offsets is not."""
    n = d2t.numel()
    if n == 0 or bool((d2t < 0).any()) or bool((d2t >= vocab).any()) or d2t.unique().numel() != n:
        return None
    as_offsets = d2t + torch.arange(n)
    if t2d is not None:
        marked = torch.zeros(vocab, dtype=torch.bool)
        marked[d2t] = True
        if not torch.equal(marked, t2d.bool()):
            return None
        offsets_ok = bool((as_offsets < vocab).all()) and torch.equal(
            torch.zeros(vocab, dtype=torch.bool).index_fill_(0, as_offsets.clamp(max=vocab - 1), True), t2d.bool()
        )
    else:
        offsets_ok = bool((as_offsets < vocab).all()) and as_offsets.unique().numel() == n
    if offsets_ok:
        return None
    return (
        f"read as absolute ids, d2t is a valid table: {n} distinct target ids in 0..{vocab - 1}"
        + (", exactly the ids t2d marks" if t2d is not None else "")
        + f"; read as offsets it is not (draft id 0..{min(n, 3) - 1} -> {as_offsets[:3].tolist()} ...)"
    )


def normalised_rope(c: dict[str, Any]) -> dict[str, Any]:
    """A config's RoPE in one form, whichever layout it uses: transformers 4 (``rope_theta`` +
    ``rope_scaling`` + top-level ``partial_rotary_factor``) or 5 (``rope_parameters``)."""
    rp = c.get("rope_parameters") if isinstance(c.get("rope_parameters"), dict) else None
    d = dict(rp if rp is not None else (c.get("rope_scaling") or {}))
    if "type" in d and "rope_type" not in d:
        d["rope_type"] = d.pop("type")
    d.setdefault("rope_type", "default")
    d.setdefault("rope_theta", c.get("rope_theta", 10000.0))
    d.setdefault("partial_rotary_factor", c.get("partial_rotary_factor", 1.0))
    return d


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

    from ..draft.model import rope_tables

    same = False
    try:
        a = rope_tables(replace(cfg, rope_scaling={**dn, "rope_theta": theta}, extra={}))
        b = rope_tables(replace(cfg, rope_scaling={**tn, "rope_theta": theta}, extra={}))
        same = a[0].shape == b[0].shape and bool(torch.allclose(a[0], b[0], rtol=1e-6, atol=0)) and abs(a[1] - b[1]) < 1e-9
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
        d, info = read_draft(draft, fmt=draft_format, device="cpu", dtype=None)
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
    fx = examine(draft, info.format)
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
    q_findings, q_facts = _quant_findings(target, tcfg, info, fx, engine)
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


def _weight_findings(d: Any, info: DraftInfo, target: str, tH: int, tV: int, serving: Serving | None) -> list[Finding]:
    """DRF*: what the checkpoint's tensors say, in the order a reader fixes them (head, maps, sizes, values);
    each tensor's own values (NaN, initialisation) are forensics.py's."""
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


def fc_width_findings(cfg: Any, info: DraftInfo, tH: int, serving: Serving | None) -> list[Finding]:
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


def _size_findings(cfg: Any, info: DraftInfo, tH: int, tV: int, serving: Serving | None) -> list[Finding]:
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


def _vocab_map_findings(d: Any, info: DraftInfo) -> list[Finding]:
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
    tgt_ids = torch.arange(cfg.draft_vocab_size) + d.d2t.cpu()
    if not info.has_d2t:
        return out
    bad = ((tgt_ids < 0) | (tgt_ids >= cfg.vocab_size)).nonzero().flatten()
    absolute = absolute_d2t(d.d2t.cpu(), d.t2d.cpu() if info.has_t2d else None, cfg.vocab_size)
    if bad.numel():
        ev = [f"draft ids {bad[:5].tolist()} -> target ids {tgt_ids[bad[:5]].tolist()} (vocab {cfg.vocab_size})"]
        if absolute:
            out.append(_absolute_d2t_finding(ev + [absolute]))
        else:
            out.append(
                Finding(
                    "DRF003",
                    f"d2t maps {bad.numel()} draft id(s) outside the target vocabulary",
                    ev,
                    "re-create d2t from the draft vocabulary used in training",
                    location=Location(DRAFT_WEIGHTS, "d2t"),
                )
            )
    elif absolute and info.has_t2d:
        out.append(_absolute_d2t_finding([absolute]))
    elif info.has_t2d:
        out += _t2d_findings(d.t2d.cpu(), tgt_ids, cfg.draft_vocab_size)
    return out


def _absolute_d2t_finding(ev: list[str]) -> Finding:
    """DRF003 for a d2t written as target ids: one finding whether or not some ids also overflow the vocabulary."""
    return Finding(
        "DRF003",
        "d2t holds absolute target ids, not offsets (target_id - draft_id)",
        ev,
        ABSOLUTE_D2T_FIX,
        data={"absolute_d2t": True},
    )


def _t2d_findings(t2d: torch.Tensor, tgt_ids: torch.Tensor, draft_vocab: int) -> list[Finding]:
    """DRF004: t2d must mark exactly the target ids d2t reaches."""
    from_d2t = torch.zeros_like(t2d)
    from_d2t[tgt_ids] = True
    if torch.equal(t2d, from_d2t) and int(t2d.sum()) == draft_vocab:
        return []
    diff = (t2d != from_d2t).nonzero().flatten()
    return [
        Finding(
            "DRF004",
            f"t2d disagrees with d2t at {diff.numel()} target id(s)",
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


def _embedding_findings(d: Any, info: DraftInfo, target: str) -> list[Finding]:
    if not info.has_embed:
        return []
    temb = read_target_tensor(target, ("model.embed_tokens.weight", "embed_tokens.weight"))
    demb = d.embed_tokens.weight.detach().float() if d.embed_tokens is not None else None
    if temb is None or demb is None:
        return []
    same = temb.shape == demb.shape and torch.allclose(temb.float(), demb, atol=1e-3, rtol=1e-3)
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


def _layer_id_findings(info: DraftInfo, L: int, engine: str) -> tuple[dict[str, list[int]], list[Finding]]:
    """CFG001/CFG002 on every layer-id list the config holds, and those lists by key (the capture check reads them)."""
    out: list[Finding] = []
    config_ids = {}
    if info.layer_ids_key:
        config_ids[info.layer_ids_key] = info.layer_ids
    config_ids.update(info.other_layer_id_keys)
    for key, ids in config_ids.items():
        if L:
            oob = _ids_in_range(ids, L, engine)
            if oob:
                out.append(
                    Finding(
                        "CFG001",
                        f"{key} = {ids}: id(s) {oob} are out of range for a {L}-layer target under {engine}",
                        [f"{engine} ids run {id_range(engine, L)[0]}..{id_range(engine, L)[1]}"],
                        "use ids inside the target's depth",
                        location=Location(DRAFT_CONFIG, key),
                    )
                )
        if ids != sorted(ids):
            out.append(
                Finding(
                    "CFG002",
                    f"{key} = {ids} is not sorted",
                    [
                        "SGLang concatenates in the listed order; vLLM, TensorRT-LLM and ModelOpt sort: the fc input is permuted in one and not the other"
                    ],
                    config_fix(f"write the ids sorted ({sorted(ids)}) and make sure training used that order", key, sorted(ids)),
                )
            )
    return config_ids, out


def _has(findings: list[Finding], code: str) -> bool:
    return any(f.code == code for f in findings)


def _serving(
    info: DraftInfo, engine: str, engine_version: str | None, family: str, L: int, config_ids: dict[str, list[int]]
) -> Serving:
    """What the engine feeds this draft, from every id list its config holds."""
    ec_all = info.config.get("eagle_config") if isinstance(info.config.get("eagle_config"), dict) else {}
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


def _dtype_and_flag_findings(
    info: DraftInfo, tcfg: dict[str, Any], engine: str, engine_version: str | None
) -> tuple[list[Finding], list[tuple[str, str]]]:
    """CFG005/CFG006, and the forward flags the config sets as a fact."""
    out: list[Finding] = []
    tdt = str(tcfg.get("torch_dtype") or tcfg.get("dtype") or "").replace("torch.", "")
    if tdt and info.weight_dtype and tdt != info.weight_dtype:
        out.append(
            Finding(
                "CFG005",
                f"draft weights are {info.weight_dtype}, target is {tdt}",
                ["an fp16 draft against a bf16 target overflows and rounds differently"],
                f"serve the draft in {tdt} (engines cast to the target dtype; check accuracy with acceptance --dtype {tdt})",
            )
        )
    flags = {
        k: info.config.get(k) for k in ("norm_before_residual", "norm_output", "norm_before_fc", "fc_norm") if k in info.config
    }
    ec = info.config.get("eagle_config") if isinstance(info.config.get("eagle_config"), dict) else {}
    if "norm_before_fc" in ec:
        flags["eagle_config.norm_before_fc"] = ec["norm_before_fc"]
    if "norm_before_residual" not in info.config and info.format == "speculators":
        out.append(
            Finding(
                "CFG006",
                "norm_before_residual is missing from a speculators config",
                ["vLLM's native default is False, its speculators adapter defaults it to True"],
                'write "norm_before_residual" explicitly (the value used in training)',
                location=Location(DRAFT_CONFIG, "norm_before_residual"),
            )
        )
    if "norm_output" in info.config and draft_serving(engine, rules_release(engine, engine_version), info.format) is None:
        out.append(
            Finding(
                "CFG006",
                f"norm_output = {info.config['norm_output']} means different things per tool",
                [
                    "SGLang/vLLM/TensorRT-LLM/speculators: feed the normed state to the next draft step; SpecForge: norm before lm_head"
                ],
                "make sure the serving engine's reading matches how the draft was trained",
                location=Location(DRAFT_CONFIG, "norm_output"),
            )
        )
    facts = [("forward flags", ", ".join(f"{k}={v}" for k, v in flags.items()))] if flags else []
    return out, facts


def _served_findings(
    d: Any, info: DraftInfo, target: str, tcfg: dict[str, Any], engine: str, engine_version: str | None, tV: int
) -> tuple[list[Finding], list[tuple[str, str]]]:
    """The draft's own forward as the engine runs it (issue 13), and the flags it runs with as a fact."""
    from ..draft import served

    version = rules_release(engine, engine_version)  # a release newer than modelled runs the newest rules (ENG005)
    fwd, sf = served.diagnose(
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
            f"{engine} {version} runs",
            ", ".join(f"{k}={served.json_bool(v)}" for k, (v, _) in sf.flags.items())
            + (f"; undetermined: {', '.join(sf.undetermined)}" if sf.undetermined else ""),
        )
    ]


def _registration_findings(info: DraftInfo, engine: str) -> list[Finding]:
    archs = set(info.config.get("architectures") or [])
    if engine not in REGISTERED or not archs or archs & REGISTERED[engine]:
        return []
    return [
        Finding(
            "CFG007",
            f"{engine} does not register {sorted(archs)} as an EAGLE-3 draft",
            [f"{engine} registers: {', '.join(sorted(REGISTERED[engine]))}"],
            config_fix(
                f'set "architectures": ["{PREFERRED[engine]}"] or convert the draft to the '
                f"{'speculators' if engine == 'vllm' else 'sglang'} format",
                "architectures",
                [PREFERRED[engine]],
            ),
        )
    ]


def _quant_findings(
    target: str, tcfg: dict[str, Any], info: DraftInfo, fx: Forensics, engine: str
) -> tuple[list[Finding], list[tuple[str, str]]]:
    """Target and draft quantization, and the scheme the engine builds the draft with (engines/quant.py)."""
    sc = info.config.get("speculators_config")
    ver = sc.get("verifier") if isinstance(sc, dict) else None
    verifier = ver.get("name_or_path") if isinstance(ver, dict) else None
    tensors = [(t.name, t.dtype) for t in fx.tensors]
    return quant_findings(target_quant(target, tcfg), info.config, tensors, engine, verifier)
