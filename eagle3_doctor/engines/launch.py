"""Serving config in: read the server launch command a user already wrote, derive the doctor's settings.

Accepted forms (``--serve-cmd`` text, or a ``--serve-config`` file holding any of them):
- SGLang: ``python -m sglang.launch_server --model-path ... --speculative-algorithm EAGLE3 ...``
  (also ``sglang serve``), or a JSON/YAML object of server-args fields (``{"model_path": ...}``).
- vLLM: ``vllm serve MODEL --speculative-config '{...}'`` (also ``--speculative-config.KEY VALUE``,
  ``python -m vllm.entrypoints.openai.api_server --model ...``), a JSON/YAML object of engine args
  (``{"model": ..., "speculative_config": {...}}``) or the speculative-config JSON alone.
- TensorRT-LLM: ``trtllm-serve [serve] MODEL ... --extra_llm_api_options FILE.yaml`` (or ``--config``),
  the YAML's ``speculative_config`` read by launch_trtllm.py, or that YAML alone.

The command is read as words by launch_args.py and its settings per engine by launch_config.py; here
are the entry points, and the findings the command alone shows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.errors import BadInput
from ..io.hub import config_if_local
from .flag_releases import SOURCE as FLAG_SOURCE
from .flag_releases import Absent, absent_flags, refused_values
from .launch_args import (
    MAX_SERVE_CONFIG,
    STEPS,
    config_args,
    docker_image,
    find_entry,
    flag_table,
    parse_flags,
    prefix_env,
    refuse_measured_unknown,
    split_words,
    to_int,
)
from .launch_config import ServeConfig, finish_vllm, json_object, sglang_config, target_arch, vllm_config, vllm_engine_args
from .launch_values import value_finding
from .releases import check_engine


def launch_release(launch: str, engine: str | None = None, version: str | None = None, own: str | None = None) -> str:
    """Which release a launch of engine ``launch`` runs, the one answer every reader of it takes: the SGLang defaults
    that fill what the command leaves unset, the release a refused flag is named against, the summary line, and the
    flag names CMD003 checks the command against. The release the run names (``version``, --engine-version) where
    the run's engine (``engine``: --engine, "declared" for a serving description; None: the launch's) is the
    launch's, else the launch's own (``own``: its image's tag; None: the newest modelled, whose argument table reads
    the command), as check_engine reads it (and refuses it)."""
    named = version if engine is None or engine.lower() == launch else None
    return check_engine(launch, named or own)


def parse_serve_cmd(text: str, arch: str | None = None, named: tuple[str | None, str | None] = (None, None)) -> ServeConfig:
    """Parse one launch command. arch: the target's architecture name when already known; named: the engine and
    release the run names (--engine, --engine-version), whose release this launch runs where it is its engine
    (``launch_release``)."""
    toks = split_words(text)
    engine, start = find_entry(toks)
    image, image_release = docker_image(toks[:start])
    release = launch_release(engine, *named, own=image_release)
    # trtllm-serve's --config is its options YAML, read with the rest of its launch below
    args = toks[start:] if engine == "trtllm" else config_args(engine, toks[start:])
    values, unknown, positional, dotted = parse_flags(engine, args)
    used = values.pop("__flags__", [])
    refuse_measured_unknown(engine, unknown, release)
    if engine == "trtllm":
        from .launch_trtllm import read_api_options, trtllm_config

        extra = values.get("extra_llm_api_options")
        sc = trtllm_config(values, unknown, positional, read_api_options(extra) if extra else {})
    elif engine == "sglang":
        sc = sglang_config(values, unknown, positional, arch or target_arch(values.get("model_path")), release)
    else:
        sc = vllm_config(values, unknown, positional, dotted)
        speculators_verifier(sc, config_if_local(sc.target))
    sc.flags = used
    table = flag_table().get(engine, {}).get("flags", {})
    typed = {f: values[table[f]["dest"]] for f in used if f in table and isinstance(values.get(table[f]["dest"]), str)}
    sc.flag_values = {**typed, **sc.flag_values}  # and the values the engine's reader took from a flag's JSON
    sc.env = prefix_env(toks[:start])
    sc.image = image
    if sc.image:
        if image_release:  # the launch's own mode (TensorRT-LLM's two-model EAGLE-3) stays on the image's release
            sc.engine_version = image_release + ("-two-model" if sc.engine_version.endswith("-two-model") else "")
        tag = f"image {sc.image}" + ("" if image_release else " names no release")
        if release != launch_release(engine, own=image_release):  # the run names another
            sc.notes.append(f"{tag}: the {engine} {release} rules apply, as --engine-version names")
        else:
            pin = "" if image_release else " (pin --engine-version)"
            sc.notes.append(f"{tag}: the {engine} {image_release or sc.engine_version} rules apply{pin}")
    if "config" in values and engine != "trtllm":
        sc.notes.append("--config is not the word --config here (--config=FILE?): the engine does not read that file")
    return sc


def speculators_verifier(sc: ServeConfig, cfg: dict[str, Any] | None) -> None:
    """``vllm serve DRAFT`` where DRAFT is a speculators checkpoint: vLLM reads its config's
    ``speculators_config`` and serves the verifier named there as the target, with the checkpoint as
    the draft (vllm transformers_utils/config.py ``maybe_override_with_speculators``)."""
    spec = cfg.get("speculators_config") if cfg else None
    if sc.engine != "vllm" or sc.draft is not None or not isinstance(spec, dict):
        return
    verifier = v if isinstance(v := spec.get("verifier"), dict) else {}
    name = verifier.get("name_or_path")
    if not isinstance(name, str) or not name:
        raise BadInput(
            f"{sc.target} is a speculators checkpoint without speculators_config.verifier.name_or_path",
            "vLLM needs it to load the target: write it into the checkpoint's config.json",
        )
    methods = spec.get("proposal_methods") or [{}]
    sc.draft, sc.target = sc.target, name
    sc.algorithm = str(spec.get("algorithm") or sc.algorithm or "eagle3")
    sc.sources["target"] = "speculators_config.verifier.name_or_path of the served checkpoint"
    tokens = methods[0].get("speculative_tokens") if isinstance(methods[0], dict) else None
    if sc.num_steps is None and tokens is not None:
        sc.num_steps = to_int(tokens, "speculators_config.proposal_methods[0].speculative_tokens", STEPS)
        sc.topk, sc.num_draft_tokens = 1, sc.num_steps + 1
        sc.sources["num_steps"] = "speculators_config.proposal_methods[0].speculative_tokens"
    sc.notes = [n for n in sc.notes if not n.startswith("no --speculative-config")]
    sc.notes.append(f"speculators checkpoint: vLLM serves its verifier {name} as the target and the checkpoint as the draft")


def parse_serve_config(path: str, arch: str | None = None, named: tuple[str | None, str | None] = (None, None)) -> ServeConfig:
    """A file: a launch command, or a JSON/YAML object (SGLang server args, vLLM engine args or speculative config);
    named: as parse_serve_cmd takes it."""
    from ..io.safeio import read_regular_text

    p = Path(path)
    text = read_regular_text(p, "--serve-config", "pass the launch command or JSON/YAML server args as a file", MAX_SERVE_CONFIG)
    stripped = text.strip()
    obj: Any = None
    if stripped.startswith("{"):
        obj = json_object(stripped, f"--serve-config {path}")
    elif p.suffix in (".yaml", ".yml"):
        from ..io.safeio import load_yaml

        obj = load_yaml(stripped, f"--serve-config {path}", "fix the YAML (plain key: value lines, no aliases needed)")
        if not isinstance(obj, dict):
            raise BadInput(f"--serve-config {path} holds no mapping", "write key: value lines")
    if obj is None:
        return parse_serve_cmd(text, arch, named)
    if isinstance(obj.get("speculative_config"), dict) and "decoding_type" in obj["speculative_config"]:
        from .launch_trtllm import trtllm_config

        sc = trtllm_config({}, [], [], obj)  # TensorRT-LLM's LLM API options: its --extra_llm_api_options file
        if sc.target is None:
            sc.notes = [n for n in sc.notes if not n.startswith("no MODEL")]
            sc.notes.append("an --extra_llm_api_options file names no model: pass --target")
        return sc
    keys = {k.replace("-", "_") for k in obj}
    obj = {k.replace("-", "_"): v for k, v in obj.items()}
    if keys & {"speculative_algorithm", "model_path", "speculative_num_steps", "speculative_eagle_topk"}:
        table = flag_table()["sglang"]["flags"]
        dests = {v["dest"] for v in table.values()}
        unknown = [f"{k} (not a SGLang {flag_table()['sglang']['version']} server arg)" for k in obj if k not in dests]
        release = launch_release("sglang", *named)
        return sglang_config(
            {k: v for k, v in obj.items() if k in dests}, unknown, [], arch or target_arch(obj.get("model_path")), release
        )
    if "num_speculative_tokens" in keys or ("method" in keys and "speculative_config" not in keys):
        sc = ServeConfig("vllm", flag_table()["vllm"]["version"])
        finish_vllm(sc, obj)
        sc.notes.append("a speculative config alone names no target: pass --target")
        return sc
    if keys & {"speculative_config", "model"}:
        table = flag_table()["vllm"]["flags"]
        dests = {v["dest"] for v in table.values()}
        unknown = [f"{k} (not a vLLM {flag_table()['vllm']['version']} engine arg)" for k in obj if k not in dests]
        spec = obj.get("speculative_config") or {}
        if isinstance(spec, str):
            spec = json_object(spec, "speculative_config")
        sc = ServeConfig("vllm", flag_table()["vllm"]["version"], unknown_flags=unknown)
        sc.target = obj.get("model")
        vllm_engine_args(sc, obj, lambda dest: dest)
        finish_vllm(sc, spec)
        return sc
    raise BadInput(
        f"--serve-config {path}: cannot tell which engine this configures",
        "use SGLang server-arg names (model_path, speculative_algorithm, ...) or vLLM's (model, speculative_config)",
    )


def load(
    serve_cmd: str | None, serve_config: str | None, named: tuple[str | None, str | None] = (None, None)
) -> ServeConfig | None:
    """The launch command or file as read; ``named``: the engine and release the run names (parse_serve_cmd)."""
    if serve_cmd and serve_config:
        raise BadInput("both --serve-cmd and --serve-config given", "pass one of them")
    sc = (
        parse_serve_cmd(serve_cmd, named=named)
        if serve_cmd
        else parse_serve_config(serve_config, named=named)
        if serve_config
        else None
    )
    if sc is not None and sc.engine == "vllm":
        from .vllm_method import settle

        # the method as the release the launch runs settles it (its image's, where the command names one)
        settle(sc, launch_release("vllm", *named, own=sc.engine_version if sc.image else None))
    return sc


# --------------------------------------------------------------------------- findings the command alone shows

_TRUE = ("1", "true", "yes", "on")
_SGLANG_WORKER = "sglang 0.5.23 srt/speculative/eagle_worker_v2.py:323-333 (init_token_map)"


def launch_findings(sc: ServeConfig, release: str | None = None) -> list[Any]:
    """What the launch command itself does to the draft, before any model is read: an FR-Spec token map
    (the draft's vocabulary), spec v2 asked for with a token tree, flags ``release`` (the one the launch runs,
    ``launch_release``) does not have or values its parser does not take, speculative settings the release refuses
    at start-up, a draft configured with no algorithm to run it."""
    out = [_absent_flag_finding(sc, a) for a in absent_flags(sc.engine, release, sc.flags) or []] if release else []
    # the algorithm's name is the executed tree table's to judge (engines/sglang_tree.py: CMD004), with its chooser
    given = {f: v for f, v in sc.flag_values.items() if f != "--speculative-algorithm"}
    out += [value_finding(sc, r) for r in refused_values(sc.engine, release, given) or []] if release else []
    if sc.startup_error:
        out.append(_startup_error_finding(sc, sc.startup_error))
    if sc.token_map:
        out.append(_token_map_finding(sc))
    v2 = sc.env.get("SGLANG_ENABLE_SPEC_V2")
    if sc.engine == "sglang" and v2 is not None and v2.strip().lower() in _TRUE and (sc.topk or 1) > 1:
        out.append(_spec_v2_finding(sc, v2))
    if sc.engine == "sglang" and sc.algorithm is None and _speculative_flags(sc):
        out.append(_no_algorithm_finding(sc))
    return out


def _speculative_flags(sc: ServeConfig) -> list[str]:
    """The SGLang settings the launch (command or server-args file) gives for a draft: its path, the tree's shape,
    a token map, a DFlash block size; by their flags."""
    from .sglang_tree import DFLASH_FLAG, given_tree_flags

    given = ["--speculative-draft-model-path"] if sc.draft else []
    given += given_tree_flags(sc)
    given += ["--speculative-token-map"] if sc.token_map else []
    return given + ([DFLASH_FLAG] if sc.dflash_block_size is not None else [])


def without_refused_flags(findings: list[Any], engine: str) -> list[Any]:
    """``findings`` less each one that reads a launch flag (its data's LAUNCH_FLAGS) which a CMD003 among them says the
    release lacks, or a CMD006 says it takes no such value: that server refuses to start with the flag as given, so
    what it would do with the flag's value is not said beside the finding that says so, which names what it withheld.
    An alias counts as the flag it spells."""
    from ..core.findings import LAUNCH_FLAGS

    table = flag_table()[engine]["flags"]

    def dest(flag: str) -> str:
        return table.get(flag, {}).get("dest", flag)

    absent = {dest(f.data["flag"]): f for f in findings if f.code in ("CMD003", "CMD006")}
    out = []
    for f in findings:
        lacked = [absent[d] for d in dict.fromkeys(map(dest, f.data.get(LAUNCH_FLAGS, []))) if d in absent]
        for cmd in lacked:
            cmd.evidence.append(f"{f.code} withheld: it reads {cmd.data['flag']} as a server started with it would")
        if not lacked:
            out.append(f)
    return out


def fixes_within_release(findings: list[Any], engine: str, release: str) -> None:
    """Each fix that sets a launch flag ``release`` does not register (its parser's names, flag_releases), or a value
    that release does not take for it (CMD006's lists), says so in its text and evidence, with the releases that
    have it: a fix is written against the newest release's flags, and followed as printed under an older one it
    would stop that server (as CMD003 and CMD006 say of a command)."""
    from ..core.findings import SERVER_COMMAND, Fix

    for f in findings:
        fix = f.fix
        if not (isinstance(fix, Fix) and fix.file == SERVER_COMMAND and fix.op == "set" and (fix.key or "").startswith("-")):
            continue
        absent = absent_flags(engine, release, [str(fix.key)])
        refused = refused_values(engine, release, {str(fix.key): fix.value}) if isinstance(fix.value, str) else None
        if absent:
            a = absent[0]
            needs = f"upgrade to {engine} >= {a.first_after}" if a.first_after else f"no later {engine} release has it"
            f.evidence.append(f"the fix's {fix.key} is not a flag of {engine} {a.release} ({needs}; {FLAG_SOURCE})")
            text = f"{fix} ({needs}: {engine} {a.release} has no {fix.key})"
        elif refused:
            r = refused[0]
            needs = f"run {engine} {r.takes_it[-1]}" if r.takes_it else f"no tracked {engine} release takes it"
            f.evidence.append(f"the fix's {fix.key} {fix.value} is not a value {engine} {r.release} takes: it takes "
                              f"{', '.join(r.choices)} ({r.source}; {FLAG_SOURCE})")  # fmt: skip
            text = f"{fix} ({needs}: {engine} {r.release} does not take {fix.value!r} there)"
        else:
            continue
        f.fix = Fix(text, file=fix.file, key=fix.key, value=fix.value, snippet=fix.snippet, op=fix.op, path=fix.path)


def _absent_flag_finding(sc: ServeConfig, a: Absent) -> Any:
    from ..core.findings import SERVER_COMMAND, Finding, Fix

    eng = sc.engine
    if a.first_after and a.until:
        fix = f"drop {a.flag} from the launch command, or run a {eng} release from {a.first_after} to {a.until} (those have it)"
    elif a.first_after:
        fix = f"drop {a.flag} from the launch command, or upgrade to {eng} >= {a.first_after} (the first release that has it)"
    else:
        fix = f"drop {a.flag} from the launch command: no later {eng} release has it"
    gone = f"; {eng} {a.last_before} was the last release before it that had it" if a.last_before else ""
    return Finding(
        "CMD003",
        f"{a.flag} is not a flag of {eng} {a.release}: that server refuses to start (argparse: unrecognized arguments)",
        [
            f"{eng} releases whose parser registers {a.flag}: {', '.join(a.has_it)}{gone}",
            f"each release's flag names extracted from its own wheel ({FLAG_SOURCE}); "
            f"the command was read with {eng} {flag_table()[eng]['version']}'s argument table, which "
            + ("has it" if a.flag in flag_table()[eng]["flags"] else "lacks it too (listed as unknown)"),
        ],
        Fix(fix, file=SERVER_COMMAND, key=a.flag, op="delete"),
        data={
            "flag": a.flag,
            "release": a.release,
            "first_release_with_it": a.first_after,
            "has_it": a.has_it,
            "last_release_before_with_it": a.last_before,
            "last_release_of_that_run": a.until,
        },
    )


_TOKEN_MAP_FLAGS = ["--speculative-token-map", "--speculative-algorithm"]  # what CMD001 reads


def _startup_error_finding(sc: ServeConfig, e: dict[str, Any]) -> Any:
    """The release's own argument handling raises on this launch (engines/sglang_tree.py, from its code executed):
    reported as CMD003 reports a flag the release lacks, the server's own words and where they come from."""
    from ..core.findings import LAUNCH_FLAGS, SERVER_COMMAND, Finding, Fix
    from .sglang_tree import DFLASH_FLAG, EXEC, given_tree_flags

    # the flags it reads, as the command gives them (a CMD003 for one of them withholds it: without_refused_flags)
    reads = ["--speculative-algorithm"] if sc.algorithm else []
    reads += given_tree_flags(sc)
    reads += [DFLASH_FLAG] if sc.dflash_block_size is not None else []
    shape = ", ".join(
        f"{flag} {'unset' if v is None else v}"
        for flag, v in (
            ("--speculative-num-steps", sc.num_steps),
            ("--speculative-eagle-topk", sc.topk),
            ("--speculative-num-draft-tokens", sc.num_draft_tokens),
        )
    )
    block = f", --speculative-dflash-block-size {sc.dflash_block_size}" if sc.dflash_block_size is not None else ""
    return Finding(
        "CMD004",
        f"sglang {e['release']} refuses to start on this launch: {e['error']}",
        [
            f"--speculative-algorithm {sc.algorithm or 'unset (EAGLE3 assumed)'}, {shape}{block}",
            f"raised at {e['where']} of sglang {e['release']}: its own argument handling, executed on this launch ({EXEC})"
            if e["cause"] != "case"
            else f"the parser at {e['where']} of sglang {e['release']} lists the names it takes as choices (executed on "
            f"its own names, {EXEC}); argparse matches choices exactly, case and all",
        ],
        Fix(e["fix"], file=SERVER_COMMAND, key=e["key"], op=e["op"], value=e["value"]),
        data={**{k: e[k] for k in ("release", "algorithm", "error", "where", "cause")}, LAUNCH_FLAGS: reads},
    )


def _token_map_finding(sc: ServeConfig) -> Any:
    from ..core.findings import LAUNCH_FLAGS, SERVER_COMMAND, Finding, Fix

    algo = (sc.algorithm or "").upper()
    fix = Fix(
        "drop --speculative-token-map from the launch command (an EAGLE-3 draft's vocabulary is its own d2t table)",
        file=SERVER_COMMAND,
        key="--speculative-token-map",
        op="delete",
    )
    if algo == "EAGLE3":
        return Finding(
            "CMD001",
            f"--speculative-token-map {sc.token_map} is ignored: SGLang serves an EAGLE3 draft with its own d2t vocabulary",
            [f"--speculative-algorithm {sc.algorithm}", f"SGLang logs 'Ignoring the specified token map' ({_SGLANG_WORKER})"],
            fix,
            severity="warning",
            data={"token_map": sc.token_map, "algorithm": sc.algorithm, "applied": False, LAUNCH_FLAGS: _TOKEN_MAP_FLAGS},
        )
    return Finding(
        "CMD001",
        f"--speculative-token-map {sc.token_map} replaces the draft's vocabulary with the hot tokens it lists (FR-Spec)",
        [
            f"--speculative-algorithm {sc.algorithm}: SGLang loads the map as hot_token_id and overrides the draft's "
            f"hot_vocab_size with its length ({_SGLANG_WORKER})",
            "a target token outside the map can never be drafted, and the draft's lm_head rows are read in the map's order",
        ],
        Fix(
            "drop --speculative-token-map, or serve the draft as EAGLE3 with its trained d2t table "
            "(--speculative-algorithm EAGLE3), or rebuild the map from the serving traffic's token frequencies",
            file=SERVER_COMMAND,
            key="--speculative-token-map",
            op="delete",
        ),
        data={"token_map": sc.token_map, "algorithm": sc.algorithm, "applied": True, LAUNCH_FLAGS: _TOKEN_MAP_FLAGS},
    )


def _no_algorithm_finding(sc: ServeConfig) -> Any:
    from ..core.findings import LAUNCH_FLAGS, SERVER_COMMAND, Finding, Fix

    given = _speculative_flags(sc)
    return Finding(
        "CMD005",
        f"no --speculative-algorithm beside {', '.join(given)}: SGLang serves without speculative decoding, "
        "the draft is never run",
        [
            f"the command gives {', '.join(given)}"
            + (f" (the draft {sc.draft})" if sc.draft else "")
            + " and no --speculative-algorithm",
            "SGLang reads a missing algorithm as SpeculativeAlgorithm.NONE (from_string(None), "
            "srt/speculative/spec_info.py) and keeps the draft path unused: read in 0.4.6, 0.5.2, 0.5.10 and 0.5.23",
            "the doctor's measurements assume --speculative-algorithm EAGLE3: what this server would do once it is named",
        ],
        Fix(
            "add --speculative-algorithm EAGLE3 to the launch command (DFLASH for a DFlash draft, NEXTN for an MTP head)",
            file=SERVER_COMMAND,
            key="--speculative-algorithm",
            op="set",
            value="EAGLE3",
        ),
        data={"flags": given, "draft": sc.draft, LAUNCH_FLAGS: given},
    )


def _spec_v2_finding(sc: ServeConfig, v2: str) -> Any:
    from ..core.findings import LAUNCH_FLAGS, SERVER_COMMAND, Finding, Fix

    steps = sc.num_steps or 1
    return Finding(
        "CMD002",
        f"SGLANG_ENABLE_SPEC_V2={v2} with --speculative-eagle-topk {sc.topk}: spec v2 drafts a chain (topk 1) only",
        [
            f"topk {sc.topk} ({sc.sources.get('topk', 'from the command')}), {sc.num_draft_tokens} draft tokens",
            "SGLang releases that read SGLANG_ENABLE_SPEC_V2 turn the overlap scheduler off and run spec v1 "
            "('spec v2 currently only supports topk = 1'); hybrid (Mamba/GDN) targets raise that error",
            f"SGLang {flag_table()['sglang']['version']} no longer reads the variable",
        ],
        Fix(
            f"--speculative-eagle-topk 1 --speculative-num-draft-tokens {steps + 1} for spec v2, "
            "or drop SGLANG_ENABLE_SPEC_V2 to keep the tree",
            file=SERVER_COMMAND,
            key="--speculative-eagle-topk",
            value=1,
        ),
        data={
            "SGLANG_ENABLE_SPEC_V2": v2,
            "topk": sc.topk,
            "num_steps": sc.num_steps,
            LAUNCH_FLAGS: ["--speculative-eagle-topk"],
        },
    )
