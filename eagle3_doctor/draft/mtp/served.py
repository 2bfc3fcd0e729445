"""How each engine release serves an MTP head: which target state step 1 receives, what steps 2..K receive,
and whether the engine loads the checkpoint's layout at all.

Answered from ``draft/mtp/serving.json`` only, written by ``make conformance`` (``conformance/mtp_exec.py``):
every sglang and vllm release's own MTP model code (DeepSeek-V3 ``deepseek_mtp.py`` / ``deepseek_nextn.py``,
GLM-4-MoE, Qwen3-Next, Qwen3.5) executed on symbols, per family:

- recycled between steps (executed): the model's return as the release's proposer splits it (vLLM), or the
  state SGLang's logits processor stores for the next step - the layer output before any norm (``pre_norm``)
  or a norm of it (``post_norm``: ``shared_head.norm``, or the MTP model's ``norm`` for Qwen3-Next/Qwen3.5);
- step 1 (a checked source pattern, not executed, file:line in the source): the target's inner model forward
  ends in its final norm, and that output is what the engine hands the head;
- a speculators-format head (``MTPDraftModel``): vLLM's own speculators reader executed on such a config
  (it registers no ``mtp`` algorithm and refuses it: :attr:`MTPServing.refusal`, the engine's own words);
  SGLang has no speculators reader and no ``MTPDraftModel`` class (pattern). A refused layout is measured
  as the engine serves the layout it does load, the head inside the target, and said so.

A release the table does not list takes the row of the release that covers it (engines.releases).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from ...core.taps import CapturePoint, final_norm

HARNESS = "conformance/mtp_exec.py"
FAMILIES = ("deepseek_v3", "glm4_moe", "qwen3_next", "qwen3_5")
_FAMILY_OF = {"deepseek_v2": "deepseek_v3", "deepseek_v3": "deepseek_v3", "glm4_moe": "glm4_moe", "qwen3_next": "qwen3_next"}


@dataclass(frozen=True)
class MTPServing:
    engine: str
    hidden: CapturePoint  # what step 1 receives
    hidden_source: str
    recycle: str | None  # "pre_norm" | "post_norm" | None (undetermined)
    recycle_source: str
    release: str | None = None
    family: str | None = None
    refusal: str | None = None  # the engine's own refusal of the checkpoint's layout, with where it is raised
    served_targets: tuple[str, ...] = field(default=())  # target model types the engine serves an MTP head inside
    served_targets_source: str = ""


@functools.lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    return json.loads(resources.files("eagle3_doctor").joinpath("draft/mtp/serving.json").read_text())


def mtp_family(model_type: str | None) -> str:
    """The MTP family a target's model_type is served as; DeepSeek-V3's (the layout's namesake) otherwise."""
    mt = model_type or ""
    return "qwen3_5" if mt.startswith("qwen3_5") else _FAMILY_OF.get(mt, "deepseek_v3")


def table_release(engine: str, version: str | None) -> str:
    """The table's release for a version: itself when listed, else the listed release that covers it (the
    newest for None or a newer one)."""
    from ...engines.releases import release_key

    listed = table()["releases"][engine]
    if version is None:
        return listed[-1]
    k = release_key(version)
    older = [v for v in listed if release_key(v) <= k]
    return older[-1] if older else listed[0]


def row(engine: str, version: str | None, family: str) -> tuple[dict[str, Any], str]:
    """(the executed row, the release it was looked up for)."""
    t = table()
    rel = table_release(engine, version)
    rid = t["release_rows"][engine][rel][family]
    return next(r for r in t["rows"] if r["id"] == rid), rel


def span(r: dict[str, Any]) -> str:
    rel = r["releases"]
    return rel[0] if len(rel) == 1 else f"{rel[0]}-{rel[-1]}"


def _sources(engine: str, r: dict[str, Any]) -> tuple[str, str, str | None]:
    b = r["behaviour"]
    s1 = b["step1"]
    hidden = f"{engine} {span(r)} {s1['at']} ({s1['how']})" + (f"; runner {s1['runner']}" if s1.get("runner") else "")
    rec = b["recycle"]
    what = "the layer output before any norm" if rec == "pre_norm" else f"{' then '.join(b['recycle_norms'])} of the layer output"
    via = f", split by {b['split']['at']}" if b.get("split") else f", stored by {b['stored']}" if b.get("stored") else ""
    recycle = f"{engine} {span(r)} {', '.join(b['executed'])}{via}, executed ({HARNESS}): the next step reads {what}"
    return hidden, recycle, rec


def refusal(engine: str, rel: str) -> tuple[str | None, tuple[str, ...], str]:
    """The engine's own refusal of a speculators MTP head in that release (None: it reads the layout), the target
    model types it serves an MTP head inside, and where that list is read."""
    sp = table()["speculators"][engine][rel]
    tg = sp.get("mtp_targets") or {}
    targets, where = tuple(tg.get("model_types", ())), str(tg.get("at", ""))
    if engine == "sglang":
        return f"sglang {rel}: {sp['outcome'].lstrip('!')}", targets, where
    for step in ("from_pretrained", "extract_vllm_speculative_config", "extract_transformers_pre_trained_config"):
        got = sp.get(step)
        if isinstance(got, str) and got.startswith("!"):
            how = f"executed ({HARNESS}); the reader is called from {sp.get('called_from')}"
            return f"vllm {rel} {sp['reader']} {step} raises {got.lstrip('!')} [{how}]", targets, where
    outcome = sp.get("outcome")
    return (f"vllm {rel}: {outcome.lstrip('!')}" if isinstance(outcome, str) else None), targets, where


def mtp_serving(engine: str, fmt: str, version: str | None = None, family: str = "deepseek_v3") -> MTPServing:
    """The served side for an engine release, checkpoint layout and MTP family, from the executed table."""
    if engine not in ("vllm", "sglang"):
        return MTPServing(engine, final_norm(), f"{engine}: not read", None, f"{engine}: not read")
    r, rel = row(engine, version, family)
    if "absent" in r["behaviour"]:  # the release has no MTP model of this family: DeepSeek-V3's is the layout's
        r, rel = row(engine, version, "deepseek_v3")
        family = "deepseek_v3"
    if "absent" in r["behaviour"]:
        why = f"{engine} {rel} has no MTP model ({r['behaviour']['absent']})"
        return MTPServing(engine, final_norm(), why, None, why, rel, family, refusal=why)
    hidden, recycle_src, rec = _sources(engine, r)
    refused, targets, where = refusal(engine, rel)
    if fmt != "speculators":
        return MTPServing(engine, final_norm(), hidden, rec, recycle_src, rel, family, None, targets, where)
    if refused is None:
        why = f"{engine} {rel} reads the speculators layout, but the class that serves it was not executed"
        return MTPServing(engine, final_norm(), hidden, None, why, rel, family)
    note = f"as {engine} serves the layout it does load, the head inside the target ({family} MTP model): "
    return MTPServing(engine, final_norm(), note + hidden, rec, note + recycle_src, rel, family, refused, targets, where)


def first_release_recycling(engine: str, fmt: str, family: str, after: str | None, recycle: str) -> str | None:
    """The first executed release of ``engine`` after ``after`` whose MTP model of ``family`` recycles ``recycle``
    between steps (in the layout it loads), or None where none does."""
    from ...engines.releases import release_key

    if engine not in ("vllm", "sglang") or after is None:
        return None
    k = release_key(after)
    for v in table()["releases"][engine]:
        if release_key(v) > k and mtp_serving(engine, fmt, v, family).recycle == recycle:
            return v
    return None
