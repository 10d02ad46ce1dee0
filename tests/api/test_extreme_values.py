"""Extreme values inside the documented ranges: a finite result or a ValueError naming the
argument (issue #28, items 2 and 6 of the report)."""

import numpy as np
import pytest

from skattn._validation import Interval, check_scalar_range
from skattn.data import AttentionIndexedModel, SpectrumTarget, WishartTarget
from skattn.estimators import ScaledLambdaRegressor, TiedAttentionRegressor
from skattn.theory import solve_state_evolution
from skattn.theory.laws import DiscreteLaw, WishartLaw
from skattn.theory.spectral import free_convolution

W = WishartTarget(0.5)


def _solve(**kw):
    args = dict(alpha=0.5, target=W, n_tokens=2, reg_lambda=0.1)
    args.update(kw)
    return solve_state_evolution(**args)


@pytest.mark.parametrize("kw, name", [
    ({"alpha": 1e-50}, "alpha"), ({"alpha": 1e-310}, "alpha"), ({"alpha": 10 ** 400}, "alpha"),
    ({"beta": 1e-300}, "beta"), ({"target_beta": 1e-20}, "target_beta"),
    ({"n_tokens": 2 ** 64}, "n_tokens"), ({"max_iter": 2 ** 64}, "max_iter"),
    ({"target": WishartTarget(1e-20)}, "rank_ratio"),
    ({"target": SpectrumTarget(np.full(10, 1e-160)), "n_features": 10}, "target"),
    ({"target": SpectrumTarget(np.full(10, 1e6)), "n_features": 10}, "target"),
])
def test_state_evolution_names_the_argument(kw, name):
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        _solve(**kw)


def test_extreme_target_scale_fails_before_allocating(monkeypatch):
    # used to grow to 24 GB (killed by the system); now refused at once
    monkeypatch.setenv("SKATTN_MEMORY_LIMIT_GB", "0.2")
    with pytest.raises(ValueError, match="root-mean-square eigenvalue"):
        solve_state_evolution(0.3, target=SpectrumTarget(np.full(10, 1e150)), n_tokens=2,
                              reg_lambda=0.1, n_features=10)


def test_quadrature_refinement_passes_the_memory_guard(monkeypatch):
    # the spectral path itself (free_convolution is public): its panels double at each
    # level that does not converge; the guard refuses before the next level's arrays
    monkeypatch.setenv("SKATTN_MEMORY_LIMIT_GB", "0.05")
    with np.errstate(all="ignore"), pytest.raises(ValueError, match=r"quadrature.*GiB"):
        # δ at the edge of the range the quadrature accepts (1e-10 of the law's scale)
        free_convolution(DiscreteLaw(np.full(10, 1e150)), 1e140).J(0.0)


@pytest.mark.slow
def test_edges_of_the_ranges_are_finite():
    for kw in ({"alpha": 1e-12}, {"beta": 1e-6}, {"target_beta": 1e-6},
               {"target": WishartTarget(1e-6)}):
        res = _solve(**kw)
        assert np.isfinite(res.test_error), kw


def test_huge_python_ints():
    with pytest.raises(ValueError, match="n_tokens"):
        check_scalar_range(2 ** 64, "n_tokens", low=1, integer=True)
    with pytest.raises(ValueError, match="alpha must be finite"):
        check_scalar_range(10 ** 400, "alpha", low=0)
    assert check_scalar_range(2 ** 40, "n", low=1, integer=True) == 2 ** 40
    assert not Interval("int", 1).accepts(2 ** 64)
    assert not Interval("real", 0).accepts(10 ** 400)
    assert Interval("int", 1).accepts(2 ** 40)


@pytest.mark.parametrize("param", ["n_tokens", "max_iter", "batch_size"])
def test_estimators_refuse_huge_ints(param):
    X, y = AttentionIndexedModel(8, n_tokens=2, random_state=0).sample(20, random_state=1)
    with pytest.raises(ValueError, match=param):
        TiedAttentionRegressor(**{param: 2 ** 64}).fit(X, y)


def test_scaled_lambda_huge_exponent():
    X, y = AttentionIndexedModel(8, n_tokens=2, random_state=0).sample(20, random_state=1)
    with pytest.raises(ValueError, match="exponent"):
        ScaledLambdaRegressor(TiedAttentionRegressor(), exponent=1000).fit(X, y)


@pytest.mark.parametrize("delta", [1e-50, 1e-20, 1e20, 1e50])
def test_free_convolution_delta_relative_to_the_law(delta):
    # before: 1e-20 returned a law of second moment 0 (should be 1.1), 1e-50 / 1e50 a
    # RuntimeError of the edge search
    law = DiscreteLaw(np.linspace(0.5, 1.5, 10))
    if delta < 1:
        with pytest.raises(ValueError, match=r"^delta="):
            free_convolution(law, delta)
    else:  # a discrete law under a much wider semicircle is that semicircle
        mu = free_convolution(law, delta)
        assert mu.second_moment() == pytest.approx(law.second_moment() + delta ** 2)
        assert np.all(np.isfinite(mu.support()))
    with pytest.raises(ValueError, match=r"^delta="):
        free_convolution(WishartLaw(0.5), delta)


def test_free_convolution_inside_the_delta_range():
    law = DiscreteLaw(np.linspace(0.5, 1.5, 10))
    for delta in (1e-8, 1e10):
        mu = free_convolution(law, delta)
        assert mu.second_moment() == pytest.approx(law.second_moment() + delta ** 2,
                                                   rel=1e-8)
