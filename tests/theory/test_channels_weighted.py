"""The weighted square loss Tr(R G Rᵀ) of the seq2seq channel and its proximal map."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from skattn.theory.channels import LinearChannel, SoftmaxChannel
from skattn.theory.channels.weighted import (
    weighted_derivatives,
    weighted_loss,
    weighted_prox,
)

CHANNELS = [LinearChannel(1), LinearChannel(3), SoftmaxChannel(2), SoftmaxChannel(3, beta=2.0)]


def _problem(ch, N, scale, rng):
    T = ch.n_tokens
    z, w = rng.normal(size=(N, ch.K)), rng.normal(size=(N, ch.K))
    g = rng.normal(size=(N, T, T))
    G = np.eye(T) + scale * (g + np.swapaxes(g, 1, 2)) / 2
    return ch.labels(w), z, G


@pytest.mark.parametrize("ch", CHANNELS, ids=repr)
def test_identity_weights_give_the_channel_loss(ch):
    y, z, _ = _problem(ch, 40, 0.0, np.random.default_rng(1))
    eye = np.broadcast_to(np.eye(ch.n_tokens), (40, ch.n_tokens, ch.n_tokens))
    loss, grad, hess = weighted_derivatives(ch, y, z, eye)
    np.testing.assert_allclose(loss, ch.loss(y, z), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(grad, ch.grad(y, z), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(hess, ch.hessian(y, z), rtol=1e-10, atol=1e-13)
    omega = np.random.default_rng(2).normal(size=z.shape)
    np.testing.assert_allclose(weighted_prox(ch, y, omega, 0.8, eye), ch.prox(y, omega, 0.8),
                               atol=1e-7)


@pytest.mark.parametrize("ch", CHANNELS, ids=repr)
def test_derivatives_match_finite_differences(ch):
    y, z, G = _problem(ch, 30, 0.3, np.random.default_rng(3))
    _, grad, hess = weighted_derivatives(ch, y, z, G)
    eps = 1e-6
    for k in range(ch.K):
        e = np.zeros(ch.K)
        e[k] = eps
        fd = (weighted_loss(ch, y, z + e, G) - weighted_loss(ch, y, z - e, G)) / (2 * eps)
        np.testing.assert_allclose(grad[:, k], fd, atol=1e-7)
        fdg = (weighted_derivatives(ch, y, z + e, G)[1]
               - weighted_derivatives(ch, y, z - e, G)[1]) / (2 * eps)
        np.testing.assert_allclose(hess[:, :, k], fdg, atol=1e-6)


@pytest.mark.parametrize("ch", CHANNELS, ids=repr)
def test_prox_is_stationary_and_moves_with_the_weights(ch):
    rng = np.random.default_rng(4)
    y, _, G = _problem(ch, 60, 0.15, rng)
    omega = rng.normal(size=(60, ch.K))
    z = weighted_prox(ch, y, omega, 0.6, G)
    stationarity = (z - omega) / 0.6 + weighted_derivatives(ch, y, z, G)[1]
    assert np.max(np.abs(stationarity)) < 1e-8
    assert np.max(np.abs(z - ch.prox(y, omega, 0.6))) > 1e-3


def test_softmax_prox_is_not_beaten_by_random_starts():
    ch = SoftmaxChannel(3, beta=2.0)
    rng = np.random.default_rng(5)
    y, _, G = _problem(ch, 25, 0.2, rng)
    omega, sigma = rng.normal(size=(25, ch.K)), 2.0
    z = weighted_prox(ch, y, omega, sigma, G)

    def objective(zz, i):
        return (np.sum((zz - omega[i]) ** 2) / (2 * sigma)
                + weighted_loss(ch, y[i:i + 1], zz[None], G[i:i + 1])[0])

    for i in range(25):
        ours = objective(z[i], i)
        for _ in range(6):
            res = minimize(objective, omega[i] + 3 * rng.normal(size=ch.K), args=(i,),
                           method="BFGS", options={"gtol": 1e-10})
            assert res.fun >= ours - 1e-9


def test_bad_weights_are_rejected():
    ch = SoftmaxChannel(2)
    y, z, G = _problem(ch, 5, 0.1, np.random.default_rng(6))
    with pytest.raises(ValueError, match=r"weights must have shape \(5, 2, 2\)"):
        weighted_loss(ch, y, z, G[:4])
    bad = G.copy()
    bad[0, 0, 1] += 1.0
    with pytest.raises(ValueError, match="weights must be symmetric"):
        weighted_loss(ch, y, z, bad)
    bad = G.copy()
    bad[1] = np.nan
    with pytest.raises(ValueError, match="weights must be finite"):
        weighted_prox(ch, y, z, 1.0, bad)
    lin = LinearChannel(2)
    with pytest.raises(ValueError, match="unbounded below"):
        weighted_prox(lin, y, z, 1.0, -5 * np.broadcast_to(np.eye(2), (5, 2, 2)))
    with pytest.raises(ValueError, match="same number of rows"):
        weighted_loss(ch, y[:3], z, G)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), T=st.integers(1, 3), scale=st.floats(0.0, 0.4))
def test_linear_prox_minimises_the_objective(seed, T, scale):
    """Linear attention: the prox objective is a convex quadratic for G ⪰ 0, so any
    perturbation of the returned point raises it."""
    ch = LinearChannel(T)
    rng = np.random.default_rng(seed)
    y, _, G = _problem(ch, 8, scale, rng)
    G = G @ G                                 # positive semi-definite
    omega = rng.normal(size=(8, ch.K))
    z = weighted_prox(ch, y, omega, 0.5, G)

    def objective(zz):
        return np.sum((zz - omega) ** 2, axis=1) / 1.0 + weighted_loss(ch, y, zz, G)

    base = objective(z)
    for _ in range(5):
        assert np.all(objective(z + 1e-3 * rng.normal(size=z.shape)) >= base - 1e-12)
