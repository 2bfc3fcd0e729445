"""fix: write a corrected copy of the draft and measure that it recovers acceptance.

The edits are the findings' own :class:`core.findings.Fix` objects (a dotted key of the draft's
config.json and the value to write, or a key to delete; or a rename of weight tensors, given as data),
the same edits the terminal prints: `fix` never reinterprets a fix's text, nor runs its snippet. The input directory is never touched; the copy goes to a new
directory. Acceptance is then measured on the original and on the copy, on the same prompts and the
same target forward settings, and the change in mean acceptance length (as the engine feeds and runs
the draft) gets its paired interval over prompts. A fix that does not recover acceptance is reported
as such (FIX002), not as done.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..core.errors import BadInput
from ..core.findings import DRAFT_CONFIG, DRAFT_WEIGHTS, Finding, Fix
from ..core.stats import Interval, difference_interval, mean_acceptance_length
from ..core.typed_json import JsonFields
from .attribution.measure import measure_gap
from .attribution.plan import SERVING
from .attribution.result import Diagnosis

if TYPE_CHECKING:
    from ..model.setup import Setup
    from .acceptance.options import AcceptanceOptions
    from .results import AcceptanceRun, PathResult

Progress = Callable[[str, int, int], None]
SCHEMA = "eagle3-doctor/fix/1"


@dataclass
class Edit(JsonFields):
    """One key of the copy's config.json, or one renamed weight tensor, as a finding asked for it."""

    code: str  # the finding whose fix this is
    key: str
    op: str  # set | delete | rewrite (before: the tensor's name, after: its new name)
    before: Any
    after: Any


@dataclass
class FixResult(JsonFields):
    """What was written, and what it bought, measured."""

    source: str
    out: str
    edits: list[Edit]
    path: str  # the acceptance path compared (as the engine runs the draft)
    before: Interval | None  # mean acceptance length, original
    after: Interval | None  # the same on the copy
    change: Interval | None  # after - before, paired over prompts
    verdict: str
    findings: list[Finding]
    diagnosis: Diagnosis | None = None
    notes: list[str] = field(default_factory=list)

    JSON_OMIT_NONE: ClassVar = ("diagnosis",)
    JSON_SCHEMA: ClassVar = {"findings": {"type": "array", "items": {"$ref": "#/$defs/finding"}}}

    def to_dict(self) -> dict[str, Any]:
        from ..core.typed_json import fields_json

        doc = fields_json(self)
        doc["findings"] = [f.to_dict() for f in self.findings]
        return doc


# --------------------------------------------------------------------------- the edits


def config_edits(findings: list[Finding]) -> list[tuple[str, Fix]]:
    """(code, fix) for every finding whose fix is a set/delete of a draft config key or a rename of the
    draft's weight tensors, first one per key."""
    seen: dict[str, tuple[str, Fix]] = {}
    for f in findings:
        fx = f.fix
        if isinstance(fx, Fix) and fx.file == DRAFT_CONFIG and fx.key and fx.op in ("set", "delete"):
            seen.setdefault(fx.key, (f.code, fx))
        elif isinstance(fx, Fix) and fx.key and _renames(fx):
            seen.setdefault(fx.key, (f.code, fx))
    return list(seen.values())


def _renames(fx: Fix) -> dict[str, str]:
    """The tensor renames a weights rewrite carries as data ({old name: new name}), or none."""
    if fx.file != DRAFT_WEIGHTS or fx.op != "rewrite" or not isinstance(fx.value, dict):
        return {}
    got = fx.value.get("rename")
    return {str(k): str(v) for k, v in got.items()} if isinstance(got, dict) else {}


def _rename_tensors(copy_dir: Path, code: str, renames: dict[str, str]) -> list[Edit]:
    """Rename tensors in every safetensors file of the copy (each file rewritten whole, its metadata kept)."""
    from safetensors import safe_open
    from safetensors.torch import save

    from ..io.copies import write_file

    done = []
    for f in sorted(copy_dir.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as h:  # one read: names first, tensors only where one is renamed
            names = list(h.keys())
            hits = [k for k in renames if k in names]
            if not hits:
                continue
            meta, sd = h.metadata(), {k: h.get_tensor(k) for k in names}
        for k in hits:
            sd[renames[k]] = sd.pop(k)
            done.append(Edit(code, renames[k], "rewrite", k, renames[k]))
        # serialised here and written by Python, so a full disk is an OSError the copy's stage names in one line
        write_file(f, save(sd, metadata=meta))
    return done


def _get(cfg: dict, dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def apply_edit(cfg: dict, key: str, op: str, value: Any) -> None:
    """Set or delete a dotted key of a nested config dict (intermediate objects created as needed)."""
    parts = key.split(".")
    node = cfg
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            if op == "delete":
                return
            node[part] = {}
        node = node[part]
    if op == "delete":
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = copy.deepcopy(value)


def check_out(out: str, src: str | None) -> None:
    """``out`` must be new and outside the draft directory: checked before anything loads, and again
    before the copy is written."""
    o = Path(out).resolve()
    if o.exists() or o.is_symlink():
        raise BadInput(f"--out {out} already exists", "name a new directory: fix never writes over anything")
    if src is not None and Path(src).exists():
        s = Path(src).resolve()
        if o == s or s in o.parents:
            raise BadInput(f"--out {out} lies inside the draft directory {src}", "name a directory outside the input")
        if s.is_dir():  # a link to /dev/zero or to nothing is refused now, not after the measurement
            from ..io.copies import regular_files

            regular_files(s, "--draft")


def write_copy(src: str, out: str, edits: list[tuple[str, Fix]]) -> list[Edit]:
    """Copy the draft directory ``src`` to the new directory ``out`` and apply ``edits`` to the copy's
    config.json and weights. ``out`` must not exist yet, nor lie inside ``src``; it appears only once the
    copy is complete (outputs.new_directory), and holds the regular files of ``src``'s top level, a link
    copied as the file it leads to (outputs.copy_regular_files)."""
    from ..io.copies import copy_regular_files, new_directory, write_file

    check_out(out, src)
    s, o = Path(src).resolve(), Path(out).resolve()
    done = []
    with new_directory(o) as stage:
        copy_regular_files(s, stage, "--draft")
        cfg_path = stage / "config.json"
        cfg = json.loads(cfg_path.read_text())
        for code, fx in edits:
            key = fx.key
            assert key is not None  # config_edits keeps only fixes that name a key
            if fx.op == "rewrite":
                done += _rename_tensors(stage, code, _renames(fx))
                continue
            before = copy.deepcopy(_get(cfg, key))
            apply_edit(cfg, key, fx.op, fx.value)
            done.append(Edit(code, key, fx.op, before, None if fx.op == "delete" else fx.value))
        write_file(cfg_path, (json.dumps(cfg, indent=2) + "\n").encode())
    return done


# --------------------------------------------------------------------------- write, then measure


def fix_draft(
    setup: Setup,
    opts: AcceptanceOptions,
    out: str,
    *,
    prompts_path: str | None = None,
    draft_format: str | None = None,
    train_recipe: str | None = None,
    progress: Progress | None = None,
) -> FixResult:
    """Diagnose, write the copy with every draft-config fix the findings carry, measure both."""
    from ..model.setup import assemble
    from .acceptance.options import _no_progress
    from .acceptance.run import measure_acceptance
    from .as_served import served_paths
    from .compare.symbolic import diagnose_specs

    progress = progress or _no_progress
    if setup.draft is None or setup.info is None:
        raise BadInput("fix needs a draft", "pass --draft DIR")
    d, measured = measure_gap(setup, opts, prompts_path=prompts_path, progress=progress)
    symbolic = diagnose_specs(setup.train_spec, setup.train_source, setup.serving) if setup.train_spec else []
    edits = config_edits(d.findings + symbolic + served_paths(setup).findings)
    src = setup.info.path
    if not edits and not [f for f in d.findings if f.severity != "info"]:
        f = Finding("FIX003", f"nothing to fix: {d.verdict}", [f.title for f in d.findings], "serve the draft as it is")
        return FixResult(src, out, [], "", None, None, None, "nothing to fix", [f], d)
    if not edits:
        f = Finding(
            "FIX002",
            f"nothing to write: no finding's fix is an edit of the draft's config.json or a rename of its weights ({d.verdict})",
            [f.title for f in d.findings],
            "apply the diagnosis' fix by hand (re-export, retrain, or change the launch command), then re-run diagnose",
        )
        return FixResult(src, out, [], "", None, None, None, "no edit to make", [f], d)
    done = write_copy(src, out, edits)
    fixed = assemble(setup.target, out, draft_format, setup.serving.engine, setup.serving.version, None, train_recipe)
    # "before" is the diagnosis' own serving side (the draft as the engine runs it): the same prompts, the
    # same continuation and the same chain settings the copy is now measured with
    chain = replace(opts, topk=1, num_draft_tokens=None, token_tree=None)
    after = measure_acceptance(fixed, chain, prompts_path=prompts_path, progress=progress)
    if SERVING not in measured or _served_path(after) not in after.paths:
        return _unmeasured(src, out, done, SERVING in measured, d)
    return _compare(src, out, done, measured[SERVING], after.paths[_served_path(after)], opts.num_steps, d)


def _unmeasured(src: str, out: str, done: list[Edit], before_ok: bool, d: Diagnosis) -> FixResult:
    """The engine serves neither the original nor (``before_ok``) the copy: no change can be measured."""
    side = "the copy" if before_ok else "the original"
    f = Finding(
        "FIX002",
        f"no acceptance change can be measured: the engine serves {side} no features the draft can take",
        [f"{e.code}: {e.key} {e.before!r} -> {e.after!r}" for e in done],
        "run eagle3-doctor inspect and diagnose on the copy for the engine finding",
    )
    return FixResult(src, out, done, "", None, None, None, "not measured", [f], d)


def _served_path(run: AcceptanceRun) -> str:
    from .as_served import AS_SERVED

    return AS_SERVED if AS_SERVED in run.paths else "serving"


def _compare(src: str, out: str, done: list[Edit], before: PathResult, after: PathResult, K: int, d: Diagnosis) -> FixResult:
    pb = after.name
    cb, ca = before.counts(K), after.counts(K)
    b, a = before.intervals, after.intervals
    assert b is not None and a is not None  # path_results gives every path its intervals
    change, how = difference_interval(ca, cb, mean_acceptance_length)
    ev = [
        f"mean acceptance length as the engine runs the draft: before {b.mean_acceptance_length.text(2)}, "
        f"after {a.mean_acceptance_length.text(2)}, change {change.text(2)} ({how})",
        *(f"{e.code}: {e.key} {e.before!r} -> {e.after!r}" if e.op == "set" else f"{e.code}: delete {e.key}" for e in done),
    ]
    if change.lo > 0:
        f = Finding(
            "FIX001", f"the corrected copy recovers {change.text(2)} of mean acceptance length", ev, f"serve the draft in {out}"
        )
        verdict = "recovered"
    else:
        f = Finding(
            "FIX002",
            f"the corrected copy does not recover acceptance: change {change.text(2)}",
            ev,
            "the edits were not the cause: run eagle3-doctor diagnose on the copy for what is left",
        )
        verdict = "not recovered"
    return FixResult(src, out, done, pb, b.mean_acceptance_length, a.mean_acceptance_length, change, verdict, [f], d)
