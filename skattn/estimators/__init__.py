"""scikit-learn estimators for attention: tied (the paper's), direct, untied and
multi-head (torch backend), and the asymptotic predictor."""

from ._base import BaseAttentionRegressor, infer_structure
from ._mixin import resolve_width
from .direct import DirectAttentionRegressor
from .predictor import AsymptoticPredictor
from .scaled import ScaledLambdaRegressor
from .tied import TiedAttentionRegressor
from .untied import UntiedAttentionRegressor

__all__ = ["TiedAttentionRegressor", "UntiedAttentionRegressor", "DirectAttentionRegressor",
           "AsymptoticPredictor", "ScaledLambdaRegressor", "BaseAttentionRegressor",
           "infer_structure", "resolve_width"]
