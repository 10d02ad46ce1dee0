"""Torch backend: functional pre-activations and losses, attention modules (tied, untied,
multi-head, direct), training
and its history."""

from . import functional
from .history import HistoryRecorder
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
    "HistoryRecorder",
]
