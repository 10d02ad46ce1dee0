"""The compiled loops of the discrete kernel (skattn.theory.spectral._compiled) against the
numpy forms they replace: the same algorithm element by element, so the same numbers to
round-off, on random atoms, points and noise levels."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skattn.theory.laws import DiscreteLaw
from skattn.theory.spectral import _compiled, free_convolution
from skattn.theory.spectral.evaluators import _SubordinationEvaluator
from skattn.theory.spectral.kernels import _DiscreteKernel

pytestmark = pytest.mark.skipif(not _compiled.HAVE_NUMBA, reason="numba missing")


def _numpy_path(monkeypatch):
    monkeypatch.setattr(_compiled, "HAVE_NUMBA", False)


def _atoms(seed, d):
    rng = np.random.default_rng(seed)
    return np.sort(rng.chisquare(2, size=d) * rng.uniform(0.2, 2.0))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10 ** 6), d=st.integers(2, 60),
       log_delta=st.floats(-2.5, 0.5))
def test_kernel_sums_and_solve_match_numpy(seed, d, log_delta):
    t = _atoms(seed, d)
    kernel = _DiscreteKernel(t)
    delta = 10.0 ** log_delta
    rng = np.random.default_rng(seed + 1)
    u = rng.uniform(t[0] - 2 * delta, t[-1] + 2 * delta, size=40)
    s = rng.uniform(1e-6, 1.0, size=40) * delta ** 2
    ev = _SubordinationEvaluator(kernel, delta)
    compiled = (kernel.FA(u, s), kernel.FARB(u, s), ev.solve_s(u), ev.solve_s(u, s),
                kernel.edges_u(delta))
    with pytest.MonkeyPatch.context() as mp:
        _numpy_path(mp)
        reference = (kernel.FA(u, s), kernel.FARB(u, s), ev.solve_s(u), ev.solve_s(u, s),
                     kernel.edges_u(delta))
    for got, want in zip(compiled[0] + compiled[1], reference[0] + reference[1]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14 * np.max(np.abs(want)))
    for got, want in zip(compiled[2:4], reference[2:4]):
        # the root in s (0 outside U): the same iteration, so the same root to round-off
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-30)
        assert np.array_equal(got > 0, want > 0)
    assert len(compiled[4]) == len(reference[4])
    np.testing.assert_allclose(np.ravel(compiled[4]), np.ravel(reference[4]), rtol=1e-12,
                               atol=1e-13 * (t[-1] - t[0] + delta))


@pytest.mark.parametrize("d, delta", [(40, 0.05), (100, 0.39), (300, 0.8)])
def test_convolved_law_integrals_match_numpy(monkeypatch, d, delta):
    """The state evolution's four integrals on d atoms (a fresh build each time)."""
    law = DiscreteLaw(_atoms(d, d))
    eps = float(np.quantile(law.eigenvalues, 0.6))

    def integrals():
        mu = free_convolution(law, delta, rtol=1e-8, warm_start=None)
        mu = type(mu)(law, delta, rtol=1e-8)        # not the cache's copy
        return np.array([mu.J(eps), mu.D(eps), mu.x_relu_moment(eps), mu.relu_moment(eps)])

    compiled = integrals()
    _numpy_path(monkeypatch)
    np.testing.assert_allclose(compiled, integrals(), rtol=1e-11)
