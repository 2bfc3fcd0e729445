"""The MTP head's configuration: the decoder layer's geometry (a :class:`DraftConfig`, read the same way as an
EAGLE-3 draft's) and the two choices that decide what the head sees.

``hidden``: the target state the head was trained on, a capture point: the pre-norm output of the last
decoder layer (``layer_out[L-1]``) or the target's ``final_norm`` of it.
``recycle``: the state a step hands the next one: ``pre_norm`` (the layer output before
``shared_head.norm``; vLLM ``model_executor/models/deepseek_mtp.py`` @03356f8 returns ``residual +
hidden_states`` and norms only inside ``compute_logits``) or ``post_norm`` (``shared_head.norm`` of it,
the same tensor the head reads; SGLang ``srt/models/deepseek_nextn.py`` @0114f9c returns
``shared_head.norm(hidden_states, residual)``, speculators ``models/mtp/model_definitions.py``
``MTPLayerMixin.forward`` returns ``final_layernorm(hidden_states)`` and ``core.py`` feeds it to the
next step).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import DraftConfig

HIDDEN_POINTS = ("layer_out_last", "final_norm")
RECYCLES = ("pre_norm", "post_norm")


@dataclass
class MTPConfig:
    layer: DraftConfig  # the one decoder layer, over H-wide states (its vocab_size is the target's)
    hidden: str = "layer_out_last"  # one of HIDDEN_POINTS
    recycle: str = "post_norm"  # one of RECYCLES
    hidden_source: str = "default"  # where ``hidden`` was read from, for the reports

    def __post_init__(self) -> None:
        if self.hidden not in HIDDEN_POINTS:
            raise ValueError(f"MTP hidden {self.hidden!r} is not one of {HIDDEN_POINTS}")
        if self.recycle not in RECYCLES:
            raise ValueError(f"MTP recycle {self.recycle!r} is not one of {RECYCLES}")

    # the attributes the acceptance estimator reads of any drafter's config (one feature slot, the target's vocabulary)
    @property
    def num_aux_states(self) -> int:
        return 1

    @property
    def hidden_size(self) -> int:
        return self.layer.hidden_size

    @property
    def vocab_size(self) -> int:
        return self.layer.vocab_size

    @property
    def draft_vocab_size(self) -> int:
        return self.layer.vocab_size

    @property
    def fc_in_features(self) -> int:
        return self.layer.hidden_size
