"""The factored (tied) attention regressor: ``S = W Wᵀ / √(p d)`` (docs: Theory §2)."""

from __future__ import annotations

import math

import numpy as np

from ..nn.modules import FactoredAttention
from ._base import FactoredRegressorBase
from ._mixin import resolve_width

__all__ = ["TiedAttentionRegressor"]


class TiedAttentionRegressor(FactoredRegressorBase):
    """Tied attention with a factored query-key matrix, one or several heads.

    The model is ``S = W Wᵀ / √(p d)`` with ``W ∈ R^{d×p}``, the trace-centred
    pre-activation ``h_ab = (x_aᵀ S x_b − δ_ab Tr S)/√d`` and the prediction
    ``ŷ = σ_β(h)`` (seq2lab) or ``σ_β(h) x`` (seq2seq), σ a row-wise softmax or the
    identity. Training minimises the *sum* objective of docs: Theory §2,

        ``L(W) = Σ_μ ℓ_μ + reg_lambda · ‖W‖²_F``,

    with ``ℓ_μ = Σ_ab (ŷ_ab − y_ab)²`` (seq2lab) or ``‖ŷ − y‖²_F / d`` (seq2seq). Weight
    decay on W is a nuclear-norm penalty ``√κ · reg_lambda · d · Tr S`` on S.

    With ``n_heads=H > 1`` each head k has its own ``S_k = W_k W_kᵀ / √(p d)``, the
    attention map is the mean ``(1/H) Σ_k σ_β(h(S_k; x))`` (rows still sum to one) and the
    penalty is ``reg_lambda · Σ_k ‖W_k‖²_F``. This goes beyond the paper's single head.

    Parameters
    ----------
    width : int or float, default=1.0
        Width p of W. An int is p; a float is the ratio κ = p/d (p = max(1, round(κ d))),
        like scikit-learn's ``max_features``.
    reg_lambda : float, default=1e-2
        λ ≥ 0, weight decay on the sum objective.
    beta : float, default=1.0
        Inverse temperature β > 0 of the softmax.
    attention : {"softmax", "linear"}, default="softmax"
        Row-wise softmax, or the identity (linear attention).
    task : {"auto", "seq2lab", "seq2seq"}, default="auto"
        seq2lab: y is the T×T attention matrix; seq2seq: y is ``σ(h) x`` (T×d). "auto"
        reads it from y's shape (an error asks for it when T == d makes it ambiguous).
    n_tokens : int or None, default=None
        Token count T for flattened 2-D X. Needed only when y does not determine it
        (flattened seq2seq data); 3-D X carries it.
    solver : {"adam", "lbfgs"}, default="lbfgs"
        ``"lbfgs"``: torch L-BFGS with a strong-Wolfe line search, full batch. On the
        paper's problems (d = 60–100, α ≤ 1, T ≤ 4) it reaches the ERM minimum in
        60–350 iterations, 5–20× fewer objective evaluations than Adam, and to 10× higher
        precision, hence the default. ``"adam"``: Adam (the paper's choice), full batch or
        minibatch; it reaches the same minimum (within ~1e-3 relative) more slowly, and
        can stop early on ill-conditioned problems (tiny ``reg_lambda``).
    learning_rate_init : float, default=0.1
        Adam's step size (in units of the entries of W, which are O(1)); it is multiplied
        by 0.7 whenever the objective increases, and Adam returns its best iterate.
        Ignored by L-BFGS.
    max_iter : int, default=5000
        Maximum number of iterations (L-BFGS steps, full-batch Adam steps, or epochs).
    tol : float, default=1e-6
        Stop when the relative change of the objective stays below ``tol`` for
        ``n_iter_no_change`` consecutive iterations; otherwise a ``ConvergenceWarning``.
    n_iter_no_change : int, default=10
    batch_size : int or None, default=None
        Adam minibatch size (None: full batch). The minibatch data term is scaled by
        ``n / batch``. Ignored by L-BFGS.
    init_scale : float, default=1.0
        Initial W has i.i.d. ``N(0, init_scale²)`` entries, so with 1.0 the spectrum of S
        is of order one. Must be > 0: W = 0 is a stationary point.
    device : str, default="auto"
        "auto" (CUDA when available, else CPU), "cpu", "cuda" or "cuda:<index>".
    dtype : {"float32", "float64"}, default="float32"
        Training precision. Predictions are computed in float64.
    random_state : int, RandomState, Generator or None, default=None
        Seeds the initial W and the minibatch order.
    verbose : int, default=0
        If > 0, a progress bar shows the current objective / d².
    warm_start : bool, default=False
        Start from the fitted ``W_`` instead of a random W, and append to ``loss_curve_``
        (as :class:`~sklearn.neural_network.MLPRegressor` does).
    n_heads : int, default=1
        Number of heads H ≥ 1. Heads start from independent random factors (identical
        heads would stay identical).
    history : None, dict or skattn.nn.HistoryRecorder, default=None
        Record the training trajectory: None (off, no cost), or the settings of a
        :class:`skattn.nn.HistoryRecorder` as a dict, e.g. ``{"S0": S0, "every": 1,
        "top_k": 10}`` (every ``every`` iterations: objective / d², the overlaps
        ``m = Tr(S0ᵀ S)/d`` and ``q = ‖S‖²_F/d`` when ``S0`` is given, and the top
        ``top_k`` eigenvalues of S). Stored in ``history_``.

    Attributes
    ----------
    W_ : ndarray of shape (n_features, width_), or (n_heads, n_features, width_) if H > 1
        Learned factor(s).
    S_ : ndarray of shape (n_features, n_features), or (n_heads, n_features, n_features)
        ``W_ W_ᵀ / √(p d)`` (per head).
    head_spectra_ : ndarray of shape (n_heads, n_features)
        Eigenvalues of each head's ``S_``, in decreasing order (one row when H = 1).
    history_ : dict of str to ndarray
        Only with ``history`` set: the trajectory of the last ``fit``, one entry per
        recorded iteration along axis 0 — ``iteration`` (1-based index into this fit's
        iterations), ``objective``, ``top`` and, with ``S0``, ``m`` and ``q`` (see
        :meth:`skattn.nn.HistoryRecorder.as_dict`).
    width_ : int
        p.
    n_iter_ : int
        Optimiser iterations run by the last call to ``fit`` (L-BFGS steps, full-batch
        Adam steps, or minibatch-Adam epochs), not objective evaluations.
    loss_curve_ : list of float
        Objective / d² after each iteration, over every fit since the last cold start
        (``warm_start=True`` appends to it).
    train_objective_ : float
        Final objective / d² (the quantity the theory predicts).
    train_error_ : float
        Mean per-sample loss ``(1/n) Σ_μ ℓ_μ`` at the end.
    converged_ : bool
        Whether the stopping rule was met before ``max_iter``.
    n_features_in_ : int
        Number of input columns as scikit-learn counts them: those of the flattened X,
        ``n_tokens_ * token_dim_`` (so it equals ``len(feature_names_in_)``), whichever
        layout ``fit`` received.
    token_dim_ : int
        Token dimension d (features per token); ``S_`` is d × d.
    n_tokens_ : int
        Token count T.
    task_ : str
        "seq2lab" or "seq2seq".
    device_ : str
        Device used for training.
    feature_names_in_ : ndarray of shape (n_tokens * n_features,)
        Column names, when X was a DataFrame with string column names.

    See Also
    --------
    DirectAttentionRegressor : the Frobenius baseline ``S = V/√d``.
    UntiedAttentionRegressor : untied query and key factors, ``S = W_Q W_Kᵀ/√(p d)``.

    Examples
    --------
    >>> from skattn import TiedAttentionRegressor, make_attention_indexed
    >>> X, y = make_attention_indexed(n_samples=400, n_features=20, random_state=0)
    >>> X.shape, y.shape  # scikit-learn's layout: (n, n_tokens·n_features), (n, n_tokens²)
    ((400, 40), (400, 4))
    >>> est = TiedAttentionRegressor(width=0.5, random_state=0).fit(X, y)
    >>> est.predict(X[:2]).shape  # the layout of the y seen in fit
    (2, 4)
    """

    def _param_shape(self, n_features):
        p = resolve_width(self.width, n_features)
        # H = 1 keeps the single-head (d, p) layout, so nothing existing changes
        return (n_features, p) if self.n_heads == 1 else (self.n_heads, n_features, p)

    def _fitted_param(self):
        return self.W_

    def _random_init(self, shape, rng):
        # one draw for all heads: independent, hence distinct, starting heads
        return rng.standard_normal(shape) * self.init_scale

    def _make_module(self, n_features, task, init, dtype, device):
        return FactoredAttention(n_features, init.shape[-1], beta=self.beta,
                                 attention=self.attention, task=task, W=init,
                                 n_heads=self.n_heads, dtype=dtype, device=device)

    def _store_params(self, module):
        W = module.W.detach().cpu().double().numpy().copy()
        d, p = W.shape[-2:]
        self.W_ = W
        self.width_ = p
        self.S_ = (W @ np.swapaxes(W, -1, -2)) / math.sqrt(p * d)
        heads = self.S_.reshape(-1, d, d)
        self.head_spectra_ = np.linalg.eigvalsh(heads)[:, ::-1].copy()
