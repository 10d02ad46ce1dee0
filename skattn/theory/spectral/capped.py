"""Spectral integrals of the rank-capped ReLU: the prior of a student of width κ < 1.

Under a rank constraint the factored student keeps only the ``p = κ d`` largest positive
eigenvalues of ``M = m̂ (S0 + δ Z − ε I)``, each at its ReLU value (docs: Theory §4):
the spectral map is ``g(x) = (x − ε)₊ 1{x > τ}`` with ``τ`` the upper κ-quantile of
``μ_δ = μ0 ⊞ SC(δ²)``. When ``τ > ε`` (the cap binds) ``g`` is a ReLU at τ plus a jump of
height ``τ − ε``:

``g(x) = (x − τ)₊ + (τ − ε) 1{x > τ}``,

so every integral is the ReLU integral at τ plus the jump's. The divided difference of the
jump is ``∫∫ (1{x>τ} − 1{y>τ})/(x − y) μ_δ(dx) μ_δ(dy) = 2 ∫_{x>τ} Re G_δ(x + i0) ρ_δ(x) dx``
(the antisymmetry identity of :meth:`ConvolvedLaw.D`; finite since ρ_δ is bounded): at
finite d it is the sum of ``1/(ν_i − ν_j)`` over the pairs the cap separates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..._validation import check_scalar_range
from .law import ConvolvedLaw

__all__ = ["CappedReluIntegrals", "capped_relu_integrals"]


@dataclass(frozen=True)
class CappedReluIntegrals:
    """The integrals of ``g(x) = (x − ε)₊ 1{x > τ}`` under ``μ_δ``.

    Attributes
    ----------
    threshold : float
        ``max(τ, ε)``: the cut, ``τ`` the upper κ-quantile of μ_δ.
    binding : bool
        Whether the cap removes positive mass (``τ > ε``).
    kept_mass : float
        ``μ_δ((max(τ, ε), ∞))``, at most κ.
    first : float
        ``∫ g dμ_δ`` (``Tr Ŝ/d`` up to the factor η).
    second : float
        ``∫ g² dμ_δ`` (the J of the capped map).
    x_first : float
        ``∫ x g(x) μ_δ(dx)``.
    divided_difference : float
        ``∫∫ (g(x) − g(y))/(x − y) μ_δ(dx) μ_δ(dy)`` (the D of the capped map).
    """

    threshold: float
    binding: bool
    kept_mass: float
    first: float
    second: float
    x_first: float
    divided_difference: float


def capped_relu_integrals(mu, eps, rank_ratio):
    """Integrals of the rank-capped ReLU ``g(x) = (x − ε)₊ 1{x > τ}`` under ``μ_δ``.

    Parameters
    ----------
    mu : ConvolvedLaw
        ``μ_δ = μ0 ⊞ SC(δ²)`` with δ > 0 (from :func:`free_convolution`).
    eps : float
        The threshold ε of the trace penalty.
    rank_ratio : float
        κ in (0, 1]: the kept fraction; ``τ = mu.upper_quantile(κ)``.

    Returns
    -------
    CappedReluIntegrals
        Equal to the plain ReLU integrals at ε (``J``, ``D``, …) when the cap does not
        bind (``τ ≤ ε``).

    Notes
    -----
    With ``c = max(τ, ε)`` and ``h = c − ε ≥ 0``:
    ``∫ g = R1(c) + h K``, ``∫ g² = J(c) + 2h R1(c) + h² K``,
    ``∫ x g = X(c) + h (R1(c) + c K)`` and ``D_g = D(c) + 2h ∫_{x>c} Re G ρ dx``, where
    ``K = μ_δ((c, ∞))``, ``R1 = ∫ (x − c)₊``, ``X = ∫ x (x − c)₊`` (docs: Theory §4).
    """
    if not isinstance(mu, ConvolvedLaw):
        raise TypeError(f"mu must be a ConvolvedLaw, got {type(mu).__name__}.")
    if not mu.delta > 0:
        raise ValueError(f"mu must have delta > 0 (a continuous law, where the κ-quantile "
                         f"cuts no atom), got delta={mu.delta!r}.")
    eps = float(eps)
    if not np.isfinite(eps):
        raise ValueError(f"eps must be finite, got {eps!r}.")
    rank_ratio = check_scalar_range(rank_ratio, "rank_ratio", low=0, high=1,
                                    low_inclusive=False)
    tau = mu.upper_quantile(rank_ratio) if rank_ratio < 1 else -np.inf
    cut = max(tau, eps)
    jump = cut - eps
    kept = mu.mass_above(cut)
    relu1 = mu.relu_moment(cut, 1)
    second = mu.J(cut)
    x_first = mu.x_relu_moment(cut)
    dd = mu.D(cut)
    if jump > 0:
        _, _, _, x_above, w_above, re_g_above, _ = mu._split(cut)
        dd += jump * 2.0 * float(np.sum(w_above * re_g_above))
        second += 2 * jump * relu1 + jump * jump * kept
        x_first += jump * (relu1 + cut * kept)
    return CappedReluIntegrals(threshold=float(cut), binding=bool(jump > 0),
                               kept_mass=float(kept), first=float(relu1 + jump * kept),
                               second=float(second), x_first=float(x_first),
                               divided_difference=float(dd))
