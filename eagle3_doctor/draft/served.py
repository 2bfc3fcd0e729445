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


ENGINE_NAME = {"sglang": "SGLang", "vllm": "vLLM"}


def executed_flags(engine: str, version: str, fmt: str) -> dict[str, FlagRule | None]:
    """The four forward flags as the release's own draft model sets them (engines/draft_table.py, from
    ``make conformance``); None where the table has no row for the release."""
    from ..engines.draft_table import flag_rule

    flags: dict[str, FlagRule | None] = {}
    for f in ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output"):
        r = flag_rule(engine, version, f, fmt)
        later = f"{ENGINE_NAME[engine]} >= {r.first_reading}, which reads it" if r and r.first_reading else None
        flags[f] = None if r is None else FlagRule(r.keys, r.default, r.source, later)
    return flags


def _vllm(version: str, fmt: str) -> DraftServing:
    old_weights = version == "0.10.2"
    weights = "target-if-same-shape" if old_weights else "own"  # embed and lm_head alike
    weights_source = (
        "vLLM before PR #28549 replaced the draft's lm_head / embed_tokens with the target's"
        if old_weights
        else "vLLM PR #28549: the draft keeps its own lm_head / embed_tokens"
    )
    weights_fixed_by = "vLLM PR #28549 (merged 2025-11-12)" if old_weights else None
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
    return DraftServing(
        "vllm",
        version,
        fmt,
        flags,
        embed=weights,
        lm_head=weights,
        ties_head_to_embed=False,
        weights_source=weights_source,
        weights_fixed_by=weights_fixed_by,
        rope_neox=rope,
        qk_norm=qk[0],
        qk_norm_source=qk[1],
    )


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


def _declared(path: str, fmt: str) -> DraftServing:
    """A serving description's draft side (engines/declared.py): what it states, and nothing it does not; a flag it
    leaves out is undetermined (measured as trained, and said so), never a guess of what the engine does."""
    from ..engines.declared import FLAG_KEYS, read_declared

    d = read_declared(path)
    said = d.draft
    src = f"{d.label}: " + (d.source or "no source named")

    def rule(key: str) -> FlagRule | None:
        return FlagRule((), bool(said[key]), src) if key in said else None

    flags: dict[str, FlagRule | None] = {f: rule(f) for f in FLAG_KEYS}
    flags["norm_before_lm_head"] = _NORM_HEAD
    rope = FlagRule((), said["rope"] == "neox", src) if "rope" in said else None
    qk = ("qwen3", src) if said.get("qk_norm") is True else ("never", src)
    return DraftServing(
        "declared",
        path,
        fmt,
        flags,
        embed="target" if said.get("embed") == "target" else "own",
        lm_head="target-if-same-shape" if said.get("lm_head") == "target" else "own",
        ties_head_to_embed=said.get("tie_word_embeddings") is True,
        weights_source=src,
        rope_neox=rope,
        qk_norm=qk[0],
        qk_norm_source=qk[1],
    )


def draft_serving(engine: str, version: str, fmt: str) -> DraftServing | None:
    """The row for an engine version and checkpoint format; None where the project models none."""
    if engine == "vllm":
        return _vllm(version, fmt)
    if engine == "sglang":
        return _sglang(version, fmt)
    if engine == "declared":
        return _declared(version, fmt)
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


def trained_where(flag: str, info: Any) -> str:
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


def newest_release(engine: str) -> str:
    from ..engines.releases import ENGINE_VERSIONS

    return ENGINE_VERSIONS[engine][0]


# --------------------------------------------------------------------------- RoPE layout


# --------------------------------------------------------------------------- multi-layer drafts
