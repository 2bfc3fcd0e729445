"""expected_shapes, which checks a checkpoint without building the torch module, is Eagle3Draft's
state_dict exactly: names, shapes and order, for every optional piece of the module."""

from __future__ import annotations

import pytest
import torch

from eagle3_doctor.draft.config import DraftConfig
from eagle3_doctor.draft.model import Eagle3Draft
from eagle3_doctor.draft.shapes import expected_shapes

BASE = dict(
    hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2, vocab_size=100, draft_vocab_size=50
)


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"norm_before_fc": True},
        {"fc_norm": True, "num_aux_states": 2, "target_hidden_size": 96},
        {"attention_bias": True, "qk_norm": True, "head_dim": 32},
        {"num_hidden_layers": 3, "norm_before_residual": True, "norm_output": True},
    ],
)
def test_expected_shapes_are_the_modules(extra):
    cfg = DraftConfig(**BASE, **extra)
    with torch.device("meta"):
        module = Eagle3Draft(cfg)
    assert list(expected_shapes(cfg).items()) == [(k, tuple(v.shape)) for k, v in module.state_dict().items()]
