"""Data layer: targets S0 and the attention-indexed teacher (numpy only)."""

from .targets import PowerLawTarget, SpectrumTarget, Target, WishartTarget
from .teacher import (
    AttentionIndexedModel,
    attention_map,
    make_attention_indexed,
    preactivation,
    softmax,
)

__all__ = [
    "Target",
    "WishartTarget",
    "PowerLawTarget",
    "SpectrumTarget",
    "AttentionIndexedModel",
    "make_attention_indexed",
    "preactivation",
    "softmax",
    "attention_map",
]
