"""Linear attention channel: identity activation, closed-form prox."""

from __future__ import annotations

import numpy as np

from ..._validation import check_scalar_range
from ..coords import u_from_h
from .base import _as_sigma, _Channel


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

    def prox(self, y, omega, sigma, start=None, warm=None, return_certified=False):
        """Closed-form prox ``argmin_z ‖z − ω‖²/(2Σ) + ‖h(z) − y‖²``.

        With ``L: u ↦ vec h`` (``LᵀL = 2 I``) the stationarity condition
        ``(I/Σ + 2LᵀL) z = ω/Σ + 2Lᵀ vec y`` gives ``z = (ω + 2Σ Lᵀ vec y)/(1 + 4Σ)``.

        Parameters
        ----------
        y : array_like of shape (N, T, T)
        omega : array_like of shape (N, K)
        sigma : float or array_like of shape (N,)
        start, warm : ignored
            Accepted for interface compatibility with :meth:`SoftmaxChannel.prox`.
        return_certified : bool, default False
            Also return the certified mask (all True: the prox problem is convex).

        Returns
        -------
        z : ndarray of shape (N, K)
        certified : ndarray of bool, shape (N,)
            Only with ``return_certified``.
        """
        y, omega = self._check_y(y), self._check_u(omega, "omega")
        N = omega.shape[0]
        sigma = _as_sigma(sigma, N)[:, None]
        Lty = y.reshape(N, -1) @ self._L
        z = (omega + 2 * sigma * Lty) / (1 + 4 * sigma)
        return (z, np.ones(N, dtype=bool)) if return_certified else z

    # the prox is closed-form: no warm start to iterate on (see SoftmaxChannel)
    warm_startable = False

    def _prox_certified(self, y, omega, sigma, start=None, warm=None, trust_warm=False):
        """:meth:`prox` and the certified mask (all True: the prox problem is convex)."""
        return self.prox(y, omega, sigma, return_certified=True)
