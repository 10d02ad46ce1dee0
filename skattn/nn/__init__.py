"""Torch backend: functional pre-activations and losses, attention modules (tied, untied,
multi-head, direct), training."""

from . import functional
from .modules import DirectAttention, FactoredAttention, UntiedAttention
from .training import SOLVERS, TrainingDivergedError, TrainingResult, train

__all__ = [
    "functional",
    "FactoredAttention",
    "UntiedAttention",
    "DirectAttention",
    "train",
    "TrainingResult",
    "TrainingDivergedError",
    "SOLVERS",
]
