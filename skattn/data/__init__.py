"""Data layer: targets S0 and the attention-indexed teacher (numpy only)."""

from .targets import (
    TARGET_FAMILIES,
    PowerLawTarget,
    SpectrumTarget,
    Target,
    WishartTarget,
    check_target_spec,
    target_from_spec,
)
from .teacher import (
    TOKEN_DISTRIBUTIONS,
    AttentionIndexedModel,
    attention_map,
    check_token_covariance,
    make_attention_indexed,
    preactivation,
    sample_tokens,
    softmax,
)

__all__ = [
    "Target",
    "WishartTarget",
    "PowerLawTarget",
    "SpectrumTarget",
    "TARGET_FAMILIES",
    "check_target_spec",
    "target_from_spec",
    "AttentionIndexedModel",
    "make_attention_indexed",
    "TOKEN_DISTRIBUTIONS",
    "sample_tokens",
    "check_token_covariance",
    "preactivation",
    "softmax",
    "attention_map",
]
