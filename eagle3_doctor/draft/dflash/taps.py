"""A DFlash draft's taps: trained (its config) and served (each engine's reading of the same config), in the
capture vocabulary.

DFlash numbers a tap by the layer it comes *after*: id i is ``layer_out[i]`` (SGLang
``srt/speculative/dflash_utils.py`` @00731f0 ``build_target_layer_ids``: "DFlash uses hidden states after
each selected target layer (HF-style)"). EAGLE-3's vLLM ids count one higher (id k is ``layer_out[k-1]``):
"DFlash and EAGLE layer indexing semantics are different".

Checked against the engines' own code executed per release (draft/dflash/serving.json, written by
``make conformance``; tests/draft/test_dflash_conformance.py holds these rules to the newest release's rows,
vLLM's V2 runner); what was first read:

- SGLang (``dflash_utils.py`` @00731f0 ``parse_dflash_draft_config``, ``resolve_target_layer_ids``):
  ``dflash_config.target_layer_ids``, else top-level ``target_layer_ids``; when neither is present it
  **guesses** ``build_target_layer_ids(L, draft num_hidden_layers)``: ``[L // 2]`` for one draft layer,
  else ``round(1 + i (L - 4) / (n - 1))`` for i < n. The guess counts the draft's *layers*, not the
  taps its ``fc`` takes.
- vLLM (``v1/worker/gpu/spec_decode/eagle/eagle3_utils.py`` @0cfdd2e ``get_eagle3_aux_layers_from_config``,
  which ``qwen3_dflash.py`` sizes its fc from): top-level ``eagle_aux_hidden_state_layer_ids`` as vLLM ids,
  first; else ``dflash_config.target_layer_ids`` + 1; else ``dspark_target_layer_ids`` + 1; else top-level
  ``target_layer_ids`` + 1; else ``dflash_config.layer_ids`` / ``eagle_config.layer_ids`` as vLLM ids;
  else the target's EAGLE-3 default aux layers (``set_eagle3_aux_hidden_state_layers``), with the fc sized
  for the draft's num_hidden_layers taps (``qwen3_dflash.py`` ``_get_dflash_fc_input_size``).

Older releases read the same config otherwise, and ``served_taps`` takes the release (every row of
draft/dflash/serving.json is held to it, tests/draft/test_dflash_conformance.py): vLLM has DFlash from 0.20.0;
its V1 runner (the stock one before 0.33.0) read ``dflash_config.target_layer_ids`` as vLLM ids, one layer
early, in 0.20-0.21, adds 1 from 0.22.0 and from then lets ``eagle_config``'s EAGLE-3 ids override them; it
reads no top-level ``target_layer_ids``, ``dspark_target_layer_ids`` or ``layer_ids``. The V2 runner reads
DFlash configs from 0.24.0 and ``dflash_config.layer_ids`` from 0.27.0. SGLang has DFlash from 0.5.11 and
reads the ids alike in every release since.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from ...core.errors import BadInput
from ...core.taps import FeatureSpec, embed, layer_out
from ...engines.releases import NEWEST, release_key
from ...engines.table import vllm_runner

DFLASH_FIRST = {"sglang": "0.5.11", "vllm": "0.20.0"}  # DFlashDraftModel registered (executed)
VLLM_V1_PLUS_ONE = "0.22.0"  # V1 adds 1 to dflash_config.target_layer_ids, then lets eagle_config override
VLLM_V2_DFLASH = "0.24.0"  # the V2 runner reads DFlash configs
VLLM_V2_LAYER_IDS = "0.27.0"  # the V2 runner reads dflash_config.layer_ids as vLLM ids


def is_dflash(config: dict[str, Any]) -> bool:
    archs = config.get("architectures")
    return (
        isinstance(config.get("dflash_config"), dict)
        or config.get("speculators_model_type") == "dflash"
        or (isinstance(archs, list) and "DFlashDraftModel" in archs)
    )


def _ints(v: Any) -> list[int] | None:
    if isinstance(v, (list, tuple)) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return list(v)
    return None


def _dflash_cfg(config: dict[str, Any]) -> dict[str, Any]:
    d = config.get("dflash_config")
    return d if isinstance(d, dict) else {}


def draft_layers(config: dict[str, Any]) -> int | None:
    n = config.get("num_hidden_layers")
    return n if isinstance(n, int) and n > 0 else None


def build_target_layer_ids(num_target_layers: int, num_draft_layers: int) -> list[int]:
    """SGLang's (and the DFlash reference's) default taps, op for op (dflash_utils.py @00731f0)."""
    if num_draft_layers == 1:
        return [num_target_layers // 2]
    start, end = 1, num_target_layers - 3
    span = end - start
    return [int(round(start + (i * span) / (num_draft_layers - 1))) for i in range(num_draft_layers)]


@dataclass(frozen=True)
class Taps:
    spec: FeatureSpec | None  # None: the engine refuses (ids out of range) or nothing is known
    ids: list[int] | None
    key: str | None  # the config key the ids came from; None where guessed
    source: str
    guessed: bool = False
    release: str = ""  # "vllm 0.20.0": the engine release whose reading this is; "" for the draft's own config


def _dflash_points(ids: list[int], L: int) -> FeatureSpec | None:
    return tuple(layer_out(i) for i in ids) if all(0 <= i < L for i in ids) else None


def _vllm_points(ids: list[int], L: int) -> FeatureSpec:
    """vLLM captures in layer order, once per layer: vLLM id 0 is the embeddings, k in 1..L is
    ``layer_out[k-1]``; an id past L is never reached and silently dropped (executed: the ``ids up to L``
    rows of eagle3_doctor/draft/dflash/serving.json)."""
    return tuple(embed() if k == 0 else layer_out(k - 1) for k in sorted(set(ids)) if 0 <= k <= L)


def trained_taps(config: dict[str, Any], L: int) -> Taps:
    """What the config says the draft was trained on; the reference default where it says nothing."""
    for key, ids in (("dflash_config.target_layer_ids", _ints(_dflash_cfg(config).get("target_layer_ids"))),
                     ("target_layer_ids", _ints(config.get("target_layer_ids")))):  # fmt: skip
        if ids is not None:
            return Taps(_dflash_points(ids, L), ids, key, f"{key} = {ids} in config.json (DFlash ids: after layer i)")
    n = draft_layers(config)
    if n is None:
        return Taps(None, None, None, "no target_layer_ids and no num_hidden_layers: unknown")
    ids = build_target_layer_ids(L, n)
    why = f"no target_layer_ids: the DFlash reference default for {n} draft layers and {L} target layers"
    return Taps(_dflash_points(ids, L), ids, None, why, guessed=True)


def sglang_taps(config: dict[str, Any], L: int, release: str = "") -> Taps:
    """SGLang reads ``dflash_config.target_layer_ids`` (the top-level key only where dflash_config has none),
    refuses an empty or out-of-range list, and guesses where there is none. Its target captures before
    layer i+1 for DFlash id i, in layer order, once per layer, and a Qwen3 target has no capture after its
    last layer: id L-1 is dropped (executed: the ``the deep end`` rows of draft/dflash/serving.json)."""
    d = _dflash_cfg(config)
    key = "dflash_config.target_layer_ids" if "target_layer_ids" in d else "target_layer_ids"
    raw = d["target_layer_ids"] if "target_layer_ids" in d else config.get("target_layer_ids")
    if raw is None:
        t = trained_taps(config, L)
        if t.ids is None:
            return Taps(None, None, None, f"{_SG_SRC}: no target_layer_ids and no num_hidden_layers: refused", release=release)
        return Taps(_sglang_points(t.ids, L), t.ids, None, f"{_SG_SRC}: no target_layer_ids, guesses "
                    f"build_target_layer_ids({L}, num_hidden_layers) = {t.ids}", guessed=True, release=release)  # fmt: skip
    ids = _ints(raw)
    if ids is None or not all(0 <= i < L for i in ids):
        return Taps(None, ids, key, f"{_SG_SRC}: refuses {key} = {raw!r} for a {L}-layer target (empty or out of range)",
                    release=release)  # fmt: skip
    return Taps(_sglang_points(ids, L), ids, key, f"{_SG_SRC} reads {key} = {ids}", release=release)


def _sglang_points(ids: list[int], L: int) -> FeatureSpec:
    return tuple(layer_out(i) for i in sorted(set(ids)) if 0 <= i < L - 1)


_SG_SRC = "sglang dflash_utils.py parse_dflash_draft_config, resolve_target_layer_ids"
_V2_SRC = "eagle3_utils.py @0cfdd2e get_eagle3_aux_layers_from_config"
_V1_SRC = "gpu_model_runner.py _get_eagle3_aux_layers_from_config"


def vllm_taps(config: dict[str, Any], L: int, release: str | None = None) -> Taps:
    """vLLM's reading of a DFlash config in ``release`` (a release string as check_engine returns it; None:
    the newest), by the runner that release launches (or its -v1/-v2 suffix names)."""
    rel = release or NEWEST["vllm"]
    k = release_key(rel)
    v2 = vllm_runner(rel) == "v2" and k >= release_key(VLLM_V2_DFLASH)
    label = f"vllm {rel}"
    d, ecfg = _dflash_cfg(config), config.get("eagle_config") if isinstance(config.get("eagle_config"), dict) else {}
    chain: list[tuple[str, list[int] | None, int]] = [
        ("eagle_aux_hidden_state_layer_ids", _ints(config.get("eagle_aux_hidden_state_layer_ids")), 0),
    ]
    if v2:
        chain += [
            ("dflash_config.target_layer_ids", _ints(d.get("target_layer_ids")), 1),
            ("dspark_target_layer_ids", _ints(config.get("dspark_target_layer_ids")), 1),
            ("target_layer_ids", _ints(config.get("target_layer_ids")), 1),
        ]
        if k >= release_key(VLLM_V2_LAYER_IDS):
            chain += [
                ("dflash_config.layer_ids", _ints(d.get("layer_ids")), 0),
                ("eagle_config.layer_ids", _ints(ecfg.get("layer_ids")) if isinstance(ecfg, dict) else None, 0),
            ]
    elif k >= release_key(VLLM_V1_PLUS_ONE):
        if isinstance(ecfg, dict) and ecfg:
            # V1 assigns eagle_config's ids after the DFlash ones: present, they win (and None reads as none)
            chain.append(
                ("eagle_config.eagle_aux_hidden_state_layer_ids", _ints(ecfg.get("eagle_aux_hidden_state_layer_ids")), 0)
            )
            chain.append(("", None, 0))
        chain.append(("dflash_config.target_layer_ids", _ints(d.get("target_layer_ids")), 1))
    else:  # 0.20-0.21: the DFlash ids taken as vLLM ids, one layer early
        chain.append(("dflash_config.target_layer_ids", _ints(d.get("target_layer_ids")), 0))
    src = f"{label} ({'V2' if v2 else 'V1'} runner) {_V2_SRC if v2 else _V1_SRC}"
    for key, ids, plus in chain:
        if not key:
            break
        if ids is not None:
            vids = [i + plus for i in ids]
            how = f" + 1 = {vids}" if plus else " (vLLM ids)"
            return Taps(_vllm_points(vids, L), ids, key, f"{src}: {key} = {ids}{how}", release=label)
    dflt = (layer_out(1), layer_out(L // 2 - 1), layer_out(L - 4))
    why = f"{src}: no ids in the config it reads; the target's EAGLE-3 default aux layers"
    return Taps(dflt, None, None, why, guessed=True, release=label)


def served_taps(engine: str, config: dict[str, Any], L: int, release: str | None = None) -> Taps | None:
    """What ``engine`` feeds the draft in ``release`` (None: the newest modelled); None for an engine whose
    DFlash serving is not modelled. A release before the engine's first DFlash one is refused in one line."""
    if engine not in DFLASH_FIRST:
        return None
    rel = release or NEWEST[engine]
    if release_key(rel) < release_key(DFLASH_FIRST[engine]):
        raise BadInput(
            f"{engine} {rel} does not serve DFlash drafts: DFlashDraftModel is registered from {engine} {DFLASH_FIRST[engine]}",
            f"upgrade to {engine} {DFLASH_FIRST[engine]} or later (and pass it as --engine-version)",
        )
    return sglang_taps(config, L, f"sglang {rel}") if engine == "sglang" else vllm_taps(config, L, rel)


def stated_config(engine: str, config: dict[str, Any], L: int, release: str | None, ids: list[int]) -> tuple[dict[str, Any], str]:
    """(the config as the engine would read it with ``ids`` written where ``release`` reads them for this config, that
    key): --layer-ids states what a server feeds without editing files. The key is the one the release read the
    draft's own ids from; where it read none (its default), the DFlash key."""
    served = served_taps(engine, config, L, release)
    key = (served.key if served is not None else None) or "dflash_config.target_layer_ids"
    return _with(config, key, ids), key


def _with(config: dict[str, Any], key: str, value: list[int]) -> dict[str, Any]:
    """A copy of ``config`` with ``key`` (dotted: one level of nesting) set to ``value``."""
    out = dict(config)
    head, _, leaf = key.partition(".")
    if leaf:
        inner = out.get(head)
        out[head] = {**(inner if isinstance(inner, dict) else {}), leaf: value}
    else:
        out[head] = value
    return out


def tap_edit(
    engine: str, config: dict[str, Any], L: int, release: str | None, trained: Taps
) -> tuple[str, list[int], str] | None:
    """(key, value, convention): the one config edit after which ``release`` feeds the trained taps, found by
    running the release's reading on the edited config; the DFlash key first unless the engine reads another key
    before it; None where no edit does it."""
    if trained.ids is None or trained.spec is None:
        return None
    served = served_taps(engine, config, L, release)
    dflash = ("dflash_config.target_layer_ids", trained.ids, "DFlash ids: after layer i")
    eagle = ("eagle_aux_hidden_state_layer_ids", [i + 1 for i in trained.ids], "vLLM ids: the DFlash ids + 1")
    order = [eagle, dflash] if served is not None and served.key == "eagle_aux_hidden_state_layer_ids" else [dflash, eagle]
    for key, value, words in order if engine == "vllm" else [dflash]:
        got = served_taps(engine, _with(config, key, value), L, release)
        if got is not None and got.spec == trained.spec:
            return key, value, words
    return None


@cache
def dflash_releases(engine: str) -> tuple[str, ...]:
    """Every release of ``engine`` whose DFlash code was executed (draft/dflash/serving.json), oldest first."""
    import json
    from importlib import resources

    table = json.loads(resources.files("eagle3_doctor").joinpath("draft/dflash/serving.json").read_text())
    return tuple(str(v) for v in table["releases"].get(engine, []))


def first_release_as_trained(engine: str, config: dict[str, Any], L: int, release: str | None, trained: Taps) -> str | None:
    """The first release after ``release`` that feeds this very config the trained taps (the same runner
    suffix), or None where none does."""
    rel = release or NEWEST[engine]
    suffix = rel[len(rel.split("-")[0]) :]
    for v in dflash_releases(engine):
        if release_key(v) <= release_key(rel):
            continue
        got = served_taps(engine, config, L, v + suffix)
        if got is not None and got.spec is not None and got.spec == trained.spec:
            return v
    return None
