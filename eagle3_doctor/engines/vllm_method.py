"""The speculative method a vLLM release runs a launch's draft under, as its own code settles it.

``SpeculativeConfig.__post_init__`` rewrites the name as typed (unset becomes ``draft_model`` from 0.20.0; deprecated
``*_mtp`` names become ``mtp``), then keeps it or detects one: from the draft's path ("eagle-" in it before "eagle3",
"dflash"), its config's ``model_type`` or ``architectures``; otherwise it falls back to ``draft_model`` or raises.
``conformance/method_exec.py`` reads each release's chain into data, executes the release's own statements over a
grid of launches, checks that ``resolve_rules`` gives the same method case by case, and writes
``data/vllm_method_detect.json``, which this module applies.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ..io.hub import config_if_local
from .launch_config import VLLM_METHOD, ServeConfig

TABLE = Path(__file__).resolve().parent.parent / "data" / "vllm_method_detect.json"
EXEC = "conformance/method_exec.py"


@functools.lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    return json.loads(TABLE.read_text())


@dataclass(frozen=True)
class Method:
    """What the release settles: the method (None where it raises), the raise as written, and the reason."""

    method: Optional[str]
    raises: Optional[str] = None
    why: str = ""  # "as typed", "'eagle-' in the draft path", ...
    source: str = ""  # "vllm 0.33.0 vllm/config/speculative.py:1433" (the chain), empty from resolve_rules alone
    # a test of the draft config's model_type or architectures came before the branch that held: unread, it could
    # have held
    after_config: bool = False


def _holds(when: dict[str, Any], method: Optional[str], path: str, model_type: Optional[str], archs: list[str]) -> bool:
    if "any" in when:
        return any(_holds(w, method, path, model_type, archs) for w in when["any"])
    if "all" in when:
        return all(_holds(w, method, path, model_type, archs) for w in when["all"])
    if "typed" in when:
        return method in when["typed"]
    if "path_has" in when:
        return when["path_has"] in path.lower()
    if "model_type" in when:
        return model_type in when["model_type"]
    if "model_type_within" in when:  # ``model_type in ("x")``: a substring test on the string
        return model_type is not None and model_type in when["model_type_within"]
    if "arch" in when:
        return when["arch"] in archs
    return bool(when.get("else"))  # "never" (a flag the launch cannot set here) and "unread" do not hold


def _why(
    when: dict[str, Any], typed: Optional[str], method: Optional[str], path: str, model_type: Optional[str], archs: list[str]
) -> str:
    """Why the branch holds, in a user's words (of an any/all: the first part that holds)."""
    if "typed" in when:
        return "as typed" if typed is not None else f"no method typed: {method}, the release's default"
    if "path_has" in when:
        return f"{when['path_has']!r} in the draft path"
    if "model_type" in when or "model_type_within" in when:
        return f"the draft config's model_type {model_type}"
    if "arch" in when:
        return f"{when['arch']} among the draft config's architectures"
    if "else" in when:
        return "no method typed and none detected" if typed is None else f"{typed!r} is no name it acts on, none detected"
    parts = [w for w in when.get("any", when.get("all", [])) if _holds(w, method, path, model_type, archs)]
    return " and ".join(_why(w, typed, method, path, model_type, archs) for w in parts)


def resolve_rules(rule: dict[str, Any], typed: Optional[str], path: str, model_type: Optional[str], archs: list[str]) -> Method:
    """``rule`` (a table row's: the rewrites by typed name, the chain's branches) applied to a launch."""
    method = rule["rewrites"].get(str(typed), typed)
    config = False
    for b in rule["branches"]:
        when = b["when"]
        if not _holds(when, method, path, model_type, archs):
            config |= _reads_config(when)
            continue
        why = _why(when, typed, method, path, model_type, archs)
        if "raises" in b:
            return Method(None, b["raises"], why, after_config=config)
        return Method(b["method"] if "method" in b else method, None, why, after_config=config)
    return Method(method, None, "as typed", after_config=config)


def _reads_config(when: dict[str, Any]) -> bool:
    if "any" in when or "all" in when:
        return any(_reads_config(w) for w in when.get("any", when.get("all", [])))
    return any(k in when for k in ("model_type", "model_type_within", "arch"))


def _row(release: str) -> Optional[dict[str, Any]]:
    t = table()
    order = {r: i for i, r in enumerate(t["releases"])}
    if release not in order:
        return None
    for row in t["rows"]:
        a, _, b = row["releases"].partition("..")
        if order[a] <= order[release] <= order[b or a]:
            return row
    return None


def served_method(release: str, typed: Optional[str], path: str, model_type: Optional[str], archs: list[str]) -> Optional[Method]:
    """The method ``release`` (a release of conformance/releases.py, as flag_releases.listed_release names it) runs a
    draft at ``path`` under; None where the table holds no row for it."""
    row = _row(release)
    if row is None:
        return None
    m = resolve_rules(row["rule"], typed, path, model_type, archs)
    return Method(m.method, m.raises, m.why, row["source"], m.after_config)


def fields(cfg: Optional[dict[str, Any]]) -> tuple[Optional[str], list[str]]:
    """(model_type, architectures) of a draft's config.json (io.hub.config_if_local), as the detection chain reads
    them; (None, []) where there is none."""
    if cfg is None:
        return None, []
    archs, mt = cfg.get("architectures"), cfg.get("model_type")
    return (mt if isinstance(mt, str) else None), [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []


def settle(sc: ServeConfig, release: str) -> None:
    """The launch's method as ``release`` settles it, into ``sc.algorithm`` (its reason in ``sc.sources``), and the
    whole answer in ``sc.method_settled``: where the typed name is unset or one the release acts on. A name a
    validating release refuses (CMD006) is left as typed: that server never starts."""
    from .flag_releases import listed_release, refused_values

    if sc.engine != "vllm" or not sc.draft or (listed := listed_release("vllm", release)) is None:
        return
    typed = sc.flag_values.get(VLLM_METHOD)
    if typed is None and sc.algorithm is not None:  # a method not typed as a string: the speculators reader's
        return
    if typed is not None and typed.lower().endswith("mtp") and sc.draft == sc.target:
        # the target's own MTP layers: vLLM's draft config is the target's rewritten by hf_config_override into its
        # family's MTP model_type, not the config.json read here; whether the family has one is MTP003's to say
        return
    refused = refused_values("vllm", listed, {VLLM_METHOD: typed}) if typed is not None else []
    if refused and refused[0].refused:
        return
    cfg = config_if_local(sc.draft)
    model_type, archs = fields(cfg)
    m = served_method(listed, typed, sc.draft, model_type, archs)
    if m is None:
        return
    sc.method_settled = m
    if m.method is not None:
        sc.algorithm = m.method
    if m.method != typed or m.raises:
        unread = (
            ""
            if cfg is not None or not m.after_config
            else "; the draft's config.json was not read here: its model_type and architectures tests taken as failing"
        )
        got = m.method if m.method is not None else f"none, it raises {m.raises}"
        sc.sources["algorithm"] = f"{m.source}: {m.why}" + ("" if got in m.why else f": {got}") + unread
