"""The canonical draft's configuration: every field the forward reads, whatever checkpoint format it
came from (draft/format_configs.py maps each format's config.json onto it)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class DraftConfig:
    """Format-neutral draft hyper-parameters (Llama-style decoder layer)."""

    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int  # target vocabulary
    draft_vocab_size: int
    # None in the constructor: __post_init__ derives them (hidden_size, hidden // heads), so an int after
    target_hidden_size: int = None  # type: ignore[assignment]  # None until __post_init__ fills it
    head_dim: int = None  # type: ignore[assignment]  # None until __post_init__ fills it
    num_aux_states: int = 3
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None
    max_position_embeddings: int = 2048
    hidden_act: str = "silu"
    attention_bias: bool = False
    norm_before_residual: bool = False
    norm_before_fc: bool = False
    fc_norm: bool = False
    norm_before_lm_head: bool = True
    norm_output: bool = False
    rope_interleaved: bool = False  # GPT-J pairs (2i, 2i+1); False = NeoX rotate-half (i, i + d/2)
    qk_norm: bool = False  # Qwen3 attention: RMSNorm over head_dim on q and k, before RoPE
    num_hidden_layers: int = 1  # decoder layers: the EAGLE-3 layer, then plain ones (see DecoderLayer)
    torch_dtype: str | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.target_hidden_size is None:
            self.target_hidden_size = self.hidden_size
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"{self.num_attention_heads} attention heads do not split into {self.num_key_value_heads} KV groups")
        if self.head_dim % 2:
            raise ValueError(f"head_dim {self.head_dim} must be even for rotary embeddings")

    @property
    def fc_in_features(self) -> int:
        return self.num_aux_states * int(self.target_hidden_size)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DraftConfig:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})
