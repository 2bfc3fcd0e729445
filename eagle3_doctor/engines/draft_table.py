"""What each SGLang and vLLM release's own EAGLE-3 draft model does with a draft config, as executed.

``data/draft_serving.json`` is written by ``make conformance`` (``conformance/draft_exec.py``): every
release's ``llama_eagle3.py`` is constructed on stubs from a recording config, once per placement of
each forward flag, and its decoder layers are run on symbols. This module answers from that table
only: which keys set a flag and in which order, its default, what a two-layer draft gets, which
flags vLLM's speculators translation passes on, and the first release where any of that changes.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

HARNESS = "conformance/draft_exec.py"


@functools.lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    return json.loads(resources.files("eagle3_doctor").joinpath("data/draft_serving.json").read_text())


def _release(version: str) -> str:
    return version.split("-")[0]  # vLLM's -v1/-v2 runner suffix names no other draft code


def behaviour(engine: str, version: str) -> tuple[dict[str, Any], str] | None:
    """(the executed behaviour, where it was executed: "sglang 0.5.17-0.5.23 <file>") or None when the
    table holds no row for the release (an engine it does not cover, a release not listed)."""
    t = table()
    idx = t["release_rows"].get(engine, {}).get(_release(version))
    if idx is None:
        return None
    row = t["rows"][idx]
    span = row["releases"][0] if len(row["releases"]) == 1 else f"{row['releases'][0]}-{row['releases'][-1]}"
    return row["behaviour"], f"{engine} {span} {t['files'][engine]}, executed ({HARNESS})"


@dataclass(frozen=True)
class ExecutedFlag:
    keys: tuple[str, ...]  # config keys that set the flag, first match wins; () = never read
    default: bool
    source: str
    first_reading: str | None  # the first later release that reads a key for it (for the fix), if any


def _model_rule(b: dict[str, Any], flag: str) -> tuple[tuple[str, ...], bool]:
    f = b["flags"][flag]
    if not f["applied"]:  # nothing in this release's model stands for the flag: never applied
        return (), False
    return tuple(f["keys"]), bool(f["default"])


def _speculators_rule(b: dict[str, Any], flag: str) -> tuple[tuple[str, ...], bool] | None:
    """A speculators config reaches the model through update_eagle3: a flag it does not pass is never read."""
    spec = b.get("speculators")
    if spec is None:
        return None
    keys, default = _model_rule(b, flag)
    s = spec[flag]
    if not s["passed"] or not keys:  # the model's own default then applies (False where it reads no key)
        return (), default
    return (flag,), bool(s["default"])


def flag_rule(engine: str, version: str, flag: str, fmt: str) -> ExecutedFlag | None:
    got = behaviour(engine, version)
    if got is None or "absent" in got[0]:
        return None
    b, where = got
    speculators = engine == "vllm" and fmt == "speculators"
    rule = _speculators_rule(b, flag) if speculators else _model_rule(b, flag)
    if rule is None:
        return None
    src = where + (f" with {table()['files']['vllm_speculators']} update_eagle3" if speculators else "")
    later = None
    if not rule[0]:
        later = first_release_where(
            engine,
            version,
            lambda x: bool((_speculators_rule(x, flag) or ((), False))[0] if speculators else _model_rule(x, flag)[0]),
        )
    return ExecutedFlag(rule[0], rule[1], src, later)


def first_release_where(engine: str, version: str, pred: Any) -> str | None:
    """The first release after ``version`` (in the table's release order) whose behaviour satisfies pred."""
    t = table()
    order = [v for r in t["rows"] if r["engine"] == engine for v in r["releases"]]
    rel = _release(version)
    if rel not in order:
        return None
    for v in order[order.index(rel) + 1 :]:
        b = t["rows"][t["release_rows"][engine][v]]["behaviour"]
        if "absent" not in b and pred(b):
            return v
    return None


def first_serving(engine: str, later_norm: str) -> str | None:
    """The first release of ``engine`` that builds every layer of a two-layer draft and applies
    ``later_norm`` before a later layer's attention."""
    t = table()
    for row in t["rows"]:
        lay = row["behaviour"].get("layers", {})
        if row["engine"] == engine and lay.get("two_layers") == "built":
            if lay.get("later", {}).get("norm_before_attention") == later_norm:
                return row["releases"][0]
    return None


def serving_elsewhere(engine: str, later_norm: str) -> str | None:
    """'vLLM >= 0.11.1': the first release of another engine that serves a multi-layer draft whose later
    layers hold ``later_norm``, for the fix's alternative."""
    names = {"sglang": "SGLang", "vllm": "vLLM"}
    for other in names:
        if other != engine and (v := first_serving(other, later_norm)) is not None:
            return f"{names[other]} >= {v}"
    return None


@dataclass(frozen=True)
class ExecutedLayers:
    two_layers: str  # "built", "built 1" (later layers dropped), or the error the constructor raised
    later_norm: str | None  # the norm a later layer applies before its attention
    source: str
    first_serving: str | None  # the first later release that builds every layer


def layers_rule(engine: str, version: str) -> ExecutedLayers | None:
    got = behaviour(engine, version)
    if got is None or "absent" in got[0]:
        return None
    b, where = got
    lay = b["layers"]
    later = lay.get("later", {}).get("norm_before_attention")
    first = None
    if lay["two_layers"] != "built":
        first = first_release_where(engine, version, lambda x: x["layers"]["two_layers"] == "built")
    return ExecutedLayers(lay["two_layers"], later, where, first)


@dataclass(frozen=True)
class ExecutedWindow:
    """What a release's draft does with a declared sliding-window layer (executed on its own llama.py base layer)."""

    config: bool | str  # the config's window reaches the attention (True), is dropped (False), or the error raised
    server: bool  # a server argument sets the draft's window (SGLang --speculative-draft-window-size)
    keys: tuple[str, ...]  # the window keys the release read from the config
    source: str
    first_config: str | None  # the first later release that applies the config's window
    first_server: str | None  # the first release (this one or later) whose server argument sets it


def window_rule(engine: str, version: str) -> ExecutedWindow | None:
    got = behaviour(engine, version)
    if got is None or "window" not in got[0]:
        return None
    b, where = got
    w = b["window"]
    first_config = (
        None if w["config"] is True else first_release_where(engine, version, lambda x: x.get("window", {}).get("config") is True)
    )
    first_server = (
        version if w["server"] else first_release_where(engine, version, lambda x: x.get("window", {}).get("server") is True)
    )
    src = f"{where}, built on the release's own llama.py LlamaDecoderLayer/LlamaAttention"
    return ExecutedWindow(w["config"], bool(w["server"]), tuple(w["keys"]), src, first_config, first_server)


@dataclass(frozen=True)
class ExecutedAux:
    """How many aux hidden states a release's draft concatenates into fc (executed: fc's input width)."""

    keys: tuple[str, ...]  # config keys that set the count, first present wins; () = hard-wired to ``default``
    default: int  # the count with none of them present
    source: str
    first_reading: str | None  # the first later release that reads a key for it, where this one reads none

    def served(self, config: dict[str, Any]) -> tuple[int, str | None]:
        """(the count this release builds for a draft config, the key it took it from; None: the default)."""
        for key in self.keys:
            value = _dotted(config, key)
            if key == "num_aux_hidden_states" and isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value, key
            if key != "num_aux_hidden_states" and isinstance(value, list) and value:
                return len(value), key
        return self.default, None


def _dotted(config: dict[str, Any], key: str) -> Any:
    cur: Any = config
    for part in key.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return cur


def aux_rule(engine: str, version: str) -> ExecutedAux | None:
    got = behaviour(engine, version)
    if got is None or "aux" not in got[0]:
        return None
    b, where = got
    keys = tuple(b["aux"]["keys"])
    later = None if keys else first_release_where(engine, version, lambda x: bool(x.get("aux", {}).get("keys")))
    return ExecutedAux(keys, int(b["aux"]["default"]), f"{where}, fc's input width", later)


def speculators_model_config(engine: str, version: str, config: dict[str, Any]) -> dict[str, Any] | None:
    """The model config a vLLM release builds the draft from for a speculators checkpoint: its
    transformer_layer_config plus the top-level aux-count keys update_eagle3 passes on (executed); None where the
    release has no speculators path."""
    passed = speculators_aux_passed(engine, version)
    if passed is None:
        return None
    inner = config.get("transformer_layer_config")
    out = dict(inner) if isinstance(inner, dict) else {}
    out.update({k: config[k] for k in passed if k in config})
    return out


def speculators_steps_key(engine: str, version: str) -> str | None:
    """The speculative-config key a release fills with a speculators checkpoint's speculative_tokens when it serves
    the checkpoint on its own (executed: base.py's builder), or None where it has none."""
    got = behaviour(engine, version)
    spec = None if got is None else got[0].get("speculators")
    return None if spec is None else spec.get("steps")


def speculators_aux_passed(engine: str, version: str) -> tuple[str, ...] | None:
    """The top-level keys stating the aux count that update_eagle3 passes on (None: no speculators path)."""
    got = behaviour(engine, version)
    spec = None if got is None else got[0].get("speculators")
    return None if spec is None or "aux_passed" not in spec else tuple(spec["aux_passed"])


def _flag_cell(b: dict[str, Any], flag: str, speculators: bool) -> str:
    rule = _speculators_rule(b, flag) if speculators else _model_rule(b, flag)
    if rule is None:
        return "no speculators path"
    keys, default = rule
    return (
        (" > ".join(f"`{k}`" for k in keys) + f" (default {str(default).lower()})") if keys else f"never ({str(default).lower()})"
    )


def _aux_cell(b: dict[str, Any], speculators: bool) -> str:
    aux = b.get("aux")
    if aux is None:
        return ""
    keys = aux["keys"]
    if speculators:  # only what update_eagle3 passes on from the top level reaches the model
        passed = (b.get("speculators") or {}).get("aux_passed", [])
        keys = [k for k in keys if k in passed]
        if not keys and aux["keys"]:
            return f"transformer_layer_config only ({aux['default']})"
    return (" > ".join(f"`{k}`" for k in keys) + f" (default {aux['default']})") if keys else f"always {aux['default']}"


def markdown() -> str:
    """The executed rows as a Markdown table (docs/draft-forward.md embeds it between markers)."""
    head = (
        "| engine | releases | format | norm_before_residual | norm_before_fc | fc_norm | norm_output | 2 layers | later layers' norm "
        "| aux states |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n"
    )
    # (engine, format, cells) per row; adjacent rows the columns cannot tell apart merge into one span
    spans: list[list[Any]] = []
    for row in table()["rows"]:
        b, rel = row["behaviour"], row["releases"]
        for fmt in ["other", "speculators"] if row["engine"] == "vllm" and "absent" not in b else ["any"]:
            if "absent" in b:
                cells = ["no EAGLE-3 draft model", "", "", "", "", "", ""]
            else:
                lay = b["layers"]
                cells = [
                    _flag_cell(b, f, fmt == "speculators")
                    for f in ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output")
                ]
                cells += [lay["two_layers"], lay.get("later", {}).get("norm_before_attention") or ""]
                cells.append(_aux_cell(b, fmt == "speculators"))
            same = next((sp for sp in reversed(spans) if sp[0] == row["engine"] and sp[1] == fmt), None)
            if same is not None and same[2] == cells:
                same[4] = rel[-1]
            else:
                spans.append([row["engine"], fmt, cells, rel[0], rel[-1]])
    lines = [f"| {e} | {a if a == z else f'{a}-{z}'} | {fmt} | " + " | ".join(cells) + " |" for e, fmt, cells, a, z in spans]
    return head + "\n".join(lines) + "\n"
