"""The untied attention regressor: ``S = W_Q W_Kᵀ / √(p d)``, one or several heads.

Beyond the paper's assumptions (docs: Theory §2 treats tied, symmetric S): the query and key
factors are learned separately, so S is any d × d matrix of rank ≤ p.
"""

from __future__ import annotations

import math

import numpy as np

from ..nn.modules import UntiedAttention
from ._base import FactoredRegressorBase
from ._mixin import resolve_width

__all__ = ["UntiedAttentionRegressor"]


class UntiedAttentionRegressor(FactoredRegressorBase):
    """Attention with untied query and key factors, one or several heads.

    The model is ``S = W_Q W_Kᵀ / √(p d)`` with ``W_Q, W_K ∈ R^{d×p}``, the trace-centred
    pre-activation ``h_ab = (x_aᵀ S x_b − δ_ab Tr S)/√d`` (not symmetric in a, b, since S
    is not) and the prediction ``ŷ = σ_β(h)`` (seq2lab) or ``σ_β(h) x`` (seq2seq), as in
    :class:`TiedAttentionRegressor`. Training minimises the sum objective

        ``L(W_Q, W_K) = Σ_μ ℓ_μ + reg_lambda · (‖W_Q‖²_F + ‖W_K‖²_F) / 2``.

    Penalty convention: the halved sum makes the penalty equal to the tied ``‖W‖²_F`` at
    ``W_Q = W_K = W``, where this objective *is* the tied one. Minimised over the
    factorisations of a fixed S, ``(‖W_Q‖²_F + ‖W_K‖²_F) / 2 = √(p d) ‖S‖_*`` (nuclear
    norm, reached at ``W_Q = (p d)^{1/4} U √Σ``, ``W_K = (p d)^{1/4} V √Σ`` for the SVD
    ``S = U Σ Vᵀ``), so the penalty on S is ``reg_lambda · √(p d) ‖S‖_*`` — the tied
    ``reg_lambda · √(p d) Tr S`` whenever S is positive semi-definite.

    With ``n_heads=H > 1`` each head k has its own ``S_k = W_Q,k W_K,kᵀ / √(p d)``, the
    attention map is the mean ``(1/H) Σ_k σ_β(h(S_k; x))`` (rows still sum to one) and the
    penalty is the sum over heads.

    Parameters
    ----------
    width : int or float, default=1.0
        Width p of W_Q and W_K. An int is p; a float is the ratio κ = p/d
        (p = max(1, round(κ d))).
    reg_lambda : float, default=1e-2
        λ ≥ 0, weight decay on the sum objective (convention above).
    beta : float, default=1.0
        Inverse temperature β > 0 of the softmax.
    attention : {"softmax", "linear"}, default="softmax"
    task : {"auto", "seq2lab", "seq2seq"}, default="auto"
    n_tokens : int or None, default=None
        Token count T for flattened 2-D X when y does not determine it.
    solver : {"adam", "lbfgs"}, default="lbfgs"
        See :class:`TiedAttentionRegressor`.
    learning_rate_init : float, default=0.1
        Adam's step size (entries of the factors are O(1)). Ignored by L-BFGS.
    max_iter : int, default=5000
    tol : float, default=1e-6
    n_iter_no_change : int, default=10
    batch_size : int or None, default=None
    init_scale : float, default=1.0
        Initial W_Q and W_K have independent i.i.d. ``N(0, init_scale²)`` entries. Must be
        > 0: ``W_Q = W_K = 0`` is a saddle of the objective.
    device : str, default="auto"
        "auto" (CUDA when available, else CPU), "cpu", "cuda" or "cuda:<index>".
    dtype : {"float32", "float64"}, default="float32"
        Training precision. Predictions are computed in float64.
    random_state : int, RandomState, Generator or None, default=None
        Seeds the initial factors and the minibatch order.
    verbose : int, default=0
    warm_start : bool, default=False
        Start from the fitted ``W_Q_`` and ``W_K_`` and append to ``loss_curve_``.
    n_heads : int, default=1
        Number of heads H ≥ 1, started from independent random factors (identical heads
        would stay identical).
    history : None, dict or skattn.nn.HistoryRecorder, default=None
        Record the training trajectory: None (off, no cost), or the settings of a
        :class:`skattn.nn.HistoryRecorder` as a dict, e.g. ``{"S0": S0, "every": 1,
        "top_k": 10}`` (every ``every`` iterations: objective / d², the overlaps
        ``m = Tr(S0ᵀ S)/d`` and ``q = ‖S‖²_F/d`` when ``S0`` is given, and the top
        ``top_k`` singular values of S). Stored in ``history_``.

    Attributes
    ----------
    W_Q_, W_K_ : ndarray of shape (n_features, width_), or (n_heads, n_features, width_) \
if H > 1
        Learned query and key factors.
    S_ : ndarray of shape (n_features, n_features), or (n_heads, n_features, n_features)
        ``W_Q_ W_K_ᵀ / √(p d)`` (per head); not symmetric.
    head_spectra_ : ndarray of shape (n_heads, n_features)
        Singular values of each head's ``S_``, in decreasing order (one row when H = 1).
    history_ : dict of str to ndarray
        Only with ``history`` set: the trajectory of the last ``fit``, one entry per
        recorded iteration along axis 0 — ``iteration`` (1-based index into this fit's
        iterations), ``objective``, ``top`` and, with ``S0``, ``m`` and ``q`` (see
        :meth:`skattn.nn.HistoryRecorder.as_dict`).
    width_ : int
        p.
    n_iter_, loss_curve_, train_objective_, train_error_, converged_, n_features_in_, \
token_dim_, n_tokens_, task_, device_, feature_names_in_ :
        As in :class:`TiedAttentionRegressor`.

    See Also
    --------
    TiedAttentionRegressor : the tied model ``W_Q = W_K``, the paper's.

    Examples
    --------
    >>> from skattn import UntiedAttentionRegressor, make_attention_indexed
    >>> X, y = make_attention_indexed(n_samples=400, n_features=20, random_state=0)
    >>> X.shape, y.shape  # scikit-learn's layout: (n, n_tokens·n_features), (n, n_tokens²)
    ((400, 40), (400, 4))
    >>> est = UntiedAttentionRegressor(width=0.5, random_state=0).fit(X, y)
    >>> est.predict(X[:2]).shape  # the layout of the y seen in fit
    (2, 4)
    """

    # The base template handles one parameter array: W_Q and W_K travel stacked on a
    # leading axis of length 2 (query first).
    def _param_shape(self, n_features):
        p = resolve_width(self.width, n_features)
        factor = (n_features, p) if self.n_heads == 1 else (self.n_heads, n_features, p)
        return (2, *factor)

    def _fitted_param(self):
        return np.stack([self.W_Q_, self.W_K_])

    def _random_init(self, shape, rng):
        # independent query, key and head factors
        return rng.standard_normal(shape) * self.init_scale

    def _make_module(self, n_features, task, init, dtype, device):
        return UntiedAttention(n_features, init.shape[-1], beta=self.beta,
                               attention=self.attention, task=task, W_Q=init[0], W_K=init[1],
                               n_heads=self.n_heads, dtype=dtype, device=device)

    def _store_params(self, module):
        W_Q = module.W_Q.detach().cpu().double().numpy().copy()
        W_K = module.W_K.detach().cpu().double().numpy().copy()
        d, p = W_Q.shape[-2:]
        self.W_Q_ = W_Q
        self.W_K_ = W_K
        self.width_ = p
        self.S_ = (W_Q @ np.swapaxes(W_K, -1, -2)) / math.sqrt(p * d)
        self.head_spectra_ = np.linalg.svd(self.S_.reshape(-1, d, d), compute_uv=False)
