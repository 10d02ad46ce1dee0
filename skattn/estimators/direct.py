"""The direct (Frobenius) attention regressor: ``S = V / √d``, V symmetric (docs: Theory §2)."""

from __future__ import annotations

import math

from ..nn.modules import DirectAttention
from ._base import BaseAttentionRegressor

__all__ = ["DirectAttentionRegressor"]


class DirectAttentionRegressor(BaseAttentionRegressor):
    """Single-head tied attention with an unconstrained symmetric query-key matrix.

    The Frobenius baseline of docs: Theory §2: ``S = V / √d`` with ``V ∈ Sym(d)`` and the
    objective ``L(V) = Σ_μ ℓ_μ + reg_lambda · ‖V‖²_F`` (a ridge penalty
    ``reg_lambda · d · ‖S‖²_F``). Same pre-activation, outputs and losses as
    :class:`TiedAttentionRegressor`.

    Parameters
    ----------
    reg_lambda : float, default=1e-2
        λ ≥ 0.
    beta : float, default=1.0
        Inverse temperature β > 0 of the softmax.
    attention : {"softmax", "linear"}, default="softmax"
    task : {"auto", "seq2lab", "seq2seq"}, default="auto"
    n_tokens : int or None, default=None
        Token count T for flattened 2-D X when y does not determine it.
    solver : {"adam", "lbfgs"}, default="lbfgs"
        See :class:`TiedAttentionRegressor`.
    learning_rate_init : float, default=0.1
        Adam's step size (entries of V are O(1)). Ignored by L-BFGS.
    max_iter : int, default=5000
    tol : float, default=1e-6
    n_iter_no_change : int, default=10
    batch_size : int or None, default=None
    init_scale : float, default=0.0
        Initial V is GOE with off-diagonal standard deviation ``init_scale``. The default
        0 starts from V = 0: the objective is not stationary there, and directions the
        data do not constrain stay at zero (the minimum-norm solution).
    device : str, default="auto"
    dtype : {"float32", "float64"}, default="float32"
    random_state : int, RandomState, Generator or None, default=None
    verbose : int, default=0
    warm_start : bool, default=False
        Start from the fitted ``V_`` and append to ``loss_curve_``.
    history : None, dict or skattn.nn.HistoryRecorder, default=None
        Record the training trajectory: None (off, no cost), or the settings of a
        :class:`skattn.nn.HistoryRecorder` as a dict, e.g. ``{"S0": S0, "every": 1,
        "top_k": 10}`` (every ``every`` iterations: objective / d², the overlaps
        ``m = Tr(S0ᵀ S)/d`` and ``q = ‖S‖²_F/d`` when ``S0`` is given, and the top
        ``top_k`` eigenvalues of S). Stored in ``history_``.

    Attributes
    ----------
    V_ : ndarray of shape (n_features, n_features)
        Learned symmetric matrix.
    S_ : ndarray of shape (n_features, n_features)
        ``V_ / √d``.
    history_ : dict of str to ndarray
        Only with ``history`` set: the trajectory of the last ``fit``, one entry per
        recorded iteration along axis 0 — ``iteration`` (1-based index into this fit's
        iterations), ``objective``, ``top`` and, with ``S0``, ``m`` and ``q`` (see
        :meth:`skattn.nn.HistoryRecorder.as_dict`).
    n_features_in_ : int
        Number of columns of the flattened X, ``n_tokens_ * token_dim_`` (equal to
        ``len(feature_names_in_)``).
    token_dim_ : int
        Token dimension d (features per token).
    n_iter_, loss_curve_, train_objective_, train_error_, converged_, n_tokens_, task_, \
device_, feature_names_in_ :
        As in :class:`TiedAttentionRegressor`.

    See Also
    --------
    TiedAttentionRegressor : the factored (nuclear-norm) model.

    Examples
    --------
    >>> from skattn import DirectAttentionRegressor, make_attention_indexed
    >>> X, y = make_attention_indexed(n_samples=400, n_features=20, random_state=0)
    >>> X.shape, y.shape  # scikit-learn's layout: (n, n_tokens·n_features), (n, n_tokens²)
    ((400, 40), (400, 4))
    >>> DirectAttentionRegressor().fit(X, y).predict(X[:2]).shape
    (2, 4)
    """

    def __init__(self, reg_lambda=1e-2, beta=1.0, attention="softmax", task="auto",
                 n_tokens=None, solver="lbfgs", learning_rate_init=0.1, max_iter=5000,
                 tol=1e-6, n_iter_no_change=10, batch_size=None, init_scale=0.0,
                 device="auto", dtype="float32", random_state=None, verbose=0,
                 warm_start=False, history=None):
        super().__init__(
            reg_lambda=reg_lambda, beta=beta, attention=attention, task=task,
            n_tokens=n_tokens, solver=solver, learning_rate_init=learning_rate_init,
            max_iter=max_iter, tol=tol, n_iter_no_change=n_iter_no_change,
            batch_size=batch_size, init_scale=init_scale, device=device, dtype=dtype,
            random_state=random_state, verbose=verbose, warm_start=warm_start,
            history=history)

    def _param_shape(self, n_features):
        return (n_features, n_features)

    def _fitted_param(self):
        return self.V_

    def _random_init(self, shape, rng):
        G = rng.standard_normal(shape)
        return (G + G.T) / math.sqrt(2) * self.init_scale

    def _make_module(self, n_features, task, init, dtype, device):
        return DirectAttention(n_features, beta=self.beta, attention=self.attention, task=task,
                               V=init, dtype=dtype, device=device)

    def _store_params(self, module):
        V = module.V.detach().cpu().double().numpy().copy()
        V = (V + V.T) / 2
        self.V_ = V
        self.S_ = V / math.sqrt(V.shape[0])
