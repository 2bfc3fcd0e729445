"""SGLang's tree shape (steps, topk, draft tokens) for what a launch leaves unset, per release and per algorithm, as
executed.

``conformance/spec_defaults_exec.py`` (``make conformance``) runs each release's own code that fills the three over a
grid of launches, per ``--speculative-algorithm``, and writes ``eagle3_doctor/data/sglang_tree_defaults.json``: per
row of releases the executed cases and the rules read off them. EAGLE3, EAGLE (NEXTN through the release's own alias)
and STANDALONE reach the EAGLE call site (the chooser ``auto_choose_speculative_params`` on the target's architecture,
the assert beside it, the topk-1 adjustment, the checks that order topk; before the chooser the ServerArgs field
defaults); DFLASH reaches its own handler (steps and topk forced to 1, the draft tokens the draft's block size). A name
the release's parser refuses is recorded with what it says. This module applies a release's rules to a launch;
``resolve_shape`` and ``resolve_dflash`` reproduce every executed case (checked when the table is built and by the
tests). A release the table does not hold, or an algorithm it did not execute (NGRAM, ...), has no rules: the caller
says so rather than borrow another's.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

TABLE = Path(__file__).resolve().parent.parent / "data" / "sglang_tree_defaults.json"
EXEC = "conformance/spec_defaults_exec.py"
EAGLE3, DFLASH = "EAGLE3", "DFLASH"

Shape = tuple[Optional[int], Optional[int], Optional[int]]  # steps, topk, draft tokens; None: unset
UNREADABLE = "unreadable"  # the draft's config.json could not be read here: its block size is unknown


@functools.lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    return json.loads(TABLE.read_text())


def _shape(text: str) -> Shape:
    s, t, n = (None if x == "-" else int(x) for x in text.split(","))
    return s, t, n


@dataclass(frozen=True)
class TreeRules:
    """How one release fills the tree shape for an algorithm of the EAGLE family, read off its executed cases."""

    release: str
    defaults: Shape  # ServerArgs' field defaults (what an unset field is when the chooser does not run)
    auto: dict[str, str] | None  # the chooser's pick by architecture, "other" for any it does not list; None: no chooser
    unset_error: str | None  # what the release raises for steps unset beside a set topk or draft-token count
    topk1_forces: bool  # topk 1 sets draft tokens to steps + 1
    sources: dict[str, Any] = field(default_factory=dict)  # file:line of each piece in this release
    topk_unset_error: str | None = None  # what the checks after the adjustment raise on a topk left unset (None)

    @classmethod
    def of(cls, row: dict[str, Any], release: str, sources: dict[str, Any]) -> TreeRules:
        d = row["defaults"]
        return cls(
            release, (d[0], d[1], d[2]), row["auto"], row["unset_error"], row["topk1_forces"],
            sources, row.get("topk_unset_error"),
        )  # fmt: skip

    def auto_for(self, arch: str) -> str:
        """The chooser's pick for ``arch`` as executed: "steps,topk,draft tokens", or the error it raised ("!...")."""
        assert self.auto is not None
        return self.auto.get(arch) or self.auto["other"]


@dataclass(frozen=True)
class DflashRules:
    """How one release fills the three for DFLASH, read off its executed cases: steps and topk unset and given
    ({"unset": n, "given": "kept" or the number it forces}), the draft tokens' fallback, the block-size mismatch."""

    release: str
    num_steps: dict[str, Any]
    topk: dict[str, Any]
    fallback: int  # the draft tokens where neither the launch nor the draft's config sets them
    mismatch_error: str | None  # --speculative-dflash-block-size beside a different --speculative-num-draft-tokens
    sources: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, row: dict[str, Any], release: str, sources: dict[str, Any]) -> DflashRules:
        return cls(release, row["num_steps"], row["topk"], row["fallback"], row["mismatch_error"], sources)


@dataclass(frozen=True)
class Refused:
    """The release's parser refuses the algorithm's name: the server does not start."""

    release: str
    algorithm: str
    error: str  # what it says ("!argparse: argument --speculative-algorithm: invalid choice: ...")
    sources: dict[str, Any] = field(default_factory=dict)


Rules = Union[TreeRules, DflashRules, Refused]


@dataclass(frozen=True)
class Resolved:
    values: Shape
    how: dict[str, str]  # num_steps/topk/num_draft_tokens -> "given", "default", "auto", "forced", "dflash", ...
    error: str | None = None  # what the release raises at start-up for this launch ("!AssertionError", ...)
    needs_arch: bool = False  # the chooser would pick, and the target's architecture is unknown here
    cause: str | None = None  # which rule raised: "unset", "chooser", "topk_unset", "mismatch"
    needs_draft: bool = False  # DFLASH would read the draft's block size, and its config is unreadable here


KEYS = ("num_steps", "topk", "num_draft_tokens")


def _release_key(release: str) -> str:
    return release.split("+")[0].partition("-")[0]


def executed() -> list[str]:
    """The algorithms whose handling the table executed, and the name each release aliases (NEXTN)."""
    return [*table()["algorithms"], table()["alias"]]


def tree_rules(release: str, algorithm: str = EAGLE3) -> Rules | None:
    """The rules of ``release`` (a release string as engines/releases.py writes it) for ``algorithm`` (NEXTN: the
    algorithm the release's alias makes it), or None where the release or the algorithm was not executed."""
    t = table()
    at = t["release_rows"].get(_release_key(release))
    if at is None:
        return None
    name = algorithm.upper()
    if name == t["alias"]:
        name = at["algorithms"][name]["as"]
    a = at["algorithms"].get(name)
    if a is None:
        return None
    if "refused" in a:
        return Refused(release, name, a["refused"], at["sources"])
    row = t["rows"][a["row"]]
    sources = {**at["sources"], "route": at["sources"].get("route", {}).get(row["handler"], [])}
    if row["handler"] == "dflash":
        return DflashRules.of(row, release, sources)
    return TreeRules.of(row, release, sources)


def covered() -> str:
    """The releases the table holds, first-last."""
    rs = list(table()["release_rows"])
    return f"{rs[0]}-{rs[-1]}"


def _choices_parser(release: str) -> str | None:
    """Where ``release``'s parser lists the --speculative-algorithm names it takes (``add_argument(choices=...)``,
    which argparse matches exactly, case and all), or None: a release outside the table, or one that takes any
    name and upper-cases it (from 0.5.12, where the table's parser is ``SpeculativeAlgorithm``)."""
    at = table()["release_rows"].get(_release_key(release))
    parser = at["sources"].get("parser", "") if at is not None else ""
    return parser if parser.startswith("sglang/srt/server_args.py:") else None


def first_upper_casing() -> str:
    """The first release of the table that takes the algorithm's name in any case."""
    return next(v for v in table()["release_rows"] if _choices_parser(v) is None)


def first_accepting(algorithm: str) -> str | None:
    """The first release of the table whose parser takes ``algorithm``."""
    return next((v for v, at in table()["release_rows"].items() if "row" in at["algorithms"].get(algorithm, {})), None)


def resolve_shape(rules: TreeRules, given: Shape, arch: str | None) -> Resolved:
    """The release's (steps, topk, draft tokens) for a launch that sets ``given`` (None: not set) on a target of
    architecture ``arch`` (None: unknown)."""
    steps, topk, ndt = given
    how = {k: "given" for k, v in zip(KEYS, given) if v is not None}
    if steps is None and rules.auto is not None:
        if rules.unset_error and (topk is not None or ndt is not None):
            return Resolved(given, how, error=rules.unset_error, cause="unset")
        if arch is None:
            return Resolved(given, how, needs_arch=True)
        picked = rules.auto_for(arch)
        if picked.startswith("!"):
            return Resolved(given, how, error=picked, cause="chooser")
        (steps, topk, ndt), how = _shape(picked), dict.fromkeys(KEYS, "auto")
    else:
        filled = [v if v is not None else d for v, d in zip(given, rules.defaults)]
        how |= {k: "default" for k, v, d in zip(KEYS, given, rules.defaults) if v is None and d is not None}
        steps, topk, ndt = filled
    if rules.topk1_forces and topk == 1 and steps is not None and ndt != steps + 1:
        ndt, how["num_draft_tokens"] = steps + 1, "forced"
    if topk is None and rules.topk_unset_error:  # a check after the adjustment orders topk: None > 1
        return Resolved(given, how, error=rules.topk_unset_error, cause="topk_unset")
    return Resolved((steps, topk, ndt), how)


def dflash_block(cfg: dict[str, Any] | None) -> int | None | str:
    """The draft's block size as SGLang's ``parse_dflash_draft_config`` reads it: ``dflash_config.block_size``, else
    the top-level ``block_size``; None where neither is set; ``UNREADABLE`` where it is no positive integer (the release
    would then log its parse error and fall back: not modelled)."""
    if cfg is None:
        return UNREADABLE
    nested = cfg.get("dflash_config")
    raw = (nested if isinstance(nested, dict) else {}).get("block_size", cfg.get("block_size"))
    if raw is None:
        return None
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 1 else UNREADABLE


def resolve_dflash(rules: DflashRules, given: Shape, flag: int | None, draft_block: int | None | str) -> Resolved:
    """The release's (steps, topk, draft tokens) for a DFLASH launch setting ``given``, ``--speculative-dflash-block-size
    flag`` (None: unset), with a draft whose block size is ``draft_block`` (``dflash_block``)."""
    how = {k: "given" for k, v in zip(KEYS, given) if v is not None}
    out: list[Optional[int]] = []
    for k, v in zip(KEYS[:2], given[:2]):
        r = getattr(rules, k)
        if v is None:
            out.append(r["unset"])
            how[k] = "dflash"
        elif r["given"] == "kept":
            out.append(v)
        else:
            out.append(r["given"])
            how[k] = "dflash"
    ndt = given[2]
    if flag is not None:
        if ndt is not None and ndt != flag and rules.mismatch_error:
            return Resolved(given, how, error=rules.mismatch_error, cause="mismatch")
        ndt, how["num_draft_tokens"] = flag, "flag"
    elif ndt is None:
        if isinstance(draft_block, str):  # UNREADABLE
            return Resolved((out[0], out[1], None), how, needs_draft=True)
        ndt, how["num_draft_tokens"] = (draft_block, "draft") if draft_block is not None else (rules.fallback, "fallback")
    return Resolved((out[0], out[1], ndt), how)


_FLAGS = {
    "num_steps": "--speculative-num-steps",
    "topk": "--speculative-eagle-topk",
    "num_draft_tokens": "--speculative-num-draft-tokens",
}
DFLASH_FLAG = "--speculative-dflash-block-size"


def given_tree_flags(sc: Any) -> list[str]:
    """The tree's flags (steps, topk, draft tokens) that ``sc``'s launch gives itself, not filled by a release."""
    return [flag for k, flag in _FLAGS.items() if sc.sources.get(k) == flag]


def fill_tree(sc: Any, arch: str | None, release: str) -> None:
    """Fill ``sc``'s (a ServeConfig's) steps/topk/draft tokens the launch left unset as SGLang ``release`` does for its
    ``--speculative-algorithm`` (none: EAGLE3's), with each value's source and a note for what the release refuses
    (also kept as ``sc.startup_error``, which launch.py reports as CMD004) or the table does not hold."""
    given: Shape = (sc.num_steps, sc.topk, sc.num_draft_tokens)
    algorithm = str(sc.algorithm or EAGLE3).upper()
    parser = _choices_parser(release)
    if sc.algorithm is not None and sc.algorithm != algorithm and parser is not None:
        _refuse(
            sc, release, sc.algorithm, f"!argparse: argument --speculative-algorithm: invalid choice: {sc.algorithm!r}",
            parser, "case", f"write the name in capitals, --speculative-algorithm {algorithm} (SGLang {release}'s "
            f"parser takes its listed names only; from {first_upper_casing()} it upper-cases the name)", to=algorithm,
        )  # fmt: skip
        return
    rules = tree_rules(release, algorithm)
    at = f"SGLang {release}"
    if rules is None:
        if _release_key(release) not in table()["release_rows"]:
            if None in given or given[1] == 1 and given[0] is not None and given[2] != given[0] + 1:
                sc.notes.append(
                    f"defaults for SGLang {release} not extracted ({EXEC} covers {covered()}): steps/topk/draft tokens "
                    "are taken as the command sets them, nothing filled in or adjusted"
                )
        elif None in given:
            sc.notes.append(
                f"{at}'s handling of --speculative-algorithm {sc.algorithm} not executed ({EXEC} covers "
                f"{', '.join(executed())}): steps/topk/draft tokens are taken as the command sets them, nothing filled in"
            )
        return
    if isinstance(rules, Refused):
        first = first_accepting(rules.algorithm)
        _refuse(
            sc, rules.release, rules.algorithm, rules.error, rules.sources.get("parser", "?"), "refused",
            f"run a release that accepts it (SGLang {first} and later)" if first else "use another --speculative-algorithm",
        )  # fmt: skip
        return
    if isinstance(rules, DflashRules):
        _fill_dflash(sc, rules, given)
        return
    r = resolve_shape(rules, given, arch)
    src = rules.sources
    if r.error is not None:
        where = src["raised"].get(r.error, "?")
        if r.error == "!AssertionError":
            sc.notes.append(
                f"{at} asserts that {_FLAGS['topk']} and {_FLAGS['num_draft_tokens']} are unset when "
                f"{_FLAGS['num_steps']} is ({where}): set all three"
            )
        _refuse(sc, rules.release, algorithm, r.error, where, r.cause or "chooser", None, note=r.error != "!AssertionError")
        return
    if r.needs_arch:
        sc.notes.append(
            f"{at} picks steps/topk/draft tokens from the target's architecture ({src['chooser']}); the target config "
            "was not readable here"
        )
        return
    _set(sc, rules, r, arch, given)


_FIXES = {  # what the server's refusal asks of the launch: (text, flag, op, value)
    "unset": ("set --speculative-num-steps as well: SGLang picks topk and draft tokens itself only with all three unset",
              "--speculative-num-steps", "set", None),
    "chooser": ("set all three of --speculative-num-steps, --speculative-eagle-topk, --speculative-num-draft-tokens",
                "--speculative-num-steps", "set", None),
    "topk_unset": ("add --speculative-eagle-topk 1 (a chain: the draft tokens become steps + 1), or the topk the tree "
                   "should have", "--speculative-eagle-topk", "set", 1),
    "mismatch": (f"drop --speculative-num-draft-tokens: {DFLASH_FLAG} sets it for DFLASH (or give both the same value)",
                 "--speculative-num-draft-tokens", "delete", None),
    "refused": ("", "--speculative-algorithm", "set", None),
    "case": ("", "--speculative-algorithm", "set", None),  # the parser's choices, matched exactly (not executed)
}  # fmt: skip


def _refuse(
    sc: Any, release: str, algorithm: str, error: str, where: str, cause: str, fix: str | None, note: bool = True, to: Any = None
) -> None:
    """The release does not start on this launch: say so, and keep what CMD004 reports (``to``: the value the fix sets
    where the cause's own has none)."""
    text, key, op, value = _FIXES[cause]
    value = to if value is None else value
    text = fix or text
    if note:
        sc.notes.append(f"SGLang {release} fails at start-up on this launch ({error[1:]}, {where}, executed): {text}")
    sc.startup_error = {
        "release": release, "algorithm": algorithm, "error": error[1:], "where": where, "cause": cause,
        "fix": text, "key": key, "op": op, "value": value,
    }  # fmt: skip


def _fill_dflash(sc: Any, rules: DflashRules, given: Shape) -> None:
    """DFLASH: steps and topk as the release's handler sets them, the draft tokens from the block-size flag, the
    launch, the draft's config or the fallback, in the order the release reads them."""
    src, at = rules.sources, f"SGLang {rules.release}"
    handler, parse = src["dflash"]["handler"], src["dflash"]["parse"]
    from ..io.hub import config_if_local

    draft_cfg = config_if_local(sc.draft)
    block = dflash_block(draft_cfg)
    r = resolve_dflash(rules, given, sc.dflash_block_size, block)
    if r.error is not None:
        _refuse(sc, rules.release, DFLASH, r.error, src["raised"].get(r.error, "?"), r.cause or "mismatch", None)
        return
    for i, k in enumerate(KEYS):
        how = r.how.get(k)
        if how in (None, "given") or r.values[i] is None:
            continue
        if how == "dflash" and given[i] is not None:
            sc.notes.append(f"{at} overrides {_FLAGS[k]} {given[i]} to {r.values[i]} for DFLASH ({handler})")
        setattr(sc, k, r.values[i])
        sc.sources[k] = {
            "dflash": f"{at} sets it to {r.values[i]} for DFLASH ({handler}, executed: {EXEC})",
            "flag": DFLASH_FLAG,
            "draft": f"the draft's block size ({_block_key(draft_cfg)} in its config.json), as {at} reads it ({parse}, executed)",
            "fallback": f"{at}'s DFLASH fallback: the draft's config names no block size ({handler}, executed)",
        }[how]
    if r.needs_draft:
        sc.notes.append(
            f"{at} takes the DFLASH draft tokens from the draft's block size ({parse}); the draft's config.json "
            "was not readable here, or its block size is no positive integer"
        )


def _block_key(cfg: dict[str, Any] | None) -> str:
    nested = (cfg or {}).get("dflash_config")
    return "dflash_config.block_size" if isinstance(nested, dict) and "block_size" in nested else "block_size"


def _set(sc: Any, rules: TreeRules, r: Resolved, arch: str | None, given: Shape) -> None:
    src, at = rules.sources, f"SGLang {rules.release}"
    for i, (k, how) in enumerate((k, r.how.get(k)) for k in KEYS):
        if how in (None, "given"):
            continue
        setattr(sc, k, r.values[i])
        sc.sources[k] = {
            "auto": f"{at} default for {arch} ({src.get('chooser')}, executed: {EXEC})",
            "default": f"{at} ServerArgs default ({src['fields'][i]})",
            "forced": f"steps + 1 with topk 1 ({at} {src.get('force')})",
        }[how]
    if r.how.get("num_draft_tokens") == "forced" and given[2] is not None:
        sc.notes.append(
            f"{at} sets {_FLAGS['num_draft_tokens']} to steps + 1 = {sc.num_draft_tokens} when topk is 1 "
            f"(was {given[2]}; {src.get('force')})"
        )
    if sc.num_steps is not None and sc.topk is None:  # the release leaves it None: the doctor measures a chain
        sc.topk = 1
        sc.sources["topk"] = (
            f"assumed 1: {at} leaves {_FLAGS['topk']} unset (default None, {src['fields'][1]}) when only "
            f"{_FLAGS['num_steps']} is given"
        )
        sc.notes.append(sc.sources["topk"])
        if sc.num_draft_tokens != sc.num_steps + 1:
            sc.num_draft_tokens = sc.num_steps + 1
            sc.sources["num_draft_tokens"] = "steps + 1: the chain topk 1 drafts"
