"""The config edit that makes an engine feed what the draft was trained on: the layer ids to write, and
where the engine reads them."""

from __future__ import annotations

from ...core.findings import DRAFT_CONFIG, Fix, Location
from ...core.taps import FeatureSpec, format_spec
from ...engines.capture import default_spec_llama
from ...engines.fixes import fix_snippet, ids_to_serve, upgrade_fix
from ...engines.serving import Serving


def fix_for(serving: Serving, train: FeatureSpec) -> tuple[str, list[int] | None]:
    """The config change that makes ``serving`` feed ``train`` (text, ids), or ('', None)."""
    ids = ids_to_serve(serving.engine, serving.version, serving.family, serving.num_layers, train)
    up = upgrade_fix(serving, train)  # the same config on a later release of the user's engine
    if ids is None:
        return up, None
    text = f"set {fix_snippet(serving.engine, serving.version, ids)}"
    if tuple(train) == default_spec_llama(serving.num_layers) and serving.engine in ("sglang", "vllm", "modelopt", "trtllm"):
        text += f"; or remove the ids so {serving.engine} uses its default, which is what was trained"
    if up:
        text += f"; or {up}"
    where = ids_location(serving)
    if where is None:
        return text, ids
    from ...engines.keys import key_rule
    from ...engines.releases import check_engine

    snippet = key_rule(serving.engine, check_engine(serving.engine, serving.version)).snippet(ids)
    return Fix(text, file=where.file, key=where.key, value=ids, snippet=snippet), ids


def ids_location(serving: Serving) -> Location | None:
    """The file and key the engine reads layer ids from (where a fix to them goes), or None: nowhere."""
    from ...engines.keys import key_rule
    from ...engines.releases import check_engine

    kr = key_rule(serving.engine, check_engine(serving.engine, serving.version))
    if not kr.keys:
        return None
    if serving.engine == "trtllm":  # the LLM API options file, not the checkpoint
        return Location("extra_llm_api_options.yaml", f"speculative_config.{kr.keys[0]}")
    if serving.engine == "declared" and kr.keys[0] == "capture.layer_ids":  # the description, not the checkpoint
        return Location(serving.version, kr.keys[0])
    return Location(DRAFT_CONFIG, kr.keys[0])


def _served_count_fix(serving: Serving, n_fc: int) -> tuple[str, list[int] | None]:
    """The ids that feed the points the written ids name (what a trainer reading them at face value fed),
    else ids that each capture a state, else another engine that captures them."""
    from ...engines.fixes import ids_to_serve
    from ...engines.keys import key_rule
    from ...engines.releases import check_engine
    from ...engines.serving import as_written

    L = serving.num_layers
    written = as_written(serving.engine, serving.ids, L) if serving.ids else None
    if written is not None and len(written) == n_fc:
        text, ids = fix_for(serving, written)
        more = f" (the {n_fc} capture points the written ids name: {format_spec(written)})"
        if isinstance(text, Fix):
            return Fix(text + more, file=text.file, key=text.key, value=text.value, snippet=text.snippet), ids
        if text:
            return text + more, ids
        others = []
        for eng in ("vllm", "trtllm"):
            if eng != serving.engine:
                alt = ids_to_serve(eng, None, serving.family, L, written)
                if alt is not None:
                    others.append(f"{eng} {check_engine(eng, None)} with ids {alt}")
        return (
            f"no {serving.label} id list feeds {format_spec(written)} (what the written ids name): retrain on ids "
            f"{serving.engine} captures ({_span(serving)} here)" + (f", or serve with {' or '.join(others)}" if others else ""),
            None,
        )
    span = _span(serving)
    where = ids_location(serving)
    kr = key_rule(serving.engine, serving.version)
    if serving.ids == [] and where is not None:
        dflt = resolve_default(serving)
        return Fix(
            f"delete the empty {where.key} so {serving.engine} captures its default ({dflt}), if that is what the draft "
            f"was trained on; otherwise write the {n_fc} ids it was trained on ({serving.engine} ids that capture a "
            f"state here: {span})",
            file=where.file,
            key=where.key,
            op="delete",
        ), None
    return f"write {n_fc} distinct ids that each capture a state ({serving.engine} ids {span} here) in {kr.where}", None


def _span(serving: Serving) -> str:
    """The ids that capture a state on this release, as a range when they are one."""
    from ...engines.serving import capturing_ids

    ok = capturing_ids(serving.engine, serving.version, serving.family, serving.num_layers)
    if not ok:
        return "none"
    return f"{ok[0]}..{ok[-1]}" if ok == list(range(ok[0], ok[-1] + 1)) else ", ".join(map(str, ok))


def resolve_default(serving: Serving) -> str:
    """What the engine release captures with no ids configured, as text."""
    from ...engines.capture import RULES

    return format_spec(RULES[serving.engine](serving.version, serving.family, serving.num_layers, None).spec)
