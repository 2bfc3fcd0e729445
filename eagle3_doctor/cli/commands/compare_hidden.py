"""eagle3-doctor compare-hidden: training features vs what the serving engine captures, slot by slot.

With --engine-dump (or no target at all) the engine's own dump is diffed against the training dump,
and the target is never loaded.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ...core.findings import exit_code, locate
from ...io.positions import place
from ..drive import drive
from ..formats import check_format, drop_ignored, emit, report_to_stderr
from ..options import (
    BATCH_SIZE,
    DUMP_TARGET,
    ENGINE_DUMP,
    FORMAT,
    HEATMAP_PLOT,
    JSON_OUT,
    LAYER_IDS,
    LIMIT,
    LOADING,
    MATRIX,
    MAX_TOKENS,
    NUM_LAYERS,
    PROMPTS,
    QUIET,
    REFERENCE_TARGET,
    REPORT,
    SERVED,
    STREAM_LAYERS,
    TRAIN_DUMP,
    TRAIN_RECIPE,
    TRAINED_WITH,
    options,
)
from ..output import console, write_result
from ..resolve import RESOLVED_LATER, preflight_given, resolve_models


@options(
    **{**SERVED, "target": DUMP_TARGET},
    layer_ids=LAYER_IDS,
    train_recipe=TRAIN_RECIPE,
    trained_with=TRAINED_WITH,
    train_dump=TRAIN_DUMP,
    prompts=PROMPTS,
    max_tokens=MAX_TOKENS,
    batch_size=BATCH_SIZE,
    limit=LIMIT,
    matrix=MATRIX,
    plot=HEATMAP_PLOT,
    **LOADING,
    stream_layers=STREAM_LAYERS,
    reference_target=REFERENCE_TARGET,
    json_out=JSON_OUT,
    format=FORMAT,
    report=REPORT,
    quiet=QUIET,
    engine_dump=ENGINE_DUMP,
    num_layers=NUM_LAYERS,
)
def compare_hidden_cmd(**given: Any) -> int:
    """Training features vs what the serving engine captures: slot by slot, with the exact fix."""
    a = SimpleNamespace(**given)
    check_format(a.format, a.json_out)
    preflight_given(a, skip=RESOLVED_LATER)
    if a.engine_dump is not None or (a.target is None and a.serve_cmd is None and a.serve_config is None):
        return _compare_dumps(a)
    return drive("compare-hidden", compare_hidden_cmd, a, need_draft=False, preflighted=True)


def _compare_dumps(a: SimpleNamespace) -> int:
    """Dump vs dump: the engine did the forward; the target is never loaded."""
    from ...analyses.engine_dump import compare_dumps
    from ...io.hub import role_paths
    from ...report.render import render_compare

    tspec, tsrc, engine = _dump_training_spec(a)
    res = compare_dumps(
        a.engine_dump,
        a.train_dump,
        train_spec=tspec,
        train_source=tsrc,
        engine=engine,
        engine_version=a.engine_version,
        num_layers=a.num_layers,
        limit=a.limit,
        max_tokens=a.max_tokens,
    )
    res.findings[:] = drop_ignored(res.findings)
    locate(res.findings, role_paths(draft=a.draft))
    place(res.findings)  # each config key at its line and column in the file the run read
    render_compare(console(stderr=report_to_stderr(a.format, a.json_out)), res)
    write_result(a.json_out, res.to_dict, False)
    emit(a.format, res.findings)
    return exit_code(res.findings, "warning")


def _dump_training_spec(a: SimpleNamespace) -> tuple[Any, str, str]:
    """What the training dump's slots are, from --train-recipe or the draft's config, for a target never
    loaded; and the engine, resolved and checked before the draft is read."""
    from ...core.errors import BadInput

    target, engine_dump, train_dump, num_layers = a.target, a.engine_dump, a.train_dump, a.num_layers
    train_recipe, draft, engine, engine_version = a.train_recipe, a.draft, a.engine, a.engine_version
    if target is not None:
        raise BadInput("--engine-dump is compared with --train-dump without the target", "drop --target (or drop --engine-dump)")
    if a.trained_with is not None:
        raise BadInput(
            "--trained-with needs the target's config: the capture a trainer's engine makes depends on the target's family",
            "pass --train-recipe spec:POINTS with what the training captured, or compare with --target",
        )
    if not engine_dump or not train_dump:
        # worded as click's own usage error: --target is only optional for dump vs dump
        raise BadInput(
            "Missing option '--target' (or --engine-dump with --train-dump: dump vs dump, no target)",
            "see `eagle3-doctor compare-hidden --help`",
        )
    if num_layers is None or num_layers < 1:
        raise BadInput(
            "dump vs dump needs the target's layer count for the fix",
            "pass --num-layers N (num_hidden_layers of the target's config.json)",
        )
    from ...engines.recipes import training_spec
    from ...engines.releases import check_engine

    engine = (engine or "sglang").lower()  # as with a target: any case, sglang by default
    check_engine(engine, engine_version)  # before the draft is read

    if train_recipe:
        tspec, tsrc = training_spec(train_recipe, num_layers)
    elif draft:
        from ...draft.formats import read_draft, spec_from_info

        _, draft_dir = resolve_models(None, draft, a.draft_format)
        assert draft_dir is not None  # a draft was given
        _, info = read_draft(draft_dir, fmt=a.draft_format, device="cpu", dtype=None)
        tspec, tsrc = spec_from_info(info, num_layers)
    else:
        raise BadInput(
            "dump vs dump needs to know what the training dump's slots are",
            "pass --draft DIR (its config's ids) or --train-recipe",
        )
    for p in tspec:
        p.check_range(num_layers)
    return tspec, tsrc, engine
