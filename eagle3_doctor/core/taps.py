"""The capture-point vocabulary, and hooks that record chosen points in one forward.

Every framework numbers "the layer a feature comes from" its own way. This module is the
single place that says what a capture point *is*; everything else translates into it:

- ``embed``         the token embeddings, i.e. the input to decoder layer 0
- ``layer_out[i]``  the residual stream after decoder layer i (0-based): ``hidden_states + residual``
- ``final_norm``    the model's final norm applied to ``layer_out[L-1]``

Stated once (as TransformerLens states ``resid_post[i] == resid_pre[i+1]``):
``input of layer i == layer_out[i-1]`` for i >= 1 and ``input of layer 0 == embed``, and Hugging Face
``output_hidden_states`` is ``hs[0] = embed``, ``hs[i] = layer_out[i-1]`` for 1 <= i <= L-1,
``hs[L] = final_norm`` (post-norm: the pre-norm ``layer_out[L-1]`` is never in the tuple).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import BadInput

if TYPE_CHECKING:  # torch stays out of import time so `--help` answers at once
    import torch

EMBED = "embed"
LAYER_OUT = "layer_out"
FINAL_NORM = "final_norm"

_POINT_RE = re.compile(r"^\s*(?:(embed)|(final_norm)|layer_out\[\s*(-?\d+)\s*\])\s*$")


@dataclass(frozen=True)
class CapturePoint:
    """One unambiguous place in the target's forward pass."""

    kind: str
    layer: int | None = None

    def __post_init__(self) -> None:
        if self.kind == LAYER_OUT:
            if self.layer is None or self.layer < 0:
                raise ValueError(f"layer_out needs a layer >= 0, got {self.layer}")
        elif self.kind in (EMBED, FINAL_NORM):
            if self.layer is not None:
                raise ValueError(f"{self.kind} takes no layer")
        else:
            raise ValueError(f"unknown capture point kind {self.kind!r}")

    def __str__(self) -> str:
        return f"layer_out[{self.layer}]" if self.kind == LAYER_OUT else self.kind

    def __repr__(self) -> str:
        return str(self)

    def layer_index(self) -> int:
        """The layer of a ``layer_out[i]`` point; embed and final_norm have none."""
        if self.layer is None:
            raise ValueError(f"{self} has no layer index")
        return self.layer

    def is_embed(self) -> bool:
        return self.kind == EMBED

    def is_layer_out(self) -> bool:
        return self.kind == LAYER_OUT

    def is_final_norm(self) -> bool:
        return self.kind == FINAL_NORM

    def depth(self, num_layers: int) -> float:
        """Position along the residual stream: embed=-1, layer_out[i]=i, final_norm=L-0.5.

        final_norm sits between layer_out[L-1] and "one past the end": it is computed from
        layer_out[L-1] but is a different tensor.
        """
        if self.is_embed():
            return -1
        if self.is_final_norm():
            return num_layers - 0.5
        return self.layer_index()

    def check_range(self, num_layers: int) -> None:
        if self.is_layer_out() and self.layer_index() >= num_layers:
            raise BadInput(
                f"capture point {self} does not exist: the target has {num_layers} decoder layers "
                f"(layer_out[0]..layer_out[{num_layers - 1}])",
                "use a layer id inside the target's depth",
            )


@dataclass(frozen=True)
class TapWindow:
    """Where a replay reads a capture point: every position of every sequence (the default), or only the sequences
    ``sequences`` (replay indices), at their prompt's positions and the first ``after`` positions past it.

    A continuation's recording keeps each point only where some reader needs it (:mod:`model.recorded`): the
    weights' fit reads its candidate wirings at 128 prompts' first positions, where keeping them everywhere cost
    more memory than the run's KV cache could spare at 1,024 x 1,024, and the replay then ran a second forward."""

    sequences: frozenset[int] | None = None
    after: int | None = None

    def includes(self, other: TapWindow) -> bool:
        """Every position ``other`` reads is in this window."""
        rows = self.sequences is None or (other.sequences is not None and other.sequences <= self.sequences)
        cols = self.after is None or (other.after is not None and other.after <= self.after)
        return rows and cols

    def union(self, other: TapWindow) -> TapWindow:
        """The smallest window of this form holding both."""
        rows = None if self.sequences is None or other.sequences is None else self.sequences | other.sequences
        cols = None if self.after is None or other.after is None else max(self.after, other.after)
        return TapWindow(rows, cols)


EVERYWHERE = TapWindow()


def merge_windows(*reads: dict[CapturePoint, TapWindow]) -> dict[CapturePoint, TapWindow]:
    """Each point's window over several readers: the union of theirs."""
    out: dict[CapturePoint, TapWindow] = {}
    for r in reads:
        for p, w in r.items():
            out[p] = out[p].union(w) if p in out else w
    return out


def embed() -> CapturePoint:
    return CapturePoint(EMBED)


def layer_out(i: int) -> CapturePoint:
    """``layer_out[i]``, i >= 0: the embedding is :func:`embed`, never a layer index (an engine's "before
    layer 0" is translated to it by that engine's rule in :mod:`engines`)."""
    return CapturePoint(LAYER_OUT, i)


def final_norm() -> CapturePoint:
    return CapturePoint(FINAL_NORM)


def parse_point(text: str) -> CapturePoint:
    m = _POINT_RE.match(text)
    if not m:
        raise BadInput(
            f"cannot read capture point {text!r}",
            "write embed, layer_out[i] or final_norm",
        )
    if m.group(1):
        return embed()
    if m.group(2):
        return final_norm()
    i = int(m.group(3))
    if i < 0:
        raise BadInput(f"capture point {text!r} has a negative layer", "use layer_out[0] or more, or embed for the embeddings")
    return layer_out(i)


FeatureSpec = tuple[CapturePoint, ...]
"""The ordered capture points a draft is fed (concatenated along the hidden dimension)."""


def parse_spec(text: str) -> FeatureSpec:
    """``"layer_out[1],layer_out[3],final_norm"`` -> FeatureSpec."""
    parts = re.findall(r"embed|final_norm|layer_out\[\s*-?\d+\s*\]|[^,\s]+", text)
    return tuple(parse_point(p) for p in parts)


def format_spec(spec: Sequence[CapturePoint]) -> str:
    return ", ".join(str(p) for p in spec)


def from_hs_index(i: int, num_layers: int) -> CapturePoint:
    """Hugging Face ``output_hidden_states[i]`` (negative indices as in Python) -> capture point."""
    n = num_layers + 1
    if not -n <= i < n:
        raise BadInput(
            f"output_hidden_states index {i} is out of range for a {num_layers}-layer target "
            f"(valid: 0..{num_layers} or -{n}..-1)",
            "use an index inside the hidden_states tuple",
        )
    i %= n
    if i == 0:
        return embed()
    if i == num_layers:
        return final_norm()
    return layer_out(i - 1)


def to_hs_index(point: CapturePoint, num_layers: int) -> int | None:
    """Capture point -> ``output_hidden_states`` index; None for ``layer_out[L-1]`` (not in the tuple)."""
    if point.is_embed():
        return 0
    if point.is_final_norm():
        return num_layers
    return None if point.layer == num_layers - 1 else point.layer_index() + 1


def all_points(num_layers: int) -> list[CapturePoint]:
    """Every capture point of an L-layer target, shallow to deep."""
    return [embed(), *(layer_out(i) for i in range(num_layers)), final_norm()]


# --------------------------------------------------------------------------- hooks


class DecoderParts:
    """The pieces of a Hugging Face decoder the hooks attach to.

    Found once, by attribute path, so an unusual architecture fails here with a clear message
    instead of recording nothing.
    """

    def __init__(self, model: torch.nn.Module):
        base = model
        for attr in ("model", "transformer", "language_model"):
            inner = getattr(base, attr, None)
            if inner is not None and (hasattr(inner, "layers") or hasattr(inner, "h")):
                base = inner
                break
        layers = getattr(base, "layers", None)
        if layers is None:
            layers = getattr(base, "h", None)
        norm = getattr(base, "norm", None)
        if norm is None:
            norm = getattr(base, "ln_f", None)
        if layers is None or norm is None:
            arch = type(model).__name__
            raise BadInput(
                f"cannot find the decoder layers and final norm of {arch} "
                "(looked for model.layers / model.norm and transformer.h / transformer.ln_f)",
                "load a causal LM whose decoder sits at model.model.layers, or report the architecture",
            )
        self.base = base
        self.layers = layers
        self.norm = norm
        self.num_layers = len(layers)


class TapRecorder:
    """Records the chosen capture points during one forward of a Hugging Face decoder.

    Hooks, not ``output_hidden_states``: asking transformers for all L+1 states holds every
    layer's activations until the forward ends; here only the requested points are kept.
    ``embed`` is taken as the input of layer 0 (not the ``embed_tokens`` output) so models that
    scale or otherwise post-process the embeddings are still captured at the point layer 0 sees.
    """

    def __init__(self, model: torch.nn.Module, points: Iterable[CapturePoint], *, to_device=None, detach=True):
        self.parts = DecoderParts(model)
        self.points = sorted(set(points), key=lambda p: p.depth(self.parts.num_layers))
        for p in self.points:
            p.check_range(self.parts.num_layers)
        self.to_device = to_device
        self.detach = detach
        self.captured: dict[CapturePoint, torch.Tensor] = {}
        self._handles: list = []

    def _store(self, point: CapturePoint, tensor: torch.Tensor) -> None:
        t = tensor.detach() if self.detach else tensor
        if self.to_device is not None:
            t = t.to(self.to_device, non_blocking=True)
        self.captured[point] = t

    def __enter__(self) -> TapRecorder:
        for p in self.points:
            if p.is_embed():

                def pre(_mod, args, kwargs, p=p):
                    hs = args[0] if args else kwargs["hidden_states"]
                    self._store(p, hs)

                self._handles.append(self.parts.layers[0].register_forward_pre_hook(pre, with_kwargs=True))
            elif p.is_layer_out():

                def post(_mod, _args, out, p=p):
                    self._store(p, out[0] if isinstance(out, (tuple, list)) else out)

                self._handles.append(self.parts.layers[p.layer].register_forward_hook(post))
            else:

                def norm_post(_mod, _args, out, p=p):
                    self._store(p, out[0] if isinstance(out, (tuple, list)) else out)

                self._handles.append(self.parts.norm.register_forward_hook(norm_post))
        return self

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def take(self) -> dict[CapturePoint, torch.Tensor]:
        out, self.captured = self.captured, {}
        return out
