"""Output channels of the state evolution (THEORY.md §3–4), reusable by AMP on data (§9).

A sample enters the theory only through the ``K = T(T+1)/2`` normalised components
``u_k = h_ab / √(1 + δ_ab)`` (a ≤ b) of its symmetric pre-activation. This module holds

* the coordinate maps :func:`pair_indices`, :func:`h_from_u`, :func:`u_from_h`;
* the channels :class:`SoftmaxChannel` and :class:`LinearChannel`: student attention, teacher
  labels, the per-sample square loss ``ℓ(y, z) = Σ_ab (σ(h(z))_ab − y_ab)²`` with its
  analytic gradient and Hessian in u-coordinates, and the proximal operator
  ``z* = argmin_z ‖z − ω‖²/(2Σ) + ℓ(y, z)`` (the *global* minimiser) with its Jacobians;
* :class:`GaussianNodes`, fixed quasi-Monte-Carlo Gaussian nodes (common random numbers, so
  the state-evolution map is a smooth function of its arguments);
* :func:`output_side` (the conjugates ``m̂, q̂, Σ̂`` with the paper's factor 2, and the train
  error) and :func:`test_error`.

Pure numpy/scipy.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.special import expit
from scipy.stats import norm, qmc

from .._validation import check_scalar_range

__all__ = [
    "pair_indices",
    "h_from_u",
    "u_from_h",
    "SoftmaxChannel",
    "LinearChannel",
    "channel_for",
    "GaussianNodes",
    "OutputSide",
    "output_side",
    "test_error",
]

# clip of the labels before taking logs in ``fit_logits``: log(1e-12) ≈ −27.6, so the fitted
# logits stay moderate while the residual loss of the fit is ≤ ~1e-24
_LOG_CLIP = 1e-12


# ----------------------------------------------------------------------------------------
# coordinates
# ----------------------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _pairs(T):
    diag = [(a, a) for a in range(T)]
    off = [(a, b) for a in range(T) for b in range(a + 1, T)]
    return tuple(diag + off)


def pair_indices(T):
    """Index pairs ``(a, b)``, ``a ≤ b``, in the order of the u-coordinates.

    The diagonal pairs come first, then the off-diagonal pairs ``a < b`` in row-major order;
    for ``T = 2``: ``(0, 0), (1, 1), (0, 1)``, i.e. ``(u11, u22, u12)``.

    Parameters
    ----------
    T : int
        Number of tokens (≥ 1).

    Returns
    -------
    pairs : list of tuple of int
        ``K = T(T+1)/2`` pairs.
    """
    T = check_scalar_range(T, "n_tokens", low=1, integer=True)
    return list(_pairs(T))


@lru_cache(maxsize=None)
def _maps(T):
    """Index map, scale and the linear map L: u ↦ vec(h) (shape (T², K)) for T tokens."""
    pairs = _pairs(T)
    K = len(pairs)
    index = np.empty((T, T), dtype=np.intp)
    scale = np.empty((T, T))
    L = np.zeros((T * T, K))
    for k, (a, b) in enumerate(pairs):
        c = np.sqrt(2.0) if a == b else 1.0
        for (i, j) in {(a, b), (b, a)}:
            index[i, j] = k
            scale[i, j] = c
            L[i * T + j, k] = c
    inv_scale = np.array([1 / np.sqrt(2.0) if a == b else 1.0 for (a, b) in pairs])
    rows = np.array([a for (a, b) in pairs], dtype=np.intp)
    cols = np.array([b for (a, b) in pairs], dtype=np.intp)
    for arr in (index, scale, L, inv_scale, rows, cols):
        arr.setflags(write=False)
    return index, scale, L, inv_scale, rows, cols


def _n_tokens_from_K(K):
    T = int(round((np.sqrt(8 * K + 1) - 1) / 2))
    if T * (T + 1) // 2 != K or T < 1:
        raise ValueError(f"the last axis of u must have length T(T+1)/2, got {K}.")
    return T


def h_from_u(u, T=None):
    """Symmetric pre-activation ``h_ab = √(1 + δ_ab) u_k`` from the u-coordinates.

    Parameters
    ----------
    u : array_like of shape (..., K)
        ``K = T(T+1)/2`` components ordered as in :func:`pair_indices`.
    T : int, optional
        Number of tokens; inferred from ``K`` when omitted.

    Returns
    -------
    h : ndarray of shape (..., T, T), symmetric in its last two axes
    """
    u = np.asarray(u, dtype=float)
    if T is None:
        T = _n_tokens_from_K(u.shape[-1])
    index, scale, *_ = _maps(T)
    if u.shape[-1] != len(_pairs(T)):
        raise ValueError(f"u must have T(T+1)/2 = {len(_pairs(T))} components for "
                         f"n_tokens={T}, got {u.shape[-1]}.")
    return u[..., index] * scale


def u_from_h(h):
    """u-coordinates ``u_k = h_ab / √(1 + δ_ab)`` of the symmetric part of ``h``.

    Parameters
    ----------
    h : array_like of shape (..., T, T)

    Returns
    -------
    u : ndarray of shape (..., K), the inverse of :func:`h_from_u` on symmetric matrices
    """
    h = np.asarray(h, dtype=float)
    if h.ndim < 2 or h.shape[-1] != h.shape[-2]:
        raise ValueError(f"h must have shape (..., T, T), got {h.shape}.")
    T = h.shape[-1]
    _, _, _, inv_scale, rows, cols = _maps(T)
    hs = 0.5 * (h + np.swapaxes(h, -1, -2))
    return hs[..., rows, cols] * inv_scale


def _row_softmax(z):
    """Row-wise softmax of already-scaled logits, log-sum-exp stable."""
    z = z - np.max(z, axis=-1, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=-1, keepdims=True)


def _as_batch(arr, name, last_shape):
    arr = np.asarray(arr, dtype=float)
    if arr.ndim == len(last_shape):
        arr = arr[None]
    if arr.ndim != len(last_shape) + 1 or arr.shape[1:] != tuple(last_shape):
        raise ValueError(f"{name} must have shape (N, {', '.join(map(str, last_shape))}), "
                         f"got {arr.shape}.")
    return arr


def _as_sigma(sigma, N):
    sigma = np.asarray(sigma, dtype=float)
    if sigma.ndim > 1 or (sigma.ndim == 1 and sigma.shape[0] not in (1, N)):
        raise ValueError(f"sigma must be a scalar or have shape ({N},), got {sigma.shape}.")
    if np.any(~np.isfinite(sigma)) or np.any(sigma <= 0):
        raise ValueError("sigma must be finite and > 0.")
    return np.broadcast_to(sigma, (N,)).astype(float)


# ----------------------------------------------------------------------------------------
# channels
# ----------------------------------------------------------------------------------------

class _Channel:
    """Common part of the channels: coordinates, loss derivatives, Jacobians."""

    def _setup(self, n_tokens):
        self.n_tokens = n_tokens
        self.K = n_tokens * (n_tokens + 1) // 2
        self._index, self._scale, self._L, *_ = _maps(n_tokens)
        self._Lr = self._L.reshape(n_tokens, n_tokens, self.K)
        T, K = n_tokens, self.K
        self._S = np.einsum("ack,aej->acekj", self._Lr, self._Lr).reshape(T ** 3, K * K)

    # subclasses provide _act(h, beta) -> A, _row_terms(A, r, hessian) -> (∂ℓ/∂h, row
    # Hessians) and _jac(u, beta) -> ∂A/∂u

    def _h(self, u):
        return u[..., self._index] * self._scale

    def _check_u(self, u, name="u"):
        return _as_batch(u, name, (self.K,))

    def _check_y(self, y):
        return _as_batch(y, "y", (self.n_tokens, self.n_tokens))

    def attention(self, u):
        """Student attention matrix as a function of the u-coordinates.

        Parameters
        ----------
        u : array_like of shape (N, K)

        Returns
        -------
        A : ndarray of shape (N, T, T)
        """
        return self._act(self._h(self._check_u(u)), self.beta_)

    def labels(self, w):
        """Teacher labels ``y = σ_β0(h(w))`` with ``w = u0 + ξ̃`` (target inverse temperature).

        Parameters
        ----------
        w : array_like of shape (N, K)

        Returns
        -------
        y : ndarray of shape (N, T, T)
        """
        return self._act(self._h(self._check_u(w, "w")), self.target_beta_)

    def loss(self, y, z):
        """Per-sample loss ``ℓ(y, z) = Σ_ab (attention(z)_ab − y_ab)²``.

        Parameters
        ----------
        y : array_like of shape (N, T, T)
        z : array_like of shape (N, K)

        Returns
        -------
        loss : ndarray of shape (N,)
        """
        y, z = self._check_y(y), self._check_u(z, "z")
        return self._loss(y, z)

    def _loss(self, y, z):
        r = self._act(self._h(z), self.beta_) - y
        return np.einsum("nab,nab->n", r, r)

    def grad(self, y, z):
        """Gradient ``∇_z ℓ(y, z)`` in u-coordinates.

        Parameters
        ----------
        y : array_like of shape (N, T, T)
        z : array_like of shape (N, K)

        Returns
        -------
        grad : ndarray of shape (N, K)
        """
        y, z = self._check_y(y), self._check_u(z, "z")
        return self._derivs(y, z, hessian=False)[1]

    def hessian(self, y, z):
        """Hessian ``∇²_z ℓ(y, z)`` in u-coordinates (analytic, vectorised).

        Parameters
        ----------
        y : array_like of shape (N, T, T)
        z : array_like of shape (N, K)

        Returns
        -------
        hessian : ndarray of shape (N, K, K)
        """
        y, z = self._check_y(y), self._check_u(z, "z")
        return self._derivs(y, z, hessian=True)[2]

    def _derivs(self, y, z, hessian=True):
        """Loss, gradient and (optionally) Hessian in u-coordinates."""
        A = self._act(self._h(z), self.beta_)
        r = A - y
        loss = np.einsum("nab,nab->n", r, r)
        G, Hrow = self._row_terms(A, r, hessian)   # ∂ℓ/∂h (N,T,T), row Hessians (N,T,T,T)
        N, T = z.shape[0], self.n_tokens
        grad = G.reshape(N, T * T) @ self._L
        if not hessian:
            return loss, grad, None
        # H = Σ_a L_aᵀ Hrow_a L_a (L_a: the rows of L that belong to row a of h), as one
        # matrix product with the fixed (T³, K²) map ``_S``
        H = (Hrow.reshape(N, T ** 3) @ self._S).reshape(N, self.K, self.K)
        return loss, grad, H

    def attention_jacobian(self, u):
        """Jacobian of :meth:`attention` with respect to ``u``.

        Parameters
        ----------
        u : array_like of shape (N, K)

        Returns
        -------
        jac : ndarray of shape (N, T, T, K), ``∂ attention(u)_ab / ∂u_k``
        """
        return self._jac(self._check_u(u), self.beta_)

    def labels_jacobian(self, w):
        """Jacobian of :meth:`labels` with respect to ``w``, shape (N, T, T, K)."""
        return self._jac(self._check_u(w, "w"), self.target_beta_)

    def prox_jacobian_omega(self, y, z, sigma):
        """``∂z*/∂ω = (I + Σ H)⁻¹`` at a prox solution ``z`` (implicit function theorem).

        Parameters
        ----------
        y : array_like of shape (N, T, T)
        z : array_like of shape (N, K)
            The prox solution for ``(y, ω, Σ)``.
        sigma : float or array_like of shape (N,)

        Returns
        -------
        jac : ndarray of shape (N, K, K)
        """
        y, z = self._check_y(y), self._check_u(z, "z")
        sigma = _as_sigma(sigma, z.shape[0])
        H = self._derivs(y, z)[2]
        M = np.eye(self.K) + sigma[:, None, None] * H
        return np.linalg.inv(M)

    def prox_jacobian_w(self, w, z, sigma):
        """``∂z*/∂w`` for labels ``y = labels(w)`` at a prox solution ``z``.

        From ``(z* − ω)/Σ + ∇ℓ(y(w), z*) = 0``:
        ``∂z*/∂w = Σ (I + Σ H)⁻¹ · 2 J_A(z*)ᵀ J_y(w)``, with ``J_A`` the attention Jacobian
        and ``J_y`` the label Jacobian. ``Σ_k ∂g_k/∂w_k`` with ``g = (z* − ω)/Σ`` is the
        non-Stein form of ``m̂`` (valid where z* is a smooth function of w).

        Parameters
        ----------
        w : array_like of shape (N, K)
        z : array_like of shape (N, K)
        sigma : float or array_like of shape (N,)

        Returns
        -------
        jac : ndarray of shape (N, K, K), ``∂z*_k / ∂w_j``
        """
        w, z = self._check_u(w, "w"), self._check_u(z, "z")
        N = z.shape[0]
        sigma = _as_sigma(sigma, N)
        y = self._act(self._h(w), self.target_beta_)
        H = self._derivs(y, z)[2]
        JA = self._jac(z, self.beta_).reshape(N, -1, self.K)
        Jy = self._jac(w, self.target_beta_).reshape(N, -1, self.K)
        cross = 2.0 * np.matmul(np.swapaxes(JA, 1, 2), Jy)          # (N, K, K)
        M = np.eye(self.K) + sigma[:, None, None] * H
        return sigma[:, None, None] * np.linalg.solve(M, cross)

    def moreau(self, y, omega, sigma, start=None):
        """Value of the prox problem ``‖z* − ω‖²/(2Σ) + ℓ(y, z*)`` (Moreau envelope).

        Parameters
        ----------
        y : array_like of shape (N, T, T)
        omega : array_like of shape (N, K)
        sigma : float or array_like of shape (N,)
        start : array_like of shape (N, K), optional
            Passed to :meth:`prox`.

        Returns
        -------
        value : ndarray of shape (N,)
        """
        y, omega = self._check_y(y), self._check_u(omega, "omega")
        sigma = _as_sigma(sigma, omega.shape[0])
        z = self.prox(y, omega, sigma, start=start)
        return np.sum((z - omega) ** 2, axis=1) / (2 * sigma) + self._loss(y, z)


class LinearChannel(_Channel):
    """Linear attention: ``σ`` is the identity, ``ℓ(y, z) = ‖h(z) − y‖²_F``.

    Parameters
    ----------
    n_tokens : int
        Number of tokens T ≥ 1.

    Attributes
    ----------
    n_tokens : int
    K : int
        ``T(T+1)/2`` components.
    K_eff : int
        Number of directions a sample constrains (``= K``).
    """

    def __init__(self, n_tokens):
        n_tokens = check_scalar_range(n_tokens, "n_tokens", low=1, integer=True)
        self._setup(n_tokens)
        self.K_eff = self.K
        self.beta_ = self.target_beta_ = 1.0

    def __repr__(self):
        return f"LinearChannel(n_tokens={self.n_tokens})"

    @staticmethod
    def _act(h, beta):
        return h

    def _row_terms(self, A, r, hessian):
        G = 2.0 * r
        if not hessian:
            return G, None
        N, T = A.shape[0], self.n_tokens
        Hrow = np.broadcast_to(2.0 * np.eye(T), (N, T, T, T))
        return G, Hrow

    def _jac(self, u, beta):
        N = u.shape[0]
        T = self.n_tokens
        return np.broadcast_to(self._Lr, (N, T, T, self.K)).copy()

    def fit_logits(self, y):
        """Least-squares ``z`` with ``h(z) ≈ y`` (exact for symmetric ``y``).

        Parameters
        ----------
        y : array_like of shape (N, T, T)

        Returns
        -------
        z : ndarray of shape (N, K)
        """
        return u_from_h(self._check_y(y))

    def prox(self, y, omega, sigma, start=None):
        """Closed-form prox ``argmin_z ‖z − ω‖²/(2Σ) + ‖h(z) − y‖²``.

        With ``L: u ↦ vec h`` (``LᵀL = 2 I``) the stationarity condition
        ``(I/Σ + 2LᵀL) z = ω/Σ + 2Lᵀ vec y`` gives ``z = (ω + 2Σ Lᵀ vec y)/(1 + 4Σ)``.

        Parameters
        ----------
        y : array_like of shape (N, T, T)
        omega : array_like of shape (N, K)
        sigma : float or array_like of shape (N,)
        start : ignored
            Accepted for interface compatibility with :meth:`SoftmaxChannel.prox`.

        Returns
        -------
        z : ndarray of shape (N, K)
        """
        y, omega = self._check_y(y), self._check_u(omega, "omega")
        N = omega.shape[0]
        sigma = _as_sigma(sigma, N)[:, None]
        Lty = y.reshape(N, -1) @ self._L
        return (omega + 2 * sigma * Lty) / (1 + 4 * sigma)


class SoftmaxChannel(_Channel):
    """Row-wise softmax attention ``σ_β(h)`` with square loss.

    Parameters
    ----------
    n_tokens : int
        Number of tokens T ≥ 2.
    beta : float, default=1.0
        Inverse temperature β of the student.
    target_beta : float, default=1.0
        Inverse temperature β0 of the teacher (used by :meth:`labels`).
    n_starts : int, optional
        Number of Newton starts of the prox on the segment between ω and the exact-fit
        point (both ends included). Default 2 for T = 2 (where a 2-D grid search supplies
        one more start) and 5 for T ≥ 3.
    max_iter : int, default=100
        Newton iterations of the prox.

    Attributes
    ----------
    n_tokens : int
    K : int
        ``T(T+1)/2`` components.
    K_eff : int
        ``K − 1``: the loss is invariant along the shift direction ``s``.
    shift : ndarray of shape (K,)
        Unit shift direction, ``s_k ∝ 1/√(1 + δ_ab)``.
    basis : ndarray of shape (K, K − 1)
        Orthonormal basis of the complement of ``shift``.
    """

    def __init__(self, n_tokens, beta=1.0, target_beta=1.0, n_starts=None, max_iter=100):
        if not isinstance(n_tokens, (int, np.integer)) or isinstance(n_tokens, bool) \
                or n_tokens < 2:
            raise ValueError(f"n_tokens must be an integer ≥ 2 for softmax attention "
                             f"(a single token has a constant softmax), got {n_tokens!r}.")
        n_tokens = int(n_tokens)
        self.beta = check_scalar_range(beta, "beta", low=0, low_inclusive=False)
        self.target_beta = check_scalar_range(target_beta, "target_beta", low=0,
                                              low_inclusive=False)
        if n_starts is None:
            n_starts = 2 if n_tokens == 2 else 5
        self.n_starts = check_scalar_range(n_starts, "n_starts", low=1, integer=True)
        self.max_iter = check_scalar_range(max_iter, "max_iter", low=1, integer=True)
        self._radius = 8.0                                   # Newton step cap, × 1/β
        self.beta_, self.target_beta_ = self.beta, self.target_beta
        self._setup(n_tokens)
        self.K_eff = self.K - 1
        _, _, _, inv_scale, _, _ = _maps(n_tokens)
        s = inv_scale.copy()
        self.shift = s / np.linalg.norm(s)
        # orthonormal complement of the shift direction
        q, _ = np.linalg.qr(np.column_stack([self.shift, np.eye(self.K)]))
        self.basis = np.ascontiguousarray(q[:, 1:self.K])
        # least-squares design of the log-ratio equations log y_ab = β h_ab − c_a
        T, K = n_tokens, self.K
        design = np.zeros((T * T, K + T))
        design[:, :K] = self.beta * self._L
        for a in range(T):
            design[a * T:(a + 1) * T, K + a] = -1.0
        self._fit_pinv = np.linalg.pinv(design)[:K]          # (K, T²)

    def __repr__(self):
        return (f"SoftmaxChannel(n_tokens={self.n_tokens}, beta={self.beta}, "
                f"target_beta={self.target_beta})")

    @staticmethod
    def _act(h, beta):
        return _row_softmax(beta * h)

    def _row_terms(self, A, r, hessian):
        b = self.beta_
        sbar = np.sum(r * A, axis=-1, keepdims=True)
        Arho = A * (r - sbar)                          # A_c ρ_c, ρ = r − Σ_b r_b A_b
        G = 2 * b * Arho
        if not hessian:
            return G, None
        # with J = diag(A) − AAᵀ (the softmax Jacobian / β),
        # ∇²_h ℓ_a = 2β²[J² + diag(Aρ) − (Aρ)Aᵀ − A(Aρ)ᵀ]
        #          = 2β²[diag(W) − WAᵀ − AWᵀ + ‖A‖² AAᵀ],  W = A ∘ (A + ρ)
        T = self.n_tokens
        W = A * A + Arho
        nA = np.sum(A * A, axis=-1)[..., None, None]
        Hrow = (nA * A[..., :, None] - W[..., :, None]) * A[..., None, :] \
            - A[..., :, None] * W[..., None, :]
        idx = np.arange(T)
        Hrow[..., idx, idx] += W
        return G, 2 * b * b * Hrow

    def _jac(self, u, beta):
        A = _row_softmax(beta * self._h(u))                         # (N, T, T)
        T = self.n_tokens
        J = beta * (A[..., :, None] * np.eye(T) - A[..., :, None] * A[..., None, :])
        return np.matmul(J, self._Lr)                                # (N, T, T, K)

    def fit_logits(self, y):
        """Logits ``z`` with ``attention(z) ≈ y``.

        Solves ``log y_ab = β h_ab(z) − c_a`` by least squares (minimum norm) in the unknowns
        ``(z, c)``; exact when ``y`` is the softmax of symmetric logits at the student's β.
        Entries of ``y`` are clipped below at ``1e-12`` so the logits stay finite.

        Parameters
        ----------
        y : array_like of shape (N, T, T)

        Returns
        -------
        z : ndarray of shape (N, K)
        """
        y = self._check_y(y)
        logy = np.log(np.clip(y, _LOG_CLIP, None))
        return logy.reshape(y.shape[0], -1) @ self._fit_pinv.T

    # -- prox -------------------------------------------------------------------------

    def prox(self, y, omega, sigma, start=None):
        """Global minimiser ``z* = argmin_z ‖z − ω‖²/(2Σ) + ℓ(y, z)``.

        The loss is constant along the shift direction ``s``, so ``z* − ω ⊥ s``; the problem
        is solved over the ``K_eff``-dimensional complement, ``z = ω + B x``, by damped
        Newton (eigenvalue-modified Hessian ``|λ|``, step capped at ``8/β``, Armijo
        backtracking on the objective), vectorised over samples and starts:

        * samples whose objective is provably convex (a curvature bound: ``Σβ²`` small)
          get one start, ω;
        * the others get ``n_starts`` points on the segment between ω and the exact-fit
          point (``start``, or :meth:`fit_logits` of ``y``, projected so as to keep ω's
          component along ``s``), and, for T = 2, the best point of a 2-D grid search
          (:meth:`_Softmax2Problem.grid_starts`); the best end point is kept.

        For T = 2 this matched a dense-grid / 60-random-start reference on all but ~1 in
        10⁴ non-convex samples (β ≤ 20, Σ ∈ [0.03, 10³]). For T ≥ 3 the segment alone is a
        heuristic: exact at β ≲ 2 in our checks, while at β = 4 about 0.1–0.5 % of the
        non-convex samples end in a non-global local minimum.

        Parameters
        ----------
        y : array_like of shape (N, T, T)
        omega : array_like of shape (N, K)
        sigma : float or array_like of shape (N,)
            Σ > 0.
        start : array_like of shape (N, K), optional
            A point ``z`` with ``attention(z) ≈ y`` (e.g. ``w β0/β`` when ``y = labels(w)``).

        Returns
        -------
        z : ndarray of shape (N, K)
        """
        y, omega = self._check_y(y), self._check_u(omega, "omega")
        N = omega.shape[0]
        if y.shape[0] != N:
            raise ValueError(f"y and omega must have the same number of rows, got "
                             f"{y.shape[0]} and {N}.")
        sigma = _as_sigma(sigma, N)
        if start is None:
            start = self.fit_logits(y)
        else:
            start = self._check_u(start, "start")
        return self._prox(y, omega, sigma, start)[0]

    def _prox(self, y, omega, sigma, start):
        """Multi-start Newton; returns ``z*`` and the prox objective at ``z*``."""
        N, B = omega.shape[0], self.basis
        x_fit = (start - omega) @ B                 # projection keeps ω's shift component
        prob = (_Softmax2Problem(self, y, omega, sigma) if self.n_tokens == 2
                else _SoftmaxProblem(self, y, omega, sigma))
        radius = self._radius / self.beta_
        ts = np.linspace(0.0, 1.0, self.n_starts) if self.n_starts > 1 else np.zeros(1)
        xb, fb = np.zeros((N, self.K_eff)), np.zeros(N)
        # provably convex samples: one Newton run from ω
        convex = prob.convex()
        easy, hard = np.flatnonzero(convex), np.flatnonzero(~convex)
        if easy.size:
            xb[easy], fb[easy] = _newton(prob, easy, np.zeros((easy.size, self.K_eff)),
                                         radius, self.max_iter)
        if hard.size:
            x0 = ts[None, :, None] * x_fit[hard, None, :]
            if self.n_tokens == 2:
                # plus the best point of a 2-D grid: the segment alone misses the global
                # minimiser of a few % of the samples at β ≳ 4
                x_grid = prob.grid_starts(hard, x_fit[hard])
                x0 = np.concatenate([x0, x_grid[:, None, :]], axis=1)
            S = x0.shape[1]
            rows = np.repeat(hard, S)
            x, f = _newton(prob, rows, x0.reshape(hard.size * S, -1), radius, self.max_iter)
            x, f = x.reshape(hard.size, S, -1), f.reshape(hard.size, S)
            best = np.argmin(f, axis=1)
            xb[hard] = x[np.arange(hard.size), best]
            fb[hard] = f[np.arange(hard.size), best]
        return omega + xb @ B.T, fb


class _SoftmaxProblem:
    """Prox objective ``‖x‖²/(2Σ) + ℓ(y, ω + Bx)`` over the complement of the shift."""

    def __init__(self, channel, y, omega, sigma):
        self.ch, self.y, self.omega, self.sigma = channel, y, omega, sigma
        self.B = channel.basis

    def convex(self):
        """Samples whose prox objective is provably convex (crude bound, any T).

        Per row, ``∇²_h ℓ_a = 2J² + 2β²[diag(Aρ) − (Aρ)Aᵀ − A(Aρ)ᵀ]`` with ``|ρ_c| ≤ 2R``,
        ``R = max_ab max(|y_ab|, |1 − y_ab|) ≥ |A − y|``, so ``λ_min ≥ −12 R β²``; in u
        (``LᵀL = 2I``) ``λ_min(∇²ℓ) ≥ −24 R β²``.
        """
        R = np.max(np.maximum(np.abs(self.y), np.abs(1 - self.y)), axis=(1, 2))
        return 1.0 / self.sigma > 1.01 * 24 * R * self.ch.beta_ ** 2

    def value(self, rows, x):
        z = self.omega[rows] + x @ self.B.T
        return np.sum(x * x, axis=1) / (2 * self.sigma[rows]) + self.ch._loss(self.y[rows], z)

    def grad_hess(self, rows, x):
        B, s = self.B, self.sigma[rows]
        _, gl, Hl = self.ch._derivs(self.y[rows], self.omega[rows] + x @ B.T)
        g = x / s[:, None] + gl @ B
        H = np.eye(B.shape[1]) / s[:, None, None] + np.matmul(B.T, np.matmul(Hl, B))
        return g, H

    @staticmethod
    def direction(g, H):
        """``−|H|⁻¹ g`` with the eigenvalues of H replaced by ``max(|λ|, floor)``.

        Positive definite Hessians (most of them) go through a vectorised Cholesky solve;
        the others through a batched eigendecomposition.
        """
        p, ok = _cholesky_solve(H, g)
        bad = np.flatnonzero(~ok)
        if bad.size:
            p[bad] = _SoftmaxProblem._eig_direction(g[bad], H[bad])
        return -p

    @staticmethod
    def _eig_direction(g, H):
        lam, V = np.linalg.eigh(H)
        lam = np.abs(lam)
        floor = 1e-12 * np.max(lam, axis=1, keepdims=True) + 1e-300
        c = np.einsum("nji,nj->ni", V, g) / np.maximum(lam, floor)
        return np.einsum("nij,nj->ni", V, c)


class _Softmax2Problem(_SoftmaxProblem):
    """T = 2: the loss depends on ``a = C z`` (row differences) only; elementwise formulas.

    Row i of σ_β(h) is ``(sigmoid(β a_i), sigmoid(−β a_i))`` (diagonal entry first), with
    ``a_1 = h11 − h12``, ``a_2 = h22 − h12``; ``C = [[√2, 0, −1], [0, √2, −1]]``.
    """

    def __init__(self, channel, y, omega, sigma):
        super().__init__(channel, y, omega, sigma)
        C = np.array([[np.sqrt(2.0), 0.0, -1.0], [0.0, np.sqrt(2.0), -1.0]])
        self.D = C @ self.B                                  # a = Cω + D x
        self.a0 = omega @ C.T
        self.p = np.stack([y[:, 0, 0], y[:, 1, 1]], axis=1)  # diagonal label entries
        self.r = np.stack([y[:, 0, 1], y[:, 1, 0]], axis=1)  # off-diagonal label entries
        self.beta = channel.beta_
        self.Dinv = np.linalg.inv(self.D)
        self.P = self.Dinv.T @ self.Dinv                     # ‖x‖² = (a − Cω)ᵀ P (a − Cω)

    def convex(self):
        """Samples whose prox objective is provably convex (one Newton start suffices).

        In ``a`` the Hessian is ``P/Σ + diag(ℓ1'', ℓ2'')``; with ``σ = sigmoid(β a_i)``,
        ``ℓ_i'' = β² [4 σ²(1−σ)² + 2(2σ − c_i) σ(1−σ)(1−2σ)]``, ``c_i = 1 + p_i − r_i``,
        whose minimum over σ is a concave function of ``c_i``, tabulated once
        (:func:`_curvature_floor`); a 5 % margin covers the tabulation.
        """
        lam_p = np.linalg.eigvalsh(self.P)[0]
        lower = np.min(_curvature_floor(1 + self.p - self.r), axis=1) * self.beta ** 2
        return lam_p / self.sigma * (1 - 1e-3) + 1.05 * np.minimum(lower, 0) > 0

    def grid_starts(self, rows, x_fit, n_sigma=12, n_segment=8):
        """Best point of a per-sample 2-D grid in ``a``-space, as an ``x`` start (N, 2).

        The loss is separable, ``ℓ = ℓ1(a1) + ℓ2(a2)``, and the quadratic term is
        ``dᵀ P d/(2Σ)`` with ``d = a − Cω``, ``P = (C Cᵀ)⁻¹``. Each axis holds points uniform
        in ``sigmoid(β a_i)`` (resolving the well of the label at any β) and points on the
        segment between ``(Cω)_i`` and the fitted ``a_i``; for each point of one axis the
        other axis also gets the minimiser of the quadratic term given that point (where a
        saturated row sits). Objective values come from 1-D loss tables.
        """
        N, beta, P = x_fit.shape[0], self.beta, self.P
        a0, sig = self.a0[rows], self.sigma[rows, None]
        pp, rr = self.p[rows], self.r[rows]
        d_fit = x_fit @ self.D.T                                # a_fit − Cω
        u = (np.arange(n_sigma) + 0.5) / n_sigma
        sig_pts = np.log(u / (1 - u)) / beta
        ts = np.linspace(0.0, 1.0, n_segment)
        d, tables = [], []
        for i in range(2):
            p, r = pp[:, i, None], rr[:, i, None]
            d_seg = ts * d_fit[:, i, None]
            ba = beta * (a0[:, i, None] + d_seg)
            loss_seg = (expit(ba) - p) ** 2 + (expit(-ba) - r) ** 2
            loss_sig = (u - p) ** 2 + (1 - u - r) ** 2
            di = np.concatenate([sig_pts - a0[:, i, None], d_seg], axis=1)    # (N, G)
            d.append(di)
            tables.append(P[i, i] * di ** 2 / (2 * sig)
                          + np.concatenate([loss_sig, loss_seg], axis=1))
        cross = P[0, 1] / sig                                   # (N, 1)
        n = np.arange(N)
        # product grid
        F = d[0][:, :, None] * (cross * d[1])[:, None, :]
        F += tables[0][:, :, None]
        F += tables[1][:, None, :]
        G = d[0].shape[1]
        k = np.argmin(F.reshape(N, G * G), axis=1)
        k0, k1 = np.divmod(k, G)
        best_f = F.reshape(N, G * G)[n, k]
        best_d = np.stack([d[0][n, k0], d[1][n, k1]], axis=1)
        # each axis' points with the other coordinate at its quadratic optimum
        for i, j in ((0, 1), (1, 0)):
            dj = -(P[0, 1] / P[j, j]) * d[i]
            ba = beta * (a0[:, j, None] + dj)
            Fc = (tables[i] + P[j, j] * dj ** 2 / (2 * sig) + cross * d[i] * dj
                  + (expit(ba) - pp[:, j, None]) ** 2
                  + (expit(-ba) - rr[:, j, None]) ** 2)
            kc = np.argmin(Fc, axis=1)
            upd = Fc[n, kc] < best_f
            best_f[upd] = Fc[n, kc][upd]
            best_d[upd, i], best_d[upd, j] = d[i][n, kc][upd], dj[n, kc][upd]
        return best_d @ self.Dinv.T

    def _sig(self, rows, x):
        ba = self.beta * (self.a0[rows] + x @ self.D.T)
        return expit(ba), expit(-ba)

    def value(self, rows, x):
        s1, s0 = self._sig(rows, x)
        loss = np.sum((s1 - self.p[rows]) ** 2 + (s0 - self.r[rows]) ** 2, axis=1)
        return np.sum(x * x, axis=1) / (2 * self.sigma[rows]) + loss

    def grad_hess(self, rows, x):
        s1, s0 = self._sig(rows, x)
        b, D, s = self.beta, self.D, self.sigma[rows]
        e = 2 * (s1 - self.p[rows]) - 2 * (s0 - self.r[rows])   # dℓ_i/dσ_i
        d1 = b * s1 * s0                                           # dσ_i/da_i
        la = e * d1
        laa = 4 * d1 * d1 + e * b * d1 * (s0 - s1)
        g = x / s[:, None] + la @ D
        H = np.empty((x.shape[0], 2, 2))
        H[:, 0, 0] = laa @ (D[:, 0] * D[:, 0]) + 1 / s
        H[:, 1, 1] = laa @ (D[:, 1] * D[:, 1]) + 1 / s
        H[:, 0, 1] = H[:, 1, 0] = laa @ (D[:, 0] * D[:, 1])
        return g, H

    @staticmethod
    def direction(g, H):
        a, c, d = H[:, 0, 0], H[:, 0, 1], H[:, 1, 1]
        theta = 0.5 * np.arctan2(2 * c, a - d)
        cs, sn = np.cos(theta), np.sin(theta)
        l1 = a * cs * cs + 2 * c * sn * cs + d * sn * sn
        l2 = a * sn * sn - 2 * c * sn * cs + d * cs * cs
        l1, l2 = np.abs(l1), np.abs(l2)
        floor = 1e-12 * np.maximum(l1, l2) + 1e-300
        c1 = (cs * g[:, 0] + sn * g[:, 1]) / np.maximum(l1, floor)
        c2 = (-sn * g[:, 0] + cs * g[:, 1]) / np.maximum(l2, floor)
        return -np.stack([cs * c1 - sn * c2, sn * c1 + cs * c2], axis=1)


def _cholesky_solve(H, g):
    """Solve ``H p = g`` for a batch of small symmetric matrices by Cholesky.

    Returns ``p`` and a mask of the matrices found positive definite (pivots above
    ``1e-12`` times the largest diagonal entry); ``p`` is meaningless elsewhere.
    """
    M, D, _ = H.shape
    L = np.zeros_like(H)
    ok = np.ones(M, dtype=bool)
    tol = 1e-12 * np.max(np.abs(np.diagonal(H, axis1=1, axis2=2)), axis=1)
    for j in range(D):
        piv = H[:, j, j] - np.einsum("mk,mk->m", L[:, j, :j], L[:, j, :j])
        ok &= piv > tol
        d = np.sqrt(np.where(piv > tol, piv, 1.0))
        L[:, j, j] = d
        if j + 1 < D:
            L[:, j + 1:, j] = (H[:, j + 1:, j]
                               - np.einsum("mik,mk->mi", L[:, j + 1:, :j], L[:, j, :j])) \
                / d[:, None]
    y = np.zeros_like(g)
    for j in range(D):
        y[:, j] = (g[:, j] - np.einsum("mk,mk->m", L[:, j, :j], y[:, :j])) / L[:, j, j]
    p = np.zeros_like(g)
    for j in range(D - 1, -1, -1):
        p[:, j] = (y[:, j] - np.einsum("mk,mk->m", L[:, j + 1:, j], p[:, j + 1:])) / L[:, j, j]
    return p, ok


@lru_cache(maxsize=1)
def _curvature_table():
    s = np.linspace(0.0, 1.0, 2049)[:, None]
    v = s * (1 - s)
    c = np.linspace(-2.0, 4.0, 1201)[None, :]
    g = np.min(4 * v * v + 2 * (2 * s - c) * v * (1 - 2 * s), axis=0)
    return c[0], g


def _curvature_floor(c):
    """``min_σ 4σ²(1−σ)² + 2(2σ − c)σ(1−σ)(1−2σ)`` (a lower bound, vectorised over c).

    The minimum is concave in c, so linear interpolation of the table is a lower bound;
    outside the table, ``min ≥ −(|c| + 2) max |σ(1−σ)(1−2σ)| · 2``.
    """
    cg, g = _curvature_table()
    inside = (c >= cg[0]) & (c <= cg[-1])
    crude = -2 * (np.abs(c) + 2) / (6 * np.sqrt(3.0))
    return np.where(inside, np.interp(c, cg, g), crude)


def _newton(prob, rows, x, radius, max_iter):
    """Damped modified Newton, vectorised over independent problems.

    ``rows[i]`` is the sample of problem i. Steps ``−|H|⁻¹g`` (eigenvalue-modified, so a
    descent direction where H is indefinite), capped at ``radius``, with Armijo backtracking
    on the objective. Returns the end points and the objective values.
    """
    x = np.array(x, dtype=float)
    f = prob.value(rows, x)
    active = np.arange(x.shape[0])
    for _ in range(max_iter):
        if active.size == 0:
            break
        ra, xa, fa = rows[active], x[active], f[active]
        g, H = prob.grad_hess(ra, xa)
        p = prob.direction(g, H)
        pn = np.linalg.norm(p, axis=1)
        p *= np.minimum(1.0, radius / np.maximum(pn, 1e-300))[:, None]
        pn = np.minimum(pn, radius)
        slope = np.einsum("ni,ni->n", g, p)
        xnorm = np.linalg.norm(xa, axis=1)
        # converged: negligible step, or a predicted decrease below the rounding noise of
        # f (≈ ε(|f| + Σ|A − y|) for a square loss, bounded by 4e-15(|f| + √|f|)); in the
        # latter case the line search cannot judge the step, so take the (tiny) Newton
        # step once unless it increases f beyond that noise, and stop
        noise = 4e-15 * (np.abs(fa) + np.sqrt(np.abs(fa)))
        resolved = slope < -noise
        small = pn <= 1e-12 * xnorm
        last = np.flatnonzero((slope < 0) & ~resolved & ~small)
        if last.size:
            xt = xa[last] + p[last]
            ft = prob.value(ra[last], xt)
            ok = ft <= fa[last] + noise[last]
            xa[last[ok]], fa[last[ok]] = xt[ok], ft[ok]
        done = small | ~resolved
        t = np.ones(active.size)
        accepted = done.copy()
        search = np.flatnonzero(~accepted)
        for _ in range(30):
            if search.size == 0:
                break
            xt = xa[search] + t[search, None] * p[search]
            ft = prob.value(ra[search], xt)
            ok = (ft <= fa[search] + 1e-4 * t[search] * slope[search]) & np.isfinite(ft)
            hit = search[ok]
            xa[hit], fa[hit] = xt[ok], ft[ok]
            accepted[hit] = True
            # quadratic-interpolation backtracking, t ← clip(t_q, t/10, t/2)
            miss, ts, sl = ~ok, t[search], slope[search]
            excess = np.where(np.isfinite(ft), ft - fa[search] - sl * ts, np.inf)
            with np.errstate(divide="ignore", invalid="ignore"):
                tq = -sl * ts * ts / (2 * excess)
            tq = np.clip(np.nan_to_num(tq, nan=0.0), 0.1 * ts, 0.5 * ts)
            search = search[miss]
            t[search] = tq[miss]
        done |= ~accepted                          # no decrease possible: converged
        x[active], f[active] = xa, fa
        done |= t * pn <= 1e-11 * xnorm
        active = active[~done]
    return x, f


def channel_for(attention, n_tokens, beta=1.0, target_beta=1.0):
    """Channel factory.

    Parameters
    ----------
    attention : {"softmax", "linear"}
    n_tokens : int
    beta, target_beta : float
        Inverse temperatures (ignored for linear attention).

    Returns
    -------
    channel : SoftmaxChannel or LinearChannel
    """
    if attention == "softmax":
        return SoftmaxChannel(n_tokens, beta=beta, target_beta=target_beta)
    if attention == "linear":
        return LinearChannel(n_tokens)
    raise ValueError(f"attention must be one of ['linear', 'softmax'], got {attention!r}.")


# ----------------------------------------------------------------------------------------
# Gaussian expectations
# ----------------------------------------------------------------------------------------

class GaussianNodes:
    """Fixed quasi-Monte-Carlo nodes for expectations over ``N(0, I_dim)``.

    Scrambled Sobol points (``scipy.stats.qmc``), clipped away from 0 and 1 and mapped
    through the normal quantile. Reusing the same nodes (common random numbers) makes the
    state-evolution map a smooth function of the order parameters.

    Parameters
    ----------
    dim : int
    n_points : int, default=8192
        A power of two keeps the Sobol balance properties.
    seed : int, numpy Generator, RandomState or None, default=0
        Seeds the scrambling (``None``: fresh entropy, not reproducible).

    Attributes
    ----------
    points : ndarray of shape (n_points, dim)
    weights : ndarray of shape (n_points,)
        Uniform weights ``1/n_points``.

    Notes
    -----
    Uniforms are clipped to ``[ε, 1 − ε]``, ``ε = 1/(2048 n_points)``, before ``norm.ppf``.
    """

    def __init__(self, dim, n_points=8192, seed=0):
        self.dim = check_scalar_range(dim, "dim", low=1, integer=True)
        self.n_points = check_scalar_range(n_points, "n_points", low=1, integer=True)
        self.seed = seed
        if isinstance(seed, np.random.RandomState):
            seed = seed.randint(2 ** 31)
        try:
            sampler = qmc.Sobol(d=self.dim, scramble=True, rng=seed)
        except TypeError:                       # scipy < 1.15 names the argument ``seed``
            sampler = qmc.Sobol(d=self.dim, scramble=True, seed=seed)
        n = self.n_points
        if n & (n - 1) == 0:
            u = sampler.random_base2(int(np.log2(n)))
        else:
            with warnings.catch_warnings():     # balance warning for n not a power of 2
                warnings.simplefilter("ignore")
                u = sampler.random(n)
        eps = 0.5 / (n * 1024.0)
        u = np.clip(u, eps, 1 - eps)
        self.points = norm.ppf(u)
        self.weights = np.full(n, 1.0 / n)

    def __repr__(self):
        return f"GaussianNodes(dim={self.dim}, n_points={self.n_points}, seed={self.seed!r})"

    def mean(self, values):
        """Weighted mean over the nodes (first axis)."""
        return np.tensordot(self.weights, values, axes=(0, 0))


@dataclass
class OutputSide:
    """Conjugate order parameters and train error from :func:`output_side`.

    Attributes
    ----------
    m_hat, q_hat, sigma_hat : float
        ``m̂, q̂, Σ̂`` (with the paper's factor 2).
    train_error : float
        ``E ℓ(y, z*)``.
    moreau : float
        ``E[‖z* − ω‖²/(2Σ) + ℓ(y, z*)]``, the averaged Moreau envelope ``M(Σ, m, q)``.
    sigma_hat_pointwise : float
        ``(2α/Σ) E Tr(I − (I + ΣH)⁻¹) = −2α E[Σ_k ∂g_k/∂ω_k]`` with the pointwise
        derivative (THEORY.md §4).
    sigma_hat_stein : float
        ``−2α E[Σ_k ∂g_k/∂ω_k]`` in Stein form,
        ``−2α E[gᵀω]/q + (m/q) m̂``: the derivative in the sense of distributions, which also
        counts the jumps of the global minimiser z*(ω) of a non-convex prox. It equals
        ``4α ∂M/∂q``, the stationarity condition of the paper's Φ. Falls back to the
        pointwise form when ``q ≤ 1e-8 (Q0 + Δ/2)``.
    """

    m_hat: float
    q_hat: float
    sigma_hat: float
    train_error: float
    moreau: float
    sigma_hat_pointwise: float
    sigma_hat_stein: float

    def __getitem__(self, key):
        return getattr(self, key)

    def keys(self):
        return ("m_hat", "q_hat", "sigma_hat", "train_error", "moreau", "sigma_hat_pointwise",
                "sigma_hat_stein")


def _check_nodes(channel, nodes):
    if nodes is None:
        nodes = GaussianNodes(2 * channel.K)
    if nodes.dim != 2 * channel.K:
        raise ValueError(f"nodes must have dim 2K = {2 * channel.K} for n_tokens="
                         f"{channel.n_tokens}, got {nodes.dim}.")
    return nodes


def _gaussian_pair(m, q, var0, nodes, K):
    """``(ω, w)`` per component Gaussian with covariance ``[[q, m], [m, var0]]``.

    Returns ω, w, the residual standard deviation √V of w given ω (V = var0 − m²/q) and the
    standardised residual ζ2 = (w − (m/q) ω)/√V.
    """
    zeta1, zeta2 = nodes.points[:, :K], nodes.points[:, K:]
    if q <= 1e-300:
        omega = np.zeros_like(zeta1)
        V = var0
        w = np.sqrt(V) * zeta2
    else:
        V = max(var0 - m * m / q, 0.0)
        omega = np.sqrt(q) * zeta1
        w = (m / np.sqrt(q)) * zeta1 + np.sqrt(V) * zeta2
    return omega, w, V, zeta2


def output_side(channel, *, m, q, Q0, noise, sigma, alpha, nodes=None,
                sigma_hat_form="pointwise"):
    """Output side of the state evolution (THEORY.md §4, paper's factor 2).

    Per component ``ω ~ N(0, q)`` and ``w = u0 + ξ̃`` with
    ``w | ω ~ N((m/q) ω, Q0 − m²/q + Δ/2)``; ``y = labels(w)``, ``z* = prox(y, ω, Σ)`` and
    ``g = (z* − ω)/Σ``. Then

    * ``m̂ = 2α E[gᵀ(w − (m/q) ω)] / (Q0 − m²/q + Δ/2)``,
    * ``q̂ = 2α E‖g‖²``,
    * ``Σ̂ = (2α/Σ) E Tr(I − (I + ΣH)⁻¹)``, ``H = ∇²ℓ(y, z*)``,
    * ``train_error = E ℓ(y, z*)``.

    Parameters
    ----------
    channel : SoftmaxChannel or LinearChannel
    m, q : float
        Overlaps ``Tr(S0 S)/d`` and ``Tr S²/d`` (``q ≥ 0``, ``m² ≤ q Q0``).
    Q0 : float
        ``Tr S0²/d``.
    noise : float
        Δ ≥ 0.
    sigma : float
        Σ > 0.
    alpha : float
        ``n/d²``.
    nodes : GaussianNodes of dim 2K, optional
        Default ``GaussianNodes(2K)``.
    sigma_hat_form : {"pointwise", "stein"}, default="pointwise"
        Which form of Σ̂ is returned as ``sigma_hat``: THEORY.md's pointwise
        ``(2α/Σ) E Tr(I − (I + ΣH)⁻¹)``, or the Stein (distributional) form, which is the
        stationarity condition of Φ also where the prox is non-convex and z* jumps (the
        two agree where the prox is smooth; at β = 4, Σ = 0.5 they differ by ~50 %). Both
        are always available as ``sigma_hat_pointwise`` and ``sigma_hat_stein``.

    Returns
    -------
    OutputSide
        ``m_hat, q_hat, sigma_hat, train_error, moreau, sigma_hat_pointwise,
        sigma_hat_stein`` (also readable as a mapping).
    """
    if sigma_hat_form not in ("pointwise", "stein"):
        raise ValueError(f"sigma_hat_form must be one of ['pointwise', 'stein'], got "
                         f"{sigma_hat_form!r}.")
    m = float(m)
    q = check_scalar_range(q, "q", low=0)
    Q0 = check_scalar_range(Q0, "Q0", low=0, low_inclusive=False)
    noise = check_scalar_range(noise, "noise", low=0)
    sigma = check_scalar_range(sigma, "sigma", low=0, low_inclusive=False)
    alpha = check_scalar_range(alpha, "alpha", low=0)
    nodes = _check_nodes(channel, nodes)
    K = channel.K
    var0 = Q0 + noise / 2
    omega, w, V, zeta2 = _gaussian_pair(m, q, var0, nodes, K)

    y = channel.labels(w)
    # exact-fit logits of the label at the student's β: a start of the softmax prox
    start = w * (channel.target_beta_ / channel.beta_)
    z = channel.prox(y, omega, sigma, start=start)
    loss, _, H = channel._derivs(y, z)
    g = (z - omega) / sigma

    # m̂. THEORY.md writes 2α E[gᵀ(u0 − (m/q)ω)]/(Q0 − m²/q), Stein's lemma on u0 | ω. Since g
    # depends on (u0, ξ̃) only through w = u0 + ξ̃, and w | ω ~ N((m/q)ω, V I), V = Q0 − m²/q
    # + Δ/2, Stein's lemma on w gives the same quantity, E[Σ_k ∂g_k/∂w_k]:
    #   E[gᵀ(w − (m/q)ω)]/V = E[gᵀ ζ2]/√V  with  ζ2 = (w − (m/q)ω)/√V  ~ N(0, I).
    # The Stein form is the derivative in the sense of distributions: it also counts the
    # jumps of z*(w) where the global minimiser of the non-convex softmax prox switches
    # branch, which the pointwise derivative (prox_jacobian_w) misses — at β = 4 and
    # Σ ≳ 0.5 the two differ by 25–60 %. When V vanishes (m² = q Q0, Δ = 0) the ratio is
    # 0/0 and we use the pointwise derivative, Tr ∂g/∂w from the implicit function theorem;
    # it is exact at the perfect-recovery point m = q = Q0, β = β0, where z* = ω = w
    # uniquely (and the Stein estimate is stable down to V ≈ 1e-10 Q0 on Sobol nodes).
    if V > 1e-10 * var0:
        m_hat = 2 * alpha * float(nodes.mean(np.sum(g * zeta2, axis=1))) / float(np.sqrt(V))
    else:
        dz = channel.prox_jacobian_w(w, z, sigma)
        m_hat = 2 * alpha * float(nodes.mean(np.trace(dz, axis1=1, axis2=2))) / sigma
    q_hat = 2 * alpha * float(nodes.mean(np.sum(g * g, axis=1)))
    lam = np.linalg.eigvalsh(H)
    den = np.maximum(1 + sigma * lam, 1e-12)       # ≥ 0 at a global minimiser
    tr = np.sum(sigma * lam / den, axis=1)          # Tr(I − (I + ΣH)⁻¹)
    sigma_hat_pw = 2 * alpha / sigma * float(nodes.mean(tr))
    # Σ̂ = 4α ∂M/∂q = −2α E[div_ω g] (Φ's stationarity in q). With w̃ = w − (m/q)ω
    # independent of ω, d/dω|_w̃ = ∂_ω + (m/q)∂_w, so by Stein on ω and on w̃:
    # E[div_ω g] = E[gᵀω]/q − (m/q) E[gᵀw̃]/V = E[gᵀζ1]/√q − (m/q) m̂/(2α).
    # The pointwise form (THEORY.md) misses the jumps of z*(ω) of a non-convex prox.
    if q > 1e-8 * var0:
        zeta1 = nodes.points[:, :K]
        sigma_hat_st = (-2 * alpha * float(nodes.mean(np.sum(g * zeta1, axis=1)))
                        / float(np.sqrt(q)) + (m / q) * m_hat)
    else:
        sigma_hat_st = sigma_hat_pw
    sigma_hat = sigma_hat_st if sigma_hat_form == "stein" else sigma_hat_pw
    train = float(nodes.mean(loss))
    moreau = float(nodes.mean(np.sum((z - omega) ** 2, axis=1) / (2 * sigma) + loss))
    return OutputSide(m_hat=m_hat, q_hat=q_hat, sigma_hat=sigma_hat, train_error=train,
                      moreau=moreau, sigma_hat_pointwise=sigma_hat_pw,
                      sigma_hat_stein=sigma_hat_st)


def test_error(channel, *, m, q, Q0, noise, nodes=None):
    """Asymptotic test error ``E Σ_ab (labels(v0)_ab − attention(v)_ab)²``.

    Per component ``(v0, v) ~ N(0, [[Q0 + Δ/2, m], [m, q]])``, i.i.d. over the K components
    (``v0`` includes the label noise).

    Parameters
    ----------
    channel : SoftmaxChannel or LinearChannel
    m, q, Q0, noise : float
    nodes : GaussianNodes of dim 2K, optional

    Returns
    -------
    float
    """
    m = float(m)
    q = check_scalar_range(q, "q", low=0)
    Q0 = check_scalar_range(Q0, "Q0", low=0, low_inclusive=False)
    noise = check_scalar_range(noise, "noise", low=0)
    nodes = _check_nodes(channel, nodes)
    v, v0, _, _ = _gaussian_pair(m, q, Q0 + noise / 2, nodes, channel.K)
    r = channel.labels(v0) - channel.attention(v)
    return float(nodes.mean(np.einsum("nab,nab->n", r, r)))


test_error.__test__ = False  # not a pytest test despite its name
