"""Power-law targets: sequential spectral recovery, emergence and the error decomposition.

THEORY.md §8. At a state-evolution fixed point the learned matrix is, in law,
``Ŝ ≈ η · ReLU(S0 + δ Z − ε I)`` (§4, Claim 4.1). For a target with an explicit finite-d
spectrum ``λ_1 ≥ … ≥ λ_d`` (e.g. :class:`~skattn.data.PowerLawTarget`) this module reads
off that law

- which target modes are *recovered* — outliers of the spectrum of ``S0 + δZ`` that stand
  apart from the noise bulk and survive the threshold ε (:func:`recovered_modes`);
- where the outliers sit and how well their eigenvectors align with the target's;
- the sample ratio α at which mode i emerges (:func:`emergence_alpha`);
- the split of the excess test error into overfitting, underfitting, approximation and
  mismatch parts (:func:`error_decomposition`);
- whole learning curves, from the theory alone (:func:`theory_learning_curve`).

Which finite-d theory
---------------------
Everything here uses the *deterministic equivalent* of the finite-d problem: the
continuum state evolution with the target law ``(1/d) Σ_i δ_{λ_i}``
(a :class:`~skattn.theory.DiscreteLaw`; ``solve_state_evolution(..., target=DiscreteLaw(λ),
n_features=None)``), whose spectral side is the free convolution ``μ_δ = μ0 ⊞ SC(δ²)``.
It is deterministic and cheap (about 0.1–1 s per point at d = 1000, against ~30 s per
point at d = 200 for the finite-d GOE-draw mode, whose cost grows like d³ per
iteration). The two agree to within the fluctuations of the single GOE draw (checked at
d = 200, linear attention, T = 2: excess errors within 3 % at n = 2d, 0.3 % at n = 5d and
0.8 % at n = 40d).

Spectral objects used throughout
--------------------------------
With ``G_δ(x + i0) = Re G_δ(x) − iπ ρ_δ(x)`` the boundary value of the Cauchy transform of
μ_δ and the subordination function ``ω(x) = x − δ² G_δ(x + i0)``:

- the overlap density of target mode i: ``Σ_k ⟨v_k, e_i⟩² δ(x − x_k) ≈ δ² ρ_δ(x) /
  |ω(x) − λ_i|²`` (v_k, x_k the eigenpairs of ``S0 + δZ``; it integrates to one);
- hence the diagonal of the learned matrix in the target eigenbasis,
  ``Ŝ_ii = η ∫ (x − ε)₊ δ² ρ_δ(x) / |ω(x) − λ_i|² dx``, with ``(1/d) Σ_i λ_i Ŝ_ii = m``;
- and the squared overlap of an isolated outlier with its mode,
  ``c_i² = ∫_{I_i} δ² ρ_δ(x) / |ω(x) − λ_i|² dx`` over its support interval ``I_i``
  (for one spike in a semicircle this is the BBP value ``1 − δ²/λ²``).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_finite_array, check_scalar_range
from .channels import GaussianNodes, channel_for, test_error
from .laws import DiscreteLaw
from .spectral import free_convolution

__all__ = [
    "powerlaw_law",
    "SpectralRecovery",
    "recovered_modes",
    "isolation_thresholds",
    "emergence_alpha",
    "ErrorDecomposition",
    "error_decomposition",
    "error_coefficients",
    "LearningCurve",
    "theory_learning_curve",
]


# ----------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------

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
        Atoms ``λ_i = √d · i^(−γ) / (Σ_j j^(−2γ))^{1/2}`` (so ``Σ λ_i² = d``).
    """
    from ..data.targets import PowerLawTarget

    return PowerLawTarget(gamma, cutoff=cutoff).spectral_law(n_features)


def _target_eigenvalues(result, target_eigenvalues):
    """Decreasing target spectrum and its DiscreteLaw, from the argument or the result."""
    if target_eigenvalues is None:
        law = getattr(result, "law", None)
        if not isinstance(law, DiscreteLaw):
            raise ValueError(
                "target_eigenvalues is required: this result carries no finite-d target law "
                f"(law={law!r}); pass the d eigenvalues of the target.")
        eig = law.eigenvalues[::-1].copy()
    else:
        eig = check_finite_array(target_eigenvalues, "target_eigenvalues", ndim=1)
        if eig.size < 2:
            raise ValueError("target_eigenvalues must hold at least 2 values, got "
                             f"{eig.size}.")
        eig = np.sort(eig)[::-1]
        law = DiscreteLaw(eig)
    return eig, law


def _check_result(result):
    for name in ("delta", "epsilon", "eta"):
        if not hasattr(result, name):
            raise TypeError("result must be a StateEvolutionResult, got "
                            f"{type(result).__name__}.")
    if getattr(result, "parametrization", "factored") != "factored":
        raise ValueError("result must come from the factored parametrization (the learned "
                         "spectrum η·ReLU(S0 + δZ − ε) is specific to it).")
    delta = float(result.delta)
    if not np.isfinite(delta) or delta <= 0:
        raise ValueError(f"result.delta must be finite and > 0, got {delta}.")
    return delta, float(result.epsilon), float(result.eta)


def _omega(x, R, rho, delta):
    """``ω(x + i0) = x − δ² G_δ(x + i0)`` from ``Re G`` and ``ρ`` at the points x."""
    d2 = delta * delta
    return (x - d2 * R) + 1j * (np.pi * d2 * rho)


def _nodes_above(mu, eps):
    """Quadrature of μ_δ restricted to ``(ε, ∞)``: nodes x, weights W (``ρ dx``), Re G, ρ.

    The panel holding ε is cut at ε (the quadrature of the kinked integrands
    ``(x − ε)₊ f(x)`` stays exact to the quadrature tolerance).
    """
    split = getattr(mu, "_split", None)
    if split is not None:
        _, _, _, x, W, R, _ = split(eps)
        rho = mu.density(x) if x.size else np.zeros(0)
    else:  # fall back on the public nodes (the kink panel is then integrated roughly)
        sel = mu.nodes > eps
        x, W, R, rho = (mu.nodes[sel], mu.weights[sel], mu.hilbert_nodes[sel],
                        mu.density_nodes[sel])
    return x, W, R, rho


def _interval_index(intervals, x):
    """Index of the support interval holding each x (−1 if none)."""
    a = np.array([iv[0] for iv in intervals])
    b = np.array([iv[1] for iv in intervals])
    k = np.searchsorted(a, x, side="right") - 1
    ok = (k >= 0) & (x <= b[np.clip(k, 0, None)] * (1 + 1e-14) + 1e-300)
    return np.where(ok, k, -1)


# ----------------------------------------------------------------------------------------
# spectral recovery
# ----------------------------------------------------------------------------------------

@dataclass
class SpectralRecovery:
    """Which target modes a state-evolution fixed point recovers (see :func:`recovered_modes`).

    All per-mode arrays have shape ``(d,)`` and follow the target eigenvalues in
    *decreasing* order: index 0 is the largest eigenvalue λ_1.

    Attributes
    ----------
    alpha, delta, epsilon, eta : float
        The fixed point's α and the parameters of ``Ŝ ≈ η ReLU(S0 + δZ − ε)``.
    target_eigenvalues : ndarray
        ``λ_1 ≥ … ≥ λ_d``.
    outlier : ndarray of bool
        The mode's eigenvalue lies in a support interval of μ_δ above the bulk carrying at
        most ``max_cluster`` eigenvalues (whatever ε).
    recovered : ndarray of bool
        Outlier *and* its predicted position is above ε: the learned ``Ŝ`` has an isolated
        eigenvalue along this mode.
    cluster_size : ndarray of int
        Number of eigenvalues in the support interval holding the mode.
    positions : ndarray
        Predicted eigenvalue of ``S0 + δZ`` for outlier modes (the mean of its support
        interval for an isolated mode; the equal-mass quantiles for a cluster), NaN
        otherwise.
    learned_eigenvalues : ndarray
        ``η (position − ε)₊``: the predicted eigenvalue of the learned ``Ŝ`` (NaN for
        non-outliers).
    overlaps : ndarray
        Squared overlap ``c_i²`` of the mode with the eigenvector(s) of its outlier
        interval (NaN for non-outliers).
    bulk_edge : float
        Upper edge of the bulk of ``S0 + δZ`` (the support interval carrying the most
        eigenvalues).
    intervals : list of tuple
        Support intervals of μ_δ, increasing.
    interval_counts : ndarray of int
        Number of eigenvalues carried by each interval.
    """

    alpha: float
    delta: float
    epsilon: float
    eta: float
    target_eigenvalues: np.ndarray
    outlier: np.ndarray
    recovered: np.ndarray
    cluster_size: np.ndarray
    positions: np.ndarray
    learned_eigenvalues: np.ndarray
    overlaps: np.ndarray
    bulk_edge: float
    intervals: list = field(repr=False, default_factory=list)
    interval_counts: np.ndarray = field(repr=False, default=None)
    _mode_interval: np.ndarray = field(repr=False, default=None)

    @property
    def n_features(self):
        """d."""
        return int(self.target_eigenvalues.size)

    @property
    def n_recovered(self):
        """Number of recovered modes."""
        return int(np.count_nonzero(self.recovered))

    @property
    def recovered_indices(self):
        """Indices (0 = largest eigenvalue) of the recovered modes."""
        return np.flatnonzero(self.recovered)

    @property
    def learned_bulk_edge(self):
        """Upper edge of the learned bulk, ``η (bulk_edge − ε)₊``."""
        return float(self.eta * max(self.bulk_edge - self.epsilon, 0.0))


def _interval_structure(mu, d):
    """Intervals of μ_δ, their quadrature masses (in eigenvalue counts) and node table."""
    intervals = list(mu.intervals)
    x, W = mu.nodes, mu.weights
    k = _interval_index(intervals, x)
    mass = np.bincount(k[k >= 0], weights=W[k >= 0], minlength=len(intervals))
    counts = np.rint(mass * d).astype(int)
    return intervals, counts, k


def recovered_modes(result, target_eigenvalues=None, *, max_cluster=1):
    """Target modes recovered as outliers of the learned spectrum.

    Criterion (deterministic equivalent of the finite-d spectrum of ``S0 + δZ``): the
    free convolution ``μ_δ = (1/d) Σ_i δ_{λ_i} ⊞ SC(δ²)`` has a support made of disjoint
    intervals, each carrying an integer number of eigenvalues (its mass times d; the top
    eigenvalues go to the top intervals, in order). The *bulk* is the interval carrying the
    most eigenvalues. Mode i is an **outlier** when its interval lies above the bulk and
    carries at most ``max_cluster`` eigenvalues — with the default ``max_cluster=1``, when
    its atom has its own support interval, separated from every other eigenvalue by a gap
    of the spectrum. It is **recovered** when it is an outlier and its predicted position
    (the mean of its interval) lies above the threshold ε, so that the learned
    ``Ŝ ≈ η ReLU(S0 + δZ − ε)`` keeps an isolated eigenvalue along it. Isolation needs
    δ below the mode's isolation threshold (:func:`isolation_thresholds`); for one spike
    λ in a semicircle it is the BBP condition λ > δ.

    Parameters
    ----------
    result : StateEvolutionResult
        A factored fixed point (continuum or finite-d mode).
    target_eigenvalues : array-like of shape (d,), optional
        The target's spectrum; by default the atoms of ``result.law`` (a
        :class:`~skattn.theory.DiscreteLaw`, as for power-law targets).
    max_cluster : int or None, default=1
        Largest number of eigenvalues an outlier interval may carry (None: any interval
        above the bulk). Clusters are separated from the bulk but their eigenvectors mix
        the modes inside them.

    Returns
    -------
    SpectralRecovery
    """
    delta, eps, eta = _check_result(result)
    eig, law = _target_eigenvalues(result, target_eigenvalues)
    if max_cluster is not None:
        max_cluster = check_scalar_range(max_cluster, "max_cluster", low=1, integer=True)
    d = eig.size
    mu = free_convolution(law, delta)
    intervals, counts, node_k = _interval_structure(mu, d)
    n_int = len(intervals)
    if counts.sum() != d:  # a mass rounding slip: put the difference in the largest interval
        counts[int(np.argmax(counts))] += d - counts.sum()
    bulk = int(np.flatnonzero(counts == counts.max())[0])  # the largest (lowest on ties)
    x, W = mu.nodes, mu.weights
    R, rho = mu.hilbert_nodes, mu.density_nodes
    omega = _omega(x, R, rho, delta)

    outlier = np.zeros(d, bool)
    recovered = np.zeros(d, bool)
    cluster = np.zeros(d, int)
    pos = np.full(d, np.nan)
    learned = np.full(d, np.nan)
    overlaps = np.full(d, np.nan)
    mode_interval = np.full(d, -1)
    top = 0  # modes are handed out from the top interval down
    for j in range(n_int - 1, -1, -1):
        c = int(counts[j])
        if c <= 0:
            continue
        idx = np.arange(top, min(top + c, d))
        top += c
        cluster[idx] = c
        mode_interval[idx] = j
        if j <= bulk or (max_cluster is not None and c > max_cluster):
            continue
        sel = node_k == j
        xs, ws = x[sel], W[sel]
        wsum = ws.sum()
        if c == 1:
            p = np.array([np.sum(ws * xs) / wsum])
        else:
            cum = np.concatenate([[0.0], np.cumsum(ws)]) / wsum
            xx = np.concatenate([[intervals[j][0]], xs])
            p = np.interp((np.arange(c)[::-1] + 0.5) / c, cum, xx)
        mean = np.sum(ws * xs) / wsum
        outlier[idx] = True
        pos[idx] = p
        learned[idx] = eta * np.maximum(p - eps, 0.0)
        recovered[idx] = mean > eps
        om = omega[sel]
        overlaps[idx] = [np.sum(ws * delta ** 2 / np.abs(om - eig[i]) ** 2) for i in idx]
    return SpectralRecovery(
        alpha=float(result.alpha), delta=delta, epsilon=eps, eta=eta,
        target_eigenvalues=eig, outlier=outlier, recovered=recovered, cluster_size=cluster,
        positions=pos, learned_eigenvalues=learned, overlaps=overlaps,
        bulk_edge=float(intervals[bulk][1]), intervals=intervals, interval_counts=counts,
        _mode_interval=mode_interval)


def isolation_thresholds(target_eigenvalues):
    """For each mode, the largest δ at which its eigenvalue has its own support interval.

    Mode i of ``μ0 = (1/d) Σ δ_{λ_j}`` is alone in a support interval of
    ``μ0 ⊞ SC(δ²)`` iff ``F(u) = (1/d) Σ_j (u − λ_j)^{−2}`` dips below ``1/δ²`` in both
    gaps next to λ_i (Biane's description of the support). The threshold is therefore
    ``δ_i* = min over the two gaps of (min_gap F)^{−1/2}`` (only the lower gap for λ_1; the
    upper one for λ_d). Equal eigenvalues never separate (threshold 0).

    Parameters
    ----------
    target_eigenvalues : array-like of shape (d,)

    Returns
    -------
    ndarray of shape (d,)
        ``δ_i*`` in the order of the eigenvalues sorted decreasingly.
    """
    from scipy.optimize import minimize_scalar

    lam = np.sort(check_finite_array(target_eigenvalues, "target_eigenvalues", ndim=1))[::-1]
    d = lam.size
    if d < 2:
        raise ValueError(f"target_eigenvalues must hold at least 2 values, got {d}.")
    w = 1.0 / d

    def F(u):
        return w * np.sum((u - lam) ** -2.0)

    gap_delta = np.zeros(d - 1)  # gap between lam[k] (above) and lam[k+1] (below)
    for k in range(d - 1):
        hi, lo = lam[k], lam[k + 1]
        if hi - lo <= 1e-14 * max(1.0, abs(hi)):
            continue
        r = minimize_scalar(F, bounds=(lo, hi), method="bounded",
                            options={"xatol": 1e-12 * (hi - lo)})
        gap_delta[k] = 1.0 / np.sqrt(r.fun)
    out = np.empty(d)
    out[0] = gap_delta[0]
    out[-1] = gap_delta[-1]
    if d > 2:
        out[1:-1] = np.minimum(gap_delta[:-1], gap_delta[1:])
    return out


# ----------------------------------------------------------------------------------------
# emergence
# ----------------------------------------------------------------------------------------

def _resolve_theory_target(target, n_features):
    """A DiscreteLaw from a Target (+ n_features), a DiscreteLaw or an eigenvalue array."""
    if isinstance(target, DiscreteLaw):
        return target
    if hasattr(target, "spectral_law") and hasattr(target, "sample"):
        if n_features is None:
            raise ValueError(f"n_features is required with a {type(target).__name__}: the "
                             "power-law theory is a finite-d theory.")
        n_features = check_scalar_range(n_features, "n_features", low=2, integer=True)
        from .state_evolution import resolve_target_law
        law, _ = resolve_target_law(target, n_features)
        return law
    if isinstance(target, (list, tuple, np.ndarray)):
        return DiscreteLaw(check_finite_array(target, "target", ndim=1))
    raise TypeError("target must be a Target (e.g. PowerLawTarget) with n_features, a "
                    f"DiscreteLaw or an array of eigenvalues, got {type(target).__name__}.")


def _lambda_at(reg_lambda, alpha):
    lam = reg_lambda(alpha) if callable(reg_lambda) else reg_lambda
    return check_scalar_range(lam, "reg_lambda", low=0)


#: cold starts (m/Q0, q/Q0, Σ) tried, in order, when the solver's own start fails
_COLD_STARTS = ((0.5, 0.5, 1.0), (0.9, 0.9, 0.1), (0.05, 0.01, 0.01), (0.3, 0.3, 10.0))


def _solve_robust(alpha, init, kwargs):
    """solve_state_evolution with a warm start, then its default start, then fixed cold
    starts, then a continuation in λ (from λ/30 up); returns the first converged result
    (else the one with the smallest residual).

    Under a strong trace penalty the fixed-point map is undefined (Ŝ = 0) on most of the
    (m, q, Σ) space, and a start far from the fixed point can fail even where a non-trivial
    fixed point exists.
    """
    from .state_evolution import solve_state_evolution

    def attempt(start, kw):
        try:
            return solve_state_evolution(alpha, init=start, **kw)
        except (ValueError, FloatingPointError, ZeroDivisionError):
            return None

    best = None
    Q0 = 1.0
    for start in (init, None) + _COLD_STARTS:
        if start is None and init is None and best is not None:
            continue
        if isinstance(start, tuple):
            start = (start[0] * Q0, start[1] * Q0, start[2])
        r = attempt(start, kwargs)
        if r is None:
            continue
        Q0 = float(r.Q0)
        if r.converged:
            return r
        if best is None or r.residual < best.residual:
            best = r
    lam = float(kwargs.get("reg_lambda", 0.0))
    if lam > 0:  # continuation in λ
        prev = None
        for f in np.geomspace(1 / 30, 1, 8):
            r = attempt(prev, dict(kwargs, reg_lambda=lam * f))
            if r is not None and r.converged:
                prev = r
        if prev is not None and prev.params.get("reg_lambda") == lam:
            return prev
    if best is None:
        raise RuntimeError(f"the state evolution failed at alpha={alpha:g} from every start.")
    return best


def emergence_alpha(mode_index, *, target, n_tokens, reg_lambda, n_features=None,
                    alpha_range=(1e-3, 1.0), n_grid=25, rtol=1e-3, max_cluster=1,
                    **se_kwargs):
    """The sample ratio α = n/d² at which target mode i emerges as a recovered outlier.

    The state evolution (deterministic equivalent with the target's d eigenvalues, see the
    module notes) is solved on a log grid of α, warm-started point to point; for each
    requested mode the first grid interval where it turns from not recovered to recovered
    (:func:`recovered_modes`) is refined by bisection in log α — the root of the
    recovered/not-recovered indicator — until the bracket ratio is below ``1 + rtol``.

    Parameters
    ----------
    mode_index : int or array-like of int
        Mode(s), 0-based in decreasing order of eigenvalue (0 is λ_1).
    target : Target, DiscreteLaw or array-like
        E.g. ``PowerLawTarget(1.25)`` (then ``n_features`` is required), or the law or the
        eigenvalues themselves.
    n_tokens : int
        T.
    reg_lambda : float or callable
        λ, or a function ``alpha -> λ`` (e.g. ``lambda a: 3 * a ** 0.5``).
    n_features : int, optional
        d, for a Target.
    alpha_range : tuple of float, default=(1e-3, 1.0)
        Range of α searched.
    n_grid : int, default=25
        Number of grid points (log-spaced) before refinement.
    rtol : float, default=1e-3
        Relative precision on α.
    max_cluster : int or None, default=1
        See :func:`recovered_modes`.
    **se_kwargs
        Passed to :func:`~skattn.theory.solve_state_evolution` (``attention``, ``noise``,
        ``beta``, ``n_nodes``, ...).

    Returns
    -------
    float or ndarray
        The emergence α per mode; NaN (with a warning) for a mode never recovered in the
        range, or already recovered at its lower end. Where the recovered set is not
        monotone in α (a noisy interpolation peak can make δ grow with α), the first
        emergence is returned.
    """
    law = _resolve_theory_target(target, n_features)
    d = law.n_atoms
    modes = np.atleast_1d(np.asarray(mode_index))
    if modes.dtype.kind not in "iu" or modes.ndim != 1:
        raise TypeError("mode_index must be an int or a 1-D array of ints, got "
                        f"{mode_index!r}.")
    if np.any((modes < 0) | (modes >= d)):
        raise ValueError(f"mode_index must lie in [0, {d - 1}] (d = {d}), got {mode_index!r}.")
    a_lo, a_hi = (check_scalar_range(a, "alpha_range", low=0, low_inclusive=False)
                  for a in alpha_range)
    if not a_lo < a_hi:
        raise ValueError(f"alpha_range must be increasing, got {alpha_range!r}.")
    n_grid = check_scalar_range(n_grid, "n_grid", low=2, integer=True)
    rtol = check_scalar_range(rtol, "rtol", low=0, low_inclusive=False)

    def solve(a, init):
        return _solve_robust(a, init, dict(n_tokens=n_tokens,
                                           reg_lambda=_lambda_at(reg_lambda, a),
                                           target=law, **se_kwargs))

    grid = np.geomspace(a_lo, a_hi, n_grid)
    results, flags, prev = [], [], None
    for a in grid:
        r = solve(a, prev)
        results.append(r)
        flags.append(recovered_modes(r, max_cluster=max_cluster).recovered)
        prev = r if r.converged else prev
    flags = np.array(flags)
    out = np.full(modes.size, np.nan)
    for j, i in enumerate(modes):
        f = flags[:, i]
        hit = np.flatnonzero(f)
        if hit.size == 0:
            warnings.warn(f"mode {i} is not recovered for alpha in {alpha_range}.",
                          RuntimeWarning, stacklevel=2)
            continue
        k = int(hit[0])
        if k == 0:
            warnings.warn(f"mode {i} is already recovered at alpha={a_lo:g}; lower "
                          "alpha_range.", RuntimeWarning, stacklevel=2)
            continue
        lo, hi = grid[k - 1], grid[k]
        r_lo = results[k - 1]
        while hi / lo > 1 + rtol:
            mid = np.sqrt(lo * hi)
            r = solve(mid, r_lo if r_lo.converged else None)
            if recovered_modes(r, max_cluster=max_cluster).recovered[i]:
                hi = mid
            else:
                lo, r_lo = mid, r
        out[j] = np.sqrt(lo * hi)
    return float(out[0]) if np.ndim(mode_index) == 0 else out


# ----------------------------------------------------------------------------------------
# error decomposition
# ----------------------------------------------------------------------------------------

def _test_error_function(result, n_nodes, random_state):
    """``(m, q) -> e_test`` for the channel of ``result`` on fixed quadrature nodes
    (closed form for linear attention)."""
    p = result.params
    Q0, noise = float(result.Q0), float(p.get("noise", 0.0))
    attention, T = p.get("attention", "softmax"), int(p["n_tokens"])
    if attention == "linear":
        K = T * (T + 1) // 2
        return lambda m, q: K * noise + 2 * K * (Q0 - 2 * m + q)
    channel = channel_for(attention, T, p.get("beta", 1.0), p.get("target_beta", 1.0))
    nodes = GaussianNodes(2 * channel.K, n_points=n_nodes, seed=random_state)
    return lambda m, q: test_error(channel, m=m, q=q, Q0=Q0, noise=noise, nodes=nodes)


def error_coefficients(result, *, n_nodes=8192, step=1e-3, random_state=0):
    """Irreducible error e0 and the coefficients c1, c2 of the error decomposition.

    The test error depends on Ŝ only through ``m = Tr(S0 Ŝ)/d`` and ``q = Tr Ŝ²/d``.
    Split Ŝ along the target, ``Ŝ = κ S0 + Ŝ⊥`` with ``κ = m/Q0`` (the learned *scale* of
    the target) and ``r = ‖Ŝ⊥‖²_F/d = q − κ² Q0``; then
    ``s = ‖Ŝ − S0‖²_F/d = r + p`` with ``p = (1 − κ)² Q0``, and to first order in r

    ``e_test − e0 ≈ [e(κ S0) − e0] + c1 r = c1 s + c2 p``,

    - ``e0 = e_test(S0)`` (``m = q = Q0``), the irreducible error;
    - ``c1 = ∂e/∂q`` at fixed m, at ``(κ Q0, κ² Q0)``: the cost of errors transverse to
      the target, at the learned scale;
    - ``c2 = [e(κ S0) − e0]/p − c1``: how the error along the target itself departs from
      that transverse cost — zero when the error is quadratic in ``Ŝ − S0`` with constant
      coefficients (linear attention), negative for softmax, whose error saturates along
      the scale, and whose minimum along ``κ S0`` moves below κ = 1 with label noise.

    Linear attention: exactly ``e_test = KΔ + 2K s`` (``e0 = KΔ``, ``c1 = 2K``, ``c2 = 0``,
    ``K = T(T+1)/2``), no quadrature. Softmax: :func:`~skattn.theory.channels.test_error`
    on fixed quasi-Monte-Carlo nodes (common random numbers), ``c1`` by a
    Richardson-extrapolated difference in q. The first-order expansion in r is accurate to
    ~1 % of the excess for T = 2 softmax on power-law targets (0.1 % once a few modes are
    recovered).

    Parameters
    ----------
    result : StateEvolutionResult
        Supplies ``m``, ``Q0`` and the channel parameters (``params``).
    n_nodes : int, default=8192
        Quadrature nodes (softmax).
    step : float, default=1e-3
        Relative finite-difference step h.
    random_state : int, default=0
        Seed of the nodes.

    Returns
    -------
    e0, c1, c2 : float
    """
    p = result.params
    Q0, noise = float(result.Q0), float(p.get("noise", 0.0))
    attention, T = p.get("attention", "softmax"), int(p["n_tokens"])
    K = T * (T + 1) // 2
    if attention == "linear":
        return K * noise, 2.0 * K, 0.0
    step = check_scalar_range(step, "step", low=0, high=0.1, low_inclusive=False)
    e = _test_error_function(result, n_nodes, random_state)
    e0 = e(Q0, Q0)
    kappa = float(np.clip(result.m / Q0, -10.0, 10.0))
    m_k, q_k = kappa * Q0, kappa ** 2 * Q0
    e_par = e(m_k, q_k)
    h = step * Q0
    d1 = (e(m_k, q_k + h) - e_par) / h
    d2 = (e(m_k, q_k + h / 2) - e_par) / (h / 2)
    c1 = 2 * d2 - d1
    par = (1 - kappa) ** 2 * Q0
    if par < (step * Q0) ** 2:  # κ ≈ 1: the secant along the scale at κ = 1 − h
        kappa_s = 1 - step
        par = (1 - kappa_s) ** 2 * Q0
        e_par, e_ref = e(kappa_s * Q0, kappa_s ** 2 * Q0), e0
        c2 = (e_par - e_ref) / par - c1
    else:
        c2 = (e_par - e0) / par - c1
    return float(e0), float(c1), float(c2)


@dataclass
class ErrorDecomposition:
    """The split of the excess test error of one fixed point (see :func:`error_decomposition`).

    Attributes
    ----------
    alpha : float
    over, under, approx : float
        ``E_over``, ``E_under``, ``E_approx`` (pieces of ``‖Ŝ − S0‖²_F/d``).
    mismatch : float
        ``E_mismatch = (1 − κ)² Q0 = (Q0 − m)²/Q0``, the error along the target's own
        direction (κ = m/Q0 the learned scale).
    s_error : float
        ``E_over + E_under + E_approx = ‖Ŝ − S0‖²_F/d`` (from the spectral law).
    e0, c1, c2 : float
        See :func:`error_coefficients`.
    m : float
        ``Tr(S0 Ŝ)/d`` from the spectral law (equal to the fixed point's m).
    excess : float
        ``e_test − e0`` of the fixed point (for linear attention ``2K (Q0 − 2m + q)``
        exactly; for softmax on the same quadrature nodes as the coefficients).
    n_recovered : int
    recovery : SpectralRecovery
    """

    alpha: float
    over: float
    under: float
    approx: float
    mismatch: float
    s_error: float
    e0: float
    c1: float
    c2: float
    m: float
    excess: float
    n_recovered: int
    recovery: SpectralRecovery = field(repr=False, default=None)

    @property
    def approximation(self):
        """``c1 (E_over + E_under + E_approx) + c2 E_mismatch`` (exact: linear attention)."""
        return self.c1 * self.s_error + self.c2 * self.mismatch

    @property
    def residual(self):
        """``excess − approximation``: the higher-order terms (zero for linear attention)."""
        return self.excess - self.approximation

    @property
    def contributions(self):
        """The four terms on the scale of the test error, as a dict."""
        return {"over": self.c1 * self.over, "under": self.c1 * self.under,
                "approx": self.c1 * self.approx, "mismatch": self.c2 * self.mismatch}


def error_decomposition(result, target_eigenvalues=None, *, max_cluster=1, n_nodes=8192,
                        random_state=0):
    """Split ``e_test − e0`` into overfitting, underfitting, approximation and mismatch.

    With ``Ŝ ≈ η ReLU(S0 + δZ − ε)`` (eigenpairs ``(s_k, v_k)``), target modes
    ``(λ_i, e_i)`` and the recovered set R of :func:`recovered_modes`, the S-error

    ``‖Ŝ − S0‖²_F/d = (1/d) [Σ_k s_k² − 2 Σ_i λ_i Ŝ_ii + Σ_i λ_i²]``,
    ``Ŝ_ii = ⟨e_i, Ŝ e_i⟩``,

    is split, exactly, into

    - ``E_over = (1/d) Σ_{k ∈ bulk} s_k²`` — **overfitting**: the energy of the learned
      eigenvalues outside the outlier intervals (the thresholded noise bulk, the spurious
      directions); ``η² ∫_bulk (x − ε)₊² dμ_δ``;
    - ``E_under = (1/d) Σ_{i ∉ R} (λ_i² − 2 λ_i Ŝ_ii) + (1/d) Σ_{k ∈ O∖R} s_k²`` —
      **underfitting**: the error along target modes still under the threshold (their
      energy, less what the bulk captures of it, plus the energy of outlier intervals cut
      by ε);
    - ``E_approx = (1/d) Σ_{i ∈ R} (λ_i² − 2 λ_i Ŝ_ii) + (1/d) Σ_{k ∈ O_R} s_k²`` —
      **approximation**: the error along the recovered outliers (for an outlier of
      eigenvalue s aligned with squared overlap c² this is ``(λ² − 2λ s c² + s²)/d``,
      the shrinkage by ε and the eigenvector misalignment);

    with ``Ŝ_ii = η ∫ (x − ε)₊ δ² ρ_δ(x)/|ω(x) − λ_i|² dx`` (module notes) and
    ``O_R`` (``O∖R``) the outlier intervals of recovered (not recovered) modes. Also

    - ``E_mismatch = (1 − κ)² Q0 = (Q0 − m)²/Q0`` with ``κ = m/Q0`` — **mismatch**: the
      part of ``‖Ŝ − S0‖²/d`` along the target itself, ``Ŝ = κ S0 + Ŝ⊥`` (the learned
      "saturation level" κ of the target, not at the error's minimum along ``κ S0``).

    The test error is ``e_test − e0 ≈ c1 (E_over + E_under + E_approx) + c2 E_mismatch``
    (coefficients from :func:`error_coefficients`: ``c1`` the transverse curvature of the
    test error at the learned scale, ``c2`` the correction along the target). For **linear
    attention** the test error is quadratic in ``Ŝ − S0`` with constant coefficients:
    ``c1 = 2K``, ``c2 = 0`` and the decomposition is exact (the terms sum to the excess
    error, to quadrature accuracy). For **softmax** it is exact along the target direction
    and first order in the transverse error ``‖Ŝ⊥‖²/d`` (``residual`` holds the
    remainder, about 1 % of the excess for T = 2 on power-law targets); ``c2 < 0`` there:
    the softmax error saturates along the scale of the target, and with label noise its
    minimum along ``κ S0`` lies below κ = 1.

    Parameters
    ----------
    result : StateEvolutionResult
        A factored fixed point with a finite-d target law (e.g. from a
        :class:`~skattn.theory.DiscreteLaw` target).
    target_eigenvalues : array-like of shape (d,), optional
        Defaults to the atoms of ``result.law``.
    max_cluster : int or None, default=1
        See :func:`recovered_modes`.
    n_nodes : int, default=8192
        Quadrature nodes for the softmax coefficients.
    random_state : int, default=0

    Returns
    -------
    ErrorDecomposition
    """
    delta, eps, eta = _check_result(result)
    eig, law = _target_eigenvalues(result, target_eigenvalues)
    d = eig.size
    rec = recovered_modes(result, eig, max_cluster=max_cluster)
    mu = free_convolution(law, delta)
    x, W, R, rho = _nodes_above(mu, eps)
    f = eta * (x - eps)
    omega = _omega(x, R, rho, delta)
    # Ŝ_ii for every mode, in chunks (d × n_nodes)
    Sii = np.empty(d)
    step = max(1, (1 << 22) // max(x.size, 1))
    for s0 in range(0, d, step):
        lam = eig[s0:s0 + step, None]
        kernel = delta ** 2 / np.abs(omega[None, :] - lam) ** 2
        Sii[s0:s0 + step] = (W * f * kernel).sum(axis=1)
    energy = W * f * f
    k = _interval_index(rec.intervals, x)
    out_int = np.unique(rec._mode_interval[rec.outlier])
    rec_int = np.unique(rec._mode_interval[rec.recovered])
    q_all = float(energy.sum())
    q_rec = float(energy[np.isin(k, rec_int)].sum())
    q_out = float(energy[np.isin(k, out_int)].sum())
    per_mode = eig * (eig - 2 * Sii) / d
    under = float(per_mode[~rec.recovered].sum()) + (q_out - q_rec)
    approx = float(per_mode[rec.recovered].sum()) + q_rec
    over = q_all - q_out
    m = float(np.dot(eig, Sii) / d)
    Q0 = float(np.mean(eig ** 2))
    e0, c1, c2 = error_coefficients(result, n_nodes=n_nodes, random_state=random_state)
    # the fixed point's excess error on the same nodes as the coefficients (closed form
    # for linear attention)
    excess = _test_error_function(result, n_nodes, random_state)(result.m, result.q) - e0
    return ErrorDecomposition(
        alpha=float(result.alpha), over=float(over), under=float(under), approx=float(approx),
        mismatch=(Q0 - m) ** 2 / Q0, s_error=float(over + under + approx), e0=e0, c1=c1,
        c2=c2, m=m, excess=float(excess), n_recovered=rec.n_recovered, recovery=rec)


# ----------------------------------------------------------------------------------------
# learning curves from the theory
# ----------------------------------------------------------------------------------------

@dataclass
class LearningCurve:
    """A theory learning curve (see :func:`theory_learning_curve`).

    Attributes
    ----------
    n_samples : ndarray
    alpha : ndarray
        ``n/d²``.
    reg_lambda : ndarray
        λ used at each point.
    test_error, excess : ndarray
        ``e_test`` and ``e_test − e0`` (NaN where the state evolution did not converge).
    e0 : float
    converged : ndarray of bool
    results : list of StateEvolutionResult
    wall_time : float
        Seconds spent.
    """

    n_samples: np.ndarray
    alpha: np.ndarray
    reg_lambda: np.ndarray
    test_error: np.ndarray
    excess: np.ndarray
    e0: float
    converged: np.ndarray
    results: list = field(repr=False, default_factory=list)
    wall_time: float = np.nan


def theory_learning_curve(n_samples, *, target, n_tokens, reg_lambda, n_features=None,
                          lambda_exponent=0.0, **se_kwargs):
    """Excess test error against n from the state evolution alone.

    Uses the deterministic equivalent of the finite-d theory (continuum state evolution
    with the d target eigenvalues, module notes), warm-started along n, with a cold restart
    where a warm start fails.

    Parameters
    ----------
    n_samples : array-like of int
        Sample sizes n (solved in increasing order).
    target : Target, DiscreteLaw or array-like
        E.g. ``PowerLawTarget(1.25)``.
    n_tokens : int
        T.
    reg_lambda : float or callable
        λ (the estimator's ``reg_lambda``), or a function ``n -> λ``. With
        ``lambda_exponent = b`` the value used is ``reg_lambda · n^b`` (as in
        :class:`skattn.scaling.ScaledLambdaRegressor`).
    n_features : int, optional
        d (required with a Target; a law or an eigenvalue array carries it).
    lambda_exponent : float, default=0.0
    **se_kwargs
        Passed to :func:`~skattn.theory.solve_state_evolution` (``attention``, ``noise``,
        ``n_nodes``, ``width_ratio``, ...).

    Returns
    -------
    LearningCurve
    """
    t0 = time.perf_counter()
    law = _resolve_theory_target(target, n_features)
    d = law.n_atoms
    if n_features is not None and int(n_features) != d:
        raise ValueError(f"n_features={n_features} does not match the target's {d} "
                         "eigenvalues.")
    ns = check_finite_array(n_samples, "n_samples", ndim=1)
    if ns.size == 0 or np.any(ns <= 0):
        raise ValueError("n_samples must be a non-empty array of positive sizes.")
    order = np.argsort(ns)
    lambda_exponent = check_scalar_range(lambda_exponent, "lambda_exponent")
    lams = np.array([(reg_lambda(n) if callable(reg_lambda) else reg_lambda)
                     * n ** lambda_exponent for n in ns], dtype=float)
    if np.any(~np.isfinite(lams)) or np.any(lams < 0):
        raise ValueError("reg_lambda must give finite values >= 0.")
    results = [None] * ns.size
    prev = None
    for i in order:
        kw = dict(n_tokens=n_tokens, reg_lambda=float(lams[i]), target=law, **se_kwargs)
        r = _solve_robust(ns[i] / d ** 2, prev, kw)
        results[i] = r
        prev = r if r.converged else prev
    e0, c1, _ = error_coefficients(results[0])
    linear = se_kwargs.get("attention", "softmax") == "linear"
    te = np.array([r.test_error for r in results])
    exc = np.array([c1 * r.s_error if linear else r.test_error - e0 for r in results])
    if linear:
        te = e0 + exc
    ok = np.array([r.converged for r in results])
    te[~ok] = np.nan
    exc[~ok] = np.nan
    return LearningCurve(n_samples=ns, alpha=ns / d ** 2, reg_lambda=lams, test_error=te,
                         excess=exc, e0=e0, converged=ok, results=results,
                         wall_time=time.perf_counter() - t0)
