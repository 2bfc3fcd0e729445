"""An engine the doctor does not model, described by what it feeds the draft: a small JSON file.

llama.cpp and its forks, MLX servers, vllm-ascend and in-house engines run EAGLE-3 drafts with code the
engine table has not executed. What decides acceptance is the same few facts for all of them: which capture
point fills each slot of the draft's ``fc`` input, and how the engine runs the draft's own forward (its norms,
whose embeddings and head, the RoPE layout, q/k norms). A user who knows them (from the engine's source or its
docs) writes them down once, and the doctor measures that description exactly as it measures a modelled
release: the same replay, the same estimator, the same as-served copy of the draft. ``--engine declared
--engine-version FILE`` (or ``--serving-description FILE``) names it; the file is the release.

    {
      "engine": "llama.cpp", "release": "b7210",
      "source": "where these facts were read: file:line, a commit, a doc page",
      "capture": {"layer_ids": [2, 16, 29], "convention": "output"},
      "draft": {"norm_before_fc": false, "embed": "target", "lm_head": "own", "rope": "neox"}
    }

``capture`` takes exactly one of ``points`` (capture points as the doctor writes them: ``embed``,
``layer_out[i]``, ``final_norm``), ``layer_ids`` with a ``convention`` ("output": id i is the state leaving
layer i, as the Hugging Face trainers count; "input": the state entering layer i, 0 the embeddings, as
SGLang's and vLLM's ``idx + 1`` setters count), or ``from_config`` (a dotted key of the draft's config.json
that holds the ids, read with ``convention``). ``draft`` states any of the forward flags
(``norm_before_residual``, ``norm_before_fc``, ``fc_norm``, ``norm_output``), ``embed`` and ``lm_head``
("own" or "target"), ``tie_word_embeddings`` (the head is the embeddings where the config ties them),
``rope`` ("neox" or "gptj") and ``qk_norm`` (true: a Qwen3 draft's q/k norms are applied); a flag left out
is taken as the draft was trained and listed as assumed. Anything else in the file is refused by name, so a
typo is never silently a different engine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..core.errors import BadInput
from ..core.taps import FeatureSpec, embed, layer_out, parse_point

ENGINE = "declared"
FLAG_KEYS = ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output")
_DRAFT_KEYS = {*FLAG_KEYS, "embed", "lm_head", "tie_word_embeddings", "rope", "qk_norm"}
_TOP_KEYS = {"engine", "release", "source", "capture", "draft", "notes"}
_CAPTURE_KEYS = {"points", "layer_ids", "convention", "from_config"}
CONVENTIONS = ("output", "input")
FIX_HINT = "see docs/engines.md (a serving description) for the keys"


@dataclass(frozen=True)
class Declared:
    """A serving description as read: every value checked, nothing defaulted that the file did not say."""

    path: str
    engine: str
    release: str
    source: str
    points: tuple[str, ...] | None  # capture points as written, or None
    layer_ids: tuple[int, ...] | None
    convention: str
    from_config: str | None
    draft: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.engine} {self.release}".strip() + " (declared)"

    def spec(self, ids: list[int] | None, num_layers: int) -> FeatureSpec | None:
        """The capture points fed to the draft: the file's points, or the ids (its own or the config's) read
        with its convention; None where ``from_config`` names a key the config does not hold."""
        if self.points is not None:
            return tuple(parse_point(p) for p in self.points)
        if ids is None:
            return None
        if self.convention == "output":
            return tuple(layer_out(i) for i in ids)
        return tuple(embed() if i == 0 else layer_out(i - 1) for i in ids)

    def ids_as_written(self, spec: FeatureSpec) -> list[int] | None:
        """The ids that capture ``spec`` under this description's convention (for a fix), None where no id does."""
        out = []
        for p in spec:
            if p.is_embed():
                if self.convention != "input":
                    return None
                out.append(0)
            elif p.is_final_norm():
                return None
            else:
                out.append(p.layer_index() + (1 if self.convention == "input" else 0))
        return out


def _refuse(path: str, what: str) -> BadInput:
    return BadInput(f"serving description {path}: {what}", FIX_HINT)


def _bool(path: str, key: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise _refuse(path, f"draft.{key} must be true or false, not {json.dumps(v)}")
    return v


def _capture(path: str, cap: dict[str, Any]) -> tuple[str, tuple[str, ...] | None, tuple[int, ...] | None, str | None]:
    """(convention, points, layer ids, config key) of a description's ``capture``, exactly one of the last three set."""
    given = [k for k in ("points", "layer_ids", "from_config") if k in cap]
    if len(given) != 1:
        raise _refuse(path, "capture takes exactly one of points, layer_ids, from_config")
    conv = cap.get("convention", "output" if "points" in cap else None)
    if conv not in CONVENTIONS:
        raise _refuse(
            path, f'capture.convention must be "output" or "input" (how the engine counts layer ids), not {json.dumps(conv)}'
        )
    points = ids = src = None
    if "points" in cap:
        pts = cap["points"]
        if not isinstance(pts, list) or not pts or not all(isinstance(p, str) for p in pts):
            raise _refuse(path, 'capture.points must be a non-empty list such as ["layer_out[1]", "final_norm"]')
        for p in pts:
            parse_point(p)
        points = tuple(pts)
    elif "layer_ids" in cap:
        li = cap["layer_ids"]
        if not isinstance(li, list) or not li or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in li):
            raise _refuse(path, "capture.layer_ids must be a non-empty list of layer ids >= 0")
        ids = tuple(li)
    else:
        src = cap["from_config"]
        if not isinstance(src, str) or not src:
            raise _refuse(
                path,
                'capture.from_config must name a key of the draft\'s config.json ("eagle_config.eagle_aux_hidden_state_layer_ids")',
            )
    return conv, points, ids, src


def _check_draft(path: str, draft: dict[str, Any]) -> None:
    """Every key of a description's ``draft`` known and of its type."""
    if unknown := sorted(set(draft) - _DRAFT_KEYS):
        raise _refuse(path, f"unknown draft key(s) {', '.join(unknown)}; known: {', '.join(sorted(_DRAFT_KEYS))}")
    for k in (*FLAG_KEYS, "tie_word_embeddings", "qk_norm"):
        if k in draft:
            _bool(path, k, draft[k])
    for k, allowed in (("embed", ("own", "target")), ("lm_head", ("own", "target")), ("rope", ("neox", "gptj"))):
        if k in draft and draft[k] not in allowed:
            raise _refuse(path, f"draft.{k} must be {' or '.join(json.dumps(a) for a in allowed)}, not {json.dumps(draft[k])}")


@lru_cache(maxsize=32)
def _read(path: str, mtime_ns: int) -> Declared:
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"cannot read the serving description {path}: {e}", "pass a readable JSON file") from None
    except json.JSONDecodeError as e:
        raise _refuse(path, f"not JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    if not isinstance(raw, dict):
        raise _refuse(path, "the top level must be an object")
    if unknown := sorted(set(raw) - _TOP_KEYS):
        raise _refuse(path, f"unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_TOP_KEYS))}")
    for k in ("engine", "release", "source"):
        if not isinstance(raw.get(k, ""), str):
            raise _refuse(path, f"{k} must be a string")
    if not raw.get("engine"):
        raise _refuse(path, 'name the engine ("engine": "llama.cpp")')
    cap = raw.get("capture")
    if not isinstance(cap, dict):
        raise _refuse(path, 'say what fills the draft\'s slots ("capture": {"layer_ids": [...], "convention": "output"})')
    if unknown := sorted(set(cap) - _CAPTURE_KEYS):
        raise _refuse(path, f"unknown capture key(s) {', '.join(unknown)}; known: {', '.join(sorted(_CAPTURE_KEYS))}")
    conv, points, ids, src = _capture(path, cap)
    draft = raw.get("draft", {})
    if not isinstance(draft, dict):
        raise _refuse(path, "draft must be an object")
    _check_draft(path, draft)
    notes = raw.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise _refuse(path, "notes must be a list of strings")
    return Declared(
        path, raw["engine"], raw.get("release", ""), raw.get("source", ""), points, ids, conv, src, dict(draft), tuple(notes)
    )


def read_declared(path: str) -> Declared:
    """The description at ``path`` (re-read when the file changes), or one BadInput naming what is wrong."""
    try:
        mtime = Path(path).stat().st_mtime_ns
    except OSError:
        raise BadInput(
            f"--engine declared needs a serving description: {path!r} is not a file",
            "pass --serving-description FILE (or --engine-version FILE)",
        ) from None
    return _read(str(path), mtime)
