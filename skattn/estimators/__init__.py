"""scikit-learn estimators for single-head tied attention (torch backend)."""

from ._base import BaseAttentionRegressor, infer_structure
from ._mixin import resolve_width
from .direct import DirectAttentionRegressor
from .predictor import AsymptoticPredictor
from .scaled import ScaledLambdaRegressor
from .tied import TiedAttentionRegressor

__all__ = ["TiedAttentionRegressor", "DirectAttentionRegressor", "AsymptoticPredictor",
           "ScaledLambdaRegressor", "BaseAttentionRegressor", "infer_structure",
           "resolve_width"]
