"""An estimator wrapper whose weight decay grows with the sample size (docs: Theory §8)."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.utils.validation import check_is_fitted

from .._validation import MAX_REG_LAMBDA, check_scalar_range

__all__ = ["ScaledLambdaRegressor"]


class ScaledLambdaRegressor(RegressorMixin, BaseEstimator):
    """Fit an attention regressor with a weight decay that grows with the sample size.

    ``fit(X, y)`` fits a clone of ``estimator`` with
    ``reg_lambda = scale · n_samples^exponent``. With ``exponent=0.5`` and
    ``scale = c/d`` this is ``λ = c √(n/d²)``: the path along which the excess risk of a
    power-law target follows ``(n/d)^(−1+1/(2γ))`` at every n
    (:mod:`skattn.theory.powerlaw.regimes`), so that
    scikit-learn's ``learning_curve`` — which clones one estimator for every training
    size — measures that scaling law.

    Parameters
    ----------
    estimator : estimator with a ``reg_lambda`` parameter
        E.g. :class:`~skattn.TiedAttentionRegressor`.
    scale : float, default=1.0
        Prefactor (≥ 0).
    exponent : float, default=0.5
        Power of n. ``fit`` raises a ValueError when ``scale · n^exponent`` exceeds the
        largest ``reg_lambda`` (1e6).

    Attributes
    ----------
    estimator_ : estimator
        The fitted clone.
    reg_lambda_ : float
        The weight decay it was fitted with.
    n_features_in_ : int
        Forwarded from ``estimator_`` when it has it.
    """

    def __init__(self, estimator, scale=1.0, exponent=0.5):
        self.estimator = estimator
        self.scale = scale
        self.exponent = exponent

    def fit(self, X, y, **fit_params):
        """Fit the clone on ``(X, y)`` (``fit_params`` are passed on)."""
        scale = check_scalar_range(self.scale, "scale", low=0)
        exponent = check_scalar_range(self.exponent, "exponent")
        if not hasattr(self.estimator, "get_params") or \
                "reg_lambda" not in self.estimator.get_params():
            raise TypeError("estimator must be a scikit-learn estimator with a reg_lambda "
                            f"parameter, got {type(self.estimator).__name__}.")
        n = len(X)
        if n < 1:
            raise ValueError("X must hold at least one sample.")
        # in logarithms: n ** 1000 overflows float64 (OverflowError) long before the range
        # of reg_lambda is left
        log_lambda = np.log(scale) + exponent * np.log(n) if scale > 0 else -np.inf
        if log_lambda > np.log(MAX_REG_LAMBDA):
            raise ValueError(
                f"scale · n_samples^exponent = {scale:g} · {n}^{exponent:g} (about "
                f"1e{log_lambda / np.log(10):.0f}) exceeds the largest reg_lambda, "
                f"{MAX_REG_LAMBDA:g}; lower scale or exponent.")
        self.reg_lambda_ = float(scale * n ** exponent)
        self.estimator_ = clone(self.estimator).set_params(reg_lambda=self.reg_lambda_)
        self.estimator_.fit(X, y, **fit_params)
        if hasattr(self.estimator_, "n_features_in_"):
            self.n_features_in_ = self.estimator_.n_features_in_
        return self

    def predict(self, X):
        """``estimator_.predict(X)``."""
        check_is_fitted(self, "estimator_")
        return self.estimator_.predict(X)

    def score(self, X, y, sample_weight=None):
        """``estimator_.score(X, y)``."""
        check_is_fitted(self, "estimator_")
        return self.estimator_.score(X, y, sample_weight=sample_weight)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = self.estimator.__sklearn_tags__()
        tags.input_tags = inner.input_tags
        tags.target_tags = inner.target_tags
        return tags
