"""Common part of the output channels: input checks, loss derivatives, prox Jacobians.

The channels work in the u-coordinates of :mod:`skattn.theory.coords`; a subclass supplies
the activation, its row-wise loss derivatives, its Jacobian and the prox itself.
"""

from __future__ import annotations

import numpy as np

from ..coords import _maps


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


def _squared_norm(r):
    """Per-sample squared Frobenius norm ``Σ_ab r_ab²`` of a batch of shape (N, T, T)."""
    return np.einsum("nab,nab->n", r, r)


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
        return _squared_norm(r)

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
        loss = _squared_norm(r)
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
