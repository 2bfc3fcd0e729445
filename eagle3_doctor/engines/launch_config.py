"""A launch command's flags and files, per engine, in the doctor's terms (``ServeConfig``).

Defaults follow the engine's own resolution when a flag is absent:
- SGLang, per release (the one the run names) and per ``--speculative-algorithm``: for the EAGLE family, with
  ``--speculative-num-steps`` unset, (steps, topk, draft tokens) come from the release's
  ``auto_choose_speculative_params`` by the target's architecture, and from 0.4.5.post3 topk 1 forces the draft tokens
  to steps + 1; DFLASH forces steps and topk to 1 and takes the draft tokens from ``--speculative-dflash-block-size``,
  the command, or the draft's block size; each release's own code executed (``conformance/spec_defaults_exec.py``,
  table ``data/sglang_tree_defaults.json``, read by ``sglang_tree.py``).
- vLLM 0.33.0 ``config/speculative.py``: ``num_speculative_tokens`` unset takes the draft config's
  ``n_predict`` or is an error (lines 1601-1617); the method as each release settles it, typed or detected from the
  draft, is engines/vllm_method.py's (executed per release). vLLM 0.33 EAGLE drafts a chain (no token tree); older vLLM took
  ``speculative_token_tree``, a list of child-rank paths, parsed here when present.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..core.errors import BadInput
from .algorithm_names import OTHER, canonical, judged
from .flag_releases import listed_release
from .launch_args import DRAFT_TOKENS, MAX_DRAFT_TOKENS, MAX_NUM_STEPS, MAX_TOPK, STEPS, TOPK, cut_value, flag_table, to_int
from .releases import release_key

_VLLM_SRC = "vllm 0.33.0 config/speculative.py"


@dataclass
class ServeConfig:
    """What a server launch command configures, in the doctor's terms."""

    engine: str
    engine_version: str
    target: str | None = None
    target_revision: str | None = None
    draft: str | None = None
    draft_revision: str | None = None
    algorithm: str | None = None
    num_steps: int | None = None
    topk: int | None = None
    num_draft_tokens: int | None = None
    dflash_block_size: int | None = None  # SGLang's --speculative-dflash-block-size (DFLASH's draft tokens)
    token_tree: list[list[int]] | None = None
    layer_ids: list[int] | None = None  # ids the launch configures itself (TensorRT-LLM's eagle3_layers_to_capture)
    dtype: str = "auto"
    kv_cache_dtype: str | None = None  # the launch's --kv-cache-dtype (the target's; unset: the engine's default)
    draft_kv_cache_dtype: str | None = None  # the draft-only KV dtype the launch sets, where the engine has one
    chat_template: str | None = None
    tp_size: int = 1
    pp_size: int = 1
    trust_remote_code: bool = False
    token_map: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    image: str | None = None
    unknown_flags: list[str] = field(default_factory=list)
    ignored_flags: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # the flags the command gives, as the argument table names them: checked against the release the run
    # names (engines/flag_releases.py), not part of the JSON output
    flags: list[str] = field(default_factory=list)
    # the value each of those flags is given where it takes one string, as written: checked against the choices of
    # that release's parser (engines/flag_releases.py), not part of the JSON output
    flag_values: dict[str, str] = field(default_factory=dict)
    # what the release the run names raises at start-up on this launch's speculative settings (engines/sglang_tree.py):
    # reported as CMD004 (engines/launch.py), not part of the JSON output
    startup_error: dict[str, Any] | None = None
    # the speculative method vLLM's SpeculativeConfig settles for this launch (engines/vllm_method.settle), not part of
    # the JSON output (``algorithm`` and its source are)
    method_settled: Any = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["flags"], out["flag_values"], out["startup_error"], out["method_settled"]
        return out

    def flags_checked(self, release: str) -> bool | None:
        """Whether the command's flags are checked against the names of ``release`` (the one the launch runs,
        launch.launch_release), the one decision the summary line and its note read: True where that release's names
        were extracted (CMD003 names a flag it lacks), False where not (whether it accepts each flag goes unchecked),
        None where there is nothing to check against (no flags, or the argument table's own release)."""
        if not self.flags or release_key(release) == release_key(flag_table()[self.engine]["version"]):
            return None
        return listed_release(self.engine, release) is not None

    def flag_notes(self, release: str) -> list[str]:
        """The summary's note where ``release``'s flag names were not extracted (CMD003 cannot fire)."""
        if self.flags_checked(release) is False:
            return [f"flags of {self.engine} {release} not extracted: whether that release accepts each flag is not checked"]
        return []

    def summary(self, release: str | None = None) -> str:
        """One line of what was read; ``release``: the one the launch runs (launch.launch_release), named with the
        argument table that read its flags where that is another release's."""
        head = f"{self.engine} {release or self.engine_version}"
        table = flag_table()[self.engine]["version"]
        if release and release_key(release) != release_key(table):
            checked = f", checked against {release}'s own flag names" if self.flags_checked(release) else ""
            head += f" (its flags read by {table}'s argument table{checked})"
        tree = f", tree {self.token_tree}" if self.token_tree else ""
        kv = f", kv cache {self.kv_cache_dtype}" if self.kv_cache_dtype else ""
        kv += f", draft kv cache {self.draft_kv_cache_dtype}" if self.draft_kv_cache_dtype else ""
        m = self.method_settled
        how = f" ({m.why})" if m is not None and m.why != "as typed" else ""
        algo = f"algorithm {self.algorithm or 'unset'}{how}" if m is None or m.method else f"no method ({m.why}: it raises)"
        return (
            f"{head}: target {self.target}, draft {self.draft}, {algo}, steps {self.num_steps}, "
            f"topk {self.topk}, draft tokens {self.num_draft_tokens}{tree}, dtype {self.dtype}, tp {self.tp_size}, "
            f"pp {self.pp_size}{kv}"
        )


def algorithm_note(engine: str, algorithm: str) -> str | None:
    """What to say about a speculative algorithm name, or None where it serves a kind the doctor measures. A draft
    of such a kind launched under another name is CMD008 (engines/drafter_algorithms.py)."""
    a = canonical(engine, algorithm)
    if a in OTHER.get(engine, {}):
        return f"{algorithm} drafts with {OTHER[engine][a]}: eagle3-doctor does not measure that drafter"
    if judged(engine, algorithm):
        return None
    return (
        f"{algorithm} is not an algorithm eagle3-doctor has read against the drafter kinds: the draft is measured as "
        "the kind its checkpoint is, under that kind's own algorithm"
    )


VLLM_METHOD = "--speculative-config.method"  # the method's name as the choices table and the fixes name it


def _abbrev_notes(values: dict[str, Any], sc: ServeConfig) -> None:
    for a in values.pop("__abbrev__", []):
        sc.notes.append(f"abbreviated flag {a} (argparse accepts unique prefixes)")


# --------------------------------------------------------------------------- engines


_RELEVANT_SGLANG = {
    "model_path",
    "revision",
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_draft_model_revision",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_dflash_block_size",
    "dtype",
    "chat_template",
    "tp_size",
    "pp_size",
    "trust_remote_code",
    "speculative_token_map",
    "config",
    "kv_cache_dtype",
    "speculative_draft_kv_cache_dtype",
}


def sglang_config(
    values: dict[str, Any], unknown: list[str], positional: list[str], arch: str | None, release: str | None = None
) -> ServeConfig:
    """``release``: the SGLang release the run names, whose defaults fill what the command leaves unset (None: the
    argument table's)."""
    version = flag_table()["sglang"]["version"]
    sc = ServeConfig("sglang", version, unknown_flags=unknown)
    src = sc.sources
    _abbrev_notes(values, sc)
    sc.target = values.get("model_path")
    sc.target_revision = values.get("revision")
    sc.draft = values.get("speculative_draft_model_path")
    sc.draft_revision = values.get("speculative_draft_model_revision")
    sc.algorithm = values.get("speculative_algorithm")
    sc.dtype = values.get("dtype") or "auto"
    sc.kv_cache_dtype = values.get("kv_cache_dtype")
    sc.draft_kv_cache_dtype = values.get("speculative_draft_kv_cache_dtype")
    sc.chat_template = values.get("chat_template")
    sc.tp_size = to_int(values.get("tp_size", 1), "--tp-size")
    sc.pp_size = to_int(values.get("pp_size", 1), "--pp-size")
    sc.trust_remote_code = bool(values.get("trust_remote_code", False))
    sc.token_map = values.get("speculative_token_map")
    for k in ("num_steps", "topk", "num_draft_tokens"):
        flag = {
            "num_steps": "speculative_num_steps",
            "topk": "speculative_eagle_topk",
            "num_draft_tokens": "speculative_num_draft_tokens",
        }[k]
        if values.get(flag) is not None:
            bounds = {"num_steps": STEPS, "topk": TOPK, "num_draft_tokens": DRAFT_TOKENS}[k]
            setattr(sc, k, to_int(values[flag], "--" + flag.replace("_", "-"), bounds))
            src[k] = "--" + flag.replace("_", "-")
    if values.get("speculative_dflash_block_size") is not None:
        sc.dflash_block_size = to_int(values["speculative_dflash_block_size"], "--speculative-dflash-block-size", DRAFT_TOKENS)
    if positional:
        sc.notes.append(f"positional words ignored by SGLang's parser: {' '.join(positional)}")
    if sc.algorithm is None:
        sc.notes.append("no --speculative-algorithm: this server runs without speculative decoding")
    elif (note := algorithm_note("sglang", sc.algorithm)) is not None:
        sc.notes.append(f"--speculative-algorithm {note}")
    _sglang_tree_shape(sc, arch, release or version)
    if sc.draft is None and sc.algorithm and sc.algorithm.upper() in ("EAGLE3", "DFLASH"):
        sc.notes.append(f"{sc.algorithm.upper()} without --speculative-draft-model-path: SGLang refuses to start without a draft")
    sc.ignored_flags = sorted(k for k in values if k not in _RELEVANT_SGLANG)
    return sc


def _sglang_tree_shape(sc: ServeConfig, arch: str | None, release: str) -> None:
    """Steps/topk/draft tokens as SGLang ``release`` resolves what the command left unset (its architecture
    defaults, field defaults, the topk-1 adjustment), from the release's own code executed
    (engines/sglang_tree.py); a release outside what was executed fills nothing and says so."""
    from .sglang_tree import fill_tree

    fill_tree(sc, arch, release)


def _vllm_spec(spec: dict[str, Any], sc: ServeConfig) -> None:
    known = {
        "method",
        "model",
        "num_speculative_tokens",
        "revision",
        "draft_tensor_parallel_size",
        "speculative_token_tree",
        "max_model_len",
        "quantization",
        "enforce_eager",
        "code_revision",
        "disable_padded_drafter_batch",
        "parallel_drafting",
        "attention_backend",
        "kv_cache_dtype",
        "moe_backend",
        "draft_sample_method",
        "rejection_sample_method",
    }
    for k in spec:
        if k not in known:
            sc.notes.append(f"speculative-config key {k!r} is not read by eagle3-doctor")
    sc.draft = spec.get("model", sc.draft)
    sc.draft_revision = spec.get("revision", sc.draft_revision)
    sc.algorithm = spec.get("method", sc.algorithm)
    if spec.get("kv_cache_dtype") is not None:
        sc.draft_kv_cache_dtype = str(spec["kv_cache_dtype"])
    if spec.get("num_speculative_tokens") is not None:
        sc.num_steps = to_int(spec["num_speculative_tokens"], "num_speculative_tokens", STEPS)
        sc.sources["num_steps"] = "--speculative-config num_speculative_tokens"
    tree = spec.get("speculative_token_tree")
    if tree:
        sc.token_tree = parse_token_tree(tree)
        sc.sources["token_tree"] = "--speculative-config speculative_token_tree"


def parse_token_tree(tree: Any) -> list[list[int]]:
    """vLLM's ``speculative_token_tree``: a list of paths of child ranks, e.g. "[(0,), (1,), (0, 0)]"."""
    import ast

    try:
        paths = ast.literal_eval(tree) if isinstance(tree, str) else tree
        out = sorted({tuple(int(x) for x in p) for p in paths}, key=lambda p: (len(p), p))
    except (ValueError, SyntaxError, TypeError, OverflowError, RecursionError, MemoryError):
        raise BadInput(
            f"speculative_token_tree {cut_value(tree)} is not a list of tuples",
            'write it as vLLM does, e.g. "[(0,), (1,), (0, 0)]"',
        ) from None
    if len(out) >= MAX_DRAFT_TOKENS or max((len(p) for p in out), default=0) > MAX_NUM_STEPS:
        raise BadInput(
            f"speculative_token_tree has {len(out)} nodes, {max(len(p) for p in out)} deep: the doctor measures trees "
            f"of fewer than {MAX_DRAFT_TOKENS} nodes and at most {MAX_NUM_STEPS} deep",
            "write the tree the server is launched with (vLLM's examples are a few dozen nodes, 3 to 5 deep)",
        )
    nodes = set(out)
    for p in out:
        if not p or min(p) < 0 or (len(p) > 1 and p[:-1] not in nodes):
            raise BadInput(f"speculative_token_tree path {p} has no parent in the tree", "list every prefix of every path")
        if max(p) >= MAX_TOPK:
            raise BadInput(
                f"speculative_token_tree path {p} has a child rank {max(p)}: the doctor measures ranks below {MAX_TOPK}",
                "write child ranks as vLLM does, 0 for the most likely token",
            )
    return [list(p) for p in out]


def vllm_engine_args(sc: ServeConfig, args: dict[str, Any], name: Callable[[str], str]) -> None:
    """The engine args a `vllm serve` command line and a JSON engine-args file both set, by dest;
    ``name`` spells a dest the way the user wrote it (--tensor-parallel-size or tensor_parallel_size)."""
    sc.target_revision = args.get("revision")
    sc.dtype = args.get("dtype") or "auto"
    sc.kv_cache_dtype = args.get("kv_cache_dtype")
    sc.chat_template = args.get("chat_template")
    sc.tp_size = to_int(args.get("tensor_parallel_size") or 1, name("tensor_parallel_size"))
    sc.pp_size = to_int(args.get("pipeline_parallel_size") or 1, name("pipeline_parallel_size"))
    sc.trust_remote_code = bool(args.get("trust_remote_code", False))


def vllm_config(values: dict[str, Any], unknown: list[str], positional: list[str], dotted: list[str]) -> ServeConfig:
    version = flag_table()["vllm"]["version"]
    sc = ServeConfig("vllm", version, unknown_flags=unknown)
    _abbrev_notes(values, sc)
    sc.target = values.get("model") or (positional[0] if positional else None)
    if len(positional) > 1:
        sc.notes.append(f"extra positional words: {' '.join(positional[1:])}")
    vllm_engine_args(sc, values, lambda dest: "--" + dest.replace("_", "-"))
    spec: dict[str, Any] = {}
    if values.get("speculative_config"):
        spec = json_object(values["speculative_config"], "--speculative-config")
    for d in dotted:
        key, _, val = d.partition("=")
        head, _, sub = key.partition(".")
        if head == "speculative_config":
            try:
                spec[sub] = json.loads(val)
            except json.JSONDecodeError:
                spec[sub] = val
    finish_vllm(sc, spec)
    sc.ignored_flags = sorted(
        k
        for k in values
        if k
        not in {
            "model",
            "revision",
            "dtype",
            "chat_template",
            "tensor_parallel_size",
            "pipeline_parallel_size",
            "trust_remote_code",
            "speculative_config",
            "kv_cache_dtype",
        }
    )
    return sc


def finish_vllm(sc: ServeConfig, spec: dict[str, Any]) -> None:
    if not spec:
        sc.notes.append("no --speculative-config: this server runs without speculative decoding")
    _vllm_spec(spec, sc)
    if isinstance(spec.get("method"), str):  # as typed: the release's SpeculativeConfig matches it exactly (CMD006)
        sc.flag_values[VLLM_METHOD] = spec["method"]
    if sc.algorithm is not None and canonical("vllm", str(sc.algorithm)) == "mtp":  # mtp, or a deprecated *_mtp name
        if sc.draft is None:  # vllm config.py SpeculativeConfig: method "mtp" drafts with the target's own config
            sc.draft = sc.target
            sc.sources["draft"] = (
                f"method {sc.algorithm}: the target's own MTP layer (vllm config.py: draft_model_config = target_model_config)"
            )
    elif sc.algorithm is not None and (note := algorithm_note("vllm", str(sc.algorithm))) is not None:
        sc.notes.append(f"speculative method {note}")
    if sc.num_steps is None and spec:
        sc.notes.append(
            f"num_speculative_tokens unset: vLLM takes the draft config's n_predict or refuses to start ({_VLLM_SRC}:1601-1617)"
        )
    if sc.token_tree:
        sc.topk = max(p[-1] for p in sc.token_tree) + 1
        sc.num_draft_tokens = len(sc.token_tree) + 1
        depth = max(len(p) for p in sc.token_tree)
        if sc.num_steps is not None and sc.num_steps != depth:
            sc.notes.append(f"num_speculative_tokens {sc.num_steps} differs from the tree depth {depth}: the tree is used")
        sc.num_steps = depth
    elif sc.num_steps is not None:
        sc.topk, sc.num_draft_tokens = 1, sc.num_steps + 1
        sc.sources["topk"] = "vLLM EAGLE drafts a chain (no speculative_token_tree)"


def json_object(text: str, what: str) -> dict[str, Any]:
    from ..io.safeio import loads_json

    try:
        obj = loads_json(text, what, 'write a flat object, e.g. {"method": "eagle3", "num_speculative_tokens": 3}')
    except json.JSONDecodeError as e:
        raise BadInput(
            f"{what} is not valid JSON ({e.msg} at column {e.colno})",
            'quote it for the shell: --speculative-config \'{"method": "eagle3", ...}\'',
        ) from None
    if not isinstance(obj, dict):
        raise BadInput(f"{what} is JSON but not an object", 'write {"method": "eagle3", "model": ..., ...}')
    return obj


def target_arch(target: str | None) -> str | None:
    from ..io.hub import config_if_local

    arch = (config_if_local(target) or {}).get("architectures") or []
    return arch[0] if isinstance(arch, list) and arch else None
