"""ALBERT architecture description and the size presets.

Field names follow Hugging Face's ``AlbertConfig`` so that import/export is a rename-free
copy. ``SIZES`` holds albertkit's own presets, a plain dict: the ALBERT paper's
base/large/xlarge/xxlarge (Lan et al. 2020, table 1) and a ``tiny`` size for tests and the
CPU demo. They reach configs through the size registry (:mod:`albertkit.config.registry`),
where plugins add theirs (``albertkit.config.kinds.SizeName`` accepts any registered size).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Activation = Literal["gelu", "gelu_new", "gelu_fast", "relu", "silu", "swish", "tanh", "mish"]


class AlbertSpec(BaseModel):
    """A fully specified ALBERT architecture (every field resolved).

    Example:
        >>> spec = AlbertSpec(**SIZES["tiny"])
        >>> spec.hidden_size
        128
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    vocab_size: int = Field(30000, gt=0)
    embedding_size: int = Field(128, gt=0)
    hidden_size: int = Field(768, gt=0)
    num_hidden_layers: int = Field(12, gt=0)
    num_hidden_groups: int = Field(1, gt=0)
    num_attention_heads: int = Field(12, gt=0)
    intermediate_size: int = Field(3072, gt=0)
    inner_group_num: int = Field(1, gt=0)
    hidden_act: Activation = "gelu_new"
    hidden_dropout_prob: float = Field(0.0, ge=0.0, lt=1.0)
    attention_probs_dropout_prob: float = Field(0.0, ge=0.0, lt=1.0)
    classifier_dropout_prob: float = Field(0.1, ge=0.0, lt=1.0)
    max_position_embeddings: int = Field(512, gt=0)
    type_vocab_size: int = Field(2, gt=0)
    initializer_range: float = Field(0.02, gt=0.0)
    layer_norm_eps: float = Field(1e-12, gt=0.0)
    pre_layer_norm: bool = False

    @model_validator(mode="after")
    def _check(self) -> AlbertSpec:
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size={self.hidden_size} is not divisible by "
                f"num_attention_heads={self.num_attention_heads}"
            )
        if self.num_hidden_groups > self.num_hidden_layers:
            raise ValueError(
                f"num_hidden_groups={self.num_hidden_groups} exceeds "
                f"num_hidden_layers={self.num_hidden_layers}"
            )
        return self

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads


# The ALBERT paper's sizes (vocab 30000, embedding 128). ALBERT v2 uses no dropout.
SIZES: dict[str, dict[str, object]] = {
    "tiny": dict(
        vocab_size=3000,
        embedding_size=64,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=512,
        max_position_embeddings=512,
    ),
    "base": dict(
        embedding_size=128,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
    ),
    "large": dict(
        embedding_size=128,
        hidden_size=1024,
        num_hidden_layers=24,
        num_attention_heads=16,
        intermediate_size=4096,
    ),
    "xlarge": dict(
        embedding_size=128,
        hidden_size=2048,
        num_hidden_layers=24,
        num_attention_heads=16,
        intermediate_size=8192,
    ),
    "xxlarge": dict(
        embedding_size=128,
        hidden_size=4096,
        num_hidden_layers=12,
        num_attention_heads=64,
        intermediate_size=16384,
    ),
}
