"""Shared machinery of the attention regressors: input layouts, fitting, prediction."""

from __future__ import annotations

import math
import warnings
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import r2_score
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import InvalidParameterError, Interval, StrOptions
from sklearn.utils.validation import _check_feature_names, check_array, check_is_fitted

from ..nn import functional as F
from ..nn.training import TrainingDivergedError, train

__all__ = ["BaseAttentionRegressor", "infer_structure"]

_DTYPES = {"float32": torch.float32, "float64": torch.float64}
# Samples per chunk at predict time: bounds memory for very large n.
_PREDICT_CHUNK = 1 << 16


def _resolve_device(device, owner):
    """Map the ``device`` parameter to a torch device string, or raise naming it."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        dev = None
    if dev is None or dev.type not in ("cpu", "cuda"):
        raise InvalidParameterError(
            f"The 'device' parameter of {owner} must be 'auto', 'cpu', 'cuda' or "
            f"'cuda:<index>'. Got {device!r} instead.")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but CUDA is not available; use "
                         f"device='auto' or device='cpu'.")
    return str(dev)


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


class BaseAttentionRegressor(RegressorMixin, BaseEstimator):
    """Base class: fit/predict/score for single-head tied attention (THEORY.md §2).

    Subclasses implement ``_param_shape``, ``_fitted_param``, ``_random_init``,
    ``_make_module`` and ``_store_params``; the sklearn parameters and the fitted
    attributes are documented on :class:`TiedAttentionRegressor`.
    """

    _parameter_constraints: dict = {
        "reg_lambda": [Interval(Real, 0, None, closed="left")],
        "beta": [Interval(Real, 0, None, closed="neither")],
        "attention": [StrOptions({"softmax", "linear"})],
        "task": [StrOptions({"auto", "seq2lab", "seq2seq"})],
        "n_tokens": [Interval(Integral, 1, None, closed="left"), None],
        "solver": [StrOptions({"adam", "lbfgs"})],
        "learning_rate_init": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left"), None],
        "init_scale": [Interval(Real, 0, None, closed="left")],
        "device": [str, torch.device],
        "dtype": [StrOptions({"float32", "float64"})],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "warm_start": ["boolean"],
    }

    # ------------------------------------------------------------------ hooks
    def _param_shape(self, n_features):
        raise NotImplementedError

    def _fitted_param(self):
        raise NotImplementedError

    def _random_init(self, shape, rng):
        raise NotImplementedError

    def _make_module(self, n_features, task, init, dtype, device):
        raise NotImplementedError

    def _store_params(self, module):
        raise NotImplementedError

    # ------------------------------------------------------------ validation
    def _check_X(self, X, reset):
        _check_feature_names(self, X, reset=reset)
        X = check_array(X, ensure_2d=False, allow_nd=True, dtype=[np.float64, np.float32],
                        input_name="X")
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
                warnings.warn(
                    f"y has rows that do not sum to one (max deviation "
                    f"{np.max(np.abs(rows - 1)):.2g}), although softmax attention predicts "
                    "row-stochastic matrices; check the layout of y (seq2lab expects "
                    "(n_samples, n_tokens, n_tokens) attention matrices).", UserWarning)
        return X.reshape(X.shape[0], T, d), y3, T, d, task, y.ndim

    def _validate_predict_X(self, X):
        check_is_fitted(self)
        X = self._check_X(X, reset=False)
        T, d = self.n_tokens_, self.n_features_in_
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

    # ------------------------------------------------------------------- fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Minimise the ERM objective of THEORY.md §2 on ``(X, y)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_tokens, n_features) or \
                (n_samples, n_tokens * n_features)
            Token sequences; a flattened X is read with ``n_tokens`` (given, or inferred
            from y).
        y : array-like of shape (n_samples, n_tokens, n_tokens), (n_samples, n_tokens**2), \
                (n_samples, n_tokens, n_features), (n_samples, n_tokens * n_features) \
                or (n_samples,)
            Attention matrices (seq2lab), output sequences (seq2seq), or one scalar per
            sample (seq2lab with a single token, linear attention only). ``predict``
            returns this layout.

        Returns
        -------
        self : object
            Fitted estimator.

        Raises
        ------
        skattn.nn.TrainingDivergedError
            If the objective becomes NaN or infinite; the estimator then holds the last
            parameters with a finite objective.
        """
        X3, y3, T, d, task, y_ndim = self._validate_fit_data(X, y)
        device = _resolve_device(self.device, type(self).__name__)
        dtype = _DTYPES[self.dtype]
        rng = check_random_state(self.random_state)

        shape = self._param_shape(d)
        if self.warm_start and hasattr(self, "S_"):
            init = self._fitted_param()
            if init.shape != shape:
                raise ValueError(
                    f"warm_start=True but the fitted parameters have shape {init.shape} "
                    f"while X with n_features={d} needs {shape}; set warm_start=False.")
        else:
            init = self._random_init(shape, rng)

        module = self._make_module(d, task, init, dtype, device)
        # as_tensor shares memory with X when dtype and device allow (no copy of the data)
        # (a read-only input, e.g. a memmap, is copied: torch tensors must be writable)
        Xt = torch.as_tensor(np.require(X3, requirements="W"), dtype=dtype, device=device)
        yt = torch.as_tensor(np.require(y3, requirements="W"), dtype=dtype, device=device)

        fitted = dict(n_features_in_=d, n_tokens_=T, task_=task, device_=device, _y_ndim=y_ndim)
        try:
            result = train(module, Xt, yt, reg_lambda=self.reg_lambda, solver=self.solver,
                           learning_rate_init=self.learning_rate_init, max_iter=self.max_iter,
                           tol=self.tol, n_iter_no_change=self.n_iter_no_change,
                           batch_size=self.batch_size, random_state=rng, verbose=self.verbose)
        except TrainingDivergedError as err:
            # keep the last finite parameters, as documented, then report
            if err.result is not None:
                self._store_result(module, err.result, fitted)
            raise
        self._store_result(module, result, fitted)
        if not result.converged:
            warnings.warn(
                f"{type(self).__name__}: the {self.solver} solver {result.message}. "
                "Increase max_iter"
                + (" or use solver='lbfgs'" if self.solver == "adam" else "") + ".",
                ConvergenceWarning)
        return self

    def _store_result(self, module, result, fitted):
        for name, value in fitted.items():
            setattr(self, name, value)
        self._store_params(module)
        d2 = float(self.n_features_in_) ** 2
        self.n_iter_ = int(result.n_iter)
        self.loss_curve_ = [float(v) / d2 for v in result.objective_history]
        self.train_objective_ = float(result.objective) / d2
        self.train_error_ = float(result.train_error)
        self.converged_ = bool(result.converged)

    # --------------------------------------------------------------- predict
    def _predict_device(self):
        dev = getattr(self, "device_", "cpu")
        return dev if dev.startswith("cuda") and torch.cuda.is_available() else "cpu"

    def _predict_tensor(self, X3):
        """``σ_β(h(S; X))`` (seq2lab) or ``σ_β(h) X`` (seq2seq), in float64."""
        device = self._predict_device()
        S = torch.tensor(self.S_, dtype=torch.float64, device=device)
        out = []
        for start in range(0, X3.shape[0], _PREDICT_CHUNK):
            Xc = torch.tensor(X3[start:start + _PREDICT_CHUNK], dtype=torch.float64,
                              device=device)
            A = F.attention_map(F.preactivation(Xc, S), self.beta, self.attention)
            out.append(F.attention_output(A, Xc, self.task_).cpu().numpy())
        if not out:
            k = self.n_tokens_ if self.task_ == "seq2lab" else self.n_features_in_
            return np.zeros((0, self.n_tokens_, k))
        return np.concatenate(out, axis=0)

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
        y = self._predict_tensor(X3)
        if self._y_ndim == 2:
            return y.reshape(y.shape[0], -1)
        if self._y_ndim == 1:
            return y.reshape(y.shape[0])
        return y

    def attention_matrix(self, X):
        """The learned attention matrices ``σ_β(h(S; X))``, shape (n_samples, T, T)."""
        X3 = self._validate_predict_X(X)
        device = self._predict_device()
        S = torch.tensor(self.S_, dtype=torch.float64, device=device)
        Xt = torch.tensor(X3, dtype=torch.float64, device=device)
        return F.attention_map(F.preactivation(Xt, S), self.beta,
                               self.attention).cpu().numpy()

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
        return tags
