"""What every attention estimator shares, torch-trained or not: the parameters declared
once, their checks, input layouts, predict and score (docs: Theory §1–2).

No torch here: :class:`AttentionRegressorMixin` serves the torch regressors
(:mod:`._base`) and :class:`~skattn.AsymptoticPredictor` (AMP, numpy) alike.
"""

from __future__ import annotations

import math
import re
from numbers import Integral

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.metrics import r2_score
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from .._validation import (
    MAX_INVERSE_TEMPERATURE,
    MAX_REG_LAMBDA,
    NONE,
    RANDOM_STATE,
    VERBOSE,
    Interval,
    Options,
    Predicate,
    check_finite_result,
    validate_parameters,
)
from ..data.teacher import attention_map, attention_output, preactivation
from .._warnings import warn

__all__ = ["AttentionRegressorMixin", "infer_structure", "resolve_width", "WIDTH_CONSTRAINT",
           "DEVICE_STRING"]

_DEVICE_PATTERN = re.compile(r"(auto|cpu|cuda(:\d+)?)\Z")
DEVICE_STRING = Predicate(lambda value: isinstance(value, str)
                          and _DEVICE_PATTERN.match(value) is not None,
                          "a str among 'auto', 'cpu', 'cuda' or 'cuda:<index>'")
# width: an int is p itself, a float the ratio p/d (as sklearn's max_features)
WIDTH_CONSTRAINT = [Interval("int", 1), Interval("real_not_int", 0, closed="neither")]


def resolve_width(width, n_features):
    """The factor width p from the ``width`` parameter at token dimension ``n_features``.

    Parameters
    ----------
    width : int or float
        An int is p; a float is the ratio κ = p/d, rounded (at least 1).
    n_features : int
        Token dimension d.

    Returns
    -------
    p : int
    """
    if isinstance(width, Integral):
        return int(width)
    return max(1, int(round(width * n_features)))


def infer_structure(X_shape, y_shape, *, task="auto", n_tokens=None):
    """Read the token count, token dimension and task from the shapes of X and y.

    Parameters
    ----------
    X_shape : tuple
        ``(n, T, d)`` or flattened ``(n, T·d)``.
    y_shape : tuple
        ``(n, T, T)`` / ``(n, T·T)`` (seq2lab), ``(n, T, d)`` / ``(n, T·d)`` (seq2seq), or
        ``(n,)`` (one scalar label per sample: seq2lab with T = 1).
    task : {"auto", "seq2lab", "seq2seq"}
    n_tokens : int or None
        Token count T, needed only when X is flattened and y does not determine T.

    Returns
    -------
    n_tokens : int
    n_features : int
    task : str

    Raises
    ------
    ValueError
        Naming ``X``, ``y``, ``task`` or ``n_tokens`` and the expected shapes.
    """
    n_tokens_given = n_tokens
    if len(X_shape) == 3:
        T, d = X_shape[1], X_shape[2]
        if n_tokens is not None and n_tokens != T:
            raise ValueError(f"n_tokens={n_tokens} does not match X of shape {X_shape} "
                             f"(n_samples, n_tokens, n_features).")
    else:
        m = X_shape[1]
        T = n_tokens
        if T is None and len(y_shape) == 3:
            T = y_shape[1]
        if T is None:
            # Only seq2lab fixes T from a flattened y: y has T·T columns.
            k = 1 if len(y_shape) == 1 else y_shape[1]
            r = math.isqrt(k)
            seq2lab_ok = r * r == k and m % r == 0
            seq2seq_ok = len(y_shape) == 2 and k == m
            if task == "seq2seq" or (task == "auto" and seq2seq_ok and not seq2lab_ok):
                raise ValueError(
                    f"n_tokens must be given to fit flattened seq2seq data: X of shape "
                    f"{X_shape} and y of shape {y_shape} hold n_tokens × n_features columns "
                    f"and do not determine n_tokens. Pass X as (n_samples, n_tokens, "
                    f"n_features) or set n_tokens.")
            if task == "auto" and seq2lab_ok and seq2seq_ok:
                raise ValueError(
                    f"task is ambiguous for X of shape {X_shape} and y of shape {y_shape}: "
                    f"y can be a flattened {r}×{r} attention matrix (seq2lab) or the "
                    f"flattened output sequence (seq2seq). Set task='seq2lab' or "
                    f"task='seq2seq' (with n_tokens).")
            if not seq2lab_ok:
                raise ValueError(
                    f"y of shape {y_shape} matches neither task for X of shape {X_shape}: "
                    f"expected y of shape (n_samples, n_tokens²) for seq2lab or (n_samples, "
                    f"n_tokens·n_features) for seq2seq (then set n_tokens).")
            T = r
        if T < 1 or m % T != 0:
            raise ValueError(f"X of shape {X_shape} has {m} columns, which is not a multiple "
                             f"of n_tokens={T}; expected (n_samples, n_tokens·n_features).")
        d = m // T
    if d < 1:
        raise ValueError(f"X of shape {X_shape} has 0 features per token; expected "
                         f"n_features >= 1.")

    if len(y_shape) == 3:
        if y_shape[1] != T:
            raise ValueError(f"y of shape {y_shape} has {y_shape[1]} tokens but X has "
                             f"n_tokens={T}; expected y of shape (n_samples, {T}, {T}) "
                             f"(seq2lab) or (n_samples, {T}, {d}) (seq2seq).")
        k = y_shape[2]
        candidates = {"seq2lab": k == T, "seq2seq": k == d}
    elif len(y_shape) == 2:
        k = y_shape[1]
        candidates = {"seq2lab": k == T * T, "seq2seq": k == T * d}
    elif len(y_shape) == 1:
        # a scalar label per sample: the single-token seq2lab case
        candidates = {"seq2lab": T == 1, "seq2seq": False}
    else:
        raise ValueError(f"y must have 1, 2 or 3 dimensions, got shape {y_shape}.")

    expected = (f"expected y of shape (n_samples, {T}, {T}) or (n_samples, {T * T}) for "
                f"seq2lab, or (n_samples, {T}, {d}) or (n_samples, {T * d}) for seq2seq "
                f"(X has n_tokens={T}, n_features={d})")
    if task == "auto":
        ok = [t for t, v in candidates.items() if v]
        if not ok:
            raise ValueError(f"y of shape {y_shape} matches neither task: {expected}.")
        if len(ok) == 2:
            raise ValueError(
                f"task is ambiguous: n_tokens == n_features == {T}, so y of shape {y_shape} "
                f"can be seq2lab or seq2seq. Set task='seq2lab' or task='seq2seq'.")
        task = ok[0]
    elif not candidates[task]:
        hint = "" if n_tokens_given is None else f" with n_tokens={n_tokens_given}"
        raise ValueError(f"y of shape {y_shape} does not match task={task!r}{hint}: "
                         f"{expected}.")
    return T, d, task


class AttentionRegressorMixin(RegressorMixin):
    """Shared parameters, input checks, predict and score of the attention estimators.

    Declares once the parameters every attention estimator has (``reg_lambda``, ``beta``,
    ``attention``, ``task``, ``n_tokens``, ``max_iter``, ``tol``, ``device``,
    ``random_state``, ``verbose``) and their checks (``_constraints``, validated at
    ``fit``); reads the layout of X and y; predicts from the fitted ``S_`` with the numpy
    forward model of :mod:`skattn.data.teacher`. Subclasses list all their parameters in
    ``__init__`` (scikit-learn reads them from its signature) and pass these ones on.

    Fitted attributes it sets or reads: ``S_``, ``n_features_in_`` (columns of the
    flattened X, ``n_tokens_ * token_dim_``), ``token_dim_`` (d), ``n_tokens_`` (T),
    ``task_``, ``feature_names_in_``.
    """

    _constraints: dict = {
        # upper bounds: larger values overflow the objective (float32) or the state
        # evolution (float64); the documented ranges of skattn._validation
        "reg_lambda": [Interval("real", 0, MAX_REG_LAMBDA, closed="both")],
        "beta": [Interval("real", 0, MAX_INVERSE_TEMPERATURE, closed="right")],
        "attention": [Options("softmax", "linear")],
        "task": [Options("auto", "seq2lab", "seq2seq")],
        "n_tokens": [Interval("int", 1), NONE],
        "max_iter": [Interval("int", 1)],
        "tol": [Interval("real", 0)],
        "device": [DEVICE_STRING],
        "random_state": [RANDOM_STATE],
        "verbose": [VERBOSE],
    }

    def __init__(self, *, reg_lambda, beta, attention, task, n_tokens, max_iter, tol, device,
                 random_state, verbose):
        self.reg_lambda = reg_lambda
        self.beta = beta
        self.attention = attention
        self.task = task
        self.n_tokens = n_tokens
        self.max_iter = max_iter
        self.tol = tol
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _validate_params(self):
        """Check every parameter against ``_constraints``; the error names the parameter."""
        validate_parameters(type(self).__name__, self.get_params(deep=False),
                            self._constraints)

    # ------------------------------------------------------------ validation
    def _check_X(self, X, reset):
        # validate_data also records (reset) or checks the column names of a DataFrame
        X = validate_data(self, X, reset=reset, ensure_2d=False, allow_nd=True,
                          dtype=[np.float64, np.float32])
        if X.ndim not in (2, 3):
            raise ValueError(
                f"X must be 3-D (n_samples, n_tokens, n_features) or 2-D (n_samples, "
                f"n_tokens·n_features), got an array of shape {X.shape}. Reshape your "
                f"data to one of these layouts.")
        if X.ndim == 2 and X.shape[1] == 0:
            raise ValueError(f"0 feature(s) (shape={X.shape}) while a minimum of 1 is "
                             f"required.")
        return X

    def _validate_fit_data(self, X, y):
        """Checked ``(X3, y3, T, d, task, y.ndim)``; X3 and y3 are 3-D."""
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target "
                             f"y is None.")
        X = self._check_X(X, reset=True)
        y = check_array(y, ensure_2d=False, allow_nd=True, dtype=np.float64, input_name="y",
                        ensure_min_samples=1)
        if y.ndim not in (1, 2, 3):
            raise ValueError(f"y must have 1, 2 or 3 dimensions, got shape {y.shape}.")
        if X.shape[0] != y.shape[0]:
            raise ValueError(f"X and y have inconsistent numbers of samples: X has "
                             f"{X.shape[0]}, y has {y.shape[0]}.")
        if X.ndim == 3 and X.shape[1] == 0:
            raise ValueError(f"X has 0 tokens (shape {X.shape}); expected X of shape "
                             "(n_samples, n_tokens >= 1, n_features).")
        T, d, task = infer_structure(X.shape, y.shape, task=self.task, n_tokens=self.n_tokens)
        if self.attention == "softmax" and T < 2:
            raise ValueError(
                f"attention='softmax' needs n_tokens >= 2 (a softmax over one token is the "
                f"constant 1), but X of shape {X.shape} and y of shape {y.shape} give "
                f"n_tokens={T}. Use attention='linear' for single-token data.")
        y3 = y.reshape(y.shape[0], T, -1)
        if self.attention == "softmax" and task == "seq2lab":
            rows = y3.sum(axis=-1)
            if not np.allclose(rows, 1.0, atol=1e-4):
                # legal (noisy or foreign targets), but usually a sign of the wrong layout
                warn(
                    f"y has rows that do not sum to one (max deviation "
                    f"{np.max(np.abs(rows - 1)):.2g}), although softmax attention predicts "
                    "row-stochastic matrices; check the layout of y (seq2lab expects "
                    "(n_samples, n_tokens, n_tokens) attention matrices).", UserWarning)
        return X.reshape(X.shape[0], T, d), y3, T, d, task, y.ndim

    def _structure_attributes(self, T, d, task, y_ndim):
        """The fitted attributes describing the data layout, as a dict."""
        # n_features_in_ counts the columns sklearn sees (flattened X), so it agrees with
        # feature_names_in_; the token dimension d is token_dim_.
        return dict(n_features_in_=T * d, token_dim_=d, n_tokens_=T, task_=task,
                    _y_ndim=y_ndim)

    def _validate_predict_X(self, X):
        check_is_fitted(self)
        X = self._check_X(X, reset=False)
        T, d = self.n_tokens_, self.token_dim_
        name = type(self).__name__
        if X.ndim == 2 and X.shape[1] != T * d:
            raise ValueError(
                f"X has {X.shape[1]} features, but {name} is expecting {T * d} features as "
                f"input (n_tokens={T} × n_features={d}, flattened).")
        if X.ndim == 3 and X.shape[1:] != (T, d):
            raise ValueError(
                f"X has shape {X.shape}, but {name} was fitted with n_tokens={T} and "
                f"n_features={d}: expected X of shape (n_samples, {T}, {d}).")
        return X.reshape(X.shape[0], T, d)

    # --------------------------------------------------------------- predict
    def _attention_maps(self, X3):
        """``σ_β(h(S_; X))`` in float64, shape (n_samples, T, T)."""
        with np.errstate(over="ignore", invalid="ignore"):  # overflow: checked below
            h = check_finite_result(preactivation(X3, self.S_), "X", X3)
        return attention_map(h, self.beta, self.attention)

    def predict(self, X):
        """Predict attention matrices (seq2lab) or output sequences (seq2seq).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_tokens, n_features) or \
                (n_samples, n_tokens * n_features)

        Returns
        -------
        y_pred : ndarray
            In the layout of the y seen in ``fit`` (3-D, flattened 2-D or 1-D).
        """
        X3 = self._validate_predict_X(X)
        A = self._attention_maps(X3)
        with np.errstate(over="ignore", invalid="ignore"):  # overflow: checked below
            y = attention_output(A, X3.astype(np.float64, copy=False), self.task_)
        check_finite_result(y, "X", X3)  # linear seq2seq: A X can overflow where A did not
        if self._y_ndim == 2:
            return y.reshape(y.shape[0], -1)
        if self._y_ndim == 1:
            return y.reshape(y.shape[0])
        return y

    def attention_matrix(self, X):
        """The learned attention matrices ``σ_β(h(S; X))``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_tokens, n_features) or \
                (n_samples, n_tokens * n_features)

        Returns
        -------
        A : ndarray of shape (n_samples, n_tokens, n_tokens)
        """
        return self._attention_maps(self._validate_predict_X(X))

    def score(self, X, y, sample_weight=None):
        """R² of the flattened outputs, variance-weighted over output entries.

        With ``multioutput='variance_weighted'`` the score is
        ``1 − Σ (ŷ − y)² / Σ (y − ȳ)²`` over all entries, i.e. one minus the paper's test
        error (:func:`skattn.metrics.attention_error`) divided by the error of the
        per-entry mean predictor; it is monotone in the test error on a fixed test set.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_tokens, n_features) or \
                (n_samples, n_tokens * n_features)
        y : array-like, the layout used in ``fit`` (any layout with the same entries)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        score : float
        """
        y_pred = self.predict(X)
        y = check_array(y, ensure_2d=False, allow_nd=True, dtype=np.float64, input_name="y")
        n = y.shape[0]
        if n != y_pred.shape[0] or y.size != y_pred.size:
            raise ValueError(f"y of shape {y.shape} does not match the predictions for X "
                             f"(shape {y_pred.shape}); expected the same samples and layout "
                             "as in fit.")
        return float(r2_score(y.reshape(n, -1), y_pred.reshape(n, -1),
                              sample_weight=sample_weight, multioutput="variance_weighted"))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.target_tags.multi_output = True
        # a 1-D y means one token, meaningful only for linear attention
        tags.target_tags.single_output = self.attention == "linear"
        # quadratic forms cannot fit the generic (linear) regression data of sklearn's checks
        tags.regressor_tags.poor_score = True
        tags.non_deterministic = False
        return tags
