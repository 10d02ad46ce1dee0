"""The token-leverage state evolution (linear attention, one token; docs/theory.rst §4).

Its agreement with trained models is measured by benchmarks/token_leverage.py; these tests
check the solver: its Gaussian limit, the leverage spread, the sign of the correction where
it is validated, and its errors.
"""

import warnings

import numpy as np
import pytest

from skattn.data import AttentionIndexedModel, WishartTarget
from skattn.theory import DomainWarning, solve_state_evolution, solve_token_state_evolution

FAST = dict(n_draws=16, n_tokens_mc=800)


def _teacher(d, noise=0.3, **kw):
    kw = {"n_tokens": 1, "attention": "linear", **kw}
    return AttentionIndexedModel(d, target=WishartTarget(0.5), noise=noise, random_state=1, **kw)


@pytest.fixture(scope="module")
def noisy40():
    return solve_token_state_evolution(0.6, target=_teacher(40), reg_lambda=0.05, **FAST)


def test_gaussian_solve_is_the_finite_d_state_evolution(noisy40):
    """With a concentrated leverage the equations are the same-instance Gaussian SE (its
    free-convolution form differs by the Monte Carlo draws and O(1/d))."""
    reference = solve_state_evolution(0.6, target=_teacher(40), reg_lambda=0.05).test_error
    assert noisy40.converged, noisy40.message
    assert noisy40.gaussian_test_error == pytest.approx(reference, rel=0.05)
    # and it follows λ: a strong penalty moves the prediction far, and the solve with it
    strong = solve_state_evolution(0.6, target=_teacher(40), reg_lambda=1.0).test_error
    assert abs(strong / reference - 1) > 0.15
    solved = solve_token_state_evolution(0.6, target=_teacher(40), reg_lambda=1.0, **FAST)
    assert solved.gaussian_test_error == pytest.approx(strong, rel=0.05)


def test_result_is_consistent(noisy40):
    r = noisy40
    assert r.token_correction == pytest.approx(r.test_error / r.gaussian_test_error - 1)
    assert np.isfinite(r.mc_standard_error) and 0 < r.mc_standard_error < 0.05 * r.test_error
    assert 0 < r.train_error < r.test_error  # training residuals shrink by 1/(1 + V_μ)
    assert r.n_features == 40 and r.noise == 0.3


def test_leverage_spread_shrinks_like_inverse_sqrt_d():
    """The relative spread of V_μ is O(1/√d): a quartic form in one Gaussian token."""
    spreads = {d: solve_token_state_evolution(0.3, target=_teacher(d), reg_lambda=0.05,
                                              **FAST).leverage_spread for d in (25, 100)}
    assert 0.2 < spreads[25] < 1.0
    assert spreads[100] / spreads[25] == pytest.approx(0.5, rel=0.2)


def test_correction_is_an_excess_next_to_the_interpolation_threshold():
    """Measured: trained models on tokens sit above the Gaussian SE there (+8.5 % at d = 60)."""
    r = solve_token_state_evolution(0.3, target=_teacher(60), reg_lambda=0.05, n_draws=32,
                                    n_tokens_mc=2000)
    assert r.token_correction > 3 * r.mc_standard_error / r.test_error
    assert r.token_correction > 0.03


def test_reproducible_with_a_seed():
    a = solve_token_state_evolution(0.6, target=_teacher(20), reg_lambda=0.05, **FAST)
    b = solve_token_state_evolution(0.6, target=_teacher(20), reg_lambda=0.05, **FAST)
    c = solve_token_state_evolution(0.6, target=_teacher(20), reg_lambda=0.05,
                                    random_state=3, **FAST)
    assert a.test_error == b.test_error
    assert a.test_error != c.test_error


def test_noiseless_teacher_warns():
    with pytest.warns(DomainWarning, match="noise"):
        solve_token_state_evolution(0.6, target=_teacher(20, noise=0.0), reg_lambda=0.05,
                                    **FAST)


@pytest.mark.parametrize("kwargs, match", [
    (dict(target=WishartTarget(0.5)), "target must be a teacher"),
    (dict(target=_teacher(20, n_tokens=2)), "n_tokens=1"),
    (dict(target=_teacher(20, n_tokens=2, attention="softmax")), "attention='linear'"),
    (dict(reg_lambda=0.0), "reg_lambda"),
    (dict(n_draws=4), "n_draws"),
    (dict(n_tokens_mc=10), "n_tokens_mc"),
    (dict(alpha=-1.0), "alpha"),
])
def test_bad_input_names_the_argument(kwargs, match):
    args = {"alpha": 0.3, "target": _teacher(20), "reg_lambda": 0.05, **kwargs}
    alpha = args.pop("alpha")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DomainWarning)
        with pytest.raises((TypeError, ValueError), match=match):
            solve_token_state_evolution(alpha, **args)


def test_small_lambda_warns():
    with pytest.warns(DomainWarning, match="reg_lambda"):
        solve_token_state_evolution(0.6, target=_teacher(20), reg_lambda=1e-3, **FAST)
