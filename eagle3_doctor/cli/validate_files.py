"""The preflight's file checks: output paths (writable, apart from the inputs), then what the input files
hold (draft checkpoint, tokenizer directories, prompts, training dumps, gate policy and baseline), read
by type and header only. validate.py runs them in the order a user fixes things.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ..core.errors import BadInput
from ..io.checks import (
    _WHAT,
    MAX_HIDDEN,
    MAX_VOCAB,
    _cfg_int,
    _under_a_file,
    _weight_names,
    check_draft_counts,
    check_draft_layer_config,
    check_draft_layer_ids,
    check_norm_eps,
    check_rope_theta,
    kind,
    read_json,
    require_dir,
    require_file,
    safetensors_header,
)
from ..io.roles import draft_evidence, target_evidence

MAX_PROMPT_FILE = 1 << 30  # a prompts file over 1 GiB is a mistake (a dump or a model), not prompts
_FLOAT_DTYPES = {"F16", "BF16", "F32", "F64", "F8_E4M3", "F8_E5M2", "F8_E4M3FN", "F8_E5M2FNUZ", "F8_E4M3FNUZ"}


# ----------------------------------------------------------------------------- output paths


def _probe_writable(d: Path, opt: str) -> None:
    """Create and remove a file in d: the only test that also holds for root, read-only mounts and /proc."""
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".eagle3-doctor-probe-")
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise BadInput(f"{opt}: cannot write in {d} ({e.strerror or e})", f"pass a {opt} path in a writable directory") from None


def _nearest_existing(p: Path) -> Path:
    for a in [p, *p.parents]:
        if kind(a) != "missing":
            return a
    return Path(".")


def check_output_file(path: str | None, opt: str) -> None:
    """An output file path: '-' (stdout), a device or pipe to write into, or a file we can create/replace."""
    if path is None or path == "-":
        return
    if not path.strip():
        raise BadInput(f"{opt} is empty", f"pass {opt} FILE")
    p = Path(path)
    k = kind(p)
    if k == "dir":
        raise BadInput(f"{opt} {p} is a directory", f"pass a file path, e.g. {opt} {p / ('report' + (p.suffix or '.json'))}")
    if k in ("device", "fifo"):
        return  # written into, never renamed over (e.g. /dev/stdout)
    if k in ("socket", "special file", "unreadable"):
        raise BadInput(f"{opt} {p} is {_WHAT[k]}", f"pass a regular file path for {opt}")
    blocker = _under_a_file(p.parent) if k == "missing" else None
    if blocker is None and k == "missing" and kind(p.parent) not in ("dir", "missing"):
        blocker = p.parent
    if blocker is not None:
        raise BadInput(f"{opt} {p} cannot be created: {blocker} is a file, not a directory", f"pass a {opt} path in a directory")
    anc = _nearest_existing(p.parent)
    if kind(anc) != "dir":
        raise BadInput(f"{opt} {p} cannot be created: {anc} is not a directory", f"pass a {opt} path in a directory")
    _probe_writable(anc if kind(p.parent) == "missing" else p.parent, opt)


def check_output_dir(path: str | None, opt: str) -> None:
    if path is None:
        return
    if not path.strip():
        raise BadInput(f"{opt} is empty", f"pass {opt} DIR")
    p = Path(path)
    k = kind(p)
    if k == "file":
        raise BadInput(f"{opt} {p} is a file, not a directory", f"pass a directory path (new or existing) for {opt}")
    if k not in ("dir", "missing"):
        raise BadInput(f"{opt} {p} is {_WHAT.get(k, k)}, not a directory", f"pass a directory path for {opt}")
    if k == "missing":
        blocker = _under_a_file(p)
        if blocker is not None:
            raise BadInput(
                f"{opt} {p} cannot be created: {blocker} is a file, not a directory", f"pass a {opt} path in a directory"
            )
    anc = p if k == "dir" else _nearest_existing(p)
    _probe_writable(anc, opt)


def check_new_dir(path: str | None, opt: str) -> None:
    """A directory the command creates whole (fix's corrected copy): it must not exist yet, and where it goes must
    be writable. Checked here, before torch is imported: the copy's own check (analyses.fixing.check_out) comes
    after the imports, and a read-only parent was found only once the whole measurement had run."""
    if path is None:
        return
    if not path.strip():
        raise BadInput(f"{opt} is empty", f"pass {opt} DIR, a new directory")
    p = Path(path)
    if os.path.lexists(p):
        raise BadInput(f"{opt} {p} already exists", "name a new directory: fix never writes over anything")
    blocker = _under_a_file(p)
    if blocker is not None:
        raise BadInput(f"{opt} {p} cannot be created: {blocker} is a file, not a directory", f"pass a {opt} path in a directory")
    anc = _nearest_existing(p.parent)
    if kind(anc) != "dir":
        raise BadInput(f"{opt} {p} cannot be created: {anc} is not a directory", f"pass a {opt} path in a directory")
    _probe_writable(anc, opt)


def check_outputs_separate(kw: dict[str, Any]) -> None:
    """No output on an input or on another output; the gate's $GITHUB_STEP_SUMMARY a file it can append to.

    Runs before the output paths are probed, since the probe itself creates a file where the output goes.
    """
    from ..io.overlap import check_outputs_apart

    env = (os.environ.get("GITHUB_STEP_SUMMARY") or None) if "summary" in kw else None  # only the gate appends to it
    check_outputs_apart(kw, env)
    if env is not None:
        k = kind(env)
        if k not in ("file", "missing", "device", "fifo"):
            raise BadInput(
                f"$GITHUB_STEP_SUMMARY {env} is {_WHAT.get(k, 'a directory' if k == 'dir' else k)}, not a file to append to",
                "point GITHUB_STEP_SUMMARY at a file (GitHub Actions sets it for you), or unset it",
            )
        if k == "missing":
            check_output_file(env, "$GITHUB_STEP_SUMMARY")


_TOKENIZER_FILES = (".json", ".jinja", ".txt", ".model", ".tiktoken", ".py", ".vocab")


def check_tokenizer_dir(d: Path, opt: str) -> None:
    """Every file a tokenizer loader may open is a regular file: a FIFO named tokenizer.json would block it."""
    try:
        entries = list(d.iterdir())
    except OSError as e:
        raise BadInput(f"{opt} {d} cannot be listed ({e.strerror})", "fix its permissions (chmod +rx)") from None
    for f in entries:
        k = kind(f)
        if f.name.endswith(_TOKENIZER_FILES) and k not in ("file", "dir"):
            raise BadInput(
                f"{opt}: {f} is {_WHAT.get(k, k)}, not a regular file", "replace it with the real file from the checkpoint"
            )


def check_draft(path: str, fmt: str | None = None) -> None:
    """The draft directory, its config's types, and its weights' headers (names, dtypes), without torch."""
    fix = "pass --draft DIR with the draft's config.json and *.safetensors"
    d = require_dir(path, "draft directory" if kind(path) in ("missing", "dir") else "--draft", fix)
    cfg = read_json(d / "config.json", "draft config", "point --draft at a directory holding config.json and *.safetensors")
    if not isinstance(cfg, dict):
        raise BadInput(
            f"{d / 'config.json'} holds a JSON {type(cfg).__name__}, not an object",
            "restore config.json from the original checkpoint",
        )
    where = str(d / "config.json")
    check_draft_layer_ids(cfg, where)
    tl = cfg.get("transformer_layer_config")
    src = tl if isinstance(tl, dict) else cfg
    check_draft_layer_config(src, where)
    if src is not cfg:
        check_norm_eps(cfg, where)
        check_rope_theta(cfg, where)
    for k, hi in (("draft_vocab_size", MAX_VOCAB), ("target_hidden_size", MAX_HIDDEN)):
        _cfg_int(cfg, k, where, 1, hi)
    check_draft_counts(cfg, where)
    for f in d.iterdir():
        if f.name.endswith((".safetensors", ".json")) and kind(f) not in ("file", "dir"):
            raise BadInput(
                f"{f} is {_WHAT.get(kind(f), kind(f))}, not a regular file", "replace it with the real file from the checkpoint"
            )
    files, names = _weight_names(d)
    for n, meta in names.items():
        if n.endswith(("d2t", "t2d")):
            continue
        dt = meta.get("dtype")
        if dt not in _FLOAT_DTYPES:
            raise BadInput(
                f"draft tensor {n} in {d} has dtype {dt}, not a floating-point type",
                "re-export the draft weights in bfloat16, float16 or float32",
            )
    if not files:
        raise BadInput(
            f"no *.safetensors file in {d}", "save the draft with safetensors (pickled .bin/.pt drafts are not loaded)"
        )
    if files:
        from ..draft.formats import FORMATS, config_to_canonical, detect_format
        from ..drafters.registry import kinds

        found = next(k for k in kinds() if k.detect(cfg, sorted(names)) is not None)
        whole = target_evidence(cfg, names) if found.name == "eagle3" else None
        if whole is not None:  # the EAGLE-3 reader would say only that it cannot tell the draft's format
            raise BadInput(
                f"--draft {d} is {whole}, not a draft", "pass the draft checkpoint as --draft (and this model as --target)"
            )
        if found.preflight is not None:
            found.preflight(cfg, src, names, where)  # before torch allocates anything at the config's sizes
        if fmt is None and not found.draft_config_checked:
            return  # another kind's reader checks the rest of its own config (draft/<kind>/)
        if fmt is None:
            fmt, _ = detect_format(cfg, sorted(names))
        if fmt in FORMATS:
            config_to_canonical(fmt, cfg)  # field types and signs, the same checks read_draft makes


def check_roles(target: str | None, draft: str | None) -> None:
    """A draft passed as --target (and, where --draft is then a target model, the two swapped): one line from the
    configs and tensor names alone, before either is checked or loaded as what it was passed as (transformers'
    loader used to end a swapped pair in a size-mismatch trace)."""
    sides: list[tuple[dict[str, Any], dict[str, Any]] | None] = []
    for p in (target, draft):
        d = Path(p) if p else None
        if d is None or kind(d) != "dir" or kind(d / "config.json") != "file":
            sides.append(None)
            continue
        cfg = read_json(d / "config.json", "config", "restore config.json from the original checkpoint")
        sides.append((cfg, _weight_names(d)[1]) if isinstance(cfg, dict) else None)
    as_draft = draft_evidence(*sides[0]) if sides[0] else None
    if as_draft is None:
        return  # a target model passed as --draft is check_draft's to say
    as_target = target_evidence(*sides[1]) if sides[1] else None
    if as_target is not None:
        raise BadInput(
            f"--target {target} is a draft ({as_draft}) and --draft {draft} is {as_target}: did you swap --target and --draft?",
            f"pass --target {draft} --draft {target}",
        )
    raise BadInput(
        f"--target {target} is a draft ({as_draft}), not the model it drafts for",
        "pass the target model the draft was trained for as --target, and the draft as --draft",
    )


# families whose decoder layers all hold the same tensors (the native decoder's: model.native.plan.FAMILIES)
_UNIFORM_LAYERS = ("llama", "mistral", "qwen2", "qwen3")


def check_target_tensors(target: str | None) -> None:
    """A local target of a family whose decoder layers are alike holds, in every layer, the tensors its other layers
    hold, and an untied head: read from the weights' headers, so a target with one tensor removed is refused by every
    command before torch is imported (inspect included), not by the loaders alone after it."""
    if not target or kind(target) != "dir" or kind(Path(target) / "config.json") != "file":
        return
    cfg = read_json(Path(target) / "config.json", "target config", "restore config.json from the original checkpoint")
    if not isinstance(cfg, dict) or cfg.get("model_type") not in _UNIFORM_LAYERS:
        return
    layers: dict[int, set[str]] = {}
    _, names = _weight_names(Path(target))
    for n in names:
        m = re.match(r"model\.layers\.(\d+)\.(.+)$", n)
        # layers past num_hidden_layers are no decoder layer's (a DeepSeek-style MTP head stored in the target)
        if m and int(m.group(1)) < cfg.get("num_hidden_layers", 1 << 30):
            layers.setdefault(int(m.group(1)), set()).add(m.group(2))
    every = set().union(*layers.values()) if layers else set()
    lost = [f"model.layers.{i}.{t}" for i in sorted(layers) for t in sorted(every - layers[i])]
    if names and not cfg.get("tie_word_embeddings", False) and "lm_head.weight" not in names:  # as transformers' default
        lost.append("lm_head.weight")
    if lost:
        from ..model.native.plan import missing_tensors  # the loaders' own words (no torch imported)

        raise missing_tensors(target, lost)
    _check_target_shapes(cfg, names, str(Path(target) / "config.json"))


def _check_target_shapes(cfg: dict[str, Any], names: dict[str, dict[str, Any]], where: str) -> None:
    """The sizes config.json states, against the shapes its weights' headers hold: a vocab_size or head_dim that
    disagrees was refused by the loader only after torch, in words that named neither ("Error(s) in loading
    state_dict")."""
    ints = {k: v for k, v in cfg.items() if isinstance(v, int) and not isinstance(v, bool)}
    heads = ints.get("num_attention_heads")
    head_dim = ints.get("head_dim") or (
        ints["hidden_size"] // heads if heads and "hidden_size" in ints and cfg.get("model_type") != "qwen3" else None
    )
    kv = ints.get("num_key_value_heads", heads)
    want = [  # (tensor, dimension, size the config states, the key to change)
        ("model.embed_tokens.weight", 0, ints.get("vocab_size"), "vocab_size"),
        ("lm_head.weight", 0, ints.get("vocab_size"), "vocab_size"),
        ("model.embed_tokens.weight", 1, ints.get("hidden_size"), "hidden_size"),
        ("model.layers.0.mlp.up_proj.weight", 0, ints.get("intermediate_size"), "intermediate_size"),
        ("model.layers.0.self_attn.q_proj.weight", 0, heads * head_dim if heads and head_dim else None, "head_dim"),
        ("model.layers.0.self_attn.k_proj.weight", 0, kv * head_dim if kv and head_dim else None, "num_key_value_heads"),
    ]
    for name, dim, size, key in want:
        shape = names.get(name, {}).get("shape")
        if size is None or not isinstance(shape, list) or len(shape) <= dim or shape[dim] == size:
            continue
        stated = f"{key} = {cfg.get(key)}" if key in cfg else f"{key} (unset)"
        raise BadInput(
            f"{where}: {stated} means {name} has {size} {'rows' if dim == 0 else 'columns'}, but the weights hold shape {shape}",
            f"restore config.json from the original checkpoint (the weights' {key} is what they were trained at)",
        )


ONE_DEVICE_BYTES = 1 << 40  # more than any one accelerator holds (the largest hold under 300 GB)


def check_cache_estimate(kw: dict[str, Any]) -> None:
    """speedup's KV cache at its largest batch and context, sized from the target's config.json alone, against what
    a device can hold (this machine's memory for --device cpu, more than any one accelerator otherwise): a size that
    can never fit is one line with the estimate before torch is imported, not half a minute of loading first. The
    device's own memory is checked again once it is known (model.static.check_cache_fits)."""
    t, sizes, context = kw.get("target"), kw.get("batch_sizes"), kw.get("context")
    if not t or not sizes or not context or kind(t) != "dir" or kind(Path(t) / "config.json") != "file":
        return
    from ..engines.spec_settings import parse_batch_sizes

    cfg = read_json(Path(t) / "config.json", "target config", "restore config.json from the original checkpoint")
    c = cfg.get("text_config") if isinstance(cfg, dict) and isinstance(cfg.get("text_config"), dict) else cfg
    if not isinstance(c, dict):
        return
    ints = {k: v for k, v in c.items() if isinstance(v, int) and not isinstance(v, bool) and v > 0}
    heads = ints.get("num_attention_heads", 1)
    head_dim = ints.get("head_dim") or ints.get("hidden_size", 0) // heads
    per_token = 2 * ints.get("num_hidden_layers", 0) * ints.get("num_key_value_heads", heads) * head_dim
    per_token *= 4 if kw.get("dtype") in ("float32", "fp32") else 2  # at least 16-bit: a lower bound
    batch = max(parse_batch_sizes(sizes))
    need = per_token * batch * context
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    have, where = (ram, "this machine's memory") if kw.get("device") == "cpu" else (max(ram, ONE_DEVICE_BYTES), "any one device")
    if need > have:
        raise BadInput(
            f"a KV cache of {batch} sequences x {context} positions needs at least {need / 2**30:,.0f} GiB, over the "
            f"{have / 2**30:,.0f} GiB {where} holds",
            "lower the batch size or the context (--batch-sizes, --context)",
        )


# ----------------------------------------------------------------------------- prompts, dumps


def check_prompts(
    path: str | None, what: str = "prompts file", fix: str = "pass --prompts FILE (JSONL chat messages or text lines)"
) -> None:
    """Every record of a prompts or training-data file, read as the measurement reads it."""
    if path is None:
        return
    p = require_file(path, what, fix)
    size = p.stat().st_size
    if size > MAX_PROMPT_FILE:
        raise BadInput(f"{what} {p} is {size} bytes, not a {what}", fix)
    from ..io.prompts import read_prompt_file

    read_prompt_file(p, what, fix)


DUMP_SUFFIXES = (".ckpt", ".ckpt.gz", ".safetensors")


def check_dump(path: str | None) -> None:
    """Every file of a training dump: regular, non-empty, with the container format its name says."""
    if path is None:
        return
    fix = "pass --train-dump DIR (SpecForge rows_*/data_*.ckpt) or one dump file"
    k = kind(path)
    p = Path(path)
    if k == "dir":
        files = [f for f in p.rglob("*") if f.name.endswith(DUMP_SUFFIXES) and kind(f) != "dir"]
        if not files:
            raise BadInput(
                f"no .ckpt, .ckpt.gz or .safetensors files under {p}", "point --train-dump at the dump's output directory"
            )
    else:
        if k == "missing" and _under_a_file(p) is None:
            raise BadInput(f"training dump {p} does not exist", fix)
        files = [require_file(p, "training dump", fix)]
    for f in files:
        require_file(f, "dump file", "remove it from the dump directory or re-create it")
        size = f.stat().st_size
        if size == 0:
            raise BadInput(f"dump file {f} is empty (0 bytes)", "re-create it, or remove it from the dump directory")
        with open(f, "rb") as fh:
            head = fh.read(8)
        if f.name.endswith(".gz") and head[:2] != b"\x1f\x8b":
            raise BadInput(f"dump file {f} is named .gz but is not gzip data", "re-create it")
        if f.name.endswith(".safetensors"):
            safetensors_header(f)
        elif f.name.endswith(".ckpt") and head[:2] != b"PK" and head[:1] != b"\x80":
            raise BadInput(f"dump file {f} is neither a torch.save zip nor a pickle", "re-create it with torch.save")


# ----------------------------------------------------------------------------- policy, baseline


def check_policy_file(path: str | None) -> None:
    """The policy TOML parses and its [gate] table is a table of known keys (types: check_policy_values)."""
    if path is None:
        return
    try:
        import tomllib  # type: ignore[import-not-found]  # stdlib from 3.11; mypy checks as 3.10
    except ImportError:  # Python 3.10: gate_policy.Policy.load says so in one line
        return
    p = require_file(path, "policy file", "pass --policy FILE.toml")
    try:
        from ..io.safeio import read_regular_bytes

        raw = tomllib.loads(read_regular_bytes(p, "policy file", "pass --policy FILE.toml", 4 << 20).decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise BadInput(f"policy file {p} is not valid TOML ({str(e)[:120]})", "fix the file") from None
    except RecursionError:  # tomllib parses nested arrays recursively
        raise BadInput(f"policy file {p} nests too deeply to be a policy", "fix the file") from None
    data = raw.get("gate", raw)
    if not isinstance(data, dict):
        raise BadInput(f"policy file {p}: gate is not a table", "write the thresholds under a [gate] table")
    from dataclasses import fields

    from .gate_policy import Policy

    known = {f.name for f in fields(Policy)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise BadInput(f"policy file {p}: unknown key(s) {', '.join(unknown)}", f"use only {', '.join(sorted(known))}")


def check_baseline(path: str | None) -> dict[str, Any] | None:
    if path is None:
        return None
    from .gate import SCHEMA

    fix = "pass the JSON written by an earlier `eagle3-doctor gate --json`"
    data = read_json(Path(path), "baseline", fix)
    if not isinstance(data, dict) or "metrics" not in data:
        raise BadInput(f"baseline {path} is not a gate JSON (no 'metrics')", fix)
    schema = data.get("schema")
    if schema is not None and schema != SCHEMA:  # absent: a hand-written baseline, read by its metrics
        raise BadInput(
            f"baseline {path} has schema {schema!r}; this version reads {SCHEMA!r}",
            "re-run the gate on the baseline checkpoint with this version and pass its --json",
        )
    m = data["metrics"]
    if not isinstance(m, dict):
        raise BadInput(f"baseline {path}: metrics is not an object", fix)
    for key in ("step1_accuracy", "tau", "mean_acceptance_length"):
        if key in m and (not isinstance(m[key], (int, float)) or isinstance(m[key], bool)):
            raise BadInput(f"baseline {path}: metrics.{key} is {json.dumps(m[key])[:40]}, not a number", fix)
    return data
