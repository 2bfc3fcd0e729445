"""SGLang's tree shape (steps, topk, draft tokens) for what a launch leaves unset, per release, as executed.

``conformance/spec_defaults_exec.py`` (``make conformance``) runs each release's own code that fills the three
(the chooser ``auto_choose_speculative_params`` on the target's architecture, the assert beside it, the topk-1
adjustment, or before the chooser the ServerArgs field defaults) over a grid of launches and architectures, and
writes ``eagle3_doctor/data/sglang_tree_defaults.json``: per row of releases the executed cases and the rules read
off them. This module applies a release's rules to a launch; ``resolve_shape`` reproduces every executed case
(checked when the table is built and by the tests). A release the table does not hold has no rules: the caller
says so rather than borrow another release's.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

TABLE = Path(__file__).resolve().parent.parent / "data" / "sglang_tree_defaults.json"
EXEC = "conformance/spec_defaults_exec.py"

Shape = tuple[Optional[int], Optional[int], Optional[int]]  # steps, topk, draft tokens; None: unset


@functools.lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    return json.loads(TABLE.read_text())


def _shape(text: str) -> Shape:
    s, t, n = (None if x == "-" else int(x) for x in text.split(","))
    return s, t, n


@dataclass(frozen=True)
class TreeRules:
    """How one release fills the tree shape, read off its executed cases."""

    release: str
    defaults: Shape  # ServerArgs' field defaults (what an unset field is when the chooser does not run)
    auto: dict[str, str] | None  # the chooser's pick by architecture, "other" for any it does not list; None: no chooser
    unset_error: str | None  # what the release raises for steps unset beside a set topk or draft-token count
    topk1_forces: bool  # topk 1 sets draft tokens to steps + 1
    sources: dict[str, Any] = field(default_factory=dict)  # file:line of each piece in this release

    @classmethod
    def of(cls, row: dict[str, Any], release: str, sources: dict[str, Any]) -> TreeRules:
        d = row["defaults"]
        return cls(
            release, (d[0], d[1], d[2]), row["auto"], row["unset_error"], row["topk1_forces"],
            sources,
        )  # fmt: skip

    def auto_for(self, arch: str) -> str:
        """The chooser's pick for ``arch`` as executed: "steps,topk,draft tokens", or the error it raised ("!...")."""
        assert self.auto is not None
        return self.auto.get(arch) or self.auto["other"]


@dataclass(frozen=True)
class Resolved:
    values: Shape
    how: dict[str, str]  # num_steps/topk/num_draft_tokens -> "given", "default", "auto" or "forced"
    error: str | None = None  # what the release raises at start-up for this launch ("!AssertionError", ...)
    needs_arch: bool = False  # the chooser would pick, and the target's architecture is unknown here


KEYS = ("num_steps", "topk", "num_draft_tokens")


def tree_rules(release: str) -> TreeRules | None:
    """The rules of ``release`` (a release string as engines/releases.py writes it), or None where it was not executed."""
    t = table()
    at = t["release_rows"].get(release.split("+")[0].partition("-")[0])
    if at is None:
        return None
    return TreeRules.of(t["rows"][at["row"]], release, at["sources"])


def covered() -> str:
    """The releases the table holds, first-last."""
    rs = list(table()["release_rows"])
    return f"{rs[0]}-{rs[-1]}"


def resolve_shape(rules: TreeRules, given: Shape, arch: str | None) -> Resolved:
    """The release's (steps, topk, draft tokens) for a launch that sets ``given`` (None: not set) on a target of
    architecture ``arch`` (None: unknown)."""
    steps, topk, ndt = given
    how = {k: "given" for k, v in zip(KEYS, given) if v is not None}
    if steps is None and rules.auto is not None:
        if rules.unset_error and (topk is not None or ndt is not None):
            return Resolved(given, how, error=rules.unset_error)
        if arch is None:
            return Resolved(given, how, needs_arch=True)
        picked = rules.auto_for(arch)
        if picked.startswith("!"):
            return Resolved(given, how, error=picked)
        (steps, topk, ndt), how = _shape(picked), dict.fromkeys(KEYS, "auto")
    else:
        filled = [v if v is not None else d for v, d in zip(given, rules.defaults)]
        how |= {k: "default" for k, v, d in zip(KEYS, given, rules.defaults) if v is None and d is not None}
        steps, topk, ndt = filled
    if rules.topk1_forces and topk == 1 and steps is not None and ndt != steps + 1:
        ndt, how["num_draft_tokens"] = steps + 1, "forced"
    return Resolved((steps, topk, ndt), how)


_FLAGS = {
    "num_steps": "--speculative-num-steps",
    "topk": "--speculative-eagle-topk",
    "num_draft_tokens": "--speculative-num-draft-tokens",
}


def fill_tree(sc: Any, arch: str | None, release: str) -> None:
    """Fill ``sc``'s (a ServeConfig's) steps/topk/draft tokens the launch left unset as SGLang ``release`` does, with
    each value's source and a note for what the release refuses or the table does not hold."""
    given: Shape = (sc.num_steps, sc.topk, sc.num_draft_tokens)
    rules = tree_rules(release)
    if rules is None:
        if None in given or given[1] == 1 and given[0] is not None and given[2] != given[0] + 1:
            sc.notes.append(
                f"defaults for SGLang {release} not extracted ({EXEC} covers {covered()}): steps/topk/draft tokens "
                "are taken as the command sets them, nothing filled in or adjusted"
            )
        return
    r = resolve_shape(rules, given, arch)
    src, at = rules.sources, f"SGLang {release}"
    if r.error is not None:
        where = src["raised"].get(r.error, "?")
        if r.error == "!AssertionError":
            sc.notes.append(
                f"{at} asserts that {_FLAGS['topk']} and {_FLAGS['num_draft_tokens']} are unset when "
                f"{_FLAGS['num_steps']} is ({where}): set all three"
            )
        else:
            sc.notes.append(f"{at} fails at start-up on this launch ({r.error[1:]}, {where}, executed): set all three of "
                            f"{', '.join(_FLAGS.values())}")  # fmt: skip
        return
    if r.needs_arch:
        sc.notes.append(
            f"{at} picks steps/topk/draft tokens from the target's architecture ({src['chooser']}); the target config "
            "was not readable here"
        )
        return
    _set(sc, rules, r, arch, given)


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
