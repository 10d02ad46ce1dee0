"""Spectral recovery: which target modes a fixed point recovers as outliers (docs: Theory §8).

See the notes of :mod:`skattn.theory.powerlaw` for the deterministic equivalent used.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..._validation import check_finite_array, check_scalar_range
from ..spectral import free_convolution
from ._fixed_point import _check_result, _interval_index, _omega, _target_eigenvalues

__all__ = ["SpectralRecovery", "recovered_modes", "isolation_thresholds"]


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
