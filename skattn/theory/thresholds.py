"""Interpolation and recovery thresholds (docs: Theory §5–7), in closed form or as 1-D roots.

All thresholds are sample ratios ``α = n/d²`` in the high-dimensional limit. They depend on
the attention only through the number of directions a sample constrains,
``K_eff = T(T+1)/2 − 1`` (softmax: the shift direction is invisible) or ``K_eff = T(T+1)/2``
(linear attention), see :func:`effective_constraints`, and on the target only through its
spectral law ``μ0`` (mean square ``Q0``, atom masses ``w_i``, atom at zero ``w0``).

Summary (``j_sc``, ``r_sc`` are moments of the standard semicircle, see
:func:`semicircle_relu_moments`):

============================  =======================================  ====================
threshold                     factored (tied) ``S = WWᵀ/√(pd)``        direct ``S = V/√d``
============================  =======================================  ====================
interpolation (λ → 0⁺)        ``D(δ̄, 0)/(2K_eff)``, δ̄: §6 equation     ``1/(2K_eff)``
perfect recovery (Δ = 0)      ``M*(w0)/(2K_eff)`` (statistical dim.)   ``1/(2K_eff)``
Bayes-optimal recovery        ``(1 − Σ_i w_i²)/(2K_eff)``               (same, any estimator)
============================  =======================================  ====================

For a Wishart(κ0 ≤ 1) target, ``w0 = 1 − κ0`` and ``Σ w_i² = (1 − κ0)²``, so
``α_BO = (κ0 − κ0²/2)/K_eff`` and the Δ → 0⁺ interpolation threshold is
``(1 + 2κ0 − κ0²)/(4 K_eff)``. The order is always
``α_BO ≤ α_perf ≤ α_interp(Δ → 0⁺) ≤ 1/(2K_eff)``, with equality everywhere at κ0 = 1.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize

from .._validation import check_choice, check_scalar_range
from .problem import (ATTENTIONS, check_model_keywords, require_gaussian_tokens,
                      resolve_problem)
from .spectral import free_convolution

__all__ = [
    "effective_constraints",
    "semicircle_relu_moments",
    "interpolation_threshold",
    "perfect_recovery_threshold",
    "bayes_optimal_threshold",
    "statistical_dimension",
    "ridgeless_below_threshold",
]



def effective_constraints(n_tokens, attention="softmax"):
    """Number ``K_eff`` of directions of S one sample constrains (docs: Theory §3).

    Parameters
    ----------
    n_tokens : int
        Sequence length T (≥ 2 for softmax, ≥ 1 for linear attention).
    attention : {"softmax", "linear"}, default="softmax"

    Returns
    -------
    int
        ``T(T+1)/2 − 1`` for softmax (adding a constant to every logit changes nothing),
        ``T(T+1)/2`` for linear attention.
    """
    check_choice(attention, "attention", ATTENTIONS)
    n_tokens = check_scalar_range(n_tokens, "n_tokens",
                                  low=2 if attention == "softmax" else 1, integer=True)
    K = n_tokens * (n_tokens + 1) // 2
    return K - 1 if attention == "softmax" else K


def semicircle_relu_moments(t):
    """Moments of the standard semicircle (on [−2, 2], variance 1) above a threshold.

    With ``c = √(4 − t²)`` and ``A = arccos(t/2)`` (``t`` clipped to [−2, 2]):

    - ``P0(t) = ∫_t ρ = (2A − t c/2)/(2π)``,
    - ``P1(t) = ∫_t x ρ = c³/(6π)``,
    - ``P2(t) = ∫_t x² ρ = (2A − t (t² − 2) c/4)/(2π)``,
    - ``r_sc(t) = ∫ (x − t)₊ ρ = P1 − t P0``,
    - ``j_sc(t) = ∫ (x − t)₊² ρ = P2 − 2t P1 + t² P0``.

    Parameters
    ----------
    t : float or array-like

    Returns
    -------
    r_sc, j_sc : float or ndarray
    """
    t = np.clip(np.asarray(t, dtype=float), -2.0, 2.0)
    c = np.sqrt(np.maximum(4.0 - t * t, 0.0))
    A = np.arccos(t / 2)
    P0 = (2 * A - t * c / 2) / (2 * np.pi)
    P1 = c ** 3 / (6 * np.pi)
    P2 = (2 * A - t * (t * t - 2) * c / 4) / (2 * np.pi)
    r = np.maximum(P1 - t * P0, 0.0)
    j = np.maximum(P2 - 2 * t * P1 + t * t * P0, 0.0)
    if r.ndim == 0:
        return float(r), float(j)
    return r, j


def _atoms(law):
    """``(locations, masses)`` of the atoms of the target law."""
    atoms = free_convolution(law, 0.0).atoms
    if atoms is None or np.size(atoms) == 0:
        return np.zeros(0), np.zeros(0)
    atoms = np.asarray(atoms, dtype=float).reshape(-1, 2)
    return atoms[:, 0], atoms[:, 1]


def _check_psd(law):
    lo, _ = law.support()
    if lo < -1e-12 * max(1.0, abs(law.support()[1])):
        raise ValueError("target must be PSD (its spectral law has support below 0): the "
                         "factored model S = WWᵀ/√(pd) can neither fit nor recover it.")


def _zero_atom(law, rtol=1e-12):
    loc, mass = _atoms(law)
    scale = max(abs(law.support()[1]), 1e-300)
    return float(np.sum(mass[np.abs(loc) <= rtol * scale]))


def statistical_dimension(zero_mass):
    """Normalised statistical dimension of the descent cone of ``Tr`` on PSD matrices.

    For a PSD target whose spectral law has an atom of mass ``w0`` at zero (rank fraction
    ``ρ = 1 − w0``), the descent cone of ``S ↦ Tr S + ι_{S ⪰ 0}`` at ``S0`` has statistical
    dimension ``(d²/2) M*`` with

    ``M* = min_{t ≥ 0} M(t)``, ``M(t) = 1 − w0² + ρ w0 t² + w0² j_sc(t)``,

    (a GOE matrix split into range/null blocks: the range and mixed blocks count fully,
    the null block only through the part of its spectrum above ``t``). ``M`` is convex;
    its minimiser solves ``ρ t = w0 r_sc(t)``. ``M(0) = 1 − w0²/2`` is the statistical
    dimension of the tangent cone of the PSD cone alone.

    Parameters
    ----------
    zero_mass : float in [0, 1)
        ``w0``.

    Returns
    -------
    M_star : float
        In (0, 1]; 1 when ``w0 = 0`` (full rank).
    t_star : float
        The minimiser (threshold of the null block in units of its semicircle radius / 2).

    References
    ----------
    D. Amelunxen, M. Lotz, M. B. McCoy, J. A. Tropp, *Living on the edge: phase
    transitions in convex programs with random data*, Inf. Inference 3 (2014): a convex
    program recovers S0 from m generic linear measurements iff m exceeds the statistical
    dimension of its descent cone.
    """
    w0 = check_scalar_range(zero_mass, "zero_mass", low=0, high=1, high_inclusive=False)
    if w0 == 0:
        return 1.0, 0.0
    rho = 1.0 - w0
    t = optimize.brentq(lambda t: rho * t - w0 * semicircle_relu_moments(t)[0], 0.0, 2.0,
                        xtol=1e-14)
    j = semicircle_relu_moments(t)[1]
    return float(1 - w0 ** 2 + rho * w0 * t * t + w0 ** 2 * j), float(t)


def _interpolation_delta(law, Q0, noise):
    """Root δ̄ > 0 of ``J(δ, 0) − δ² D(δ, 0) = Q0 + Δ/2`` (Δ > 0), or 0 for Δ = 0."""

    def F(delta):
        mu = free_convolution(law, delta)
        return mu.J(0.0) - delta ** 2 * mu.D(0.0) - Q0

    scale = np.sqrt(Q0)
    grid = scale * np.geomspace(1e-3, 1.0, 13)
    vals = np.array([F(x) for x in grid])
    # F ≥ 0: F ~ δ³ with an atom at 0, F ≡ 0 while μ_δ stays in (0, ∞) (then D = 1)
    if np.any(vals < -1e-9 * Q0):
        raise RuntimeError(
            "J(δ, 0) − δ² D(δ, 0) − Q0 is negative at some δ for this target: the "
            "interpolation equation has a non-trivial root at Δ = 0, which this function "
            "does not handle.")
    if noise == 0:
        return 0.0
    target = noise / 2
    above = np.flatnonzero(vals >= target)   # the smallest root: first crossing
    k = int(above[0]) if above.size else grid.size
    if k == 0:
        # the root is below 1e-3 √Q0; below 1e-9 √Q0 (noise of order 1e-27 Q0 and less) the
        # free convolution's quadrature does not hold, and δ̄ that small is the Δ → 0⁺ limit
        lo, hi = 1e-9 * scale, grid[0]
        if F(lo) >= target:
            return float(lo)
    elif k < grid.size:
        lo, hi = grid[k - 1], grid[k]
    else:
        lo, hi = grid[-1], 2 * grid[-1]
        while F(hi) < target:
            lo, hi = hi, 2 * hi
            if hi > 1e6 * scale:
                raise RuntimeError(f"no interpolation root found for noise={noise}.")
    g = lambda x: (F(x) if x > 0 else 0.0) - target  # noqa: E731
    return float(optimize.brentq(g, lo, hi, xtol=1e-12 * scale, rtol=1e-12))


_INTERPOLATION_KEYWORDS = ("n_tokens", "target", "attention", "noise", "parametrization",
                           "n_features")
_RECOVERY_KEYWORDS = ("n_tokens", "target", "attention", "parametrization", "n_features")
_BAYES_KEYWORDS = ("n_tokens", "target", "attention", "n_features")


def interpolation_threshold(problem=None, **model):
    """Largest α at which the λ → 0⁺ minimiser still fits the training set exactly.

    **Factored** (docs: Theory §6; width ratio κ ≥ 1). In the λ → 0⁺ limit an interpolating
    fixed point has ``Σ → ∞`` with ``ΣΣ̂ → 2K_eff α``; the prior side then gives
    ``D(δ, ε) = 2K_eff α`` and ``Q0 + Δ/2 = J(δ, ε) + 2ε ∫(x − ε)₊ dμ_δ − δ² D(δ, ε)``.
    Along this branch ε decreases with α and the branch ends where ε = 0: δ̄ solves

    ``Q0 + Δ/2 = J(δ̄, 0) − δ̄² D(δ̄, 0) = J(δ̄, 0) − (δ̄/2) ∂_δ J(δ̄, 0)``,

    and ``α_interp = D(δ̄, 0)/(2K_eff) = ∂_δ J(δ̄, 0)/(4 K_eff δ̄)``.
    ``F(δ) = J(δ, 0) − δ² D(δ, 0) − Q0`` vanishes like ``δ³`` at δ = 0 when the target has
    an atom at zero, and identically while ``μ_δ`` stays in (0, ∞) (where ``D = 1``); it
    is non-decreasing (checked for the targets at hand, and verified at run time to be
    non-negative). So for Δ = 0 the only root is δ̄ = 0 (or the F ≡ 0 stretch, with the
    same D) and the function returns the Δ → 0⁺ limit ``D(0, 0)/(2K_eff)``, where
    ``D(0, 0) = 1 − w0²/2`` for a PSD target with an atom ``w0`` at zero (the null block
    of ``S0 + δZ`` is a symmetric semicircle, on which the ReLU has divided difference
    1/2 on average): ``(1 + 2κ0 − κ0²)/(4K_eff)`` for Wishart(κ0 ≤ 1). This is the
    statistical dimension ``M(0)`` of the PSD tangent cone: it is *not* the perfect-recovery
    threshold (with Δ = 0 every α interpolates, since S0 does; see
    :func:`perfect_recovery_threshold`).

    **Direct.** The λ → 0⁺ estimator is the minimum-Frobenius-norm solution of
    ``n K_eff`` linear equations (softmax labels fix the logits up to the shift, linear
    labels fix them exactly) in ``d(d+1)/2`` unknowns; in the state evolution
    ``Σ = 1/(Σ̂ + 4λ)`` stays of order 1/λ iff ``2K_eff α < 1``. Hence
    ``α_interp = 1/(2K_eff)`` for every noise level.

    Parameters
    ----------
    problem : StateEvolutionProblem, optional
        The model (its T, target, attention, noise, parametrization and n_features are
        used), instead of the keywords below.
    **model
        Without a problem (not both):

        - ``n_tokens`` (int, required): sequence length T;
        - ``target`` (Target or SpectralLaw, required): e.g. ``WishartTarget(0.5)``;
        - ``attention`` ("softmax" or "linear", default "softmax");
        - ``noise`` (float, default 0): label noise Δ ≥ 0; Δ = 0 returns the Δ → 0⁺ limit;
        - ``parametrization`` ("factored" or "direct", default "factored");
        - ``n_features`` (int or None, default None): for finite-size-only targets (power
          law, explicit spectrum), the d of the law.

    Returns
    -------
    float

    Examples
    --------
    >>> from skattn.data import WishartTarget
    >>> round(interpolation_threshold(n_tokens=2, target=WishartTarget(0.2)), 6)
    0.17
    >>> round(interpolation_threshold(n_tokens=2, target=WishartTarget(0.2), noise=0.5), 4)
    0.1379
    """
    problem = resolve_problem(problem, "interpolation_threshold", **check_model_keywords(
        model, _INTERPOLATION_KEYWORDS, "interpolation_threshold"))
    require_gaussian_tokens(problem, "interpolation_threshold")
    K_eff = effective_constraints(problem.n_tokens, problem.attention)
    law, _ = problem.target_law()
    if problem.parametrization == "direct":
        return 1.0 / (2 * K_eff)
    _check_psd(law)
    Q0 = float(law.second_moment())
    delta = _interpolation_delta(law, Q0, problem.noise)
    return float(free_convolution(law, delta).D(0.0) / (2 * K_eff))


def perfect_recovery_threshold(problem=None, **model):
    """Smallest α at which the noiseless λ → 0⁺ estimator recovers S0 (test error → 0).

    **Factored** (κ ≥ 1): the λ → 0⁺ limit is nuclear-norm (trace) minimisation over PSD
    matrices subject to the ``n K_eff`` noiseless constraints. In the state evolution the
    interpolating branch ends at perfect recovery (δ → 0) with ``ε = τδ``; expanding the
    prior side to order δ² (the null block of ``S0 + δZ`` is a semicircle of radius
    ``2δ√w0``, the rest is shifted by O(δ²)) gives ``D → 1 − w0²(1 − D_sc(t))`` and the
    condition ``(1 − w0) t = w0 r_sc(t)``, ``t = τ/√w0`` — exactly the minimiser of the
    statistical dimension ``M(t)`` of :func:`statistical_dimension`. Hence

    ``α_perf = M*(w0)/(2 K_eff)``, ``M* = min_t 1 − w0² + (1 − w0) w0 t² + w0² j_sc(t)``,

    which depends on the target only through the mass ``w0`` of its atom at zero
    (``w0 = 1 − κ0`` for Wishart(κ0 < 1)); full-rank targets give ``1/(2K_eff)``.
    This is *smaller* than the Δ → 0⁺ interpolation threshold ``(1 − w0²/2)/(2K_eff)`` of
    :func:`interpolation_threshold` for 0 < w0 < 1 (docs: Theory §6 says the interpolation
    equation at Δ = 0 locates α_perf; its only root at Δ = 0 is δ̄ = 0, which gives the
    larger value; the λ → 0⁺ state evolution recovers S0 in between).

    **Direct**: ``Q0 (1 − 2 K_eff α)`` vanishes at ``α = 1/(2 K_eff)``.

    Parameters
    ----------
    problem : StateEvolutionProblem, optional
        The model (its T, target, attention, parametrization and n_features are used),
        instead of the keywords below.
    **model
        Without a problem (not both): ``n_tokens`` (int, required), ``target`` (Target or
        SpectralLaw, required), ``attention`` ("softmax" or "linear", default "softmax"),
        ``parametrization`` ("factored" or "direct", default "factored"), ``n_features``
        (int or None, default None: for finite-size-only targets).

    Returns
    -------
    float

    Examples
    --------
    >>> from skattn.data import WishartTarget
    >>> round(perfect_recovery_threshold(n_tokens=2, target=WishartTarget(0.2)), 4)
    0.1278
    """
    problem = resolve_problem(problem, "perfect_recovery_threshold", **check_model_keywords(
        model, _RECOVERY_KEYWORDS, "perfect_recovery_threshold"))
    require_gaussian_tokens(problem, "perfect_recovery_threshold")
    K_eff = effective_constraints(problem.n_tokens, problem.attention)
    law, _ = problem.target_law()
    if problem.parametrization == "direct":
        return 1.0 / (2 * K_eff)
    _check_psd(law)
    return statistical_dimension(_zero_atom(law))[0] / (2 * K_eff)


def bayes_optimal_threshold(problem=None, **model):
    """Smallest α at which the Bayes-optimal MMSE of S vanishes (noiseless labels).

    The MMSE of the §7 fixed point solves ``mmse(t) = 2 K_eff α t``, ``t = 1/q̂``, with
    ``mmse(t)`` the MMSE of ``S0`` from ``S0 + √t Z``. For small t,
    ``mmse(t) ≈ (1 − Σ_i w_i²) t`` (the degrees of freedom of a matrix whose spectral law
    has atoms of masses ``w_i``: eigenvectors inside an atom's eigenspace are free), so
    a non-zero MMSE exists iff ``2 K_eff α < 1 − Σ_i w_i²``:

    ``α_BO = (1 − Σ_i w_i²)/(2 K_eff)``  — ``(κ0 − κ0²/2)/K_eff`` for Wishart(κ0 ≤ 1),
    ``1/(2K_eff)`` for κ0 ≥ 1.

    Parameters
    ----------
    problem : StateEvolutionProblem, optional
        The model (its T, target, attention and n_features are used), instead of the
        keywords below.
    **model
        Without a problem (not both): ``n_tokens`` (int, required), ``target`` (Target or
        SpectralLaw, required), ``attention`` ("softmax" or "linear", default "softmax"),
        ``n_features`` (int or None, default None: for finite-size-only targets).

    Returns
    -------
    float

    Examples
    --------
    >>> from skattn.data import WishartTarget
    >>> round(bayes_optimal_threshold(n_tokens=2, target=WishartTarget(0.2)), 12)
    0.09
    """
    problem = resolve_problem(problem, "bayes_optimal_threshold", **check_model_keywords(
        model, _BAYES_KEYWORDS, "bayes_optimal_threshold"))
    require_gaussian_tokens(problem, "bayes_optimal_threshold")
    K_eff = effective_constraints(problem.n_tokens, problem.attention)
    law, _ = problem.target_law()
    _, mass = _atoms(law)
    return float((1.0 - np.sum(mass ** 2)) / (2 * K_eff))


#: Relative margin below the interpolation threshold inside which λ = 0 is read as the
#: λ → 0⁺ limit: the fixed point there is the edge of the interpolating branch (Σ → ∞), not
#: found in finite time, so a point just above the threshold stays a λ = 0 solve.
_RIDGELESS_MARGIN = 1e-9


def ridgeless_below_threshold(alpha, problem):
    """Whether ``reg_lambda = 0`` is at or below the interpolation threshold.

    At λ = 0 the factored ERM minimises the loss over PSD matrices alone. Below the
    interpolation threshold (:func:`interpolation_threshold` at the problem's noise; its
    Δ → 0⁺ value ``(1 − w0²/2)/(2K_eff)`` for noiseless labels, the statistical dimension
    of the PSD tangent cone at S0) the training set is fitted exactly by a whole set of PSD
    matrices: the λ = 0 minimiser is not unique and the state evolution has ``Σ → ∞``.
    :func:`~skattn.theory.solve_state_evolution` then returns the λ → 0⁺ limit, the
    minimum-trace interpolant that weight decay selects (docs: Errors, "The atom at zero
    and λ = 0").

    Only decided where the threshold is known: factored seq2lab with Gaussian tokens and
    no rank cap (the direct parametrization refuses λ = 0 on its own).

    Parameters
    ----------
    alpha : float
        Sample ratio α = n/d².
    problem : StateEvolutionProblem

    Returns
    -------
    bool
        True if ``problem.reg_lambda == 0`` and α (``α_eff`` at finite d) is at or below
        the interpolation threshold.
    """
    if (problem.reg_lambda != 0 or problem.parametrization != "factored"
            or problem.task != "seq2lab" or problem.token_kurtosis != 0.0
            or problem.width_ratio < 1):
        return False
    threshold = interpolation_threshold(problem)
    return bool(problem.effective_alpha(alpha) <= threshold * (1 + _RIDGELESS_MARGIN))

