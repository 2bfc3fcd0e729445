"""From a command's options to what its run uses: the launch command merged in, the models resolved
(hub ids become snapshots), every option checked before anything heavy, the target and draft loaded.

``a``, in every function here, is a command's options by name (``SimpleNamespace(**given)``).
"""

from __future__ import annotations

import functools
import sys
from types import SimpleNamespace
from typing import Any, Optional

from ..core.errors import BadInput
from ..drafters.run import Run
from .options import SAMPLING, defaults
from .output import progress, status
from .usage import missing_option


def resolve_serve(a: SimpleNamespace, need_draft: bool = False, need_target: bool = True) -> Run:
    """Merge --serve-cmd/--serve-config with explicit options (explicit wins), say what was derived, and hand
    the run its options parsed (``a``: the command's options by name, as given; absent ones count as not
    given; the sampling options a command does not offer take their defaults). ``need_target`` False: the run
    measures on the engine's own capture, and a target, where given, is a local directory read for single tensors."""
    from ..engines.launch import launch_release, load

    target, draft, engine, engine_version = a.target, getattr(a, "draft", None), a.engine, a.engine_version
    revision, draft_revision, dtype = (
        getattr(a, "revision", None),
        getattr(a, "draft_revision", None),
        getattr(a, "dtype", "auto"),
    )
    serve_cmd, serve_config = getattr(a, "serve_cmd", None), getattr(a, "serve_config", None)
    described = getattr(a, "serving_description", None)
    named = ("declared" if described else engine, engine_version)  # the engine and release the run names
    sc = load(serve_cmd, serve_config, named)
    if sc is not None and not target:
        _speculators_from_hub(sc)
    from ..io.overlap import check_outputs_apart

    # the models the launch command names are inputs too: refused before the summary line is printed
    check_outputs_apart({**vars(a), "target": target or (sc and sc.target), "draft": draft or (sc and sc.draft)})
    launch, others = None, []
    if sc is not None:
        from ..engines.launch_models import other_models

        launch = launch_release(sc.engine, *named, own=sc.engine_version)  # what its summary and CMD003 are under
        others = other_models(sc, target, draft)  # an option naming another model than the launch serves
        _say_launch(sc, target, draft, launch)
    target = target or (sc.target if sc else None)
    _check_target(target, need_target)
    draft = draft or (sc.draft if sc else None)
    if need_draft and not draft:
        missing_option("--draft", "the draft path")
    eng, ver = _engine_of(engine, engine_version, described, sc)
    if dtype == "auto" and sc is not None and sc.dtype not in (None, "auto"):
        dtype = {"half": "float16", "bf16": "bfloat16", "fp16": "float16", "float": "float32"}.get(sc.dtype, sc.dtype)
    from ..engines.releases import check_engine
    from ..io.hub import role_paths

    # the engine and release as resolved (from --serve-cmd, or the sglang default), refused before any download or load
    release = check_engine(eng, ver)

    # hub ids (with a revision) become local snapshots here; local-looking paths never reach the hub
    if revision is None and sc is not None and target == sc.target:
        revision = sc.target_revision
    if draft_revision is None and sc is not None and draft == sc.draft:
        draft_revision = sc.draft_revision
    target_dir, draft_dir = resolve_models(target, draft, getattr(a, "draft_format", None), revision, draft_revision)
    paths = role_paths(target, draft, target_dir=target_dir, draft_dir=draft_dir, serve_config=getattr(a, "serve_config", None))
    if (target_dir, draft_dir) != (target, draft):  # hub snapshots: outputs kept out of them too
        check_outputs_apart({**vars(a), "target": target_dir, "draft": draft_dir})
    from ..engines.launch import launch_findings

    quiet = getattr(a, "quiet", False)
    found = [*launch_findings(sc, launch), *others] if sc else []
    return Run(target_dir or "", draft_dir, eng, release, dtype, sc, paths, found, _parsed(a),
               status=lambda text: status(text, quiet), progress=lambda: progress(quiet))  # fmt: skip


def _say_launch(sc: Any, target: Optional[str], draft: Optional[str], release: str) -> None:
    """The launch command as read, on stderr, after the models it names (where the options name none) pass; under
    ``release``, the one the launch runs (engines/launch.launch_release)."""
    from ..engines.launch_args import flag_table
    from .validate import preflight_named_models

    preflight_named_models(None if target else sc.target, None if draft else sc.draft)
    msg = f"serving config: {sc.summary(release)}"
    if sc.unknown_flags:
        table = flag_table()[sc.engine]["version"]
        msg += f"\n  unknown flags (not in {sc.engine} {table}'s argument table): {', '.join(sc.unknown_flags)}"
    for n in [*sc.notes, *sc.flag_notes(release)]:
        msg += f"\n  note: {n}"
    print(msg, file=sys.stderr, flush=True)


def _engine_of(
    engine: Optional[str], engine_version: Optional[str], described: Optional[str], sc: Any
) -> tuple[str, Optional[str]]:
    """(engine, release as given): the options, else the launch command, else sglang; a serving description is the
    engine "declared" at the release its file is, and refused beside an --engine naming another."""
    eng = (engine or (sc.engine if sc else None) or "sglang").lower()
    ver = engine_version or (sc.engine_version if sc and sc.engine == eng else None)
    if described:
        if engine and engine.lower() != "declared" or engine_version and engine_version != described:
            raise BadInput(
                f"--serving-description {described} describes the engine; --engine {engine} --engine-version "
                f"{engine_version} names another",
                "pass one of the two",
            )
        eng, ver = "declared", described
    return eng, ver


def _check_target(target: Optional[str], need_target: bool) -> None:
    """--target as the run needs it: required, or (on the engine's own capture) optional and local."""
    if not target and need_target:
        missing_option("--target", "the model")
    from .validate import is_hub_id

    if target and not need_target and is_hub_id(target):
        raise BadInput(
            f"--target {target} is a hub id: with --engine-dump only its embed_tokens (and tokenizer) are read, and a "
            "hub snapshot would download every weight",
            "pass a local directory holding its embed_tokens shard and tokenizer files, or leave --target out",
        )


def _parsed(a: SimpleNamespace) -> SimpleNamespace:
    """The options as a run reads them: the structured ones parsed (the preflight has checked them)."""
    from .validate import parse_layer_ids

    g = functools.partial(getattr, a)
    # --trained-with travels as the run's train recipe; a command without either keeps its options as they were
    recipe = {"train_recipe": train_recipe_of(a)} if g("trained_with", None) is not None else {}
    return SimpleNamespace(**{**defaults(SAMPLING), **vars(a), **recipe, "layer_ids": parse_layer_ids(g("layer_ids", None)),
                              "device_map": _device_map(g("device_map", None)), "max_memory": _max_memory(g("max_memory", None))})  # fmt: skip


def train_recipe_of(a: SimpleNamespace) -> Optional[str]:
    """The run's training recipe: --train-recipe, or --trained-with as the recipe engines/trainers.py reads."""
    trained_with = getattr(a, "trained_with", None)
    if trained_with is None:
        return getattr(a, "train_recipe", None)
    from ..engines.trainers import recipe_of

    return recipe_of(trained_with, getattr(a, "train_recipe", None))


def _speculators_from_hub(sc: Any) -> None:
    """``vllm serve org/speculators-draft``: the checkpoint's config.json (cached or downloaded) says which
    verifier vLLM loads as the target; a local checkpoint was read when the command was parsed."""
    from ..io.hub import resolve
    from .validate import is_hub_id

    if sc.engine != "vllm" or sc.draft is not None or not sc.target or not is_hub_id(sc.target):
        return
    from ..engines.launch import speculators_verifier
    from ..io.hub import config_if_local

    speculators_verifier(sc, config_if_local(resolve(sc.target, sc.target_revision, "target")))
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

    if getattr(a, "trained_with", None) is not None:  # one line naming the known releases, before torch
        from ..engines.trainers import check_trained_with, recipe_of

        recipe_of(a.trained_with, getattr(a, "train_recipe", None))
        check_trained_with(a.trained_with)
    preflight(**{k: v for k, v in vars(a).items() if k not in skip})


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


def server_evidence(metrics: Optional[str], before: Optional[str], log: Optional[str], model: Optional[str]) -> Any:
    """The live server's figures (scrapes or log), read and refused before torch is imported; None where none given."""
    if not (metrics or before or log):
        return None
    from ..analyses.server_metrics.measured import load_measured

    return load_measured(metrics, before, log, engine=None, model=model)
