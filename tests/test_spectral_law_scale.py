"""fit_spectral_law works in scaled units and reports a failed fit (issue #28, item 3)."""

import warnings

import numpy as np
import pytest

from skattn.spectra import MAX_FIT_KS, fit_spectral_law
from skattn.theory import WishartLaw, free_convolution


@pytest.fixture(scope="module")
def docstring_spectrum():
    mu = free_convolution(WishartLaw(0.5), 0.4)
    eps = mu.upper_quantile(0.6)
    return 2.0 * np.maximum(mu.sample_eigenvalues(400, method="quantile") - eps, 0)


@pytest.mark.parametrize("c", [1e5, 1e6, 1e12, 1e-12, 1e200])
def test_the_fit_is_scale_free(docstring_spectrum, c):
    ref = fit_spectral_law(docstring_spectrum, WishartLaw(0.5))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no overflow on the way
        fit = fit_spectral_law(docstring_spectrum * c, WishartLaw(0.5))
    assert fit.converged, fit.message
    assert fit.eta / c == pytest.approx(ref.eta, rel=1e-6)
    assert abs(ref.eta - 2.0) < 0.01  # the true η of the spectrum
    assert fit.delta == pytest.approx(ref.delta, rel=1e-6)
    assert fit.epsilon == pytest.approx(ref.epsilon, rel=1e-6, abs=1e-9)
    assert fit.ks_statistic == pytest.approx(ref.ks_statistic, abs=1e-6)
    assert fit.bulk_edge / c == pytest.approx(ref.bulk_edge, rel=1e-6)


def test_a_poor_fit_is_not_reported_converged():
    # two well separated clusters: no η·ReLU(S0 + δZ − ε) of the fixed Wishart(0.5) law
    # describes them, whatever the optimiser finds
    rng = np.random.default_rng(0)
    eig = np.concatenate([1 + 0.01 * rng.standard_normal(100),
                          100 + 0.01 * rng.standard_normal(100)])
    fit = fit_spectral_law(eig, WishartLaw(0.5))
    assert fit.ks_statistic > MAX_FIT_KS
    assert not fit.converged
    assert "Poor fit" in fit.message and "Kolmogorov" in fit.message
