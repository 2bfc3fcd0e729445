"""From a command's options to what its run uses: the launch command merged in, the models resolved
(hub ids become snapshots), every option checked before anything heavy, the target and draft loaded.

``a``, in every function here, is a command's options by name (``SimpleNamespace(**given)``).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from types import SimpleNamespace
from typing import Any, Optional

from ..core.errors import BadInput
from ..core.findings import locate
from .options import SAMPLING, defaults, missing_option
from .output import status


@dataclasses.dataclass
class Resolved:
    target: str
    draft: Optional[str]
    engine: str
    engine_version: Optional[str]
    dtype: str
    serve: Any = None
    paths: dict[str, str] = dataclasses.field(default_factory=dict)  # finding roles -> the files this run used
    findings: list[Any] = dataclasses.field(default_factory=list)  # what the launch command alone shows

    def locate(self, findings: list[Any]) -> None:
        """The launch command's findings first in a command's list (they are read before anything is
        measured), and every finding pointed at the file this run used."""
        findings[:0] = [f for f in self.findings if f not in findings]
        locate(findings, self.paths)


def resolve_serve(a: SimpleNamespace, need_draft: bool = False) -> Resolved:
    """Merge --serve-cmd/--serve-config with explicit options (explicit wins) and say what was derived.

    ``a``: the command's options by name, as given; absent ones count as not given."""
    from ..engines.launch import load

    target, draft, engine, engine_version = a.target, getattr(a, "draft", None), a.engine, a.engine_version
    revision, draft_revision, dtype = (
        getattr(a, "revision", None),
        getattr(a, "draft_revision", None),
        getattr(a, "dtype", "auto"),
    )
    sc = load(getattr(a, "serve_cmd", None), getattr(a, "serve_config", None))
    if sc is not None and not target:
        _speculators_from_hub(sc)
    from ..io.overlap import check_outputs_apart

    # the models the launch command names are inputs too: refused before the summary line is printed
    check_outputs_apart({**vars(a), "target": target or (sc and sc.target), "draft": draft or (sc and sc.draft)})
    if sc is not None:
        from .validate import preflight_named_models

        preflight_named_models(None if target else sc.target, None if draft else sc.draft)
        msg = f"serving config: {sc.summary()}"
        if sc.unknown_flags:
            msg += f"\n  unknown flags (not in {sc.engine} {sc.engine_version}'s argument table): {', '.join(sc.unknown_flags)}"
        for n in sc.notes:
            msg += f"\n  note: {n}"
        print(msg, file=sys.stderr, flush=True)
    target = target or (sc.target if sc else None)
    if not target:
        missing_option("--target", "the model")
    draft = draft or (sc.draft if sc else None)
    if need_draft and not draft:
        missing_option("--draft", "the draft path")
    eng = (engine or (sc.engine if sc else None) or "sglang").lower()
    ver = engine_version or (sc.engine_version if sc and sc.engine == eng else None)
    if dtype == "auto" and sc is not None and sc.dtype not in (None, "auto"):
        dtype = {"half": "float16", "bf16": "bfloat16", "fp16": "float16", "float": "float32"}.get(sc.dtype, sc.dtype)
    from ..engines.releases import check_engine
    from ..io.hub import role_paths

    # the engine and release as resolved (from --serve-cmd, or the sglang default), refused before any download or load
    check_engine(eng, ver)

    # hub ids (with a revision) become local snapshots here; local-looking paths never reach the hub
    if revision is None and sc is not None and target == sc.target:
        revision = sc.target_revision
    if draft_revision is None and sc is not None and draft == sc.draft:
        draft_revision = sc.draft_revision
    target_dir, draft_dir = resolve_models(target, draft, getattr(a, "draft_format", None), revision, draft_revision)
    assert target_dir is not None  # target is given: missing_option raised above otherwise
    paths = role_paths(target, draft, target_dir=target_dir, draft_dir=draft_dir, serve_config=getattr(a, "serve_config", None))
    if (target_dir, draft_dir) != (target, draft):  # hub snapshots: outputs kept out of them too
        check_outputs_apart({**vars(a), "target": target_dir, "draft": draft_dir})
    from ..engines.launch import launch_findings

    return Resolved(target_dir, draft_dir, eng, ver, dtype, sc, paths, launch_findings(sc) if sc else [])


def _speculators_from_hub(sc: Any) -> None:
    """``vllm serve org/speculators-draft``: the checkpoint's config.json (cached or downloaded) says which
    verifier vLLM loads as the target; a local checkpoint was read when the command was parsed."""
    from ..io.hub import resolve
    from .validate import is_hub_id

    if sc.engine != "vllm" or sc.draft is not None or not sc.target or not is_hub_id(sc.target):
        return
    from ..engines.launch import local_config, speculators_verifier

    speculators_verifier(sc, local_config(resolve(sc.target, sc.target_revision, "target")))
    if sc.draft is not None:
        sc.draft_revision, sc.target_revision = sc.target_revision, None


def resolve_models(
    target: Optional[str],
    draft: Optional[str],
    draft_format: Optional[str] = None,
    revision: Optional[str] = None,
    draft_revision: Optional[str] = None,
) -> tuple[Optional[str], Optional[str]]:
    """Local directories for --target and --draft: hub ids become cached (or downloaded) snapshots,
    checked as a local directory is; local-looking paths never reach the hub."""
    from ..io.hub import resolve
    from .validate import check_resolved

    target_dir = resolve(target, revision, "target") if target else None
    draft_dir = resolve(draft, draft_revision, "draft") if draft else None
    check_resolved(target, target_dir, "target")
    check_resolved(draft, draft_dir, "draft", draft_format)
    return target_dir, draft_dir


def load_models(a: SimpleNamespace, r: Resolved, *, parallel_ok: bool = False) -> Any:
    """Target and draft loaded as ``r`` resolved them, with the command's loading options ``a``; ``parallel_ok``: a
    P-EAGLE draft is read as the EAGLE-3 draft it extends (compare-hidden: its taps are EAGLE-3's)."""
    from ..draft.drafter import refuse_other_drafters

    g = functools.partial(getattr, a)
    refuse_other_drafters(r.draft, ("peagle",) if parallel_ok else ())
    stream, note = _stream_layers(a, r)
    with status(f"loading target {r.target}" + (f" and draft {r.draft}" if r.draft else "") + " ...", g("quiet", False)):
        from ..doctor import load_setup
        from .validate import parse_layer_ids

        setup = load_setup(
            target=r.target,
            draft=r.draft,
            draft_format=g("draft_format", None),
            engine=r.engine,
            engine_version=r.engine_version,
            layer_ids=parse_layer_ids(g("layer_ids", None)),
            train_recipe=g("train_recipe", None),
            dtype=r.dtype,
            device=a.device,
            trust_remote_code=a.trust_remote_code,
            device_map=_device_map(g("device_map", None)),
            max_memory=_max_memory(g("max_memory", None)),
            stream_layers=stream,
        )
    if note:
        setup.notes.append(note)
    return setup


def _stream_layers(a: SimpleNamespace, r: Resolved) -> tuple[bool, Optional[str]]:
    """--stream-layers as given; not given, on when the target would not fit the device and the command
    replays given sequences only (no greedy continuation, no reference loop, no --device-map)."""
    asked = getattr(a, "stream_layers", False)
    if asked is not None:
        return bool(asked), None
    generates = getattr(a, "continuation", "text") == "greedy" and not getattr(a, "train_dump", None)
    if generates or getattr(a, "reference_loop", False) or getattr(a, "device_map", None) is not None:
        return False, None
    from ..model.stream import should_stream

    return should_stream(r.target, r.dtype, a.device)


# checked where they are resolved (``resolve_serve``, compare-hidden's ``_dump_training_spec``, the gate's merged policy in
# ``check_policy_values``), once, on the value the run uses, and still before any load: not in the preflight
RESOLVED_LATER = ("engine", "engine_version")


def preflight_given(a: SimpleNamespace, skip: tuple[str, ...] = ()) -> None:
    """Every option a command was given (``a``: its options by name), checked before torch is imported
    or a model is loaded.

    Commands that resolve the engine through ``resolve_serve`` skip --engine/--engine-version
    (``RESOLVED_LATER``): the engine is checked once, on the value the run uses (--serve-cmd merged),
    still before any download or load."""
    from .validate import preflight

    preflight(**{k: v for k, v in vars(a).items() if k not in skip})


def batch_size_for(text: str, setup: Any, max_tokens: int) -> int:
    if text == "auto" and getattr(setup.target, "streamer", None) is not None:
        # a pass reads every weight: each replay takes as many sequences per pass as memory allows for its own
        # lengths (replay_batch_size); this figure is only the bound for the longest input
        setup.target.auto_groups = True
        from ..model.stream import group_size

        return group_size(setup.target, max_tokens)
    if text == "auto":
        from ..model.runtime import auto_batch_size

        return auto_batch_size(setup.target, max_tokens)
    from .validate import check_arguments

    check_arguments(batch_size=text)
    return int(text)


def _max_memory(text: Optional[str]):
    if text is None:
        return None
    from .validate import parse_max_memory

    return parse_max_memory(text)


def _device_map(text: Optional[str]):
    if text is None:
        return None
    if text.strip().startswith("{"):
        import json

        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise BadInput(f"--device-map is not valid JSON ({e.msg})", 'write e.g. {"model.layers.0": 0, ...} or auto') from None
    return text


def acceptance_options(a: SimpleNamespace, r: Resolved, setup: Any) -> Any:
    """How to measure: explicit options first, then the launch command's speculative settings. The
    acceptance options a command does not offer (diagnose and fix take no --temperature, --topk, --scan,
    ...) are at their defaults."""
    from ..doctor import AcceptanceOptions, options_from_serve

    a = SimpleNamespace(**{**defaults(SAMPLING), **vars(a)})

    num_steps, topk, num_draft_tokens = options_from_serve(r.serve, a.num_steps, a.topk, a.num_draft_tokens)
    return AcceptanceOptions(
        num_steps=num_steps,
        continuation=a.continuation,
        max_new_tokens=a.max_new_tokens,
        max_tokens=a.max_tokens,
        batch_size=batch_size_for(a.batch_size, setup, a.max_tokens + a.max_new_tokens),
        temperature=a.temperature,
        temp_mode=a.temperature_mode,
        topk=topk,
        num_draft_tokens=num_draft_tokens,
        reference=a.reference_loop,
        scan=a.scan,
        limit=a.limit,
        token_tree=r.serve.token_tree if r.serve is not None else None,
    )
