"""The attention-indexed teacher (docs: Theory §1), in numpy.

``x ∈ R^{T×d}`` with i.i.d. standard Gaussian rows; pre-activation
``h_ab(S; x) = (x_aᵀ S x_b − δ_ab Tr S)/√d``; labels ``y = σ_β0(h(S0) + ξ)`` (seq2lab) or
``σ_β0(h(S0) + ξ) x`` (seq2seq), σ a row-wise softmax or the identity (linear attention).

Beyond the paper's assumptions (the theory is derived for the defaults only):

- tokens ``x_a = C^{1/2} z_a`` with ``z_a`` i.i.d. Gaussian, Rademacher, unit-variance
  Student-t or user-drawn entries and a PSD token covariance C (default I); the diagonal
  centring becomes ``Tr(S C)``, so that ``E h_aa = 0`` for every C;
- H heads ``S0_1 … S0_H``, the output being the mean of the heads' attention maps,
  ``A = (1/H) Σ_k σ_β0(h(S0_k; x))`` (rows still sum to one, values are the identity).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.special

from .._validation import (
    check_choice,
    check_finite_array,
    check_finite_result,
    check_memory,
    check_scalar_range,
)
from .._validation import check_random_state_arg as check_random_state
from .targets import Target, WishartTarget

__all__ = [
    "TOKEN_DISTRIBUTIONS",
    "sample_tokens",
    "check_token_covariance",
    "preactivation",
    "softmax",
    "attention_map",
    "attention_output",
    "AttentionIndexedModel",
    "make_attention_indexed",
    "LAYOUTS",
]

ATTENTIONS = ("softmax", "linear")
TASKS = ("seq2lab", "seq2seq")
# "flat": scikit-learn's 2-D layout, one row per sample (every sklearn scorer accepts it);
# "tokens": the model's 3-D layout, one (T, d) or (T, T) block per sample
LAYOUTS = ("flat", "tokens")
TOKEN_DISTRIBUTIONS = ("gaussian", "rademacher", "student_t")
# relative tolerance of the symmetry and PSD checks of a token covariance
_COVARIANCE_TOL = 1e-10

# The forward model of docs: Theory §1–2 in numpy. skattn.nn.functional is its torch twin:
# same names, signatures, operation order and errors (tests/test_nn.py compares the two).


def check_token_covariance(token_covariance, n_features):
    """Validate a token covariance C and return it with its symmetric square root.

    Parameters
    ----------
    token_covariance : array-like of shape (n_features, n_features)
        Symmetric positive semi-definite, up to a relative tolerance of 1e-10.
    n_features : int

    Returns
    -------
    C : ndarray of shape (n_features, n_features)
        The symmetrised matrix.
    C_sqrt : ndarray of shape (n_features, n_features)
        Its PSD square root (from ``scipy.linalg.eigh``; eigenvalues within the tolerance
        below zero are set to zero).

    Raises
    ------
    ValueError
        Naming ``token_covariance``, for a wrong shape, non-finite entries, an asymmetric
        or an indefinite matrix.
    """
    C = check_finite_array(token_covariance, "token_covariance", ndim=2)
    if C.shape != (n_features, n_features):
        raise ValueError(f"token_covariance must have shape ({n_features}, {n_features}) "
                         f"(n_features × n_features), got {C.shape}.")
    scale = max(1.0, float(np.max(np.abs(C))))
    if not np.allclose(C, C.T, rtol=0, atol=_COVARIANCE_TOL * scale):
        raise ValueError("token_covariance must be symmetric, got max |C − Cᵀ| = "
                         f"{np.max(np.abs(C - C.T)):.3g}.")
    C = (C + C.T) / 2
    eigenvalues, vectors = scipy.linalg.eigh(C)
    if eigenvalues[0] < -_COVARIANCE_TOL * scale:
        raise ValueError("token_covariance must be positive semi-definite, got smallest "
                         f"eigenvalue {eigenvalues[0]:.3g}.")
    C_sqrt = (vectors * np.sqrt(np.clip(eigenvalues, 0, None))) @ vectors.T
    return C, (C_sqrt + C_sqrt.T) / 2


def _check_token_distribution(token_distribution, token_df):
    if callable(token_distribution):
        return token_distribution
    if not isinstance(token_distribution, str):
        raise ValueError(f"token_distribution must be one of {list(TOKEN_DISTRIBUTIONS)} or a "
                         f"callable (rng, shape) -> array, got {token_distribution!r}.")
    check_choice(token_distribution, "token_distribution", TOKEN_DISTRIBUTIONS)
    if token_distribution == "student_t":
        # unit variance needs a finite variance df/(df − 2): df > 2
        check_scalar_range(token_df, "token_df", low=2, low_inclusive=False)
    return token_distribution


def sample_tokens(shape, token_distribution="gaussian", *, token_df=None, token_covariance=None,
                  random_state=None):
    """Draw tokens ``x = C^{1/2} z`` with i.i.d. zero-mean, unit-variance entries ``z``.

    Parameters
    ----------
    shape : tuple of int
        ``(..., n_tokens, n_features)``.
    token_distribution : {"gaussian", "rademacher", "student_t"} or callable, \
default="gaussian"
        Law of the entries of z: standard Gaussian, ±1 with probability 1/2, or Student-t
        with ``token_df`` degrees of freedom scaled by ``√((df − 2)/df)`` to unit variance.
        A callable ``f(rng, shape)`` (rng a ``numpy.random.RandomState``) must return a
        finite array of exactly ``shape``; zero mean and unit variance are its caller's
        responsibility.
    token_df : float or None, default=None
        Degrees of freedom, ``> 2``; required for ``"student_t"``, ignored otherwise.
    token_covariance : array-like of shape (n_features, n_features) or None, default=None
        PSD covariance C of each token; None is the identity.
    random_state : int, RandomState, Generator or None

    Returns
    -------
    X : ndarray of shape ``shape``
    """
    shape = tuple(shape)
    distribution = _check_token_distribution(token_distribution, token_df)
    Z = _draw_entries(shape, distribution, token_df, check_random_state(random_state))
    if token_covariance is None:
        return Z
    _, C_sqrt = check_token_covariance(token_covariance, shape[-1])
    # rows are tokens: x_aᵀ = z_aᵀ C^{1/2} (C^{1/2} is symmetric)
    return Z @ C_sqrt


def _draw_entries(shape, distribution, token_df, rng):
    """I.i.d. zero-mean unit-variance entries of a validated ``distribution``."""
    if distribution == "gaussian":
        return rng.standard_normal(shape)
    if distribution == "rademacher":
        return 2.0 * rng.randint(0, 2, size=shape) - 1.0
    if distribution == "student_t":
        return rng.standard_t(token_df, size=shape) * np.sqrt((token_df - 2) / token_df)
    Z = distribution(rng, shape)
    if not isinstance(Z, np.ndarray) or Z.shape != shape:
        got = Z.shape if isinstance(Z, np.ndarray) else type(Z).__name__
        raise ValueError(f"token_distribution must return an ndarray of shape {shape}, "
                         f"got {got}.")
    if Z.dtype.kind not in "biuf":
        raise ValueError(f"token_distribution must return real numbers, got dtype {Z.dtype}.")
    Z = Z.astype(float)
    if not np.all(np.isfinite(Z)):
        raise ValueError("token_distribution returned NaN or infinite values.")
    return Z


def preactivation(X, S, token_covariance=None):
    """Centred pre-activation ``h_ab = (x_aᵀ S x_b − δ_ab Tr(S C))/√d``.

    Parameters
    ----------
    X : ndarray of shape (..., n_tokens, n_features)
    S : ndarray of shape (n_features, n_features) or (n_heads, n_features, n_features)
        Symmetric; a stack of matrices gives one pre-activation per head.
    token_covariance : ndarray of shape (n_features, n_features) or None, default=None
        The token covariance C of the centring term; None is the identity (``Tr S``, the
        paper's model and the only centring the estimators use).

    Returns
    -------
    h : ndarray of shape (..., n_tokens, n_tokens), or (..., n_heads, n_tokens, n_tokens)
        for a stack of S; symmetric in its last two axes.
    """
    X = np.asarray(X, dtype=float)
    S = np.asarray(S, dtype=float)
    d = X.shape[-1]
    T = X.shape[-2]
    if S.ndim == 3:
        # one (..., T, T) block per head, heads on the axis before the tokens
        X = X[..., None, :, :]
    h = (X @ S) @ np.swapaxes(X, -1, -2)
    if token_covariance is None:
        centre = np.trace(S, axis1=-2, axis2=-1)
    else:
        # Tr(S C) = Σ_ij S_ij C_ji, without forming S C
        centre = np.einsum("...ij,ji->...", S, np.asarray(token_covariance, dtype=float))
    return (h - np.multiply.outer(centre, np.eye(T))) / np.sqrt(d)


def softmax(z, beta=1.0):
    """Row-wise softmax ``σ_β(z)_ab = exp(β z_ab) / Σ_c exp(β z_ac)`` (log-sum-exp stable)."""
    return scipy.special.softmax(beta * np.asarray(z, dtype=float), axis=-1)


def attention_map(h, beta=1.0, attention="softmax", head_axis=None):
    """Row-wise ``σ_β(h)``: softmax at inverse temperature β, or the identity.

    Parameters
    ----------
    h : ndarray of shape (..., n_tokens, n_tokens)
    beta : float, default=1.0
    attention : {"softmax", "linear"}, default="softmax"
    head_axis : int or None, default=None
        The axis of ``h`` that indexes heads (``-3`` for the output of
        :func:`preactivation` with a stack of S). The heads' maps are averaged over it,
        ``A = (1/H) Σ_k σ_β(h_k)``, so softmax rows still sum to one. None: no heads.

    Returns
    -------
    A : ndarray of the same shape as ``h``, less the head axis
    """
    check_choice(attention, "attention", ATTENTIONS)
    A = softmax(h, beta) if attention == "softmax" else np.asarray(h, dtype=float)
    if head_axis is None:
        return A
    if not -A.ndim <= head_axis < A.ndim or head_axis in (-1, -2, A.ndim - 1, A.ndim - 2):
        raise ValueError(f"head_axis must index an axis of h other than the two token "
                         f"axes, got {head_axis} for h of shape {A.shape}.")
    return A.mean(axis=head_axis)


def attention_output(A, X, task):
    """The model output: the attention matrix (seq2lab) or ``A X`` (seq2seq).

    Parameters
    ----------
    A : ndarray of shape (..., n_tokens, n_tokens)
    X : ndarray of shape (..., n_tokens, n_features)
    task : {"seq2lab", "seq2seq"}

    Returns
    -------
    y_pred : ndarray of shape (..., n_tokens, n_tokens or n_features)
    """
    check_choice(task, "task", TASKS)
    return A if task == "seq2lab" else A @ X


class AttentionIndexedModel:
    """The attention-indexed teacher of docs: Theory §1, with optional heads and token laws.

    Parameters
    ----------
    n_features : int
        Token dimension d: features per token, as in the theory API (not the column count
        of X: the flat layout has ``n_tokens * n_features`` columns, which the
        estimators' ``n_features_in_`` counts; their ``token_dim_`` is d).
    n_tokens : int, default=2
        Sequence length T (``T ≥ 2`` for softmax attention, ``T ≥ 1`` for linear).
    target : Target or list of Target, default=WishartTarget(0.5)
        Family of the target S0. With ``n_heads > 1``: one Target drawn independently for
        every head, or a list of ``n_heads`` Targets, one per head.
    beta : float, default=1.0
        Inverse temperature β0 of the teacher's softmax.
    noise : float, default=0.0
        Δ ≥ 0: label noise inside the softmax, variance Δ on the diagonal, Δ/2 off it
        (independent draws for every head).
    attention : {"softmax", "linear"}, default="softmax"
    n_heads : int, default=1
        Number of heads H. The output is the mean of the heads' attention maps,
        ``A = (1/H) Σ_k σ_β0(h(S0_k; x))``; values are the identity.
    token_distribution : {"gaussian", "rademacher", "student_t"} or callable, \
default="gaussian"
        Law of the i.i.d. unit-variance token entries (see :func:`sample_tokens`); the
        theory is derived for ``"gaussian"`` only.
    token_df : float or None, default=None
        Student-t degrees of freedom, ``> 2`` (required for ``"student_t"``).
    token_covariance : array-like of shape (n_features, n_features) or None, default=None
        PSD token covariance C (tokens ``x = C^{1/2} z``); None is the identity. The
        teacher centres the diagonal with ``Tr(S0 C)``.
    random_state : int, RandomState or None
        Seeds the draw of S0 (done once, at construction).

    Attributes
    ----------
    S0_ : ndarray of shape (n_features, n_features), or (n_heads, n_features, n_features)
        The target matrix (one per head when ``n_heads > 1``).
    Q0_ : float, or ndarray of shape (n_heads,)
        ``Tr S0² / d`` (per head when ``n_heads > 1``).

    Notes
    -----
    The estimators centre their pre-activation with ``Tr S``, the identity-covariance
    convention, whatever the tokens. With an anisotropic ``token_covariance`` the student
    therefore sees a centring ``Tr S`` where the teacher uses ``Tr(S0 C)``; the student can
    only absorb the difference through S itself. This mismatch is part of the effect of
    anisotropic tokens on trained models (``examples/plot_validity_map.py``), not corrected here.
    """

    def __init__(self, n_features, n_tokens=2, target=None, beta=1.0, noise=0.0,
                 attention="softmax", n_heads=1, token_distribution="gaussian", token_df=None,
                 token_covariance=None, random_state=None):
        self.n_features = check_scalar_range(n_features, "n_features", low=1, integer=True)
        self.attention = check_choice(attention, "attention", ATTENTIONS)
        min_tokens = 2 if attention == "softmax" else 1
        self.n_tokens = check_scalar_range(n_tokens, "n_tokens", low=min_tokens, integer=True)
        self.n_heads = check_scalar_range(n_heads, "n_heads", low=1, integer=True)
        self.target = WishartTarget(0.5) if target is None else target
        head_targets = self._head_targets()
        self.beta = check_scalar_range(beta, "beta", low=0, low_inclusive=False)
        self.noise = check_scalar_range(noise, "noise", low=0)
        self.token_distribution = _check_token_distribution(token_distribution, token_df)
        self.token_df = None if token_df is None else float(token_df)
        if token_covariance is None:
            self.token_covariance = None
            self._token_covariance_sqrt = None
        else:
            self.token_covariance, self._token_covariance_sqrt = check_token_covariance(
                token_covariance, self.n_features)
        self.random_state = random_state
        if self.n_heads == 1:
            # the single-head draw is the paper's model, kept bit-for-bit
            self.S0_ = head_targets[0].sample(self.n_features, random_state)
            self.Q0_ = float(np.sum(self.S0_ ** 2) / self.n_features)
        else:
            rng = check_random_state(random_state)
            self.S0_ = np.stack([t.sample(self.n_features, rng) for t in head_targets])
            self.Q0_ = np.sum(self.S0_ ** 2, axis=(1, 2)) / self.n_features

    def _head_targets(self):
        """The list of one Target per head, checked."""
        targets = list(self.target) if isinstance(self.target, (list, tuple)) else None
        if targets is not None and len(targets) != self.n_heads:
            raise ValueError(f"target must be one Target or a list of n_heads={self.n_heads} "
                             f"Targets, got a list of {len(targets)}.")
        targets = [self.target] * self.n_heads if targets is None else targets
        for t in targets:
            if not isinstance(t, Target):
                raise TypeError(
                    f"target must be a skattn Target (WishartTarget, PowerLawTarget, "
                    f"SpectrumTarget) or a list of them, got {type(t).__name__}."
                )
        return targets

    def sample_tokens(self, n_samples, random_state=None):
        """Draw ``X`` of shape ``(n_samples, n_tokens, n_features)`` from the token law."""
        n_samples = check_scalar_range(n_samples, "n_samples", low=0, integer=True)
        rng = check_random_state(random_state)
        Z = _draw_entries((n_samples, self.n_tokens, self.n_features),
                          self.token_distribution, self.token_df, rng)
        return Z if self._token_covariance_sqrt is None else Z @ self._token_covariance_sqrt

    def sample_noise(self, n_samples, random_state=None):
        """Symmetric noise ξ with ``Var ξ_aa = Δ`` and ``Var ξ_ab = Δ/2``.

        Shape ``(n_samples, n_tokens, n_tokens)``, with a head axis after the samples when
        ``n_heads > 1``.
        """
        n_samples = check_scalar_range(n_samples, "n_samples", low=0, integer=True)
        rng = check_random_state(random_state)
        T = self.n_tokens
        heads = () if self.n_heads == 1 else (self.n_heads,)
        g = rng.standard_normal((n_samples, *heads, T, T)) * np.sqrt(self.noise / 2)
        # (g + gᵀ)/√2 keeps Δ/2 off the diagonal and doubles the diagonal variance to Δ
        return (g + np.swapaxes(g, -1, -2)) / np.sqrt(2)

    def attention_matrix(self, X, S=None, noise=None):
        """``σ_β0(h(S; X) + noise)`` with ``S = S0`` by default, averaged over heads.

        ``S`` may be one matrix or a stack ``(n_heads', d, d)`` (the mean over its heads);
        the centring uses the model's token covariance.
        """
        X = check_finite_array(X, "X", ndim=3)
        if X.shape[2] != self.n_features:
            raise ValueError(f"X must have shape (n_samples, n_tokens, {self.n_features}), "
                             f"got {X.shape}.")
        if S is not None:
            S = check_finite_array(S, "S", ndim=(2, 3))
            d = self.n_features
            if S.shape[-2:] != (d, d):
                raise ValueError(f"S must have shape ({d}, {d}) or (n_heads, {d}, {d}), got "
                                 f"{S.shape}.")
        S = self.S0_ if S is None else S
        with np.errstate(over="ignore", invalid="ignore"):  # overflow: checked below
            h = preactivation(X, S, self.token_covariance)
        h = check_finite_result(h, "X", X)
        if noise is not None:
            h = h + noise
        return attention_map(h, self.beta, self.attention,
                             head_axis=-3 if S.ndim == 3 else None)

    def sample(self, n_samples, task="seq2lab", random_state=None, *, layout="flat"):
        """Draw ``(X, y)``.

        Parameters
        ----------
        n_samples : int
        task : {"seq2lab", "seq2seq"}, default="seq2lab"
        random_state : int, RandomState or None
            Seeds X and the noise (independent of the seed that drew S0).
        layout : {"flat", "tokens"}, default="flat"
            ``"flat"``: scikit-learn's 2-D layout, X of shape ``(n_samples, T·d)`` (the
            tokens of a sample side by side) and y of shape ``(n_samples, T·T)`` (seq2lab,
            the attention matrix row by row) or ``(n_samples, T·d)`` (seq2seq); every
            scikit-learn scorer and model-selection tool accepts it. ``"tokens"``: the
            model's 3-D layout, X ``(n_samples, T, d)`` and y ``(n_samples, T, T)`` or
            ``(n_samples, T, d)``. The draws are the same; ``"flat"`` is
            ``X.reshape(n_samples, -1)``, ``y.reshape(n_samples, -1)`` of ``"tokens"``.

        Returns
        -------
        X : ndarray of shape (n_samples, n_tokens * n_features) or \
                (n_samples, n_tokens, n_features)
        y : ndarray of shape (n_samples, n_tokens * n_tokens) or \
                (n_samples, n_tokens, n_tokens) for seq2lab, (n_samples, n_tokens * \
                n_features) or (n_samples, n_tokens, n_features) for seq2seq

        Raises
        ------
        ValueError
            Naming ``layout`` and its choices, for another value.
        """
        n_samples = check_scalar_range(n_samples, "n_samples", low=1, integer=True)
        check_choice(task, "task", TASKS)
        check_choice(layout, "layout", LAYOUTS)
        T, d = self.n_tokens, self.n_features
        # X, y (at most T·d per sample), noise, pre-activations and maps, in float64
        check_memory(8 * n_samples * (2 * T * d + 3 * T * T),
                     f"n_samples={n_samples} (with n_tokens={T}, n_features={d})")
        rng = check_random_state(random_state)
        X = self.sample_tokens(n_samples, rng)
        noise = self.sample_noise(n_samples, rng) if self.noise > 0 else None
        y = attention_output(self.attention_matrix(X, noise=noise), X, task)
        if layout == "flat":
            return X.reshape(n_samples, -1), y.reshape(n_samples, -1)
        return X, y

    def __repr__(self):
        extra = ""
        if self.n_heads != 1:
            extra += f", n_heads={self.n_heads}"
        if not (isinstance(self.token_distribution, str)
                and self.token_distribution == "gaussian"):
            extra += f", token_distribution={self.token_distribution!r}"
        if self.token_df is not None:
            extra += f", token_df={self.token_df}"
        if self.token_covariance is not None:
            extra += ", token_covariance=<array>"
        return (f"AttentionIndexedModel(n_features={self.n_features}, n_tokens={self.n_tokens}, "
                f"target={self.target!r}, beta={self.beta}, noise={self.noise}, "
                f"attention={self.attention!r}{extra})")


def make_attention_indexed(n_samples=1000, n_features=50, *, n_tokens=2, target=None,
                           beta=1.0, noise=0.0, attention="softmax", task="seq2lab",
                           n_heads=1, token_distribution="gaussian", token_df=None,
                           token_covariance=None, return_target=False, layout="flat",
                           random_state=None):
    """Generate an attention-indexed regression problem (sklearn ``make_*`` style).

    Parameters
    ----------
    n_samples : int, default=1000
    n_features : int, default=50
        Token dimension d (features per token, not the column count of X: the flat X has
        ``n_tokens * n_features`` columns).
    n_tokens : int, default=2
    target : Target or list of Target, default=WishartTarget(0.5)
    beta, noise : float
    attention : {"softmax", "linear"}
    task : {"seq2lab", "seq2seq"}
    n_heads : int, default=1
    token_distribution : {"gaussian", "rademacher", "student_t"} or callable
    token_df : float or None
    token_covariance : array-like of shape (n_features, n_features) or None
        See :class:`AttentionIndexedModel`.
    return_target : bool, default=False
        Also return the target matrix S0.
    layout : {"flat", "tokens"}, default="flat"
        ``"flat"``: scikit-learn's 2-D layout, X ``(n_samples, n_tokens·n_features)`` and
        y ``(n_samples, n_tokens·n_tokens)`` (seq2lab) or ``(n_samples,
        n_tokens·n_features)`` (seq2seq), usable with every scikit-learn scorer.
        ``"tokens"``: the 3-D layout ``(n_samples, n_tokens, ·)``. See
        :meth:`AttentionIndexedModel.sample`.
    random_state : int, RandomState or None
        Seeds both the target and the samples.

    Returns
    -------
    X : ndarray of shape (n_samples, n_tokens * n_features), or \
            (n_samples, n_tokens, n_features) with ``layout="tokens"``
    y : ndarray of shape (n_samples, n_tokens * n_tokens) (seq2lab) or \
            (n_samples, n_tokens * n_features) (seq2seq); with ``layout="tokens"``
            (n_samples, n_tokens, n_tokens) or (n_samples, n_tokens, n_features)
    S0 : ndarray of shape (n_features, n_features), or (n_heads, n_features, n_features)
        Only when ``return_target=True``.
    """
    rng = check_random_state(random_state)
    model = AttentionIndexedModel(n_features, n_tokens=n_tokens, target=target, beta=beta,
                                  noise=noise, attention=attention, n_heads=n_heads,
                                  token_distribution=token_distribution, token_df=token_df,
                                  token_covariance=token_covariance, random_state=rng)
    check_choice(layout, "layout", LAYOUTS)  # before any draw
    X, y = model.sample(n_samples, task=task, random_state=rng, layout=layout)
    return (X, y, model.S0_) if return_target else (X, y)
