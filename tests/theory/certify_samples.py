"""Samples shared by the tests of the T ≥ 3 certificates: local minima of a row problem by
BFGS, quadrature nodes whose prox has two basins, Newton end points of a node's prox, and
the nodes where those ends differ."""

import numpy as np
import pytest
from scipy.optimize import minimize

from skattn.theory.channels import GaussianNodes, SoftmaxChannel, _kernels, _prox_newton
from skattn.theory.channels.output import _gaussian_pair


def local_minima(rng, phi, centre, n_starts=30):
    """Distinct local minima (value, point) of φ (value and gradient) from BFGS runs around
    ``centre``, lowest first; only the runs that end stationary to 1e-10."""
    found = []
    for _ in range(n_starts):
        x0 = centre + rng.normal(size=centre.shape) * rng.uniform(0.1, 3)
        res = minimize(phi, x0, jac=True, method="BFGS", options={"gtol": 1e-13,
                                                                    "maxiter": 2000})
        if np.linalg.norm(phi(res.x)[1]) > 1e-10:
            continue
        if all(np.linalg.norm(res.x - x) > 1e-4 for _, x in found):
            found.append((float(res.fun), res.x))
    return sorted(found, key=lambda m: m[0])


def assert_set_by_two_scalars(logits, y, kappa, b, offset, value):
    """At a stationary point with these logits (βh) and value φ: each ``v_c = log s_c``
    solves ``v_c + κ_c e^{v_c}(e^{v_c} − y_c − g) = b_c + μ`` with one μ, ``Σ r_c = 0``
    and ``φ = Σ κ_c r_c² + ‖s − y‖² + offset``. False (nothing checked) where a
    probability is below 1e-12 (its log too inexact)."""
    s = np.exp(logits - np.max(logits))
    s /= s.sum()
    if s.min() < 1e-12:
        return False
    g = s @ (s - y)
    r = s * (s - y - g)
    mu = np.log(s) + kappa * r - b
    assert np.ptp(mu) <= 1e-7 * (1 + np.abs(mu).max())
    assert abs(r.sum()) <= 1e-12
    V = np.sum(kappa * r ** 2) + (s - y) @ (s - y) + offset
    # (the point is stationary to 1e-10: the identity holds to about that, times the scale)
    assert V == pytest.approx(value, rel=1e-9, abs=1e-8 * (1 + abs(offset)))
    return True


def two_basin_samples(T, beta=4.0, n=400):
    """``(channel, omega, y, w)`` at n nodes of (m, q, Q0) = (0.6, 0.8, 1.0), β = 4: many
    of their prox problems at Σ = 0.5 have two local minima."""
    ch = SoftmaxChannel(T, beta=beta, target_beta=beta)
    nodes = GaussianNodes(2 * ch.K, n_points=n, seed=0)
    omega, w, _, _ = _gaussian_pair(0.6, 0.8, 1.0, nodes, ch.K)
    return ch, omega, ch.labels(w), w


def newton_ends(channel, omega, y, sigma, rng, n_starts=12):
    """``(objective, x)`` of Newton runs on one node's prox from scattered starts, lowest
    first."""
    beta = channel.beta_
    ends = []
    for x0 in rng.standard_normal((n_starts, channel.K_eff)) * 0.5:
        x, f = _prox_newton._newtonT(x0, omega, y, sigma, channel.basis, channel._index,
                                 channel._scale, beta, channel._radius / beta, 100)
        ends.append((f, x))
    return sorted(ends, key=lambda e: e[0])


def two_basin_nodes(channel, omega, y, sigma, rng, limit, gap=1e-3):
    """``(n, ends)`` for the nodes, in order, whose Newton ends (:func:`newton_ends`)
    differ by at least ``gap`` in objective (the worse is a local minimum that no
    certificate may pass), up to ``limit`` of them."""
    found = 0
    for n in range(omega.shape[0]):
        ends = newton_ends(channel, omega[n], y[n], sigma, rng)
        if ends[-1][0] < ends[0][0] + gap:
            continue
        yield n, ends
        found += 1
        if found >= limit:
            return


def two_basin_cases(T, limit=6, seed=0):
    """``(channel, omega_n, y_n, sigma, rng, ends)`` for the nodes of
    :func:`two_basin_samples` at Σ = 0.5 whose Newton ends differ (:func:`two_basin_nodes`),
    with the node's found rows a call away (:func:`_certify_dual.found_rows`)."""
    ch, omega, y, _ = two_basin_samples(T)
    sigma = 0.5
    rng = np.random.default_rng(seed)
    for n, ends in two_basin_nodes(ch, omega, y, sigma, rng, limit):
        yield ch, omega[n], y[n], sigma, rng, ends
