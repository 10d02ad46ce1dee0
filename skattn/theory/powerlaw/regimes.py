"""Scaling regimes of the excess risk for power-law targets (docs: Theory §8), numpy only.

For a power-law target ``λ_i ∝ √d · i^(−γ)`` (γ > 1/2, label noise Δ > 0) the excess
test error ``e_test − e0`` of factored attention trained with weight decay λ (sum
objective ``Σ_μ ℓ_μ + λ‖W‖²_F``) follows a power law of n whose exponent depends on the
regime (the phase diagram of Defilippis et al. 2025 and of the paper). The state evolution
gives ``Ŝ ≈ η ReLU(S0 + δZ − ε)`` with, up to constants of order one,

- the noise level of the effective observation ``δ ≍ √(Δ d²/n) = √(Δ/α)``,
- the threshold set by the weight decay ``ε ≍ λ d²/n = λ/α``,

and mode i is recovered when ``λ_i ≳ max(δ, ε)``; the target's eigenvalues run from
``λ_1 ≍ √d`` down to ``λ_d ≍ d^{1/2−γ}``. Counting the recovered modes and the error
they leave gives the regimes of :data:`REGIMES`:

- ``"plateau"`` — ``max(δ, ε) ≳ λ_1`` (``n ≲ d``, or a huge λ): nothing is recovered,
  the excess risk stays ``≍ Q0``; exponent 0;
- ``"recovery"`` — ``ε ≲ δ`` and ``d ≪ n ≪ d²``: ``(n/d)^(−1 + 1/(2γ))``;
- ``"bulk"`` — ``ε ≲ δ`` and ``n ≫ d²``: the noise bulk dominates, ``d²/n``; exponent −1;
- ``"regularized"`` — ``δ ≲ ε`` with ``λ_d ≲ ε ≲ λ_1``: the threshold sets the recovered
  modes, ``(λ d^{3/2}/n)^(2 − 1/γ)``; exponent ``−(2 − 1/γ)``;
- ``"shrinkage"`` — ``δ ≲ ε ≲ λ_d``: every mode is above the threshold and shrunk by it,
  ``(λ d²/n)²``; exponent −2;
- ``"optimal"`` — λ tuned at each n (``λ ∝ √(n/d²)``): the LASSO minimax rate
  ``n^(−1 + 1/(2γ))``.

Exponents are with respect to n at fixed d and λ (for ``"optimal"``: along the optimal
λ(n) ∝ √(n/d²) path, the LASSO minimax rate). The ``ε ≲ δ`` condition is
``λ ≲ √(n/d²)`` of docs: Theory §8 (with the constants of :func:`scaling_regime`,
``λ ≤ √(4KΔα)``). Along any path ``λ = c √(n)/d`` the ``"recovery"`` and
``"regularized"`` rates coincide, ``(n/d)^(−1+1/(2γ))``: this is the path the learning
curves of :class:`~skattn.estimators.ScaledLambdaRegressor` follow.

The exponents are asymptotic: they need many recovered modes. Finite-size corrections
computed with the finite-d theory (linear attention, T = 2, Δ = 0.5):

- mostly in ``n/d``: over ``n/d ∈ [4, 40]`` the fitted exponent along ``λ = c √n/d``
  depends on c — for d = 100, −0.56 (γ = 1.25) and −0.34 (γ = 0.75) with c = 10, −0.63
  and −0.45 with c = 5 — because for small c part of the noise bulk survives the
  threshold and its faster ``d²/n`` decay steepens the curve; for γ = 1.25 it is the same
  at d = 100, 128 and 1000 (−0.557, −0.557, −0.553);
- for γ close to 1/2 the truncation of the spectrum at i = d matters: γ = 0.75, c = 10
  gives −0.336, −0.329, −0.30 at d = 100, 128, 1000 over the same window, and at
  d = 1000 the local slope runs from −0.20 (n/d = 2) through −0.34 (n/d = 40) to −0.40
  (n/d = 1000); for γ = 1.25 it settles at −0.59.

Without label noise (Δ = 0) δ shrinks with the error itself and the decay is faster (the
theory gives slopes near ``1 − 2γ`` at small λ).

Fit simulated curves with :func:`skattn.scaling.fit_power_law`, from the irreducible error
of :func:`skattn.theory.powerlaw.irreducible_error`.
"""

from __future__ import annotations

import numpy as np

from ..._validation import check_choice, check_finite_array, check_scalar_range
from ..laws import power_law_eigenvalues

__all__ = ["REGIMES", "excess_risk_exponent", "scaling_regime", "phase_diagram"]


#: The regimes of the excess-risk phase diagram (see the module docstring).
REGIMES = ("plateau", "recovery", "bulk", "regularized", "shrinkage", "optimal")


def _check_gamma(gamma):
    gamma = check_scalar_range(gamma, "gamma", low=0, low_inclusive=False)
    if gamma <= 0.5:
        raise ValueError(f"gamma must be > 1/2 for these scaling laws (the target's energy "
                         f"Σ λ_i² must be dominated by its top modes), got {gamma}.")
    return gamma


def excess_risk_exponent(gamma, regime="recovery"):
    """Exponent b of ``e_test − e0 ∝ n^b`` (fixed d and λ) in a regime of §8.

    Parameters
    ----------
    gamma : float
        Decay exponent γ > 1/2 of the target spectrum.
    regime : {"plateau", "recovery", "bulk", "regularized", "shrinkage", "optimal"}
        See the module docstring; "recovery" (the default) is ``d ≪ n ≪ d²`` at small λ.

    Returns
    -------
    float
        ``0``, ``−1 + 1/(2γ)``, ``−1``, ``−(2 − 1/γ)``, ``−2`` or ``−1 + 1/(2γ)``.

    Examples
    --------
    >>> from skattn.theory.powerlaw import excess_risk_exponent
    >>> excess_risk_exponent(1.25)
    -0.6
    >>> excess_risk_exponent(1.25, "regularized")
    -1.2
    """
    gamma = _check_gamma(gamma)
    check_choice(regime, "regime", REGIMES)
    return {
        "plateau": 0.0,
        "recovery": -1.0 + 1.0 / (2.0 * gamma),
        "bulk": -1.0,
        "regularized": -(2.0 - 1.0 / gamma),
        "shrinkage": -2.0,
        "optimal": -1.0 + 1.0 / (2.0 * gamma),
    }[regime]


def _scales(n, d, reg_lambda, gamma, n_tokens, noise):
    """δ, ε, λ_1, λ_d and α of the regime map (see :func:`scaling_regime`)."""
    n_a = check_finite_array(n, "n")
    d_a = check_finite_array(d, "d")
    lam_a = check_finite_array(reg_lambda, "reg_lambda")
    if np.any(n_a <= 0):
        raise ValueError("n must be > 0.")
    if np.any(d_a < 1):
        raise ValueError("d must be >= 1.")
    if np.any(lam_a < 0):
        raise ValueError("reg_lambda must be >= 0.")
    n_tokens = check_scalar_range(n_tokens, "n_tokens", low=1, integer=True)
    noise = check_scalar_range(noise, "noise", low=0, low_inclusive=False)
    K = n_tokens * (n_tokens + 1) / 2
    n_b, d_b, lam_b = np.broadcast_arrays(n_a, d_a, lam_a)
    alpha = n_b / d_b ** 2
    delta = np.sqrt(noise / (4 * K * alpha))
    eps = lam_b / (4 * K * alpha)
    # λ_1 of the spectrum of PowerLawTarget (normalised to Σ λ_i² = d), once per distinct d
    dd = np.unique(np.rint(d_b).astype(np.int64))
    top_of = {int(k): power_law_eigenvalues(gamma, int(k))[0] for k in dd}
    top = np.vectorize(lambda k: top_of[int(k)], otypes=[float])(np.rint(d_b))
    bottom = top * d_b ** (-gamma)
    return delta, eps, top, bottom, alpha, K


def scaling_regime(n, d, reg_lambda, gamma, *, n_tokens=1, noise=1.0):
    """Regime of the phase diagram of §8 at sample size n, dimension d and weight decay λ.

    The scales are those of the state evolution at small α for the linear channel with
    ``K = T(T+1)/2`` components per sample, which fixes the constants (docs: Theory §4):
    ``m̂ ≈ Σ̂ ≈ 4Kα`` and ``q̂ ≈ 8Kα·Δ/2`` when the noise dominates the error, so

    - ``δ = √q̂/m̂ = √(Δ/(4Kα))``, ``ε = 2λ/m̂ = λ/(4Kα)`` (``α = n/d²``, width p = d);
    - ``λ_1 = √d / (Σ_{i≤d} i^(−2γ))^{1/2}`` and ``λ_d = λ_1 d^(−γ)``, the extreme
      eigenvalues of :class:`~skattn.data.PowerLawTarget`;

    and the regime is

    - ``max(δ, ε) ≥ λ_1`` → ``"plateau"``;
    - else ``ε ≤ δ`` → ``"recovery"`` if ``2Kα ≤ 1`` (below the interpolation scale
      ``n ≈ d²/(2K)``), ``"bulk"`` otherwise;
    - else (``ε > δ``) → ``"shrinkage"`` if ``ε ≤ λ_d``, ``"regularized"`` otherwise.

    The crossovers are located to within factors of order one (Σ and the error itself are
    neglected in m̂, q̂). For softmax use the same map as an order of magnitude.

    Parameters
    ----------
    n : float or array-like
        Number of samples (> 0).
    d : int or array-like of int
        Token dimension (≥ 1).
    reg_lambda : float or array-like
        Weight decay λ ≥ 0 of the sum objective ``Σ_μ ℓ_μ + λ‖W‖²_F``.
    gamma : float
        γ > 1/2.
    n_tokens : int, default=1
        T.
    noise : float, default=1.0
        Label noise Δ > 0 (the rates of §8 are those of noisy labels).

    Returns
    -------
    str or ndarray of str
        A name from :data:`REGIMES` (never ``"optimal"``, which is a path, not a point),
        an array of names when any argument is an array (broadcast together).
    """
    gamma = _check_gamma(gamma)
    delta, eps, top, bottom, alpha, K = _scales(n, d, reg_lambda, gamma, n_tokens, noise)
    out = np.where(
        np.maximum(delta, eps) >= top, "plateau",
        np.where(eps <= delta, np.where(2 * K * alpha <= 1, "recovery", "bulk"),
                 np.where(eps <= bottom, "shrinkage", "regularized"))).astype(object)
    if out.ndim == 0:
        return str(out[()])
    return out.astype(str)


def phase_diagram(d, gamma, *, n, reg_lambda, n_tokens=1, noise=1.0):
    """The regime map of :func:`scaling_regime` on a grid of (n, λ), with exponent labels.

    Parameters
    ----------
    d : int
        Token dimension.
    gamma : float
        γ > 1/2.
    n : array-like of shape (nx,)
        Sample sizes (horizontal axis).
    reg_lambda : array-like of shape (ny,)
        Weight decays (vertical axis).
    n_tokens : int, default=1
    noise : float, default=1.0
        See :func:`scaling_regime`.

    Returns
    -------
    regimes : ndarray of int, shape (ny, nx)
        Index into :data:`REGIMES` at each grid point.
    labels : list of str
        For each entry of :data:`REGIMES`, its name and excess-risk exponent, e.g.
        ``"recovery: n^-0.60"``; ready for :func:`skattn.plotting.plot_phase_diagram`.
    """
    gamma = _check_gamma(gamma)
    n = check_finite_array(n, "n", ndim=1)
    lam = check_finite_array(reg_lambda, "reg_lambda", ndim=1)
    names = scaling_regime(n[None, :], d, lam[:, None], gamma, n_tokens=n_tokens,
                           noise=noise)
    index = {r: i for i, r in enumerate(REGIMES)}
    regimes = np.vectorize(index.__getitem__, otypes=[int])(names)
    labels = [f"{r}: $n^{{{excess_risk_exponent(gamma, r):.2f}}}$" for r in REGIMES]
    return regimes, labels
