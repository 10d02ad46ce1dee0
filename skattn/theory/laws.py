"""Spectral laws of targets S0 (docs: Theory §1), as the theory needs them.

This module holds the spectral formulas that :mod:`skattn.data` samples from (data
depends on it, never the reverse). A law knows its atoms, its absolutely continuous part,
its moments, its support and its Cauchy transform ``G(z) = ∫ μ(dx) / (z - x)`` in the
upper half plane.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_finite_array, check_scalar_range

__all__ = ["SpectralLaw", "WishartLaw", "DiscreteLaw", "power_law_eigenvalues",
           "powerlaw_law"]


class SpectralLaw:
    """Base class of a compactly supported probability law on the real line."""

    def cauchy_transform(self, z):
        """``G(z) = ∫ μ(dx) / (z − x)`` for complex ``z`` with ``Im z > 0`` (vectorised)."""
        raise NotImplementedError

    def cauchy_derivative(self, z):
        """``G'(z) = −∫ μ(dx) / (z − x)²``."""
        raise NotImplementedError

    def support(self):
        """Smallest interval ``(lo, hi)`` holding the support."""
        raise NotImplementedError

    def moment(self, k):
        """``∫ x^k μ(dx)``."""
        raise NotImplementedError

    def second_moment(self):
        """``Q0 = ∫ x² μ(dx) = lim Tr S0² / d``."""
        return self.moment(2)


class WishartLaw(SpectralLaw):
    """Law of ``S0 = W0 W0ᵀ / √(p0 d)`` with ``p0 = κ0 d``: ``√κ0 ×`` Marchenko–Pastur(1/κ0).

    Parameters
    ----------
    rank_ratio : float
        κ0 = p0 / d > 0. For κ0 < 1 the law has an atom of mass ``1 − κ0`` at zero.
    """

    def __init__(self, rank_ratio):
        self.rank_ratio = check_scalar_range(rank_ratio, "rank_ratio", low=0,
                                             low_inclusive=False)

    @property
    def _ratio(self):
        return 1.0 / self.rank_ratio  # Marchenko–Pastur ratio d / p0

    @property
    def atom_mass(self):
        """Mass of the atom at zero (``max(0, 1 − κ0)``)."""
        return max(0.0, 1.0 - self.rank_ratio)

    def bulk_edges(self):
        """Edges ``(a, b)`` of the continuous part."""
        c = self._ratio
        s = np.sqrt(self.rank_ratio)
        return s * (1 - np.sqrt(c)) ** 2, s * (1 + np.sqrt(c)) ** 2

    def support(self):
        a, b = self.bulk_edges()
        return (0.0 if self.atom_mass > 0 else a), b

    def density(self, x):
        """Density of the continuous part (the atom excluded)."""
        x = np.asarray(x, dtype=float)
        s = np.sqrt(self.rank_ratio)
        c = self._ratio
        a, b = self.bulk_edges()
        t = x / s
        out = np.zeros_like(x)
        inside = (x > a) & (x < b)
        lo, hi = (1 - np.sqrt(c)) ** 2, (1 + np.sqrt(c)) ** 2
        tt = t[inside]
        out[inside] = np.sqrt((hi - tt) * (tt - lo)) / (2 * np.pi * c * tt) / s
        return out

    def cauchy_transform(self, z):
        z = np.asarray(z, dtype=complex)
        s = np.sqrt(self.rank_ratio)
        c = self._ratio
        w = z / s
        lo, hi = (1 - np.sqrt(c)) ** 2, (1 + np.sqrt(c)) ** 2
        # product of principal roots: the branch that behaves like w at infinity in C+
        root = np.sqrt(w - lo) * np.sqrt(w - hi)
        g = (w + c - 1 - root) / (2 * c * w)
        return g / s

    def cauchy_derivative(self, z):
        z = np.asarray(z, dtype=complex)
        s = np.sqrt(self.rank_ratio)
        c = self._ratio
        w = z / s
        lo, hi = (1 - np.sqrt(c)) ** 2, (1 + np.sqrt(c)) ** 2
        root = np.sqrt(w - lo) * np.sqrt(w - hi)
        droot = (2 * w - lo - hi) / (2 * root)
        num = w + c - 1 - root
        dnum = 1 - droot
        dg_dw = (dnum * w - num) / (2 * c * w ** 2)
        return dg_dw / s ** 2

    def moment(self, k):
        # moments of MP(c): Narayana polynomials; S0 = √κ0 · MP(1/κ0)
        k = int(k)
        if k == 0:
            return 1.0
        c = self._ratio
        from math import comb
        mp = sum(comb(k, r) * comb(k, r - 1) / k * c ** (r - 1) for r in range(1, k + 1))
        return float(self.rank_ratio ** (k / 2) * mp)

    def __repr__(self):
        return f"WishartLaw(rank_ratio={self.rank_ratio!r})"


class DiscreteLaw(SpectralLaw):
    """Empirical law ``(1/d) Σ_i δ_{λ_i}`` of an explicit spectrum (finite d).

    Parameters
    ----------
    eigenvalues : array-like of shape (d,)
        The eigenvalues λ_i; every atom has weight 1/d.
    """

    def __init__(self, eigenvalues):
        eig = check_finite_array(eigenvalues, "eigenvalues", ndim=1)
        if eig.size == 0:
            raise ValueError("eigenvalues must be non-empty.")
        self.eigenvalues = np.sort(eig)

    @property
    def n_atoms(self):
        return self.eigenvalues.size

    def support(self):
        return float(self.eigenvalues[0]), float(self.eigenvalues[-1])

    def cauchy_transform(self, z):
        z = np.asarray(z, dtype=complex)
        return np.mean(1.0 / (z[..., None] - self.eigenvalues), axis=-1)

    def cauchy_derivative(self, z):
        z = np.asarray(z, dtype=complex)
        return -np.mean(1.0 / (z[..., None] - self.eigenvalues) ** 2, axis=-1)

    def moment(self, k):
        return float(np.mean(self.eigenvalues ** int(k)))

    def __repr__(self):
        return f"DiscreteLaw(n_atoms={self.n_atoms})"


def power_law_eigenvalues(gamma, n_features, cutoff=None):
    """The normalised power-law spectrum ``λ_i ∝ i^(−γ)``, ``Σ λ_i² = d``, decreasing.

    Parameters
    ----------
    gamma : float
        Decay exponent γ > 0.
    n_features : int
        Dimension d ≥ 1.
    cutoff : int or None, default=None
        Number of non-zero modes (``λ_i = 0`` for ``i > cutoff``); None keeps all ``d``.

    Returns
    -------
    ndarray of shape (d,)
        ``λ_i = √d · i^(−γ) / (Σ_{j ≤ min(d, cutoff)} j^(−2γ))^{1/2}`` (zero past the
        cutoff), so that ``Q0 = Tr S0²/d = 1``.
    """
    gamma = check_scalar_range(gamma, "gamma", low=0, low_inclusive=False)
    d = check_scalar_range(n_features, "n_features", low=1, integer=True)
    if cutoff is not None:
        cutoff = check_scalar_range(cutoff, "cutoff", low=1, integer=True)
    i = np.arange(1, d + 1, dtype=float)
    lam = i ** (-gamma)
    if cutoff is not None:
        lam[cutoff:] = 0.0
    return lam * np.sqrt(d / np.sum(lam ** 2))


def powerlaw_law(gamma, n_features, cutoff=None):
    """The law ``(1/d) Σ_i δ_{λ_i}`` of a power-law target at finite d.

    Parameters
    ----------
    gamma : float
        Decay exponent γ > 0 of ``λ_i ∝ i^(−γ)``.
    n_features : int
        Dimension d.
    cutoff : int or None, default=None
        Number of non-zero modes (see :class:`~skattn.data.PowerLawTarget`).

    Returns
    -------
    DiscreteLaw
        Atoms ``λ_i = √d · i^(−γ) / (Σ_j j^(−2γ))^{1/2}`` (so ``Σ λ_i² = d``), from
        :func:`power_law_eigenvalues`.
    """
    return DiscreteLaw(power_law_eigenvalues(gamma, n_features, cutoff))
