"""The torch-trained attention regressors: shared parameters and the fit template."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning

from .._validation import BOOLEAN, NONE, InvalidParameterError, Interval, Options, Predicate
from .._validation import atomic_fit, check_finite_result, check_memory
from .._validation import check_random_state_arg
from ..nn import functional as F
from ..nn.history import HistoryRecorder, make_history_recorder
from ..nn.training import TrainingDivergedError, train
from ._mixin import DEVICE_STRING, WIDTH_CONSTRAINT, AttentionRegressorMixin, infer_structure
from .._warnings import warn

__all__ = ["BaseAttentionRegressor", "infer_structure"]

_DTYPES = {"float32": torch.float32, "float64": torch.float64}
# Samples per chunk at predict time: bounds memory for very large n.
_PREDICT_CHUNK = 1 << 16
# float32 training is accurate while the softmax logits beta·|h| stay below this
_FLOAT32_LOGIT_LIMIT = 100.0
_PRECISION_PROBE = 4096  # samples on which the logits are measured


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


class BaseAttentionRegressor(AttentionRegressorMixin, BaseEstimator):
    """Base class: fit attention (tied, untied, one or several heads) with torch
    (docs: Theory §2).

    Declares the training parameters shared by the torch regressors (``solver``,
    ``learning_rate_init``, ``n_iter_no_change``, ``batch_size``, ``init_scale``,
    ``dtype``, ``warm_start``, ``history``) on top of those of :class:`AttentionRegressorMixin`.
    Subclasses implement ``_param_shape``, ``_fitted_param``, ``_random_init``,
    ``_make_module`` and ``_store_params``; the parameters and the fitted attributes are
    documented on :class:`TiedAttentionRegressor`.
    """

    _constraints: dict = {
        **AttentionRegressorMixin._constraints,
        "solver": [Options("adam", "lbfgs")],
        "learning_rate_init": [Interval("real", 0, closed="neither")],
        "n_iter_no_change": [Interval("int", 1)],
        "batch_size": [Interval("int", 1), NONE],
        "init_scale": [Interval("real", 0)],
        "device": [DEVICE_STRING,
                   Predicate(lambda value: isinstance(value, torch.device), "a torch.device")],
        "dtype": [Options("float32", "float64")],
        "warm_start": [BOOLEAN],
        "history": [NONE, Predicate(lambda value: isinstance(value, (dict, HistoryRecorder)),
                                    "a dict or a skattn.nn.HistoryRecorder")],
    }

    def __init__(self, *, solver, learning_rate_init, n_iter_no_change, batch_size,
                 init_scale, dtype, warm_start, history=None, **shared):
        super().__init__(**shared)
        self.solver = solver
        self.learning_rate_init = learning_rate_init
        self.n_iter_no_change = n_iter_no_change
        self.batch_size = batch_size
        self.init_scale = init_scale
        self.dtype = dtype
        self.warm_start = warm_start
        self.history = history

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

    # ------------------------------------------------------------------- fit
    # a failed fit leaves the estimator as it was, except after a divergence with a
    # finite iterate, whose parameters are kept as documented
    @atomic_fit(keep=lambda exc: isinstance(exc, TrainingDivergedError)
                and exc.result is not None)
    def fit(self, X, y):
        """Minimise the ERM objective of docs: Theory §2 on ``(X, y)``.

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
        InvalidParameterError
            A ValueError naming the parameter, when one has the wrong type or value.
        ValueError
            Naming ``n_samples`` and ``width`` with the estimate in GiB, when training
            would exceed the memory limit (environment variable ``SKATTN_MEMORY_LIMIT_GB``,
            default 8 GiB); checked before anything is allocated.
        skattn.nn.TrainingDivergedError
            If the objective becomes NaN or infinite; the estimator then holds the last
            parameters with a finite objective.

        Warns
        -----
        UserWarning
            When ``dtype='float32'`` and ``beta · max|h|`` on the training data exceeds
            100: float32 softmax then loses the accuracy the model can reach (at β = 100
            a test error of 1.5e-2 against 3e-5 in float64); use ``dtype='float64'``.
            The dtype is not switched silently.

        Notes
        -----
        A fit that raises leaves the estimator as it was before the call (except after
        a divergence, see above).
        """
        self._validate_params()
        X3, y3, T, d, task, y_ndim = self._validate_fit_data(X, y)
        device = _resolve_device(self.device, type(self).__name__)
        dtype = _DTYPES[self.dtype]
        rng = check_random_state_arg(self.random_state)
        # a fresh recorder per fit (the parameter itself is never modified); None: no hook
        recorder = make_history_recorder(self.history)
        if recorder is not None:
            recorder.check_n_features(d)

        shape = self._param_shape(d)
        self._check_fit_memory(X3.shape[0], T, d, shape, y3.shape[-1])
        # as MLPRegressor: warm_start continues from the fitted parameters and curve
        warm = self.warm_start and hasattr(self, "S_")
        if warm:
            init = self._fitted_param()
            if init.shape != shape:
                raise ValueError(
                    f"warm_start=True but the fitted parameters have shape {init.shape} "
                    f"while X with n_features={d} needs {shape}; set warm_start=False.")
        else:
            init = self._random_init(shape, rng)
        previous_curve = list(self.loss_curve_) if warm else []

        module = self._make_module(d, task, init, dtype, device)
        # as_tensor shares memory with X when dtype and device allow (no copy of the data)
        # (a read-only input, e.g. a memmap, is copied: torch tensors must be writable)
        Xt = torch.as_tensor(np.require(X3, requirements="W"), dtype=dtype, device=device)
        yt = torch.as_tensor(np.require(y3, requirements="W"), dtype=dtype, device=device)

        fitted = dict(self._structure_attributes(T, d, task, y_ndim), device_=device)
        try:
            result = train(module, Xt, yt, reg_lambda=self.reg_lambda, solver=self.solver,
                           learning_rate_init=self.learning_rate_init, max_iter=self.max_iter,
                           tol=self.tol, n_iter_no_change=self.n_iter_no_change,
                           batch_size=self.batch_size, random_state=rng, verbose=self.verbose,
                           callback=recorder)
        except TrainingDivergedError as err:
            # keep the last finite parameters, as documented, then report
            if err.result is not None:
                self._store_result(module, err.result, fitted, previous_curve, recorder)
            raise
        self._store_result(module, result, fitted, previous_curve, recorder)
        self._warn_low_precision(X3)
        if not result.converged:
            warn(
                f"{type(self).__name__}: the {self.solver} solver {result.message}. "
                "Increase max_iter"
                + (" or use solver='lbfgs'" if self.solver == "adam" else "") + ".",
                ConvergenceWarning)
        return self

    def _check_fit_memory(self, n, T, d, shape, y_width):
        """Raise (naming n_samples and width) before a fit that would exceed the limit."""
        itemsize = 4 if self.dtype == "float32" else 8
        n_params = int(np.prod(shape))  # heads and stacked factors included
        # the float64 start, the parameter with its gradient, optimiser state and L-BFGS
        # history (2 × 20 vectors); the data as tensors; the forward and backward
        # intermediates (X W, pre-activations, maps, residuals), all full batch
        for_params = 8 * n_params + itemsize * n_params * 46
        for_data = (itemsize * n * T * (d + y_width)
                    + 2 * itemsize * n * T * (n_params // d + d + 4 * T))
        sizes = f"parameters of shape {shape}, n_tokens={T}, dtype={self.dtype}"
        # name first what dominates: the width (too many parameters) or the sample count
        if for_params > for_data and hasattr(self, "width"):
            what = f"width={self.width!r} ({sizes}, n_samples={n})"
        else:
            what = f"n_samples={n} ({sizes})"
        check_memory(for_params + for_data, what)

    def _warn_low_precision(self, X3):
        """UserWarning when float32 training meets large softmax logits (see ``fit``)."""
        if self.dtype != "float32" or self.attention != "softmax":
            return
        # the first samples suffice to see the scale of the logits
        # np.require: a read-only X (a DataFrame's values, a memory map) is copied, as in
        # fit, instead of torch warning that it cannot share non-writable memory
        probe = np.require(X3[:_PRECISION_PROBE], requirements="W")
        h = F.preactivation(torch.as_tensor(probe, dtype=torch.float64),
                            torch.as_tensor(self.S_, dtype=torch.float64))
        scale = self.beta * float(h.abs().max()) if h.numel() else 0.0
        if scale > _FLOAT32_LOGIT_LIMIT:
            warn(
                f"dtype='float32' with beta={self.beta:g}: the softmax logits beta·|h| reach "
                f"{scale:.3g} on the training data, where float32 training loses accuracy "
                f"(test errors orders of magnitude above float64's); use dtype='float64'.",
                UserWarning)

    def _store_result(self, module, result, fitted, previous_curve, recorder=None):
        for name, value in fitted.items():
            setattr(self, name, value)
        self._store_params(module)
        d2 = float(self.token_dim_) ** 2
        self.n_iter_ = int(result.n_iter)
        self.loss_curve_ = previous_curve + [float(v) / d2 for v in result.objective_history]
        self.train_objective_ = float(result.objective) / d2
        self.train_error_ = float(result.train_error)
        self.converged_ = bool(result.converged)
        if recorder is not None:
            self.history_ = recorder.as_dict()
        elif hasattr(self, "history_"):
            del self.history_  # from an earlier fit with history on: stale now

    # --------------------------------------------------------------- predict
    def _predict_device(self):
        dev = getattr(self, "device_", "cpu")
        return dev if dev.startswith("cuda") and torch.cuda.is_available() else "cpu"

    def _attention_maps(self, X3):
        """``σ_β(h(S_; X))`` (mean over heads for a 3-D ``S_``) in float64, in torch on the
        training device, in chunks."""
        device = self._predict_device()
        S = torch.tensor(self.S_, dtype=torch.float64, device=device)
        out = []
        for start in range(0, X3.shape[0], _PREDICT_CHUNK):
            Xc = torch.tensor(X3[start:start + _PREDICT_CHUNK], dtype=torch.float64,
                              device=device)
            h = F.preactivation(Xc, S)
            # a 3-D S_ holds one matrix per head: the model averages the heads' maps
            A = (F.mean_attention_map(h, self.beta, self.attention) if S.ndim == 3
                 else F.attention_map(h, self.beta, self.attention))
            out.append(A.cpu().numpy())
        if not out:
            return np.zeros((0, self.n_tokens_, self.n_tokens_))
        return check_finite_result(np.concatenate(out, axis=0), "X", X3)


class FactoredRegressorBase(BaseAttentionRegressor):
    """The parameters that the factored estimators (tied and untied) add: ``width`` and
    ``n_heads``, declared once (as scikit-learn's ``_BaseRidge`` does for its subclasses).
    """

    _constraints: dict = {
        **BaseAttentionRegressor._constraints,
        "width": WIDTH_CONSTRAINT,
        # zero factors are a stationary point of the objective: the start must be random
        "init_scale": [Interval("real", 0, closed="neither")],
        "n_heads": [Interval("int", 1)],
    }

    def __init__(self, width=1.0, reg_lambda=1e-2, beta=1.0, attention="softmax", task="auto",
                 n_tokens=None, solver="lbfgs", learning_rate_init=0.1, max_iter=5000,
                 tol=1e-6, n_iter_no_change=10, batch_size=None, init_scale=1.0,
                 device="auto", dtype="float32", random_state=None, verbose=0,
                 warm_start=False, n_heads=1, history=None):
        self.width = width
        self.n_heads = n_heads
        super().__init__(
            reg_lambda=reg_lambda, beta=beta, attention=attention, task=task,
            n_tokens=n_tokens, solver=solver, learning_rate_init=learning_rate_init,
            max_iter=max_iter, tol=tol, n_iter_no_change=n_iter_no_change,
            batch_size=batch_size, init_scale=init_scale, device=device, dtype=dtype,
            random_state=random_state, verbose=verbose, warm_start=warm_start,
            history=history)
