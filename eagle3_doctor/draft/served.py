"""How each engine version runs the draft itself, as opposed to how it was trained.

"As trained" is the checkpoint read with its own trainer's meaning of every key
(:mod:`eagle3_doctor.draft.formats`: speculators for the speculators format, SpecForge 0.2.0 for
the sglang format, the EAGLE reference otherwise). "As served" is what the engine does with the
same files: which keys it reads for each forward flag (and what it assumes when a key is missing),
whose ``lm_head`` / ``embed_tokens`` it uses, whether ``tie_word_embeddings`` replaces the head.

Every fact below names its source. The forward flags (``norm_before_residual``, ``norm_before_fc``,
``fc_norm``, ``norm_output``) and what a multi-layer draft gets come from each release's own
``llama_eagle3.py``, executed (:mod:`eagle3_doctor.engines.draft_table`, written by ``make
conformance`` with ``conformance/draft_exec.py``): which key sets each flag, in which order, with
which default, and (vLLM) which flags ``update_eagle3`` passes on from a speculators config. Where
the table has no row for a release, the flag is ``None`` (undetermined) and inspect says so.

Read, not executed (file at a commit, or a merged PR's own description):
- vLLM PR #28549 (merged 2025-11-12; first attempt #27732): the draft keeps its own ``lm_head`` /
  ``embed_tokens``; before it vLLM replaced them with the target's (gpt-oss-20b speculator: mean
  acceptance length 1.32 before, 2.49 after).
- SGLang ``srt/models/llama_eagle3.py`` @03d5a77 and @d737979: weights it has no parameter for are
  skipped silently by ``load_weights``; norms before ``lm_head``; ``tie_word_embeddings`` makes
  ``lm_head = embed_tokens``; ``hot_token_id = d2t + arange`` (``t2d`` ignored).
- RoPE layout (read from the released wheels): SGLang 0.4.3.post4 through 0.5.23
  ``srt/models/llama.py`` ``rope_is_neox_style = getattr(config, "rope_is_neox_style", True)``
  (:204 in 0.4.3.post4, :220 in 0.5.2, :335 in 0.5.23), in the ``LlamaDecoderLayer`` that
  ``llama_eagle3.py``'s draft layer subclasses; vLLM ``model_executor/models/llama.py``
  ``_init_rotary_emb``: ``is_neox_style = True`` (:223 in 0.10.2, :240 in 0.18.0, :241 in 0.33.0;
  False only for GGUF llama weights), which ``llama_eagle3.py`` and ``qwen3_eagle3.py`` inherit: no
  key is read. vLLM converts GPT-J-interleaved q/k rows to NeoX only in its Llama 4 models
  (``llama4.py`` ``permute_qk_weight_for_rotary``, ``llama4_eagle.py`` load_weights), never for
  EAGLE-3. The trainers that write the formats rotate NeoX-style only (speculators 0.9.0 through
  transformers' Llama/Qwen3 layers; SpecForge 0.2.0 ``llama3_eagle.py:126-141``); transformers'
  Llama 4 target rotates interleaved pairs (``modeling_llama4.py:225-231``), and TensorRT-LLM PR
  #19036 reports a Llama 4 EAGLE-3 drafter trained interleaved (acceptance length 1.01 when run NeoX).
- Qwen3 draft layers (``q_norm`` / ``k_norm``; speculators 0.9.0 writes them when
  ``transformer_layer_config.model_type`` is ``qwen3``): vLLM 0.33.0 maps that model_type to
  ``Eagle3Qwen3ForCausalLM`` (``transformers_utils/configs/speculators/algos.py:39-46``;
  ``registry.py:705``, the Qwen3 decoder layer with its q/k norms); vLLM 0.18.0 and 0.10.2 register
  no Qwen3 EAGLE-3 draft (``registry.py:553`` in 0.18.0: only ``Eagle3Qwen3vl`` -> the Llama draft).
  SGLang 0.5.2 and 0.5.23 run Llama/Qwen EAGLE-3 drafts as ``LlamaForCausalLMEagle3``
  (``llama_eagle3.py`` ``EntryClass``; 0.5.23's other EAGLE-3 classes are Kimi-K2.5's and Gemma 4's), with no q/k norm; its ``load_weights`` skips names it has
  no parameter for.
- SpecForge <= 0.2.0 meant "norm before lm_head" by ``norm_output``; SGLang reads it as "feed the
  normed state" (SpecForge PR #879 aligned SpecForge with SGLang).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FLAGS = ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output", "norm_before_lm_head")


@dataclass(frozen=True)
class FlagRule:
    """How one engine version sets one forward flag from a draft config."""

    keys: tuple[str, ...]  # dotted config keys looked up in order; () = the flag is never read
    default: bool  # the value when no key is present (or always, when keys is ())
    source: str
    fixed_by: str | None = None  # the change that made a newer version read it (for the fix text)


@dataclass(frozen=True)
class DraftServing:
    engine: str
    version: str
    fmt: str  # the checkpoint format this row is for ("*" = any)
    flags: dict[str, FlagRule | None]  # None = undetermined for this version
    embed: str  # "target" | "own" | "target-if-same-shape"
    lm_head: str  # "own" | "target-if-same-shape"
    ties_head_to_embed: bool
    weights_source: str
    weights_fixed_by: str | None = None
    notes: list[str] = field(default_factory=list)
    rope_neox: FlagRule | None = None  # whether the engine rotates NeoX-style (value True) or GPT-J
    qk_norm: str = "never"  # "never" | "qwen3" (applied for a qwen3 layer config / Qwen3 architecture)
    qk_norm_source: str = ""


_SG = "sglang srt/models/llama_eagle3.py @03d5a77/@d737979"
_NORM_HEAD = FlagRule(
    (),
    True,
    "every engine norms before lm_head (vllm llama_eagle3.py LlamaModel.forward; sglang llama_eagle3.py LlamaModel.forward)",
)
_UNREAD = "not read"


_ENGINE_NAME = {"sglang": "SGLang", "vllm": "vLLM"}


def executed_flags(engine: str, version: str, fmt: str) -> dict[str, FlagRule | None]:
    """The four forward flags as the release's own draft model sets them (engines/draft_table.py, from
    ``make conformance``); None where the table has no row for the release."""
    from ..engines.draft_table import flag_rule

    flags: dict[str, FlagRule | None] = {}
    for f in ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output"):
        r = flag_rule(engine, version, f, fmt)
        later = f"{_ENGINE_NAME[engine]} >= {r.first_reading}, which reads it" if r and r.first_reading else None
        flags[f] = None if r is None else FlagRule(r.keys, r.default, r.source, later)
    return flags


def _vllm(version: str, fmt: str) -> DraftServing:
    old_weights = version == "0.10.2"
    weights = dict(
        embed="target-if-same-shape" if old_weights else "own",
        lm_head="target-if-same-shape" if old_weights else "own",
        ties_head_to_embed=False,
        weights_source=(
            "vLLM before PR #28549 replaced the draft's lm_head / embed_tokens with the target's"
            if old_weights
            else "vLLM PR #28549: the draft keeps its own lm_head / embed_tokens"
        ),
        weights_fixed_by="vLLM PR #28549 (merged 2025-11-12)" if old_weights else None,
    )
    new = version in ("0.33.0", "0.33.0-v2")
    flags = executed_flags("vllm", version, fmt)
    flags["norm_before_lm_head"] = _NORM_HEAD
    line = {"0.10.2": 223, "0.18.0": 240}.get(version, 241)
    rope = FlagRule(
        (),
        True,
        f"vllm model_executor/models/llama.py:{line} ({version}): is_neox_style = True, "
        "no config key; only its Llama 4 models permute interleaved q/k rows at load",
    )
    qk = (
        (
            "qwen3",
            "vllm 0.33.0 speculators/algos.py:39-46 (model_type qwen3 -> Eagle3Qwen3ForCausalLM), "
            "registry.py:705 (architectures Eagle3Qwen3ForCausalLM)",
        )
        if new
        else (
            "never",
            f"vllm {version} registry.py registers no Qwen3 EAGLE-3 draft (0.18.0 registry.py:553: "
            "Eagle3Qwen3vl -> the Llama draft, llama_eagle3.py, no q/k norm)",
        )
    )
    return DraftServing("vllm", version, fmt, flags, **weights, rope_neox=rope, qk_norm=qk[0], qk_norm_source=qk[1])


def _sglang(version: str, fmt: str) -> DraftServing:
    flags = executed_flags("sglang", version, fmt)
    flags["norm_before_lm_head"] = _NORM_HEAD
    line = {"0.5.2": 220}.get(version, 335)
    rope = FlagRule(
        ("rope_is_neox_style",),
        True,
        f"sglang srt/models/llama.py:{line} ({version}): getattr(config, 'rope_is_neox_style', True), "
        "in the decoder layer llama_eagle3.py's draft layer subclasses",
    )
    return DraftServing(
        "sglang",
        version,
        fmt,
        flags,
        embed="target",
        lm_head="own",
        ties_head_to_embed=True,
        weights_source=f"{_SG}: embed_tokens from the target; tie_word_embeddings -> lm_head = embed_tokens",
        rope_neox=rope,
        qk_norm="never",
        qk_norm_source=f"sglang {version} runs Llama/Qwen EAGLE-3 drafts as LlamaForCausalLMEagle3 (llama_eagle3.py "
        "EntryClass), which has no q_norm/k_norm; load_weights skips them silently",
    )


def draft_serving(engine: str, version: str, fmt: str) -> DraftServing | None:
    """The row for an engine version and checkpoint format; None where the project models none."""
    if engine == "vllm":
        return _vllm(version, fmt)
    if engine == "sglang":
        return _sglang(version, fmt)
    return None


def lookup(config: dict[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def flag_keys_present(config: dict[str, Any], flag: str) -> dict[str, Any]:
    """Every place the config writes a flag: top level, eagle_config, transformer_layer_config."""
    out = {}
    for key in (flag, f"eagle_config.{flag}", f"transformer_layer_config.{flag}"):
        v = lookup(config, key)
        if v is not None:
            out[key] = v
    return out


def served_flag(rule: FlagRule, config: dict[str, Any]) -> tuple[bool, str]:
    """(value, why) of a flag as the engine sets it."""
    for key in rule.keys:
        v = lookup(config, key)
        if v is not None:
            return bool(v), f"read from {key} = {json_bool(v)} ({rule.source})"
    if not rule.keys:
        return rule.default, f"{_UNREAD}: always {json_bool(rule.default)} ({rule.source})"
    return rule.default, f"{' / '.join(rule.keys)} missing: default {json_bool(rule.default)} ({rule.source})"


def json_bool(v: Any) -> str:
    return "true" if v is True else "false" if v is False else repr(v)


# --------------------------------------------------------------------------- trained vs served


_WEIGHT_OF = {"norm_before_fc": "input_norm.weight", "fc_norm": "fc_norm.0.weight"}


def _trained_where(flag: str, info: Any) -> str:
    present = flag_keys_present(info.config, flag)
    bits = [f"{k} = {json_bool(v)}" for k, v in present.items()]
    w = _WEIGHT_OF.get(flag)
    if w and any(k == w or k.endswith("." + w) for k in info.weight_keys):
        bits.append(f"weights hold {w}")
    if info.format == "sglang" and flag in ("norm_before_lm_head", "norm_output"):
        no = info.config.get("norm_output")
        bits = [
            f"SpecForge 0.2.0 reads norm_output = {json_bool(no)} as 'norm before lm_head' and always feeds back "
            "the pre-norm state"
            if no is not None
            else "SpecForge 0.2.0 default"
        ]
    return ", ".join(bits) or "format default"


@dataclass
class ServedForward:
    """The draft as the engine runs it: flag values (with why) and whose weights it uses."""

    serving: DraftServing
    flags: dict[str, tuple[bool, str]]
    undetermined: list[str]
    embed_from_target: bool = False
    head_from_target: bool = False
    head_is_embed: bool = False


def served_forward(
    info: Any, engine: str, version: str, *, target_vocab: int | None = None, target_has_head: bool = True
) -> ServedForward | None:
    row = draft_serving(engine, version, info.format)
    if row is None:
        return None
    flags, und = {}, []
    for f in FLAGS:
        rule = row.flags.get(f)
        if rule is None:
            und.append(f)
            continue
        flags[f] = served_flag(rule, info.config)
    sf = ServedForward(row, flags, und)
    same_vocab = target_vocab is not None and info.config and _draft_vocab(info) == target_vocab
    if info.has_embed and row.embed in ("target", "target-if-same-shape"):
        sf.embed_from_target = True
    if info.has_lm_head and row.lm_head == "target-if-same-shape" and same_vocab and target_has_head:
        sf.head_from_target = True
    tie = info.config.get("tie_word_embeddings")
    if row.ties_head_to_embed and tie is True:
        sf.head_is_embed = True
    return sf


def _draft_vocab(info: Any) -> int | None:
    v = info.config.get("draft_vocab_size")
    return v if isinstance(v, int) else None


def _newest(engine: str) -> str:
    from ..engines.releases import ENGINE_VERSIONS

    return ENGINE_VERSIONS[engine][0]


# --------------------------------------------------------------------------- RoPE layout

_TRAINERS = {
    "speculators": "speculators 0.9.0 (transformers' Llama/Qwen3 attention, rotate-half)",
    "sglang": "SpecForge 0.2.0 (llama3_eagle.py:126-141, rotate-half)",
    "eagle": "EAGLE (eagle/model/cnets.py, rotate-half)",
}
_LLAMA4 = ("llama4", "llama4_text")


def _layer_config(config: dict[str, Any]) -> dict[str, Any]:
    tl = config.get("transformer_layer_config")
    return tl if isinstance(tl, dict) else {}


def trained_rope_interleaved(info: Any, target_config: dict[str, Any] | None = None) -> tuple[bool | None, str]:
    """(interleaved, why) for the RoPE layout the draft was trained with: True = GPT-J pairs,
    False = NeoX halves, None = undetermined (a Llama 4 target, whose own RoPE is interleaved, and
    a draft config that names no layout: no weight statistic tells the two apart reliably)."""
    c, tl = info.config, _layer_config(info.config)
    for key, node in (("rope_is_neox_style", c), ("transformer_layer_config.rope_is_neox_style", tl)):
        v = node.get("rope_is_neox_style")
        if isinstance(v, bool):
            return (not v), f"{key} = {json_bool(v)}"
    tc = target_config or {}
    llama4 = {
        str(c.get("model_type", "")).lower(),
        str(tl.get("model_type", "")).lower(),
        str(tc.get("model_type", "")).lower(),
    } & set(_LLAMA4) or any("llama4" in str(a).lower() for a in (tc.get("architectures") or []))
    if llama4:
        return None, (
            "Llama 4: its transformers model rotates GPT-J-interleaved pairs (modeling_llama4.py:225-231) and "
            "TensorRT-LLM PR #19036 reports a Llama 4 drafter trained that way, while SpecForge and "
            "speculators train NeoX; the draft config names no layout (rope_is_neox_style)"
        )
    trainer = _TRAINERS.get(info.format, "every EAGLE-3 trainer the doctor models")
    return False, f"no rope_is_neox_style: NeoX, the only layout {trainer} trains"


def neox_fix(cfg: Any, key: str = "rope_is_neox_style") -> Any:
    """The weight rewrite that turns a GPT-J-trained draft into the same function under NeoX RoPE:
    per head, rotary rows (0, 2, 4, ..., 1, 3, 5, ...) of q_proj and k_proj (vLLM's own
    permute_qk_weight_for_rotary for Llama 4, restricted to the rotary dims)."""
    from ..core.findings import DRAFT_WEIGHTS, Fix, json_snippet
    from .model import rope_inv_freq

    d, r = int(cfg.head_dim), 2 * int(rope_inv_freq(cfg).numel())
    nq, nkv = cfg.num_attention_heads, cfg.num_key_value_heads
    code = (
        "import torch; from safetensors.torch import load_file, save_file; sd = load_file(p); "
        f"f = lambda w, n: (lambda x: torch.cat([x[:, 0:{r}:2], x[:, 1:{r}:2], x[:, {r}:]], 1).reshape(w.shape))"
        f"(w.reshape(n, {d}, -1)); "
        f"sd = {{k: f(v, {nq} if 'q_proj' in k else {nkv}) if ('q_proj' in k or 'k_proj' in k) else v "
        "for k, v in sd.items()}; save_file(sd, p)"
    )
    return Fix(
        f"rewrite q_proj/k_proj (weights and any bias) in NeoX order, then set {json_snippet(key, True)} in the "
        f"draft's config.json (python, for each *.safetensors file p: {code})",
        file=DRAFT_WEIGHTS,
        key="q_proj, k_proj",
        op="rewrite",
        snippet=code,
    )


def _rope_name(interleaved: bool) -> str:
    return "GPT-J-interleaved" if interleaved else "NeoX (rotate-half)"


def rope_findings(info: Any, cfg: Any, sf: ServedForward | None, label: str, target_config: dict[str, Any] | None) -> list[Any]:
    """FWD006 where the engine rotates in another layout than training; FWD007 where the trained
    layout is undetermined."""
    from ..core.findings import Finding

    if sf is None or sf.serving.rope_neox is None:
        return []
    rule = sf.serving.rope_neox
    neox, why = served_flag(rule, info.config)
    trained, twhy = trained_rope_interleaved(info, target_config)
    served_ev = f"served by {label}: {_rope_name(not neox)}: {why}"
    if trained is None:
        return [_rope_undetermined_finding(label, neox, twhy, served_ev)]
    if trained == (not neox):
        return []
    ev = [
        f"trained: {_rope_name(trained)} ({twhy})",
        served_ev,
        "each q/k pair is rotated by another frequency than in training: attention scores lose their positions "
        "(TensorRT-LLM PR #19036: acceptance length 1.01)",
    ]
    fix, unread = _rope_fix(rule, info, cfg, trained, label)
    ev += unread
    return [
        Finding(
            "FWD006",
            f"{label} rotates the draft's RoPE {_rope_name(not neox)}, it was trained {_rope_name(trained)}",
            ev,
            fix,
            data={"trained_interleaved": trained, "served_interleaved": not neox},
        )
    ]


def _rope_undetermined_finding(label: str, neox: bool, twhy: str, served_ev: str) -> Any:
    """FWD007: only the user knows the layout training used; the config key settles it for the engines that read it."""
    from ..core.findings import DRAFT_CONFIG, Finding, Location

    return Finding(
        "FWD007",
        f"undetermined whether the draft was trained with NeoX or GPT-J-interleaved RoPE; {label} runs it {_rope_name(not neox)}",
        [f"trained: undetermined: {twhy}", served_ev],
        'write the layout training used into the draft\'s config.json: "rope_is_neox_style": true '
        "(NeoX: SpecForge, speculators) or false (GPT-J); `eagle3-doctor acceptance` measures the "
        "draft under both and names the one its weights fit",
        data={"trained": None, "served_interleaved": not neox},
        location=Location(DRAFT_CONFIG, "rope_is_neox_style"),
    )


def _rope_fix(rule: FlagRule, info: Any, cfg: Any, trained: bool, label: str) -> tuple[Any, list[str]]:
    """(fix, evidence about keys the engine ignores) for FWD006: an engine that reads the layout
    gets the key; one that always rotates NeoX needs the weights permuted instead."""
    from ..core.findings import config_fix, json_snippet

    unread: list[str] = []
    if rule.keys:
        fix = config_fix(f"set {json_snippet(rule.keys[0], not trained)} in the draft's config.json", rule.keys[0], not trained)
        moved = [
            k
            for k in ("transformer_layer_config.rope_is_neox_style",)
            if lookup(info.config, k) is not None and k not in rule.keys
        ]
        if moved:
            unread.append(f"{label} never reads {', '.join(moved)}")
    elif trained:
        fix = neox_fix(
            cfg,
            next(
                (
                    k
                    for k in ("rope_is_neox_style", "transformer_layer_config.rope_is_neox_style")
                    if isinstance(lookup(info.config, k), bool)
                ),
                "rope_is_neox_style",
            ),
        )
    else:  # trained NeoX, engine GPT-J: no modelled engine does this
        fix = f"{label} cannot rotate NeoX-style: serve with an engine that does"
    return fix, unread


def served_qk_norm(row: DraftServing, info: Any) -> bool:
    """Whether the engine row runs q_norm/k_norm for this checkpoint."""
    if row.qk_norm != "qwen3":
        return False
    if info.format == "speculators":
        return _layer_config(info.config).get("model_type") == "qwen3"
    return any(
        "Qwen3ForCausalLM" in str(a) and "Eagle3" in str(a) or str(a) == "PeagleQwen3ForCausalLM"
        for a in info.config.get("architectures") or []
    )


def qk_norm_findings(info: Any, cfg: Any, sf: ServedForward | None, label: str) -> list[Any]:
    """FWD008 where the draft's attention was trained with Qwen3's q/k norms and the engine runs
    (or loads) it without them."""
    from ..core.findings import Finding

    if sf is None or not cfg.qk_norm or served_qk_norm(sf.serving, info):
        return []
    row = sf.serving
    trained = [
        "trained: q_norm/k_norm over head_dim before RoPE ("
        + ", ".join(
            b
            for b in (
                f"transformer_layer_config.model_type = {_layer_config(info.config).get('model_type')!r}"
                if _layer_config(info.config).get("model_type")
                else "",
                "weights hold self_attn.q_norm.weight / k_norm.weight"
                if any(k.endswith("q_norm.weight") for k in info.weight_keys)
                else "",
            )
            if b
        )
        + ")",
        f"served by {label}: no q/k norm ({row.qk_norm_source})",
    ]
    if row.engine == "vllm" and row.qk_norm == "never":
        fix = f"{label} has no Qwen3 EAGLE-3 draft: upgrade to vLLM 0.33.0 or later (--engine-version 0.33.0 models it)"
    elif row.engine == "vllm" and row.qk_norm == "qwen3":
        trained.append(
            f"{label} runs q/k norms for architectures Eagle3Qwen3ForCausalLM (registry.py:705) or a "
            "speculators config whose transformer_layer_config.model_type is qwen3"
        )
        fix = 'set "architectures": ["Eagle3Qwen3ForCausalLM"] in the draft\'s config.json'
    else:
        fix = (
            f"{label} cannot run a Qwen3 draft layer: serve with vLLM 0.33.0 or later (speculators format, "
            'transformer_layer_config.model_type "qwen3"), or retrain the draft with a Llama layer'
        )
    return [
        Finding(
            "FWD008",
            f"{label} runs the draft's attention without the q_norm/k_norm it was trained with",
            trained,
            fix,
            data={"weight": "q_norm/k_norm"},
        )
    ]


def diagnose(
    draft: Any,
    info: Any,
    engine: str,
    version: str,
    *,
    target_vocab: int | None,
    target_head: Any = None,
    target_embed: Any = None,
    target_config: dict[str, Any] | None = None,
) -> tuple[list[Any], ServedForward | None]:
    """Findings where the engine runs the draft differently from how it was trained (no forward)."""
    from ..core.findings import DRAFT_CONFIG, Finding, Location

    out: list[Any] = []
    cfg = draft.config
    if cfg.norm_before_fc and cfg.fc_norm:
        out.append(
            Finding(
                "FWD005",
                "the draft has both norm_before_fc (input_norm) and fc_norm",
                [
                    f"norm_before_fc: {_trained_where('norm_before_fc', info)}; fc_norm: {_trained_where('fc_norm', info)}",
                    "speculators 0.9.0 rejects the pair (models/eagle3/config.py:89-96: 'mutually exclusive'); "
                    "the doctor runs input_norm first, then fc_norm, as speculators' forward would (core.py:236-243)",
                ],
                "keep the one training used: delete the other flag and its weights (input_norm.weight or fc_norm.*)",
                location=Location(DRAFT_CONFIG),
            )
        )
    sf = served_forward(info, engine, version, target_vocab=target_vocab, target_has_head=target_head is not None)
    if sf is None:
        return out, None
    label = f"{engine} {version}"
    out += _flag_findings(cfg, info, sf, engine, version, label)
    out += _undetermined_findings(cfg, info, sf, label)
    out += _weight_source_findings(draft, cfg, sf, engine, version, label, target_head, target_embed)
    out += rope_findings(info, cfg, sf, label, target_config)
    out += qk_norm_findings(info, cfg, sf, label)
    out += layer_findings(info, cfg, engine, version, label)
    return out, sf


# --------------------------------------------------------------------------- multi-layer drafts


def layer_findings(info: Any, cfg: Any, engine: str, version: str, label: str) -> list[Any]:
    """FWD010 where the release does not build every layer; FWD009 where it normalises the later ones
    with a weight the checkpoint does not hold (both from the release's executed draft model)."""
    from ..core.findings import DRAFT_WEIGHTS, Finding, Fix, Location
    from ..engines.draft_table import layers_rule

    n = int(cfg.num_hidden_layers)
    rule = layers_rule(engine, version) if n > 1 and engine in _ENGINE_NAME else None
    if rule is None:
        return []
    name = _ENGINE_NAME[engine]
    executed = f"{rule.source}: for num_hidden_layers = 2 the constructor "
    if rule.two_layers != "built":
        return [_not_served(rule, n, label, name, executed, engine)]
    served = rule.later_norm
    if served is None or all(_holds(info, f"layers.{i}.{served}.weight") for i in range(1, n)):
        return []
    trained = "hidden_norm" if served == "input_layernorm" else "input_layernorm"
    code = (
        "from safetensors.torch import load_file, save_file; sd = load_file(p); "
        f"sd.update({{f'layers.{{i}}.{served}.weight': sd.pop(f'layers.{{i}}.{trained}.weight') for i in range(1, {n})}}); "
        "save_file(sd, p)"
    )
    other = {"hidden_norm": "SGLang >= 0.5.12", "input_layernorm": "vLLM >= 0.11.1"}[trained]
    layers = f"layer{'s 1-' if n > 2 else ' '}{n - 1}"
    return [
        Finding(
            "FWD009",
            f"{label} normalises decoder {layers} with {served}, which this checkpoint does not hold",
            [
                f"trained: the layers after the first apply layers.N.{trained} before attention (the weights hold "
                f"layers.N.{trained}.weight{', as speculators builds the verifier decoder layer' if trained == 'input_layernorm' else ''})",
                executed + f"built every layer, and a later layer's forward applies {served} before its attention",
                f"the checkpoint has no layers.N.{served}.weight: {name} keeps its initial weight (1.0) and the trained "
                f"{trained} goes unused",
            ],
            Fix(
                f"in a copy of the draft for {name}, rename each later layer's {trained} weight to {served} "
                f"(python, for each *.safetensors file p: {code}); or serve this checkpoint with {other}, which applies "
                f"{trained}",
                file=DRAFT_WEIGHTS,
                key=f"layers.N.{served}.weight",
                op="rewrite",
                snippet=code,
            ),
            location=Location(DRAFT_WEIGHTS, key=f"layers.1.{trained}.weight"),
            data={"layers": n, "served_norm": served, "trained_norm": trained},
        )
    ]


def _not_served(rule: Any, n: int, label: str, name: str, executed: str, engine: str) -> Any:
    from ..core.findings import Finding

    got = rule.two_layers if rule.two_layers.startswith("built") else "raised " + rule.two_layers
    up = (
        f"upgrade to {name} >= {rule.first_serving}, which builds every layer"
        if rule.first_serving
        else "no release of it serves more than one layer"
    )
    return Finding(
        "FWD010",
        f"{label} does not serve this {n}-layer draft",
        [f"the checkpoint holds {n} decoder layers (num_hidden_layers = {n})", executed + got],
        up + " (or serve with vLLM >= 0.11.1)" * (engine == "sglang"),
        data={"layers": n, "served": rule.two_layers},
    )


def _holds(info: Any, key: str) -> bool:
    return any(k == key or k.endswith("." + key) for k in info.weight_keys)


def _flag_findings(cfg: Any, info: Any, sf: ServedForward, engine: str, version: str, label: str) -> list[Any]:
    """FWD001: each forward flag the engine runs at another value than training used, with the edit that aligns it."""
    from ..core.findings import Finding, config_fix, json_snippet

    out: list[Any] = []
    for flag, (value, why) in sf.flags.items():
        trained = bool(getattr(cfg, flag))
        if value == trained:
            continue
        rule = sf.serving.flags[flag]
        assert rule is not None
        ev = [
            f"trained: {flag} = {json_bool(trained)} ({_trained_where(flag, info)})",
            f"served by {label}: {flag} = {json_bool(value)}: {why}",
        ]
        if flag == "norm_before_lm_head":
            fix = (
                "no engine runs lm_head without the final norm: retrain with it (SpecForge: drop "
                '"norm_output": false; SpecForge after PR #879 always norms before lm_head)'
            )
        elif flag == "norm_output" and info.format == "sglang":
            ev.append(
                "SpecForge 0.2.0 trained norm_output as 'norm before lm_head' and fed back the pre-norm state "
                "(llama3_eagle.py:1690, 1773-1778); the engine reads the key as 'feed the normed state'"
            )
            fix = config_fix(
                "delete \"norm_output\" from the draft's config.json: SpecForge 0.2.0's default (norm before "
                f"lm_head, pre-norm state fed back) is what {label} runs when the key is absent",
                "norm_output",
                op="delete",
            )
        elif rule.keys:
            fix = config_fix(f"set {json_snippet(rule.keys[0], trained)} in the draft's config.json", rule.keys[0], trained)
            moved = [k for k in flag_keys_present(info.config, flag) if k not in rule.keys]
            if moved:
                ev.append(f"{label} never reads {', '.join(moved)}")
        else:
            newest = _newest(engine)
            fix = (
                f"{label} cannot run this flag: "
                + (f"upgrade to {rule.fixed_by}" if rule.fixed_by else "no release of it reads a key for it")
                + (f" (--engine-version {newest} models one)" if rule.fixed_by and newest != version else "")
                + (f", or retrain without {flag}" if flag != "norm_before_lm_head" else "")
            )
        out.append(
            Finding(
                "FWD001",
                f"{label} runs the draft with {flag} = {json_bool(value)}, it was trained with {json_bool(trained)}",
                ev,
                fix,
                data={"flag": flag, "trained": trained, "served": value},
            )
        )
    return out


def _undetermined_findings(cfg: Any, info: Any, sf: ServedForward, label: str) -> list[Any]:
    from ..core.findings import Finding

    out: list[Any] = []
    for flag in sf.undetermined:
        trained = bool(getattr(cfg, flag))
        if trained == (flag == "norm_before_lm_head"):
            continue  # the flag is at its plain EAGLE-3 value: every version runs that
        out.append(
            Finding(
                "FWD002",
                f"undetermined whether {label} runs the draft with {flag} = {json_bool(trained)}",
                [
                    f"trained: {flag} = {json_bool(trained)} ({_trained_where(flag, info)})",
                    f"which key {label} reads for {flag} is not pinned to a source (see draft/served.py)",
                ],
                f"check that the engine logs or applies {flag}, or name a modelled version with --engine-version",
            )
        )
    return out


def _weight_source_findings(
    draft: Any, cfg: Any, sf: ServedForward, engine: str, version: str, label: str, target_head: Any, target_embed: Any
) -> list[Any]:
    """FWD003/FWD004: trained weights the engine swaps for the target's or for embed_tokens."""
    out: list[Any] = []
    row = sf.serving
    newest = _newest(engine)
    up = f"upgrade to a release with {row.weights_fixed_by}" + (
        f" (--engine-version {newest} models one)" if newest != version else ""
    )
    if (
        sf.embed_from_target
        and draft.embed_tokens is not None
        and target_embed is not None
        and row.embed == "target-if-same-shape"
        and tuple(target_embed.shape) == tuple(draft.embed_tokens.weight.shape)
    ):
        out += _replaced_weight_findings("embed_tokens", target_embed, draft.embed_tokens.weight, row, label, up)
    if sf.head_from_target and target_head is not None and tuple(target_head.shape) == tuple(draft.lm_head.weight.shape):
        out += _replaced_weight_findings("lm_head", target_head, draft.lm_head.weight, row, label, up)
    if sf.head_is_embed:
        out.append(_tied_head_finding(draft, cfg, row, label))
    return out


def _replaced_weight_findings(weight: str, target: Any, own: Any, row: DraftServing, label: str, up: str) -> list[Any]:
    """FWD003 for one weight, only where the target's copy differs from the draft's (a draft trained
    with the target's frozen weights loses nothing by the swap)."""
    from ..core.findings import Finding

    diff = float((target.float().cpu() - own.detach().float().cpu()).abs().max())
    if diff > 1e-3:
        return [
            Finding(
                "FWD003",
                f"{label} replaces the draft's own {weight} with the target's",
                [f"draft and target {weight} differ by up to {diff:.4g}", row.weights_source],
                up,
                data={"weight": weight},
            )
        ]
    return []


def _tied_head_finding(draft: Any, cfg: Any, row: DraftServing, label: str) -> Any:
    """FWD004: tie_word_embeddings makes the engine drop the trained lm_head for embed_tokens."""
    from ..core.findings import Finding, config_fix

    shape_ok = draft.embed_tokens is not None and draft.embed_tokens.weight.shape[0] == cfg.draft_vocab_size
    return Finding(
        "FWD004",
        f"tie_word_embeddings: true makes {label} use embed_tokens as the draft's lm_head",
        [
            f"{row.weights_source}",
            f"the trained lm_head.weight [{cfg.draft_vocab_size}, {cfg.hidden_size}] is ignored"
            + ("" if shape_ok else f"; embed_tokens has {cfg.vocab_size} rows, the draft vocabulary {cfg.draft_vocab_size}"),
        ],
        config_fix('set "tie_word_embeddings": false in the draft\'s config.json', "tie_word_embeddings", False),
    )
