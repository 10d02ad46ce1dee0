"""The square loss with per-sample token weights, and its proximal map.

The seq2seq loss of one sample is ``‖(Â − Y) X‖²_F/d = Σ_a r_aᵀ G r_a = Tr(R G Rᵀ)`` with
``R = Â − Y`` and the token Gram matrix ``G = X Xᵀ/d`` (docs: Theory §4, "Finite d").
In the continuum ``G = I`` and the loss is the channel's own ``Σ_ab r_ab²``; at finite d
``G = I + h(I)/√d`` fluctuates with the sample. This module gives, for either channel
(:class:`~.linear.LinearChannel`, :class:`~.softmax.SoftmaxChannel`) and a batch of
symmetric weight matrices ``G`` (one per node):

* :func:`weighted_loss` and its u-coordinate gradient and Hessian
  (:func:`weighted_derivatives`), with the row Hessians of the channel generalised from
  ``I`` to ``G``: for a softmax row ``A = softmax(βh)``, ``J = diag(A) − AAᵀ`` and
  ``ρ̃ = G r − (Aᵀ G r)1``, ``∇²_h ℓ_a = 2β²[J G J + diag(Aρ̃) − (Aρ̃)Aᵀ − A(Aρ̃)ᵀ]``;
* :func:`weighted_prox`, ``argmin_z ‖z − ω‖²/(2Σ) + ℓ_G(y, z)``: a linear solve for
  linear attention; for softmax attention damped Newton (:func:`.prox._newton`) from the
  channel's own global minimiser of the unweighted problem, from ω and from the exact-fit
  point, keeping the best end point. G is within ``O(1/√d)`` of I, so the unweighted
  global minimiser starts inside the basin of the weighted one; this is not certified.

Pure numpy.
"""

from __future__ import annotations

import numpy as np

from .base import _as_sigma
from .linear import LinearChannel
from .prox import _newton, _SoftmaxProblem

__all__ = ["weighted_loss", "weighted_derivatives", "weighted_prox"]


def _check_weights(channel, weights, N):
    weights = np.asarray(weights, dtype=float)
    T = channel.n_tokens
    if weights.shape != (N, T, T):
        raise ValueError(f"weights must have shape ({N}, {T}, {T}), got {weights.shape}.")
    if not np.all(np.isfinite(weights)):
        raise ValueError("weights must be finite.")
    if not np.allclose(weights, np.swapaxes(weights, 1, 2), rtol=0, atol=1e-12):
        raise ValueError("weights must be symmetric matrices.")
    return weights


def _check_inputs(channel, y, z, weights, z_name="z"):
    y, z = channel._check_y(y), channel._check_u(z, z_name)
    if y.shape[0] != z.shape[0]:
        raise ValueError(f"y and {z_name} must have the same number of rows, got "
                         f"{y.shape[0]} and {z.shape[0]}.")
    return y, z, _check_weights(channel, weights, z.shape[0])


def _derivs(channel, y, z, weights, hessian=True):
    """Weighted loss, gradient and Hessian in u-coordinates (validated inputs)."""
    beta = channel.beta_
    A = channel._act(channel._h(z), beta)
    r = A - y
    rG = r @ weights                       # row a: G r_a (G symmetric)
    loss = np.einsum("nab,nab->n", r, rG)
    N, T, K = z.shape[0], channel.n_tokens, channel.K
    if isinstance(channel, LinearChannel):
        grad_h = 2.0 * rG
        Hrow = None
        if hessian:
            Hrow = np.broadcast_to(2.0 * weights[:, None], (N, T, T, T))
    else:
        sbar = np.sum(rG * A, axis=-1, keepdims=True)
        Arho = A * (rG - sbar)                     # A_c ρ̃_c
        grad_h = 2 * beta * Arho
        Hrow = None
        if hessian:
            J = A[..., :, None] * np.eye(T) - A[..., :, None] * A[..., None, :]
            JGJ = np.einsum("naij,njk,nakl->nail", J, weights, J)
            D = -Arho[..., :, None] * A[..., None, :] - A[..., :, None] * Arho[..., None, :]
            idx = np.arange(T)
            D[..., idx, idx] += Arho
            Hrow = 2 * beta * beta * (JGJ + D)
    grad = grad_h.reshape(N, T * T) @ channel._L
    if not hessian:
        return loss, grad, None
    H = (np.ascontiguousarray(Hrow).reshape(N, T ** 3) @ channel._S).reshape(N, K, K)
    return loss, grad, H


def weighted_loss(channel, y, z, weights):
    """Per-sample loss ``Tr(R G Rᵀ)``, ``R = attention(z) − y``.

    Parameters
    ----------
    channel : LinearChannel or SoftmaxChannel
    y : array_like of shape (N, T, T)
    z : array_like of shape (N, K)
        u-coordinates of the student's pre-activation.
    weights : array_like of shape (N, T, T)
        Symmetric weight matrices G (the token Gram matrices ``X Xᵀ/d`` for seq2seq).

    Returns
    -------
    loss : ndarray of shape (N,)
    """
    y, z, weights = _check_inputs(channel, y, z, weights)
    return _derivs(channel, y, z, weights, hessian=False)[0]


def weighted_derivatives(channel, y, z, weights):
    """Loss, gradient and Hessian of :func:`weighted_loss` in u-coordinates.

    Parameters
    ----------
    channel : LinearChannel or SoftmaxChannel
    y : array_like of shape (N, T, T)
    z : array_like of shape (N, K)
    weights : array_like of shape (N, T, T)

    Returns
    -------
    loss : ndarray of shape (N,)
    grad : ndarray of shape (N, K)
    hessian : ndarray of shape (N, K, K)
    """
    y, z, weights = _check_inputs(channel, y, z, weights)
    return _derivs(channel, y, z, weights, hessian=True)


class _WeightedSoftmaxProblem(_SoftmaxProblem):
    """``‖x‖²/(2Σ) + ℓ_G(y, ω + Bx)`` over the complement of the shift (any T)."""

    def __init__(self, channel, y, omega, sigma, weights):
        super().__init__(channel, y, omega, sigma)
        self.weights = weights

    def value(self, rows, x):
        z = self.omega[rows] + x @ self.B.T
        loss = _derivs(self.ch, self.y[rows], z, self.weights[rows], hessian=False)[0]
        return np.sum(x * x, axis=1) / (2 * self.sigma[rows]) + loss

    def grad_hess(self, rows, x):
        B, s = self.B, self.sigma[rows]
        _, gl, Hl = _derivs(self.ch, self.y[rows], self.omega[rows] + x @ B.T,
                            self.weights[rows])
        g = x / s[:, None] + gl @ B
        H = np.eye(B.shape[1]) / s[:, None, None] + np.matmul(B.T, np.matmul(Hl, B))
        return g, H


def weighted_prox(channel, y, omega, sigma, weights, start=None):
    """Proximal map ``argmin_z ‖z − ω‖²/(2Σ) + Tr(R G Rᵀ)`` of the weighted loss.

    Parameters
    ----------
    channel : LinearChannel or SoftmaxChannel
    y : array_like of shape (N, T, T)
    omega : array_like of shape (N, K)
    sigma : float or array_like of shape (N,)
        Σ > 0.
    weights : array_like of shape (N, T, T)
        Symmetric weight matrices G; for linear attention ``I/Σ + 2Lᵀ(I ⊗ G)L`` must be
        positive definite (it is for positive semi-definite G).
    start : array_like of shape (N, K), optional
        Softmax only: a point with ``attention(start) ≈ y`` (the exact-fit logits); passed
        to the unweighted prox and used as one more start.

    Returns
    -------
    z : ndarray of shape (N, K)

    Raises
    ------
    ValueError
        For shapes that do not match, non-symmetric or non-finite weights, or (linear
        attention) weights so negative that the prox problem has no minimiser.
    """
    y, omega, weights = _check_inputs(channel, y, omega, weights, "omega")
    N, T, K = omega.shape[0], channel.n_tokens, channel.K
    sigma = _as_sigma(sigma, N)
    if isinstance(channel, LinearChannel):             # a linear solve
        # stationarity: (I/Σ + 2Lᵀ M L) z = ω/Σ + 2Lᵀ M vec y, M = I_T ⊗ G (row-major vec)
        M = np.einsum("ab,ncd->nacbd", np.eye(T), weights).reshape(N, T * T, T * T)
        LtM = np.einsum("ik,nij->nkj", channel._L, M)
        H = np.eye(K) / sigma[:, None, None] + 2 * LtM @ channel._L
        rhs = omega / sigma[:, None] + 2 * np.einsum("nkj,nj->nk", LtM, y.reshape(N, -1))
        lam_min = np.linalg.eigvalsh(H)[:, 0]
        if np.any(lam_min <= 0):
            raise ValueError("weights make the prox problem unbounded below (I/Σ + 2LᵀML "
                             "is not positive definite); pass positive semi-definite weights.")
        return np.linalg.solve(H, rhs[..., None])[..., 0]
    if start is None:
        start = channel.fit_logits(y)
    else:
        start = channel._check_u(start, "start")
    B = channel.basis
    prob = _WeightedSoftmaxProblem(channel, y, omega, sigma, weights)
    unweighted = channel.prox(y, omega, sigma, start=start)
    starts = [(unweighted - omega) @ B, np.zeros((N, B.shape[1])), (start - omega) @ B]
    S = len(starts)
    x0 = np.stack(starts, axis=1).reshape(N * S, -1)
    rows = np.repeat(np.arange(N), S)
    x, f = _newton(prob, rows, x0, channel._radius / channel.beta_, channel.max_iter)
    x, f = x.reshape(N, S, -1), f.reshape(N, S)
    best = np.argmin(f, axis=1)
    return omega + x[np.arange(N), best] @ B.T
