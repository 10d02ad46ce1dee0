"""Torch backend: functional pre-activations and losses, attention modules, training."""

from . import functional
from .modules import DirectAttention, FactoredAttention
from .training import SOLVERS, TrainingDivergedError, TrainingResult, train

__all__ = [
    "functional",
    "FactoredAttention",
    "DirectAttention",
    "train",
    "TrainingResult",
    "TrainingDivergedError",
    "SOLVERS",
]
