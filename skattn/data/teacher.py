"""The attention-indexed teacher (THEORY.md §1), in numpy.

``x ∈ R^{T×d}`` with i.i.d. standard Gaussian rows; pre-activation
``h_ab(S; x) = (x_aᵀ S x_b − δ_ab Tr S)/√d``; labels ``y = σ_β0(h(S0) + ξ)`` (seq2lab) or
``σ_β0(h(S0) + ξ) x`` (seq2seq), σ a row-wise softmax or the identity (linear attention).
"""

from __future__ import annotations

import numpy as np
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
    "preactivation",
    "softmax",
    "attention_map",
    "attention_output",
    "AttentionIndexedModel",
    "make_attention_indexed",
]

ATTENTIONS = ("softmax", "linear")
TASKS = ("seq2lab", "seq2seq")

# The forward model of THEORY.md §1–2 in numpy. skattn.nn.functional is its torch twin:
# same names, signatures, operation order and errors (tests/test_nn.py compares the two).


def preactivation(X, S):
    """Trace-centred pre-activation ``h_ab = (x_aᵀ S x_b − δ_ab Tr S)/√d``.

    Parameters
    ----------
    X : ndarray of shape (..., n_tokens, n_features)
    S : ndarray of shape (n_features, n_features), symmetric

    Returns
    -------
    h : ndarray of shape (..., n_tokens, n_tokens), symmetric in its last two axes
    """
    X = np.asarray(X, dtype=float)
    S = np.asarray(S, dtype=float)
    d = X.shape[-1]
    T = X.shape[-2]
    h = (X @ S) @ np.swapaxes(X, -1, -2)
    return (h - np.trace(S) * np.eye(T)) / np.sqrt(d)


def softmax(z, beta=1.0):
    """Row-wise softmax ``σ_β(z)_ab = exp(β z_ab) / Σ_c exp(β z_ac)`` (log-sum-exp stable)."""
    return scipy.special.softmax(beta * np.asarray(z, dtype=float), axis=-1)


def attention_map(h, beta=1.0, attention="softmax"):
    """Row-wise ``σ_β(h)``: softmax at inverse temperature β, or the identity.

    Parameters
    ----------
    h : ndarray of shape (..., n_tokens, n_tokens)
    beta : float, default=1.0
    attention : {"softmax", "linear"}, default="softmax"

    Returns
    -------
    A : ndarray of the same shape as ``h``
    """
    check_choice(attention, "attention", ATTENTIONS)
    return softmax(h, beta) if attention == "softmax" else np.asarray(h, dtype=float)


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
    """The attention-indexed teacher of THEORY.md §1.

    Parameters
    ----------
    n_features : int
        Token dimension d.
    n_tokens : int, default=2
        Sequence length T (``T ≥ 2`` for softmax attention, ``T ≥ 1`` for linear).
    target : Target, default=WishartTarget(0.5)
        Family of the target S0.
    beta : float, default=1.0
        Inverse temperature β0 of the teacher's softmax.
    noise : float, default=0.0
        Δ ≥ 0: label noise inside the softmax, variance Δ on the diagonal, Δ/2 off it.
    attention : {"softmax", "linear"}, default="softmax"
    random_state : int, RandomState or None
        Seeds the draw of S0 (done once, at construction).

    Attributes
    ----------
    S0_ : ndarray of shape (n_features, n_features)
        The target matrix.
    Q0_ : float
        ``Tr S0² / d``.
    """

    def __init__(self, n_features, n_tokens=2, target=None, beta=1.0, noise=0.0,
                 attention="softmax", random_state=None):
        self.n_features = check_scalar_range(n_features, "n_features", low=1, integer=True)
        self.attention = check_choice(attention, "attention", ATTENTIONS)
        min_tokens = 2 if attention == "softmax" else 1
        self.n_tokens = check_scalar_range(n_tokens, "n_tokens", low=min_tokens, integer=True)
        self.target = WishartTarget(0.5) if target is None else target
        if not isinstance(self.target, Target):
            raise TypeError(
                f"target must be a skattn Target (WishartTarget, PowerLawTarget, "
                f"SpectrumTarget), got {type(self.target).__name__}."
            )
        self.beta = check_scalar_range(beta, "beta", low=0, low_inclusive=False)
        self.noise = check_scalar_range(noise, "noise", low=0)
        self.random_state = random_state
        self.S0_ = self.target.sample(self.n_features, random_state)
        self.Q0_ = float(np.sum(self.S0_ ** 2) / self.n_features)

    def sample_noise(self, n_samples, random_state=None):
        """Symmetric noise ξ with ``Var ξ_aa = Δ`` and ``Var ξ_ab = Δ/2``."""
        n_samples = check_scalar_range(n_samples, "n_samples", low=0, integer=True)
        rng = check_random_state(random_state)
        T = self.n_tokens
        g = rng.standard_normal((n_samples, T, T)) * np.sqrt(self.noise / 2)
        # (g + gᵀ)/√2 keeps Δ/2 off the diagonal and doubles the diagonal variance to Δ
        return (g + np.swapaxes(g, 1, 2)) / np.sqrt(2)

    def attention_matrix(self, X, S=None, noise=None):
        """``σ_β0(h(S; X) + noise)`` with ``S = S0`` by default."""
        X = check_finite_array(X, "X", ndim=3)
        if X.shape[2] != self.n_features:
            raise ValueError(f"X must have shape (n_samples, n_tokens, {self.n_features}), "
                             f"got {X.shape}.")
        with np.errstate(over="ignore", invalid="ignore"):  # overflow: checked below
            h = preactivation(X, self.S0_ if S is None else S)
        h = check_finite_result(h, "X", X)
        if noise is not None:
            h = h + noise
        return attention_map(h, self.beta, self.attention)

    def sample(self, n_samples, task="seq2lab", random_state=None):
        """Draw ``(X, y)``.

        Parameters
        ----------
        n_samples : int
        task : {"seq2lab", "seq2seq"}, default="seq2lab"
        random_state : int, RandomState or None
            Seeds X and the noise (independent of the seed that drew S0).

        Returns
        -------
        X : ndarray of shape (n_samples, n_tokens, n_features)
        y : ndarray of shape (n_samples, n_tokens, n_tokens) for seq2lab,
            or (n_samples, n_tokens, n_features) for seq2seq
        """
        n_samples = check_scalar_range(n_samples, "n_samples", low=1, integer=True)
        check_choice(task, "task", TASKS)
        T, d = self.n_tokens, self.n_features
        # X, y (at most T·d per sample), noise, pre-activations and maps, in float64
        check_memory(8 * n_samples * (2 * T * d + 3 * T * T),
                     f"n_samples={n_samples} (with n_tokens={T}, n_features={d})")
        rng = check_random_state(random_state)
        X = rng.standard_normal((n_samples, self.n_tokens, self.n_features))
        noise = self.sample_noise(n_samples, rng) if self.noise > 0 else None
        y = attention_output(self.attention_matrix(X, noise=noise), X, task)
        return X, y

    def __repr__(self):
        return (f"AttentionIndexedModel(n_features={self.n_features}, n_tokens={self.n_tokens}, "
                f"target={self.target!r}, beta={self.beta}, noise={self.noise}, "
                f"attention={self.attention!r})")


def make_attention_indexed(n_samples=1000, n_features=50, *, n_tokens=2, target=None,
                           beta=1.0, noise=0.0, attention="softmax", task="seq2lab",
                           return_target=False, random_state=None):
    """Generate an attention-indexed regression problem (sklearn ``make_*`` style).

    Parameters
    ----------
    n_samples, n_features, n_tokens : int
    target : Target, default=WishartTarget(0.5)
    beta, noise : float
    attention : {"softmax", "linear"}
    task : {"seq2lab", "seq2seq"}
    return_target : bool, default=False
        Also return the target matrix S0.
    random_state : int, RandomState or None
        Seeds both the target and the samples.

    Returns
    -------
    X : ndarray of shape (n_samples, n_tokens, n_features)
    y : ndarray of shape (n_samples, n_tokens, n_tokens) or (n_samples, n_tokens, n_features)
    S0 : ndarray of shape (n_features, n_features)
        Only when ``return_target=True``.
    """
    rng = check_random_state(random_state)
    model = AttentionIndexedModel(n_features, n_tokens=n_tokens, target=target, beta=beta,
                                  noise=noise, attention=attention, random_state=rng)
    X, y = model.sample(n_samples, task=task, random_state=rng)
    return (X, y, model.S0_) if return_target else (X, y)
