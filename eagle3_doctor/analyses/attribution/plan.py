"""The paths diagnose measures: serving as the engine runs it, training, one path per lever (a serving-vs-training
difference set back), and the draft copies each module is mean-ablated in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..acceptance.findings import acc_fix

if TYPE_CHECKING:
    from ...core.taps import FeatureSpec
    from ...draft.model import Eagle3Draft
    from ...model.setup import Setup


SERVING, TRAINING = "serving", "training"


WEIGHTS = "capture points the weights fit"  # the lever the scan finds, where the config's ids are not what was trained


# modules whose mean-ablation must cost a trained draft accuracy (norm weights are checked by inspect)
ABLATED = ("fc", "midlayer.self_attn", "midlayer.mlp")


@dataclass
class Plan:
    paths: dict[str, FeatureSpec]
    drafts: dict[str, Eagle3Draft]
    levers: list[tuple[str, str, str, str | None]]  # (name, what, path, fix)
    base: str
    notes: list[str]
    ablations: dict[str, Eagle3Draft] = field(default_factory=dict)  # module -> its mean-ablated copy
    aliases: dict[str, str] = field(default_factory=dict)  # path -> the path measuring the same thing
    step1: dict[str, np.ndarray] = field(default_factory=dict)  # "" (unablated) or module -> per prompt [hits, n]
    parts: dict[str, str] = field(default_factory=dict)  # lever name -> the lever it is one part of
    # references a run on the engine's own capture could not measure (they need the target): named in the verdict
    unmeasured: list[str] = field(default_factory=list)


def _plan(setup: Setup) -> Plan:
    """Serving as the engine runs it, training, one path per lever, and the path ablations run on."""
    from ..as_served import AS_SERVED, served_paths

    assert setup.draft is not None
    draft, serving, notes = setup.draft, setup.serving, []
    n_aux = draft.config.num_aux_states
    sp = served_paths(setup)
    served = sp.drafts.get(AS_SERVED)
    fwd_fix = "; ".join(dict.fromkeys(f.fix for f in sp.findings if f.fix)) or None
    s_draft = served if served is not None else draft
    paths: dict[str, FeatureSpec] = {}
    drafts: dict[str, Eagle3Draft] = {}
    if serving.failure is None and len(serving.spec) == n_aux:
        paths[SERVING], drafts[SERVING] = serving.spec, s_draft
    else:
        notes.append(
            f"{serving.label} feeds no measurable features: {serving.failure.message if serving.failure else serving.spec}"
        )
    train = setup.train_spec
    aliases: dict[str, str] = {}
    if train is not None and len(train) == n_aux:
        if SERVING in paths and train == serving.spec and served is None:
            aliases[TRAINING] = SERVING  # the same features through the same draft: measured once
        else:
            paths[TRAINING], drafts[TRAINING] = train, draft
    levers: list[tuple[str, str, str, str | None]] = []
    # (an alias means no lever: the sides are the same); train is not None once TRAINING is a path
    if SERVING in paths and TRAINING in paths and train is not None:
        if train != serving.spec and served is not None:
            paths["lever:capture"], drafts["lever:capture"] = train, s_draft
        if train != serving.spec:
            path = "lever:capture" if served is not None else TRAINING
            levers.append(("capture points", f"feed {_spec(train)} instead of {_spec(serving.spec)}", path, acc_fix(setup)))
        if served is not None:
            paths["lever:forward"], drafts["lever:forward"] = serving.spec, draft
            what = "run the draft as trained, not as the engine runs it (" + "; ".join(sp.applied) + ")"
            levers.append((FORWARD, what, "lever:forward", fwd_fix))
    parts = _forward_parts(sp, paths, drafts, levers) if "lever:forward" in paths else {}
    base = TRAINING if TRAINING in paths else SERVING
    # module health is a step-1 measurement: the ablated copies run one step, not the K of the chains
    ablations = {mod: mean_ablated(draft, mod) for mod in ABLATED} if base in paths else {}
    return Plan(paths, drafts, levers, base, notes, ablations, aliases, parts=parts)


FORWARD = "draft forward"


def _forward_parts(sp: Any, paths: dict, drafts: dict, levers: list) -> dict[str, str]:
    """One lever per served difference where the engine's forward differs in several: that difference set
    back to training alone, every other one kept, so the verdict can say which of them costs acceptance."""
    parts = {}
    for code, (why, f, others) in sp.singles.items():
        name, path = f"{FORWARD} {code}", f"lever:forward:{code}"
        paths[path], drafts[path] = paths["lever:forward"], others
        levers.append((name, f"set back the engine's {why}, every other served difference kept", path, f.fix or None))
        parts[name] = FORWARD
    return parts


def _spec(spec: FeatureSpec | None) -> str:
    return "[" + ", ".join(str(p) for p in spec or ()) + "]"


def mean_ablated(draft: Eagle3Draft, module: str) -> Eagle3Draft:
    """A copy of ``draft`` whose ``module`` outputs its mean over the batch's positions at every call."""
    from ..as_served import _eager_copy

    d = _eager_copy(draft)  # the embeddings shared, not copied; eager even where the draft was compiled
    target = d.get_submodule(module)
    # attention runs through its own methods (qkv, attend): its output is o_proj's
    hooked = target.o_proj if hasattr(target, "o_proj") else target

    def hook(_m: torch.nn.Module, _inp: Any, out: torch.Tensor) -> torch.Tensor:
        return out.mean(dim=tuple(range(out.dim() - 1)), keepdim=True).expand_as(out)

    hooked.register_forward_hook(hook)
    return d.eval()
