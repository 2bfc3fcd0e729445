"""Low-level input checks: file types, JSON, safetensors headers, target configs, draft layer ids.

The modules that read inputs (target, draft formats, inspect) call these; the preflight in
validate.py calls them too. This module imports only errors and safeio (lazily), so any module
may import it without a cycle. Nothing here imports torch or transformers, and nothing can block:
FIFOs and devices are refused by their type before anything opens them.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

from ..core.errors import BadInput
from .safeio import KIND_PHRASE, mode_kind

# Sanity bounds for sizes read from a config. The largest published decoders have ~130 layers,
# hidden 25k and vocabularies of ~260k; these bounds leave room and still refuse a config that
# would build a billion layers before any weight is read.
MAX_LAYERS = 4096
MAX_HIDDEN = 1 << 17
MAX_VOCAB = 1 << 23
MAX_POSITIONS = 1 << 27
# What the doctor measures a draft at, wherever the number comes from (--num-steps, a launch command, a draft
# config's speculative_tokens or block_size): served drafts use 1 to 10 steps and a DFlash block of 16; no
# engine sets an upper bound of its own, so this one is ours, and a pass's slots are allocated from it.
MAX_NUM_STEPS = 64
# the decoder-layer sizes a target's and a draft's config.json both carry, each with its sane upper bound
LAYER_SIZE_BOUNDS = (
    ("hidden_size", MAX_HIDDEN),
    ("intermediate_size", 8 * MAX_HIDDEN),
    ("num_attention_heads", MAX_HIDDEN),
    ("num_key_value_heads", MAX_HIDDEN),
    ("head_dim", MAX_HIDDEN),
    ("vocab_size", MAX_VOCAB),
)

# Hugging Face repo ids: [org/]name of letters, digits, '-', '_', '.', no '--' or '..', <= 96 chars
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")
_LAYER_INDEX = re.compile(r"(?:^|\.)(?:layers|h|blocks|layer)\.(\d+)\.")


# ----------------------------------------------------------------------------- file types


def kind(path: str | os.PathLike) -> str:
    """'missing', 'file', 'dir', 'fifo', 'device', 'socket' or 'broken link' (stat follows links)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "broken link" if os.path.islink(path) else "missing"
    except NotADirectoryError:
        return "missing"
    except OSError:
        return "unreadable"
    return mode_kind(st.st_mode)


_WHAT = {**KIND_PHRASE, "broken link": "a broken symbolic link", "unreadable": "not accessible"}


def _under_a_file(p: Path) -> Path | None:
    """The first ancestor of p that exists and is not a directory, if any (p 'sits under a file')."""
    for a in reversed(p.absolute().parents):
        k = kind(a)
        if k == "missing":
            return None
        if k != "dir":
            return a
    return None


def _raise_missing(p: Path, what: str, fix: str) -> NoReturn:
    parent = _under_a_file(p)
    if parent is not None:
        raise BadInput(f"{what} {p} cannot exist: {parent} is a file, not a directory", fix)
    raise BadInput(f"{what} {p} does not exist", fix)


def require_file(path: str | os.PathLike, what: str, fix: str) -> Path:
    """A readable regular file, or one BadInput that says what it is instead."""
    p = Path(path)
    k = kind(p)
    if k == "file":
        if not os.access(p, os.R_OK):
            raise BadInput(f"{what} {p} is not readable (permission denied)", "fix its permissions (chmod +r)")
        return p
    if k == "missing":
        _raise_missing(p, what, fix)
    if k == "dir":
        raise BadInput(f"{what} {p} is a directory, not a file", fix)
    raise BadInput(f"{what} {p} is {_WHAT.get(k, k)}, not a regular file", fix)


def require_dir(path: str | os.PathLike, what: str, fix: str) -> Path:
    p = Path(path)
    k = kind(p)
    if k == "dir":
        if not os.access(p, os.R_OK | os.X_OK):
            raise BadInput(f"{what} {p} is not readable (permission denied)", "fix its permissions (chmod +rx)")
        return p
    if k == "missing":
        _raise_missing(p, what, fix)
    if k == "file":
        raise BadInput(f"{what} {p} is a file, not a directory", fix)
    raise BadInput(f"{what} {p} is {_WHAT.get(k, k)}, not a directory", fix)


def read_json(path: Path, what: str, fix: str, max_bytes: int = 64 << 20) -> Any:
    """JSON from a regular file (checked first: never opens a FIFO), size-bounded."""
    require_file(path, what, fix)
    size = path.stat().st_size
    if size > max_bytes:
        raise BadInput(f"{what} {path} is {size} bytes, too large for a JSON config", fix)
    from .safeio import loads_json, read_regular_bytes

    try:
        return loads_json(read_regular_bytes(path, what, fix, max_bytes).decode("utf-8"), f"{what} {path}", fix)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadInput(f"{what} {path} is not valid JSON ({str(e)[:120]})", fix) from None
    except RecursionError:
        raise BadInput(f"{what} {path} nests too deeply to be a config", fix) from None
    except OSError as e:
        raise BadInput(f"{what} {path} cannot be read ({e.strerror})", fix) from None


# ----------------------------------------------------------------------------- safetensors headers


def safetensors_header(path: Path) -> dict[str, Any]:
    """The header of a regular safetensors file (type-checked first, so a FIFO never blocks)."""
    from .safeio import check_safetensors_header

    require_file(path, "weights file", "re-download or re-export the checkpoint")
    return check_safetensors_header(path)


def _weight_names(d: Path) -> tuple[list[Path], dict[str, dict[str, Any]]]:
    """(safetensors files, {tensor name: header entry}) of a checkpoint directory, index-aware."""
    files = sorted(f for f in d.glob("*.safetensors"))
    idx = d / "model.safetensors.index.json"
    if kind(idx) != "missing":
        data = read_json(idx, "sharded-weights index", "restore model.safetensors.index.json from the original checkpoint")
        wm = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(wm, dict) or not all(isinstance(v, str) for v in wm.values()):
            raise BadInput(f"{idx} has no weight_map of tensor -> shard file", "restore it from the original checkpoint")
        for shard in sorted(set(wm.values())):
            sp = d / shard
            if Path(shard).name != shard:
                raise BadInput(f"{idx} names shard {shard!r} outside the checkpoint directory", "restore the index file")
            require_file(sp, f"shard {shard} named in {idx.name}:", "re-download the missing shard")
    names: dict[str, dict[str, Any]] = {}
    for f in files:
        header = safetensors_header(f)
        names.update({k: v for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)})
    return files, names


# ----------------------------------------------------------------------------- targets


def looks_local(name: str) -> bool:
    """Would a user mean a path by this? Then it never goes to the hub. The one answer to the question:
    the preflight, the loaders and hub resolution all ask here."""
    if not name or os.path.exists(name):
        return True
    if name.startswith((".", "/", "~")) or "\\" in name or os.sep in name and name.count("/") != 1:
        return True
    if not _HUB_ID.match(name) or "--" in name or ".." in name:
        return True
    if "/" in name and kind(name.split("/")[0]) != "missing":
        return True  # x/y where ./x exists: a mistyped local directory, not the hub org x
    return False


def _cfg_int(cfg: dict[str, Any], key: str, where: str, lo: int, hi: int, required: bool = False) -> int | None:
    if key not in cfg or cfg[key] is None:
        if required:
            raise BadInput(f"{where} lacks {key}", "restore config.json from the original checkpoint")
        return None
    v = cfg[key]
    if not isinstance(v, int) or isinstance(v, bool):
        raise BadInput(
            f"{where}: {key} is {json.dumps(v)[:40]}, expected an integer", "restore config.json from the original checkpoint"
        )
    if not lo <= v <= hi:
        raise BadInput(f"{where}: {key} = {v} is out of range ({lo}..{hi})", "restore config.json from the original checkpoint")
    return v


def check_norm_eps(cfg: dict[str, Any], where: str) -> None:
    """rms_norm_eps (or layer_norm_eps) is a finite number in [0, 1]: NaN or inf would turn every
    normalised hidden state into NaN, and the comparison would report garbage instead of an error."""
    for key in ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon"):
        v = cfg.get(key)
        if v is None:
            continue
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise BadInput(
                f"{where}: {key} is {json.dumps(v)[:40]}, expected a number", "restore config.json from the original checkpoint"
            )
        if not (math.isfinite(v) and 0 <= v <= 1):
            raise BadInput(
                f"{where}: {key} = {v} is out of range (a finite number in [0, 1], typically 1e-5 or 1e-6)",
                "restore config.json from the original checkpoint",
            )


def check_rope_theta(cfg: dict[str, Any], where: str) -> None:
    """rope_theta, at the top (transformers 4) or in rope_parameters / rope_scaling (transformers 5), is a finite
    number > 0: the inverse frequencies are theta ** (-2i/d), so NaN or inf makes every rotated query NaN and
    0 divides by zero, and a draft would be measured on garbage instead of refused."""
    holders = [(cfg, "")] + [(cfg[k], f"{k}.") for k in ("rope_parameters", "rope_scaling") if isinstance(cfg.get(k), dict)]
    for holder, prefix in holders:
        if "rope_theta" not in holder:
            continue
        v = holder["rope_theta"]
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise BadInput(
                f"{where}: {prefix}rope_theta is {json.dumps(v)[:40]}, expected a number",
                "restore config.json from the original checkpoint (rope_theta is typically 10000 to 1000000)",
            )
        if not (math.isfinite(v) and v > 0):
            raise BadInput(
                f"{where}: {prefix}rope_theta = {v} is out of range (a finite number > 0, typically 10000 to 1000000)",
                "restore config.json from the original checkpoint",
            )


# the RoPE types transformers computes (modeling_rope_utils.ROPE_INIT_FUNCTIONS, plus "default"), and the legacy
# names it still reads ("mrope": Qwen2-VL's sections over the default table; "su": longrope's old name)
ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional", "mrope", "su")
# per type, the keys its frequencies are computed from; transformers only warns where one is absent or
# negative, then builds the table from whatever is there (a yarn factor of -2 gave a NaN attention scale)
_ROPE_NEEDS = {
    "linear": ("factor",),
    "dynamic": ("factor",),
    "yarn": ("factor",),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
    "longrope": ("short_factor", "long_factor"),
}
_ROPE_POSITIVE = ("factor", "low_freq_factor", "high_freq_factor", "attention_factor", "beta_fast", "beta_slow")


def _rope_dict(cfg: dict[str, Any], where: str) -> tuple[dict[str, Any] | None, str]:
    """The config's RoPE scaling dict and its key: ``rope_parameters`` (transformers 5) else ``rope_scaling``."""
    for key in ("rope_parameters", "rope_scaling"):
        v = cfg.get(key)
        if isinstance(v, dict):
            return v, key
        if v is not None and key == "rope_scaling":
            raise BadInput(
                f"{where}: rope_scaling is {json.dumps(v, default=str)[:40]}, expected an object or null",
                "restore config.json from the original checkpoint",
            )
    return None, ""


def check_rope_scaling(cfg: dict[str, Any], where: str) -> None:
    """The RoPE type is one transformers computes, with every number it needs present, finite and positive (a
    context-extending factor at least 1): an unknown type used to fail deep inside the load (exit 3), and a
    yarn factor of -2 was built into the table and measured."""
    rp, key = _rope_dict(cfg, where)
    if rp is None:
        return
    fix = "restore config.json from the original checkpoint"
    rtype = rp.get("rope_type", rp.get("type", "default"))
    if not isinstance(rtype, str) or rtype not in ROPE_TYPES:
        raise BadInput(
            f"{where}: {key}.rope_type is {json.dumps(rtype, default=str)[:40]}, not a RoPE type transformers computes "
            f"({', '.join(ROPE_TYPES[:7])})",
            fix,
        )
    for k in _ROPE_NEEDS.get(rtype, ()):
        if rp.get(k) is None:
            raise BadInput(
                f"{where}: {key} of rope_type {rtype!r} lacks {k}", f"write the {k} the model was trained with ({fix})"
            )
    for k in _ROPE_POSITIVE:
        v = rp.get(k)
        if v is None:
            continue
        low = 1.0 if k == "factor" and rtype in ("yarn", "llama3", "longrope", "dynamic") else 0.0
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0 or v < low:
            bound = f"a {rtype} factor is at least 1: it extends the context" if low else "a finite number > 0"
            raise BadInput(f"{where}: {key}.{k} = {json.dumps(v, default=str)[:40]} is out of range ({bound})", fix)
    for k in ("short_factor", "long_factor"):
        v = rp.get(k)
        if v is not None and not (
            isinstance(v, list)
            and v
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0 for x in v)
        ):
            raise BadInput(f"{where}: {key}.{k} is not a list of finite numbers > 0", fix)
    omp = rp.get("original_max_position_embeddings")
    if omp is not None and (not isinstance(omp, int) or isinstance(omp, bool) or not 1 <= omp <= MAX_POSITIONS):
        raise BadInput(
            f"{where}: {key}.original_max_position_embeddings is {json.dumps(omp, default=str)[:40]}, expected a positive integer",
            fix,
        )


def check_draft_layer_config(layer: dict[str, Any], where: str) -> None:
    """The decoder-layer values every drafter's config states (an EAGLE-3 or P-EAGLE draft's transformer_layer_config,
    an MTP head's, a DFlash draft's top level), checked before anything is built from them: sizes in range, the
    norm's epsilon and rope_theta finite. A key written as null is refused where its reader would call int() on it."""
    _cfg_int(layer, "num_hidden_layers", where, 1, MAX_LAYERS)
    for k, hi in (*LAYER_SIZE_BOUNDS, ("max_position_embeddings", MAX_POSITIONS)):
        _cfg_int(layer, k, where, 1, hi)
    for k in ("max_position_embeddings", "rope_theta", "hidden_size"):
        if k in layer and layer[k] is None:
            raise BadInput(f"{where}: {k} is null, expected a number", f"write the {k} the draft was trained with")
    check_norm_eps(layer, where)
    check_rope_theta(layer, where)
    check_rope_scaling(layer, where)


# tensors a decoder layer's config sizes, by the end of their names: (config key, the dimension that holds it)
_SIZED_BY = (
    ("input_layernorm.weight", "hidden_size", 0),
    ("post_attention_layernorm.weight", "hidden_size", 0),
    ("mlp.down_proj.weight", "hidden_size", 0),
    ("mlp.down_proj.weight", "intermediate_size", 1),
)


def check_sizes_against_weights(layer: dict[str, Any], names: dict[str, dict[str, Any]], where: str) -> None:
    """The config's hidden_size and intermediate_size as the weights hold them (their headers, ``names``: {tensor
    name: header entry}): a module built from a config that disagrees is allocated at the config's size before the
    load refuses it, and a wrong size in the millions fails in the allocator instead of in one line."""
    for n, meta in sorted(names.items()):
        shape = meta.get("shape")
        if not isinstance(shape, list):
            continue
        for end, key, dim in _SIZED_BY:
            want = layer.get(key)
            if not n.endswith(end) or not isinstance(want, int) or isinstance(want, bool) or len(shape) <= dim:
                continue
            if shape[dim] != want:
                raise BadInput(
                    f"{where}: {key} = {want} but the weights' {n} has shape {shape}",
                    f"set {key} to {shape[dim]}, the size the weights were trained at (or restore config.json)",
                )


def check_draft_counts(cfg: dict[str, Any], where: str) -> None:
    """The numbers a parallel drafter's config sizes each pass by: a P-EAGLE (or any speculators) proposal's
    ``speculative_tokens`` (the slots one forward drafts, each a row of an attention mask over the context) within
    the steps the doctor measures (MAX_NUM_STEPS, as --num-steps), and a ``mask_token_id`` a row of the vocabulary
    the config states. Checked before anything is allocated from them."""
    fix = "restore config.json from the original checkpoint"
    sc = cfg.get("speculators_config")
    methods = sc.get("proposal_methods") if isinstance(sc, dict) else None
    if isinstance(methods, list) and methods and isinstance(methods[0], dict) and "speculative_tokens" in methods[0]:
        v = methods[0]["speculative_tokens"]
        if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= MAX_NUM_STEPS:
            raise BadInput(
                f"{where}: speculators_config.proposal_methods[0].speculative_tokens is {json.dumps(v)[:40]}, "
                f"expected an integer in 1..{MAX_NUM_STEPS} (the tokens one pass drafts)",
                fix,
            )
    tl = cfg.get("transformer_layer_config")
    vocab = (tl if isinstance(tl, dict) else cfg).get("vocab_size")
    dc = cfg.get("dflash_config")
    for holder, key in ((cfg, "mask_token_id"), (dc if isinstance(dc, dict) else {}, "dflash_config.mask_token_id")):
        v = holder.get(key.rsplit(".", 1)[-1])
        if v is None:
            continue
        hi = vocab - 1 if isinstance(vocab, int) and not isinstance(vocab, bool) and vocab > 0 else MAX_VOCAB
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= hi:
            rows = f"the {vocab}-token vocabulary the config states" if hi < MAX_VOCAB else "a vocabulary"
            raise BadInput(
                f"{where}: {key} is {json.dumps(v)[:40]}, not a token of {rows}",
                f"write into {key} the mask token id the draft was trained with",
            )


def check_dflash_config(cfg: dict[str, Any], where: str, *, preflight: bool = False) -> None:
    """A DFlash draft's config.json (its decoder layer at the top level, the block it drafts: ``block_size`` - 1
    tokens a pass, within MAX_NUM_STEPS as any other drafter's), before torch builds it. ``preflight``: inspect,
    which builds nothing, reads a config without a block too."""
    check_draft_layer_config(cfg, where)
    _cfg_int(cfg, "block_size", where, 2, MAX_NUM_STEPS + 1, required=not preflight)
    check_draft_counts(cfg, where)


def check_target_config(cfg: dict[str, Any], where: str, weight_names: Iterable[str] | None = None) -> None:
    """Types and sizes of a target config.json, the layer count bounded by the layers the weights hold."""
    # multimodal configs keep the decoder's sizes in text_config
    top = "num_hidden_layers" in cfg or "n_layer" in cfg or not isinstance(cfg.get("text_config"), dict)
    src = cfg if top else cfg["text_config"]
    key = "n_layer" if "n_layer" in src and "num_hidden_layers" not in src else "num_hidden_layers"
    L = _cfg_int(src, key, where, 1, MAX_LAYERS, required=True)
    for k, hi in (*LAYER_SIZE_BOUNDS, ("max_position_embeddings", MAX_POSITIONS), ("n_embd", MAX_HIDDEN)):
        _cfg_int(src, k, where, 1, hi)
    check_norm_eps(src, where)
    check_rope_theta(src, where)
    check_rope_scaling(src, where)
    if weight_names is not None:
        idx = {int(m.group(1)) for n in weight_names for m in [_LAYER_INDEX.search(n)] if m}
        if idx and L is not None and L > max(idx) + 1:
            raise BadInput(
                f"{where}: {key} = {L} but the weights hold {max(idx) + 1} layers",
                f"set {key} to {max(idx) + 1} (or restore config.json from the original checkpoint)",
            )


def check_target(name: str) -> None:
    """A local target directory, or a hub id (checked for form only; HF_HUB_OFFLINE is honoured by the loader)."""
    if not name or not name.strip():
        raise BadInput("--target is empty", "pass --target DIR or a hub id like org/name")
    fix = "pass --target DIR (config.json + weights) or a hub id like org/name"
    if kind(name) == "missing" and not looks_local(name):
        return  # a hub id; the loader looks it up (and fails in one line offline)
    d = require_dir(name, "target directory" if kind(name) in ("missing", "dir") else "--target", fix)
    cfg = read_json(
        d / "config.json", "target config", "point --target at a Hugging Face model directory (config.json + weights)"
    )
    if not isinstance(cfg, dict):
        raise BadInput(
            f"{d / 'config.json'} holds a JSON {type(cfg).__name__}, not an object",
            "restore config.json from the original checkpoint",
        )
    for f in d.iterdir():
        if f.name.endswith((".safetensors", ".bin", ".pt", ".pth", ".json", ".model")) and kind(f) not in ("file", "dir"):
            raise BadInput(
                f"{f} is {_WHAT.get(kind(f), kind(f))}, not a regular file", "replace it with the real file from the checkpoint"
            )
    files, names = _weight_names(d)
    check_target_config(cfg, str(d / "config.json"), names if names else None)


# ----------------------------------------------------------------------------- drafts


def _ids_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)


def check_draft_layer_ids(cfg: dict[str, Any], where: str) -> None:
    """Every layer-id key a draft config may hold is a list of integers (not strings, not nested lists)."""
    ec = cfg.get("eagle_config")
    for holder, prefix in ((cfg, ""), (ec if isinstance(ec, dict) else {}, "eagle_config.")):
        for key in ("eagle_aux_hidden_state_layer_ids", "aux_hidden_state_layer_ids", "eagle3_layers_to_capture"):
            v = holder.get(key)
            if v is not None and not _ids_list(v):
                raise BadInput(
                    f"{where}: {prefix}{key} is {json.dumps(v, default=str)[:60]}, expected a list of integers",
                    f'write e.g. "{key}": [1, 3, 4]',
                )
            if v is not None and any(abs(x) > MAX_LAYERS for x in v):
                raise BadInput(
                    f"{where}: {prefix}{key} = {v} holds ids beyond any model's depth",
                    "write the layer ids the draft was trained on, e.g. [1, 3, 4]",
                )
